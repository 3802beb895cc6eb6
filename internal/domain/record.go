package domain

import (
	"fmt"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// Surfaces are the values of the X-SVC-Surface header (SPEC.md "POST /v1/events").
var Surfaces = []string{"rest", "mcp", "mcp_stdio", "sdk", "cli", "hook", "dashboard"}

// Decisions are the values of an event's decision (SPEC.md "Event").
var Decisions = []string{"allow", "ask", "deny"}

// EventSigningKey is the chain event the service writes when a machine's
// signing key is registered or replaced (docs/decisions/strict-input.md
// "Signing keys"): an auditor sees every key an event was checked against.
const EventSigningKey = "machine.signing_key"

// CodeMachineMismatch answers a key bound to one machine that registers the
// signing key of another (403).
const CodeMachineMismatch = "machine_mismatch"

// Record limits where the spec states them (SPEC.md "Limits").
const (
	MaxBatchEvents = 500
	MaxSearchLimit = 1000
	DefSearchLimit = 200
	MaxAncestry    = 50
)

// MaxClientSequence is the highest sequence a client may send, single or
// batch (CONTRACT.md "Batch"): RFC 8785 numbers are IEEE doubles, exact up
// to 2^53, and the space above 2^52 is the service's, so that no client
// input can leave an account unable to take the events the service writes
// at the tip (grant.revoked, governance.*, chain_repair).
const MaxClientSequence = 1 << 52

var maxTextFieldLen = 256

// ValidEventID reports whether id matches ^evt-[A-Za-z0-9_.:-]{1,160}$, the
// form of an event_id. Written out rather than a regexp: every row of a
// batch is checked (the regexp's cost: docs/performance.md, "Fourth round of
// 2026-11-22").
func ValidEventID(id string) bool {
	rest, ok := strings.CutPrefix(id, "evt-")
	if !ok || len(rest) < 1 || len(rest) > 160 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidHash reports whether h matches ^sha256:[0-9a-f]{64}$, the form of
// prev_hash and payload_hash.
func ValidHash(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidateEventShape checks the fields every stored event needs and the form of
// the optional ones, for a single append, whose prev_hash must be a hash (it
// must equal the last stored payload_hash). It returns every problem, named
// by field.
func ValidateEventShape(in *api.EventInput) []FieldError { return validateShape(in, true) }

// ValidateBatchRowShape is ValidateEventShape for a batch row, which is
// checked for shape only (CONTRACT.md "Batch"): its prev_hash is stored as
// sent, any string of at most 256 bytes (or null).
func ValidateBatchRowShape(in *api.EventInput) []FieldError { return validateShape(in, false) }

func validateShape(in *api.EventInput, hashedPrev bool) []FieldError {
	var errs []FieldError
	bad := func(field, msg string) { errs = append(errs, FieldError{Field: field, Message: msg}) }
	switch {
	case in.EventID == nil:
		bad("event_id", "required")
	case !ValidEventID(*in.EventID):
		bad("event_id", "must be evt- followed by 1 to 160 letters, digits, '_', '.', ':' or '-' (for example evt-<hex>)")
	}
	switch {
	case in.EventType == nil:
		bad("event_type", "required")
	case *in.EventType == "" || len(*in.EventType) > maxTextFieldLen:
		bad("event_type", fmt.Sprintf("must be 1 to %d bytes", maxTextFieldLen))
	}
	switch {
	case in.Sequence == nil:
		bad("sequence", "required")
	case *in.Sequence < 0:
		bad("sequence", "must be 0 or more")
	case *in.Sequence > MaxClientSequence:
		bad("sequence", fmt.Sprintf("must be at most %d (2^52)", int64(MaxClientSequence)))
	}
	switch {
	case in.PrevHash == nil:
	case hashedPrev && !ValidHash(*in.PrevHash):
		bad("prev_hash", "must be sha256:<64 lowercase hex> or null")
	case len(*in.PrevHash) > maxTextFieldLen:
		bad("prev_hash", fmt.Sprintf("must be at most %d bytes", maxTextFieldLen))
	case strings.ContainsRune(*in.PrevHash, 0): // see the loop below
		bad("prev_hash", "must not contain U+0000")
	}
	if len(in.Raw) > 0 {
		if t := strings.TrimSpace(string(in.Raw)); t != "null" && !strings.HasPrefix(t, "{") {
			bad("raw", "must be an object or null")
		}
	}
	if in.Decision != nil && !contains(Decisions, *in.Decision) {
		bad("decision", "must be allow, ask, deny or null")
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"tool", in.Tool}, {"machine_id", in.MachineID}, {"parent_id", in.ParentID}, {"signature_key", in.SignatureKey}} {
		if f.v != nil && len(*f.v) > maxTextFieldLen {
			bad(f.name, fmt.Sprintf("must be at most %d bytes", maxTextFieldLen))
		}
	}
	if in.Signature != nil && len(*in.Signature) > 200 {
		bad("signature", "must be a standard base64 Ed25519 signature")
	}
	if in.TS != nil {
		if _, err := ParseTimestamp(*in.TS); err != nil {
			bad("ts", "must be an ISO-8601 timestamp with a UTC offset, for example 2026-11-21T12:00:00+00:00")
		}
	}
	// PostgreSQL's text cannot hold U+0000 (the insert would fail), and the
	// same event must be accepted or refused alike on both stores.
	for _, f := range []struct {
		name string
		v    *string
	}{{"event_type", in.EventType}, {"tool", in.Tool}, {"machine_id", in.MachineID}, {"parent_id", in.ParentID},
		{"signature", in.Signature}, {"signature_key", in.SignatureKey}} {
		if f.v != nil && strings.ContainsRune(*f.v, 0) {
			bad(f.name, "must not contain U+0000")
		}
	}
	return errs
}

// ParseTimestamp reads an RFC 3339 timestamp (ISO-8601 with an offset). The
// instant must fall in UTC years 1–9999, so it can be compared and written
// back in RFC 3339 (found by FuzzParseTimestamp: 9999-12-31T10:00:00-17:00 is
// year 10000 in UTC). The offset's hours are 00–23 and its minutes 00–59, as
// RFC 3339 says: time.Parse takes +24:00, a different day.
func ParseTimestamp(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, err
	}
	if !validOffset(s) {
		return time.Time{}, fmt.Errorf("timestamp %q: a UTC offset's hours are 00 to 23 and its minutes 00 to 59", s)
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return time.Time{}, fmt.Errorf("timestamp %q is outside UTC years 1 to 9999", s)
	}
	return t, nil
}

// validOffset reports whether s (which time.Parse read as RFC 3339) ends in
// Z or in an offset ±hh:mm with hh at most 23 and mm at most 59.
func validOffset(s string) bool {
	if strings.HasSuffix(s, "Z") {
		return true
	}
	if len(s) < 6 {
		return false
	}
	off := s[len(s)-6:]
	return (off[0] == '+' || off[0] == '-') && off[3] == ':' &&
		twoDigits(off[1:3]) <= 23 && twoDigits(off[4:6]) <= 59
}

func twoDigits(s string) int {
	if s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 99
	}
	return int(s[0]-'0')*10 + int(s[1]-'0')
}

