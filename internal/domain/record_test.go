package domain

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

func ptr[T any](v T) *T { return &v }

func TestValidateEventShape(t *testing.T) {
	ok := func() api.EventInput {
		return api.EventInput{EventID: ptr("evt-00ab"), EventType: ptr("tool_call"), Sequence: ptr(int64(0))}
	}
	tests := []struct {
		name      string
		mutate    func(*api.EventInput)
		wantField string
	}{
		{"minimal event", func(*api.EventInput) {}, ""},
		{"missing event_id", func(e *api.EventInput) { e.EventID = nil }, "event_id"},
		{"event_id without prefix", func(e *api.EventInput) { e.EventID = ptr("abc") }, "event_id"},
		{"event_id with space", func(e *api.EventInput) { e.EventID = ptr("evt-a b") }, "event_id"},
		{"missing event_type", func(e *api.EventInput) { e.EventType = nil }, "event_type"},
		{"empty event_type", func(e *api.EventInput) { e.EventType = ptr("") }, "event_type"},
		{"missing sequence", func(e *api.EventInput) { e.Sequence = nil }, "sequence"},
		{"negative sequence", func(e *api.EventInput) { e.Sequence = ptr(int64(-1)) }, "sequence"},
		{"sequence 2^52", func(e *api.EventInput) { e.Sequence = ptr(int64(MaxClientSequence)) }, ""},
		{"sequence 2^52+1", func(e *api.EventInput) { e.Sequence = ptr(int64(MaxClientSequence + 1)) }, "sequence"},
		{"sequence 2^63-1", func(e *api.EventInput) { e.Sequence = ptr(int64(math.MaxInt64)) }, "sequence"},
		{"prev_hash malformed", func(e *api.EventInput) { e.PrevHash = ptr("sha256:xyz") }, "prev_hash"},
		{"prev_hash uppercase hex", func(e *api.EventInput) {
			e.PrevHash = ptr("sha256:" + "AB" + string(make([]byte, 0)) + "00000000000000000000000000000000000000000000000000000000000000")
		}, "prev_hash"},
		{"raw array", func(e *api.EventInput) { e.Raw = json.RawMessage(`[1]`) }, "raw"},
		{"raw null", func(e *api.EventInput) { e.Raw = json.RawMessage(`null`) }, ""},
		{"raw object", func(e *api.EventInput) { e.Raw = json.RawMessage(` {"a":1}`) }, ""},
		{"decision unknown", func(e *api.EventInput) { e.Decision = ptr("maybe") }, "decision"},
		{"decision ask", func(e *api.EventInput) { e.Decision = ptr("ask") }, ""},
		{"ts without offset", func(e *api.EventInput) { e.TS = ptr("2026-11-21T12:00:00") }, "ts"},
		{"ts with offset", func(e *api.EventInput) { e.TS = ptr("2026-11-21T12:00:00+02:00") }, ""},
		{"tool too long", func(e *api.EventInput) { e.Tool = ptr(strings.Repeat("a", 300)) }, "tool"},
		{"U+0000 in event_type", func(e *api.EventInput) { e.EventType = ptr("tool\x00call") }, "event_type"},
		{"U+0000 in tool", func(e *api.EventInput) { e.Tool = ptr("ba\x00sh") }, "tool"},
		{"U+0000 in machine_id", func(e *api.EventInput) { e.MachineID = ptr("\x00") }, "machine_id"},
		{"U+0000 in parent_id", func(e *api.EventInput) { e.ParentID = ptr("evt-1\x00") }, "parent_id"},
		{"U+0000 in signature", func(e *api.EventInput) { e.Signature = ptr("\x00") }, "signature"},
		{"U+0000 in signature_key", func(e *api.EventInput) { e.SignatureKey = ptr("k\x00") }, "signature_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ok()
			tt.mutate(&in)
			errs := ValidateEventShape(&in)
			if tt.wantField == "" {
				if len(errs) != 0 {
					t.Fatalf("unexpected errors %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tt.wantField {
				t.Fatalf("errors = %v, want one on %s", errs, tt.wantField)
			}
		})
	}
}

func TestQuotaReset(t *testing.T) {
	tests := []struct {
		now       time.Time
		wantDay   string
		wantRetry int
	}{
		{time.Date(2026, 11, 21, 23, 59, 59, 0, time.UTC), "2026-11-21", 1},
		{time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), "2026-11-22", 86400},
		{time.Date(2026, 11, 21, 23, 59, 59, 500_000_000, time.UTC), "2026-11-21", 1},
		{time.Date(2026, 11, 22, 1, 0, 0, 0, time.FixedZone("CET", 3600)), "2026-11-22", 86400},
	}
	for _, tt := range tests {
		if got := QuotaDay(tt.now); got != tt.wantDay {
			t.Errorf("QuotaDay(%v) = %s, want %s", tt.now, got, tt.wantDay)
		}
		if got := SecondsUntilQuotaReset(tt.now); got != tt.wantRetry {
			t.Errorf("SecondsUntilQuotaReset(%v) = %d, want %d", tt.now, got, tt.wantRetry)
		}
	}
}

