package main

// The errors of a command line, and of a service out of reach, as one line
// that says what to do (docs/cli.md "Errors"): the flag or command meant,
// the credential missing, the URL tried and how to start a server. Every
// command's flags and every group's verbs come through here.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/auditchain/auditchain/internal/suggest"
)

// maxFlagsListed is the most flags an unknown flag's message lists: more
// (serve's forty) are for --help.
const maxFlagsListed = 10

// flagProblem is err, an error of fs.Parse, as one line: the flag as it
// was written wrong, the flag meant or the flags there are, and where the
// command's help is. The flag package's own text and its usage dump say
// less in more lines.
func flagProblem(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	help := fmt.Sprintf("auditchain %s --help", fs.Name())
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if meant := suggest.Closest(strings.TrimLeft(name, "-"), names); meant != "" {
			return fmt.Errorf("%s: unknown flag --%s; did you mean --%s? (%s lists the flags)", fs.Name(), name, meant, help)
		}
		if len(names) == 0 {
			return fmt.Errorf("%s: unknown flag --%s; it takes no flags (%s)", fs.Name(), name, help)
		}
		if len(names) > maxFlagsListed {
			return fmt.Errorf("%s: unknown flag --%s (%s lists the flags)", fs.Name(), name, help)
		}
		slices.Sort(names)
		return fmt.Errorf("%s: unknown flag --%s; the flags are --%s (%s says more)", fs.Name(), name, strings.Join(names, ", --"), help)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("%s: --%s needs a value: --%s VALUE (%s)", fs.Name(), name, name, help)
	}
	var value, name, why string
	if n, _ := fmt.Sscanf(msg, "invalid value %q for flag -%s", &value, &name); n == 2 {
		name = strings.TrimSuffix(name, ":")
		why = strings.TrimPrefix(msg, fmt.Sprintf("invalid value %q for flag -%s: ", value, name))
	} else if n, _ := fmt.Sscanf(msg, "invalid boolean value %q for -%s", &value, &name); n == 2 {
		name = strings.TrimSuffix(name, ":")
		why = "want true or false"
	} else {
		return fmt.Errorf("%s: %s (%s)", fs.Name(), msg, help)
	}
	if why == "parse error" || why == "value out of range" {
		why = "want " + valueKind(fs.Lookup(name))
	}
	if rest, ok := strings.CutPrefix(why, strconv.Quote(value)+" "); ok {
		return fmt.Errorf("%s: --%s %q %s", fs.Name(), name, value, rest) // the value's own words: "is not a duration: …"
	}
	return fmt.Errorf("%s: --%s %q: %s", fs.Name(), name, value, why)
}

// valueKind says what a flag's value must be, for the flag package's bare
// "parse error".
func valueKind(f *flag.Flag) string {
	if f == nil {
		return "another value"
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "another value"
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return "another value"
}

// unknownWord is the usage error of a command or verb nobody knows: the one
// meant, else the ones there are.
func unknownWord(what, word string, known []string, help string) error {
	if meant := suggest.Closest(word, known); meant != "" {
		return usagef("unknown %s %q; did you mean %s? (%s)", what, word, meant, help)
	}
	return usagef("unknown %s %q; the %ss are %s (%s)", what, word, what, strings.Join(slices.Sorted(slices.Values(known)), ", "), help)
}

// serviceMissing says which of the service's URL and API key a client
// command lacks, and where each comes from; nil when both are there and the
// URL is an http(s) URL.
func serviceMissing(cmd, baseURL, key string) error {
	switch {
	case baseURL == "" && key == "":
		return usagef("%s: no service URL and no API key: give --url and --api-key, or set AUDITCHAIN_URL and AUDITCHAIN_API_KEY (auditchain admin create-account prints a key)", cmd)
	case baseURL == "":
		return usagef("%s: no service URL: give --url or set AUDITCHAIN_URL, like http://127.0.0.1:8080 (where auditchain serve listens by default)", cmd)
	case key == "":
		return usagef("%s: no API key: give --api-key or set AUDITCHAIN_API_KEY (auditchain admin create-account prints the first; auditchain keys create makes more)", cmd)
	}
	if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
		// Shown only when it cannot hold a password (user:pass@host).
		if strings.Contains(baseURL, "@") || strings.Contains(baseURL, "://") {
			return usagef("%s: the service URL (--url or AUDITCHAIN_URL) is not an http:// or https:// URL", cmd)
		}
		return usagef("%s: the service URL %q (--url or AUDITCHAIN_URL) is not an http:// or https:// URL; did you mean http://%s?", cmd, baseURL, baseURL)
	}
	return nil
}

// serviceOutOfReach explains err when it is the service at baseURL out of reach
// (connection refused, a host that does not resolve, no answer in time):
// which URL was tried and what to do. It answers nil for any other error.
func serviceOutOfReach(err error, baseURL string) error {
	shown := baseURL
	if u, perr := url.Parse(baseURL); perr == nil {
		shown = u.Redacted()
	}
	var dns *net.DNSError
	var ne net.Error
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the service at %s: connection refused; is it running? Start one with `auditchain serve`, or point --url or AUDITCHAIN_URL at the one that is", shown)
	case errors.As(err, &dns) && dns.IsNotFound:
		return fmt.Errorf("cannot reach the service at %s: no such host %q; check --url or AUDITCHAIN_URL", shown, dns.Name)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("the service at %s did not answer in time; check that it is up (GET %s/v1/health) and that --url or AUDITCHAIN_URL names it", shown, strings.TrimRight(shown, "/"))
	case errors.As(err, &errno) && (errno == syscall.ECONNRESET || errno == syscall.EHOSTUNREACH || errno == syscall.ENETUNREACH):
		return fmt.Errorf("cannot reach the service at %s: %v; check that it is up and that --url or AUDITCHAIN_URL names it", shown, errno)
	}
	return nil
}
