package config

// Witnesses (docs/operations.md "Witnesses", docs/integrity.md "Witnesses"):
// --witness URL=VKEY names a C2SP tlog-witness endpoint and the note verifier
// key its cosignatures verify under. The flag repeats; AUDITCHAIN_WITNESS and
// the settings file's witness key give a list (whitespace- or
// comma-separated, or a TOML array). A --witness on the command line replaces
// that list rather than adding to it, as every flag wins over its variable.

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/auditchain/auditchain/pkg/verify"
)

// Witness is one configured witness: where to submit (URL, the prefix of
// its add-checkpoint endpoint) and its verifier key, whose key name (Name)
// identifies it in the store, the metrics and the reports.
type Witness struct {
	URL  string
	VKey string
	Name string
}

// listValue is a repeatable flag whose first use on the command line
// replaces the list the environment or the settings file gave.
type listValue struct {
	values   []string
	from     string // where the values came from, for messages
	replaced bool
}

func (l *listValue) set(values []string, from string) { l.values, l.from = values, from }

func (l *listValue) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.values, " ")
}

func (l *listValue) Set(v string) error {
	if !l.replaced {
		l.values, l.from, l.replaced = nil, "--witness", true
	}
	l.values = append(l.values, v)
	return nil
}

// splitList splits an AUDITCHAIN_* list: values separated by whitespace or commas.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// parseWitnesses parses the URL=VKEY specs and settles the quorum: every
// witness when 0, else 1..len; names must differ (they key the store).
func parseWitnesses(specs *listValue, quorum int) ([]Witness, int, error) {
	var ws []Witness
	var errs []error
	names := map[string]bool{}
	for _, spec := range specs.values {
		w, err := ParseWitness(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cmp.Or(specs.from, "--witness"), err))
			continue
		}
		if names[w.Name] {
			errs = append(errs, fmt.Errorf("%s: two witnesses named %q (a witness is known by its key name)", cmp.Or(specs.from, "--witness"), w.Name))
			continue
		}
		names[w.Name] = true
		ws = append(ws, w)
	}
	switch {
	case len(specs.values) == 0 && quorum != 0:
		errs = append(errs, errors.New("--witness-quorum needs at least one --witness"))
	case quorum == 0:
		quorum = len(ws)
	case quorum < 0 || quorum > len(specs.values):
		errs = append(errs, fmt.Errorf("--witness-quorum must be between 1 and the %d witnesses configured", len(specs.values)))
	}
	return ws, quorum, errors.Join(errs...)
}

// ParseWitness parses "URL=VKEY". A URL may itself hold '=' (a query), so
// the spec is split at the last '=' whose left side is an http(s) URL and
// whose right side is a cosignature/v1 verifier key.
func ParseWitness(spec string) (Witness, error) {
	spec = strings.TrimSpace(spec)
	var firstErr error
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] != '=' {
			continue
		}
		rawURL, vkey := spec[:i], spec[i+1:]
		u, err := url.Parse(rawURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		w, err := verify.NewWitness(vkey)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		return Witness{URL: strings.TrimSuffix(rawURL, "/"), VKey: w.VKey, Name: w.Name}, nil
	}
	if firstErr != nil {
		return Witness{}, fmt.Errorf("%q: %w", spec, firstErr)
	}
	return Witness{}, fmt.Errorf("%q is not URL=VKEY with an http(s) URL", spec)
}