func TestDecideBatchRate(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		tat         time.Time
		now         time.Time
		n, limit    int
		wantAllowed bool
		wantRetry   int
		wantCount   int
	}{
		{"idle key, small batch", time.Time{}, t0, 10, 100, true, 0, 10},
		{"idle key, exactly the limit", time.Time{}, t0, 100, 100, true, 0, 100},
		{"idle key, a 500-row batch is admitted once", time.Time{}, t0, 500, 100, true, 0, 500},
		{"after 100 rows, the 101st at the same instant is refused", t0.Add(time.Minute), t0, 1, 100, false, 1, 100},
		{"one second later, one more row has leaked out", t0.Add(time.Minute), t0.Add(time.Second), 1, 100, true, 0, 100},
		{"after 90 rows, 10 more fit", t0.Add(54 * time.Second), t0, 10, 100, true, 0, 100},
		{"after 90 rows, 11 do not", t0.Add(54 * time.Second), t0, 11, 100, false, 1, 90},
		{"debt of a 500-row batch: wait until it is paid", t0.Add(5 * time.Minute), t0, 100, 100, false, 300, 500},
		{"debt nearly paid: a batch that fits the minute", t0.Add(5 * time.Minute), t0.Add(4 * time.Minute), 1, 100, false, 1, 100},
		{"debt paid: admitted again", t0.Add(5 * time.Minute), t0.Add(5 * time.Minute), 100, 100, true, 0, 100},
		{"old state is forgotten", t0, t0.Add(time.Hour), 100, 100, true, 0, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DecideBatchRate(tt.tat, tt.now, tt.n, tt.limit)
			if d.Allowed != tt.wantAllowed || d.RetryAfter != tt.wantRetry || d.Count != tt.wantCount {
				t.Fatalf("got %+v, want allowed=%v retry=%d count=%d", d, tt.wantAllowed, tt.wantRetry, tt.wantCount)
			}
			if d.Allowed && d.NewTAT.Before(tt.now) {
				t.Fatalf("new state %v is in the past", d.NewTAT)
			}
		})
	}
}

// A mail throttle (10 an hour): ten at once from idle, the eleventh told to
// come back when one unit (six minutes) has leaked out, then one every six
// minutes; an idle hour forgets everything.
func TestDecideRateOverAnHour(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	r := Rate{Limit: 10, Per: time.Hour}
	var tat time.Time
	for i := range 10 {
		d := DecideRate(tat, t0, 1, r)
		if !d.Allowed || d.Count != i+1 {
			t.Fatalf("unit %d: %+v", i, d)
		}
		tat = d.NewTAT
	}
	if d := DecideRate(tat, t0, 1, r); d.Allowed || d.RetryAfter != 360 || d.Remaining != 0 || !d.NewTAT.Equal(tat) {
		t.Fatalf("the eleventh: %+v", d)
	}
	if d := DecideRate(tat, t0.Add(6*time.Minute-time.Second), 1, r); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("a second early: %+v", d)
	}
	d := DecideRate(tat, t0.Add(6*time.Minute), 1, r)
	if !d.Allowed {
		t.Fatalf("six minutes later: %+v", d)
	}
	if d := DecideRate(d.NewTAT, t0.Add(6*time.Minute), 1, r); d.Allowed {
		t.Fatalf("two in the same six minutes: %+v", d)
	}
	if d := DecideRate(tat, t0.Add(time.Hour), 10, r); !d.Allowed {
		t.Fatalf("after an idle hour: %+v", d)
	}
}

