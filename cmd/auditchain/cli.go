package main

// The client verbs (events, grants, proposals, chain, keys, machines): each
// group is a table of verbs over pkg/client, sent with surface cli. The
// service comes from --url and --api-key, else AUDITCHAIN_URL and
// AUDITCHAIN_API_KEY. Output is human (one "field: value" line per member of
// the answer) unless --json, which prints the API's answer as it is.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/pkg/client"
)

// exitGateNo is the exit code of a verb whose answer is the gate saying no
// (grants status not authorized, a use refused): the call worked, the
// sub-agent may not go ahead (docs/cli-verbs.md).
const exitGateNo = 3

// gateRefusal is the gate's "no": its answer is already printed.
type gateRefusal struct{ reason string }

func (e gateRefusal) Error() string { return "the gate said no: " + e.reason }

// gateRefusalCodes are the service's codes that mean the gate refused.
var gateRefusalCodes = map[string]bool{"budget_exhausted": true, "not_authorized": true}

// signingVerbs take --sign-key and --machine (keys create's --machine is the
// key's machine label).
var signingVerbs = map[string]bool{"events append": true, "machines register": true}

// verb is one client command: flags adds its flags to fs and returns what
// runs it with the positional arguments.
type verb struct {
	name, synopsis string
	flags          func(fs *flag.FlagSet) func(ctx context.Context, c *client.Client, args []string) (any, error)
}

// clientGroup runs one verb of a group.
func clientGroup(ctx context.Context, name, groupUsage string, verbs []verb, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return group(name, groupUsage, args, stdout, stderr, clientSubs(ctx, name, verbs, getenv, stdout, stderr))
}

// clientSubs are a group's verbs as group runs them.
func clientSubs(ctx context.Context, name string, verbs []verb, getenv func(string) string, stdout, stderr io.Writer) map[string]func([]string) error {
	subs := map[string]func([]string) error{}
	for _, v := range verbs {
		subs[v.name] = func(args []string) error {
			fs := newFlags(name+" "+v.name, v.synopsis+serviceFlagsHelp)
			url, key := serviceFlags(fs, getenv)
			asJSON := fs.Bool("json", false, "print the API's answer as JSON")
			quiet := fs.Bool("quiet", false, "no progress on stderr (drawn only when stderr is a terminal)")
			opts := func() ([]client.Option, error) { return nil, nil }
			if signingVerbs[name+" "+v.name] {
				opts = clientOptions(fs)
			}
			runVerb := v.flags(fs)
			rest, err := parseFlags(fs, args, stdout, stderr)
			if err != nil {
				return err
			}
			if err := serviceMissing(name+" "+v.name, *url, *key); err != nil {
				return err
			}
			o, err := opts()
			if err != nil {
				return err
			}
			c, err := client.New(*url, *key, append(o, client.WithSurface(client.SurfaceCLI))...)
			if err != nil {
				return usageError{err}
			}
			vctx := withProgress(withStreams(ctx, stdout, stderr), stderr, *quiet)
			out, err := runWithProgress(vctx, name+" "+v.name, func() (any, error) { return runVerb(vctx, c, rest) })
			if isNil(out) {
				out = nil
			}
			// The service's problem: with --json it is the answer a script
			// reads (stdout), the message goes to stderr either way.
			var ce *client.Error
			if errors.As(err, &ce) {
				if gateRefusalCodes[ce.Code] {
					err = gateRefusal{strings.TrimPrefix(ce.Error(), "auditchain: ")}
				}
				if out == nil && (*asJSON || gateRefusalCodes[ce.Code]) {
					out = ce.Members
				}
			}
			if out != nil {
				if perr := printAnswer(stdout, out, *asJSON); perr != nil {
					return perr
				}
			}
			if err != nil {
				var ue usageError
				var gr gateRefusal
				var al alarmError
				if errors.As(err, &ue) || errors.As(err, &gr) {
					return err
				}
				if errors.As(err, &al) { // exit 4: a monitor check's alarm
					return fmt.Errorf("%s %s: %w", name, v.name, err)
				}
				if out := serviceOutOfReach(err, *url); out != nil {
					return fmt.Errorf("%s %s: %w", name, v.name, out)
				}
				return fmt.Errorf("%s %s: %s", name, v.name, strings.TrimPrefix(err.Error(), "auditchain: "))
			}
			return nil
		}
	}
	return subs
}