// FormatTimestamp renders t in the spec's form: UTC with a +00:00 offset.
func FormatTimestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000-07:00")
}

// QuotaDay names the UTC day whose quota a write at now counts against; the
// quota resets at 00:00 UTC (SPEC.md "Limits").
func QuotaDay(now time.Time) string { return now.UTC().Format(time.DateOnly) }

// SecondsUntilQuotaReset is the Retry-After of daily_quota_exceeded.
func SecondsUntilQuotaReset(now time.Time) int {
	n := now.UTC()
	next := time.Date(n.Year(), n.Month(), n.Day()+1, 0, 0, 0, 0, time.UTC)
	return int((next.Sub(n) + time.Second - 1) / time.Second)
}

// RateDecision is the outcome of a rate rule (DecideRate).
type RateDecision struct {
	Allowed    bool
	NewTAT     time.Time // the state to store when allowed
	RetryAfter int       // seconds, when refused
	Count      int       // units counted in the current period
	Remaining  int
}

// Rate is a budget of Limit units per Per, kept as a GCRA (generic cell
// rate algorithm) state: each unit costs Per/Limit, so a caller idle for a
// whole period may spend Limit at once, and then one every Per/Limit.
type Rate struct {
	Limit int
	Per   time.Duration
}

// Interval is what one unit costs: Per/Limit.
func (r Rate) Interval() time.Duration { return r.Per / time.Duration(r.Limit) }

// DecideBatchRate applies the per-key limit of `limit` batch events per minute
// (SPEC.md "Limits"). Decision (docs/decisions.md): a batch counts as its
// number of rows; each row costs one minute/limit.
func DecideBatchRate(tat, now time.Time, n, limit int) RateDecision {
	return DecideRate(tat, now, n, Rate{Limit: limit, Per: time.Minute})
}

// DecideRate applies r to n units arriving at now, over the stored
// theoretical arrival time tat. Units that fit in the period's remaining
// budget are admitted; a caller with no outstanding debt may also spend more
// than Limit at once (a 500-row batch against 100 a minute), after which it
// waits until its debt is paid. Either way the sustained rate never exceeds
// Limit per Per. A refusal changes nothing and says, in RetryAfter, when the
// same n would be admitted.
func DecideRate(tat, now time.Time, n int, r Rate) RateDecision {
	interval := r.Interval()
	if tat.Before(now) {
		tat = now
	}
	debt := tat.Sub(now)
	cost := time.Duration(n) * interval
	idle := debt == 0
	if idle || debt+cost <= r.Per {
		newTAT := tat.Add(cost)
		count := countIn(newTAT.Sub(now), interval)
		return RateDecision{Allowed: true, NewTAT: newTAT, Count: count, Remaining: max(0, r.Limit-count)}
	}
	wait := debt + cost - r.Per
	count := countIn(debt, interval)
	return RateDecision{Allowed: false, NewTAT: tat, RetryAfter: int((wait + time.Second - 1) / time.Second),
		Count: count, Remaining: max(0, r.Limit-count)}
}

func countIn(debt, interval time.Duration) int {
	return int((debt + interval - 1) / interval)
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}
