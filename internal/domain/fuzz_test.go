package domain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// FuzzParseTimestamp: any input either fails cleanly or round-trips to an
// instant that formats in the spec's +00:00 form.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-11-21T12:00:00+00:00", "2026-11-21T12:00:00Z", "2026-11-21T12:00:00.123456789-07:00", "", "noon", "9999-12-31T23:59:59+14:00",
		"2026-11-26T11:00:00+24:00", "2026-11-26T11:00:00-24:00", "2026-11-26T11:00:00+23:59", "2026-11-26T11:00:00+05:60"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTimestamp(s)
		if err != nil {
			return
		}
		if !strings.HasSuffix(s, "Z") {
			// RFC 3339: time-numoffset is ("+" / "-") time-hour ":" time-minute,
			// hours 00-23, minutes 00-59.
			off := s[len(s)-6:]
			h, m := (off[1]-'0')*10+off[2]-'0', (off[4]-'0')*10+off[5]-'0'
			if h > 23 || m > 59 {
				t.Fatalf("%q accepted with the offset %s", s, off)
			}
		}
		back, err := ParseTimestamp(FormatTimestamp(ts))
		if err != nil || !back.Equal(ts.Truncate(time.Microsecond)) {
			t.Fatalf("%q: formatted %q does not round-trip: %v", s, FormatTimestamp(ts), err)
		}
	})
}

// FuzzValidateEventShape: decoding and validating any body never panics.
func FuzzValidateEventShape(f *testing.F) {
	for _, s := range []string{`{"event_id":"evt-1","event_type":"t","sequence":0}`, `{"raw":[1]}`, `{"ts":"x","decision":"deny"}`, `null`, `{"sequence":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in api.EventInput
		if json.Unmarshal(body, &in) != nil {
			return
		}
		_ = ValidateEventShape(&in)
	})
}

// The semantic key read straight off a canonical raw equals the one found by
// parsing it, for every raw and tool (the fast path may only decline).
func FuzzEventSemanticKey(f *testing.F) {
	for _, seed := range semanticKeyCases {
		f.Add(seed.tool, seed.raw)
	}
	f.Fuzz(func(t *testing.T, tool, raw string) {
		if tool == "" {
			return
		}
		checkSemanticKeyPaths(t, tool, raw)
	})
}