// Whatever the batch sizes, admitted rows never exceed limit per minute in the
// long run plus one burst.
func TestBatchRateSustained(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var tat time.Time
	admitted := 0
	for s := 0; s < 600; s++ { // ten minutes, one attempt of 37 rows per second
		d := DecideBatchRate(tat, t0.Add(time.Duration(s)*time.Second), 37, 100)
		if d.Allowed {
			admitted += 37
			tat = d.NewTAT
		}
	}
	if admitted > 100*10+100 {
		t.Fatalf("admitted %d rows in ten minutes at 100/min", admitted)
	}
	if admitted < 100*9 {
		t.Fatalf("admitted only %d rows in ten minutes at 100/min", admitted)
	}
}

// The forms as the spec's patterns state them; ValidEventID and ValidHash
// must accept exactly what these accept.
var (
	eventIDForm = regexp.MustCompile(`^evt-[A-Za-z0-9_.:-]{1,160}$`)
	hashForm    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

func TestValidEventIDAndHash(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	ids := []struct {
		id   string
		want bool
	}{
		{"evt-a", true},
		{"evt-A_z.0:9-", true},
		{"evt-" + strings.Repeat("a", 160), true},
		{"evt-" + strings.Repeat("a", 161), false},
		{"evt-", false},
		{"evt", false},
		{"EVT-a", false},
		{"evt-a b", false},
		{"evt-a\n", false},
		{"evt-é", false},
		{"xevt-a", false},
		{"evt-a/b", false},
	}
	for _, tt := range ids {
		if got := ValidEventID(tt.id); got != tt.want {
			t.Errorf("ValidEventID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
	hashes := []struct {
		h    string
		want bool
	}{
		{"sha256:" + hex64, true},
		{"sha256:" + hex64[:63], false},
		{"sha256:" + hex64 + "0", false},
		{"sha256:" + strings.ToUpper(hex64), false},
		{"sha256:" + hex64[:63] + "g", false},
		{"SHA256:" + hex64, false},
		{hex64, false},
		{"sha256:" + hex64 + "\n", false},
	}
	for _, tt := range hashes {
		if got := ValidHash(tt.h); got != tt.want {
			t.Errorf("ValidHash(%q) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

// FuzzValidForms checks the written-out checks against the patterns.
func FuzzValidForms(f *testing.F) {
	for _, s := range []string{"evt-a", "evt-", "sha256:" + strings.Repeat("ab", 32), "evt-a\n", "evt-\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidEventID(s), eventIDForm.MatchString(s); got != want {
			t.Fatalf("ValidEventID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := ValidHash(s), hashForm.MatchString(s); got != want {
			t.Fatalf("ValidHash(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

// RFC 3339 offsets: hours 00-23, minutes 00-59; +24:00 is refused (it read
// as a different day).
func TestParseTimestampOffsets(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"2026-11-26T11:00:00Z", true},
		{"2026-11-26T11:00:00+00:00", true},
		{"2026-11-26T11:00:00+23:59", true},
		{"2026-11-26T11:00:00-23:59", true},
		{"2026-11-26T11:00:00.123456+05:30", true},
		{"2026-11-26T11:00:00+24:00", false},
		{"2026-11-26T11:00:00-24:00", false},
		{"2026-11-26T11:00:00+05:60", false},
		{"2026-11-26T11:00:00", false},
	} {
		if _, err := ParseTimestamp(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseTimestamp(%q) err = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

// The event_id refusal says the rule the check applies: evt- and 1 to 160 of
// letters, digits, '_', '.', ':' and '-' (not only hex).
func TestEventIDMessageSaysTheRule(t *testing.T) {
	for _, id := range []string{"evt-0", "evt-Zz_.:-", "evt-" + strings.Repeat("a", 160)} {
		if !ValidEventID(id) {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range []string{"evt-", "evt-a b", "evt-é", "evt-" + strings.Repeat("a", 161), "EVT-1"} {
		if ValidEventID(id) {
			t.Errorf("%q accepted", id)
		}
	}
	in := api.EventInput{EventID: ptr("evt-"), EventType: ptr("t"), Sequence: new(int64)}
	errs := ValidateEventShape(&in)
	if len(errs) != 1 || errs[0].Field != "event_id" {
		t.Fatalf("errs = %v", errs)
	}
	if msg := errs[0].Message; !strings.HasPrefix(msg, "must be evt- followed by 1 to 160 letters, digits, '_', '.', ':' or '-'") {
		t.Fatalf("message %q does not say the rule", msg)
	}
}
