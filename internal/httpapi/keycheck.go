package httpapi

// The key checker of the JSON object bodies that answer their problems with
// their own code (the grant routes): a body's exact keys, the near misses
// recognised for each (a table of aliases, then case and separators folded,
// then an edit distance), and the keys only the server sets, so that a
// near-miss key (subagent_name, expiry_seconds, ...) is refused naming the
// key the client meant, before anything is written.

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/suggest"
)

// bodySpec describes a route's JSON object body: its exact keys, the near
// misses recognised for each, and the keys only the server sets.
type bodySpec struct {
	bad     func(field, reason string) *domain.Error
	keys    []string          // the exact keys, in the order missing ones are reported
	aliases map[string]string // a known near miss → the exact key
	server  map[string]string // a key the server assigns → why it cannot be sent
	types   map[string]string // what a key's value must be, when it is not
}

func aliasTable(m map[string][]string) map[string]string {
	out := map[string]string{}
	for key, aliases := range m {
		for _, a := range aliases {
			out[a] = key
		}
	}
	return out
}

// checkKey refuses a key that is not exactly one of spec.keys.
func (spec bodySpec) checkKey(key string) *domain.Error {
	for _, k := range spec.keys {
		if key == k {
			return nil
		}
	}
	if why, ok := spec.server[key]; ok {
		return spec.bad(key, why+"; do not send it").With("key", key)
	}
	if meant := spec.nearMiss(key); meant != "" {
		return spec.bad(meant, fmt.Sprintf("unknown key %q: the key is %q", key, meant)+aliasHint(meant, key)).With("key", key)
	}
	return spec.bad(key, fmt.Sprintf("unknown key %q; the keys are exactly %s", key, strings.Join(spec.keys, ", "))).With("key", key)
}

// aliasHint adds what a near miss usually means to get the value right too.
func aliasHint(meant, sent string) string {
	if meant == "expires_at" {
		return " (an absolute ISO-8601 timestamp with a UTC offset, like 2026-01-02T15:04:05+00:00, not a duration)"
	}
	return ""
}

// nearMiss names the key a client most likely meant by key, or "".
func (spec bodySpec) nearMiss(key string) string {
	if k, ok := spec.aliases[key]; ok {
		return k
	}
	norm := normalizeKey(key)
	if k, ok := spec.aliases[norm]; ok {
		return k
	}
	for a, k := range spec.aliases {
		if normalizeKey(a) == norm {
			return k
		}
	}
	best, bestDist := "", 3
	for _, k := range spec.keys {
		nk := normalizeKey(k)
		if nk == norm {
			return k
		}
		if len(nk) < 5 {
			continue // too short for a distance to mean anything
		}
		if d := suggest.Distance(nk, norm); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// normalizeKey folds case and drops separators: subAgent, Sub-Agent and
// sub_agent all read "subagent".
func normalizeKey(k string) string {
	var b strings.Builder
	for _, r := range k {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// refuse answers what the body reader found with spec's code. field is
// always one of the body's keys (the one meant, for a near miss); reason says
// what was wrong, naming the path inside the key when there is one.
func (spec bodySpec) refuse(p *inputProblem) error {
	key, _, _ := strings.Cut(p.field, ".")
	key, _, _ = strings.Cut(key, "[")
	inside := func(reason string) string {
		if p.field != key {
			return p.field + ": " + reason
		}
		return reason
	}
	switch {
	case p.kind == inputSyntax:
		return spec.bad("", "the body is not valid JSON")
	case p.field == "" && p.kind == inputType:
		return spec.bad("", "the body must be one JSON object with the keys "+strings.Join(spec.keys, ", "))
	case (p.kind == inputUnknown || p.kind == inputCase) && p.field == p.key:
		return spec.checkKey(p.key)
	case p.kind == inputDuplicate && p.field == p.key:
		return spec.bad(p.key, "appears more than once").With("key", p.key)
	case p.kind == inputType:
		if hint, ok := spec.types[key]; ok {
			return spec.bad(key, inside(hint+", got "+p.got))
		}
	}
	return spec.bad(key, inside(p.message))
}