// serviceFlags are --url and --api-key, from AUDITCHAIN_URL and
// AUDITCHAIN_API_KEY. Both are secret flags: a key is a credential, and a URL
// may carry a password.
func serviceFlags(fs *flag.FlagSet, getenv func(string) string) (url, key *string) {
	url, key = new(string), new(string)
	config.SecretVar(fs, url, "url", getenv("AUDITCHAIN_URL"), "", "the service's base URL (AUDITCHAIN_URL)")
	config.SecretVar(fs, key, "api-key", getenv("AUDITCHAIN_API_KEY"), "", "the API key (AUDITCHAIN_API_KEY)")
	return url, key
}

const serviceFlagsHelp = `
The service is --url and --api-key, else AUDITCHAIN_URL and AUDITCHAIN_API_KEY.
Output is human unless --json (the API's answer). Progress goes to stderr when it
is a terminal, unless --quiet. Exit codes: docs/cli-verbs.md.
`

// verbStreams are the process's streams, for a verb that writes as it goes
// (export, tail) rather than returning one answer.
type verbStreams struct{ stdout, stderr io.Writer }

type streamsKey struct{}

func withStreams(ctx context.Context, stdout, stderr io.Writer) context.Context {
	return context.WithValue(ctx, streamsKey{}, verbStreams{stdout, stderr})
}

func streamsOf(ctx context.Context) verbStreams { return ctx.Value(streamsKey{}).(verbStreams) }

// verbStdout is where a streaming verb writes its output.
func verbStdout(ctx context.Context) io.Writer { return streamsOf(ctx).stdout }

// printAnswer prints v as JSON (--json), or one "member: value" line per
// member of the answer, in the API's order (nested values as compact JSON).
func printAnswer(w io.Writer, v any, asJSON bool) error {
	if s, ok := v.(humanText); ok {
		if asJSON {
			return printJSON(w, s.json)
		}
		_, err := io.WriteString(w, s.text)
		return err
	}
	if asJSON {
		return printJSON(w, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		_, err := fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for dec.More() {
		k, _ := dec.Token()
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return err
		}
		var items []map[string]json.RawMessage
		if json.Unmarshal(val, &items) == nil && len(items) > 0 {
			// A list (events, grants, proposals, keys): one line per item.
			if _, err := fmt.Fprintf(w, "%s: %d\n", k, len(items)); err != nil {
				return err
			}
			for _, it := range val2items(val) {
				if _, err := fmt.Fprintf(w, "  - %s\n", it); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := fmt.Fprintf(w, "%s: %s\n", k, scalarText(val)); err != nil {
			return err
		}
	}
	return nil
}

// scalarText is a JSON value as a person reads it: strings unquoted.
func scalarText(val json.RawMessage) string {
	var s string
	if json.Unmarshal(val, &s) == nil {
		return s
	}
	return string(val)
}

// val2items renders each object of a JSON array as its scalar members,
// "name=value" in the API's order (nested values and nulls left out:
// --json has them).
func val2items(val json.RawMessage) []string {
	var raws []json.RawMessage
	json.Unmarshal(val, &raws)
	out := make([]string, 0, len(raws))
	for _, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.Token() // {
		var parts []string
		for dec.More() {
			k, _ := dec.Token()
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				break
			}
			if len(v) == 0 || v[0] == '{' || v[0] == '[' || string(v) == "null" {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s=%s", k, scalarText(v)))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

// humanText is an answer with its own human form.
type humanText struct {
	text string
	json any
}

// oneArg checks a verb got exactly one positional argument, named what.
func oneArg(args []string, what string) (string, error) {
	if len(args) != 1 {
		return "", usagef("want one %s, got %d arguments", what, len(args))
	}
	return args[0], nil
}

// noPositional refuses positional arguments.
func noPositional(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	return nil
}

// optString is nil for "" (a flag not given).
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// isNil is true for nil and for a nil pointer in an interface (a verb's
// typed answer when the call failed).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// noArgVerb is a verb that takes nothing and calls one client method
// (a method expression such as (*client.Client).Tip).
func noArgVerb[T any](name, synopsis string, call func(*client.Client, context.Context) (T, error)) verb {
	return verb{name, synopsis, func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
		return func(ctx context.Context, c *client.Client, args []string) (any, error) {
			if err := noPositional(args); err != nil {
				return nil, err
			}
			return call(c, ctx)
		}
	}}
}

// idVerb is a verb that takes one id (named what) and calls one client method.
func idVerb[T any](name, what, synopsis string, call func(*client.Client, context.Context, string) (T, error)) verb {
	return verb{name, synopsis, func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
		return func(ctx context.Context, c *client.Client, args []string) (any, error) {
			id, err := oneArg(args, what)
			if err != nil {
				return nil, err
			}
			return call(c, ctx, id)
		}
	}}
}
