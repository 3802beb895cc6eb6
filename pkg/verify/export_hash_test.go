package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// The fast canonical form used by VerifyExport and PayloadHash must equal
// CanonicalEvent byte for byte, or both must fail.
func checkSameHash(t *testing.T, e *HashedEvent) {
	t.Helper()
	want, werr := CanonicalEvent(e)
	_, got, gerr := EventHash(e, nil)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("CanonicalEvent err %v, eventHash err %v for %+v", werr, gerr, e)
	}
	if werr == nil && got != Hash(sha256.Sum256(want)) {
		fast, _, _ := appendCanonicalEvent(nil, e)
		t.Fatalf("hashes differ\ncanonical %s\nfast      %s", want, fast)
	}
	// PayloadHash takes the fast path: its text is the reference's.
	sum := sha256.Sum256(want)
	if ph, err := PayloadHash(e); (err != nil) != (werr != nil) || werr == nil && ph != HashPrefix+hex.EncodeToString(sum[:]) {
		t.Fatalf("PayloadHash = %q, %v; reference %s%x, %v", ph, err, HashPrefix, sum, werr)
	}
	// The canonical raw returned on the way is what an event signature signs.
	if _, _, signed, err := eventHash(e, nil); err == nil && signed != nil {
		raw := []byte(e.Raw)
		if len(raw) == 0 {
			raw = []byte("null")
		}
		if canon, err := jcs.Transform(raw); err != nil || !bytes.Equal(signed, canon) {
			t.Fatalf("eventHash gives signed bytes %q, jcs gives %q, %v", signed, canon, err)
		}
	}
}

func TestEventHashMatchesCanonicalEvent(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		e    HashedEvent
	}{
		{"all null", HashedEvent{}},
		{"typical", HashedEvent{EventID: "evt-1", EventType: "tool_call", Sequence: 7, PrevHash: s("sha256:00"),
			Raw: json.RawMessage(`{"b": 1, "a": [1.0, 2e3, -0, "x"]}`), Decision: s("allow"), Tool: s("Bash"),
			MachineID: s("m"), ParentID: s("p"), TS: s("2025-01-01T00:00:00+00:00"), Signature: s("c2ln"), SignatureKey: s("k")}},
		{"escapes", HashedEvent{EventID: "a\"b\\c\b\f\n\r\t\x01\x1f\x7f", EventType: "<&>\u2028\u2029é😀", Tool: s("")}},
		{"raw null literal", HashedEvent{Raw: json.RawMessage(`null`)}},
		{"raw scalar", HashedEvent{Raw: json.RawMessage(` "x" `)}},
		{"raw with escapes", HashedEvent{Raw: json.RawMessage(`{"k":"\u00e9\u0041\/\ud83d\ude00"}`)}},
		{"invalid raw", HashedEvent{Raw: json.RawMessage(`{"k":`)}},
		{"large sequence", HashedEvent{Sequence: 1 << 60}},
		{"largest safe sequence", HashedEvent{Sequence: 1<<53 - 1}},
		{"negative sequence", HashedEvent{Sequence: -42}},
		{"invalid utf-8", HashedEvent{EventID: "a\xffb"}},
		{"beyond 2^53 with escapes and a machine", HashedEvent{EventID: "evt-3", EventType: "t\"q\\\n\u2028", Sequence: 1 << 54,
			MachineID: s("m"), Signature: s("c2ln"), SignatureKey: s("k"), TS: s("x")}},
		{"raw with surrogates and controls", HashedEvent{EventID: "evt-4", EventType: "t", Sequence: 3,
			Raw: json.RawMessage(`{"b":"\ud83d\ude00","a":"\u0001"}`), TS: s("x")}},
		{"raw unsorted, nested, decimals", HashedEvent{EventID: "evt-2", EventType: "tool_call", Sequence: 7, PrevHash: s("sha256:00"),
			Tool: s("Bash"), Raw: json.RawMessage(`{"z":1,"a":{"y":[1,2.50,"\u00e9"],"b":null},"n":1e3}`), Decision: s("allow"),
			TS: s("2026-11-21T00:00:00.5+01:00")}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSameHash(t, &tc.e) })
	}
}

func FuzzEventHash(f *testing.F) {
	f.Add("evt-1", "tool_call", int64(3), "allow", `{"a":1}`, "2025-01-01T00:00:00+00:00", true)
	f.Add("\x00\"\\", "é\u2028", int64(-1), "", `[1e400]`, "", false)
	f.Add("x", "y", int64(1<<53), "\xff", `{"z":{"b":[true,null,0.1],"a":"\t"}}`, "ts", true)
	f.Fuzz(func(t *testing.T, id, typ string, seq int64, dec, raw, ts string, nulls bool) {
		e := HashedEvent{EventID: id, EventType: typ, Sequence: seq, Decision: &dec, TS: &ts, Raw: json.RawMessage(raw)}
		if nulls {
			e.Decision, e.Tool, e.MachineID = nil, &id, &typ
		}
		checkSameHash(t, &e)
	})
}

func TestIsCanonicalJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":1,"b":[true,false,null,"x"]}`, true},
		{`{}`, true},
		{`[]`, true},
		{`"\u001f\n\"\\é😀"`, true},
		{`-12`, true},
		{`{"b":1,"a":2}`, false},    // unsorted
		{`{"a":1,"a":2}`, false},    // duplicate
		{`{"a": 1}`, false},         // whitespace
		{`1.0`, false},              // fraction
		{`1e3`, false},              // exponent
		{`-0`, false},               // negative zero
		{`01`, false},               // leading zero
		{`1234567890123456`, false}, // beyond 15 digits
		{`"\u000a"`, false},         // short form exists
		{`"\u001F"`, false},         // uppercase hex
		{`"\/"`, false},             // needless escape
		{`"\u0041"`, false},         // needless escape
		{"\"\x01\"", false},         // raw control
		{"\"\xff\"", false},         // invalid UTF-8
		{`{"é":1}`, false},          // non-ASCII key: leave to jcs
		{`{"a\n":1}`, false},        // escaped key: leave to jcs
		{`[1,]`, false},             // invalid
		{`tru`, false},              // invalid
		{`{"a":1}x`, false},         // trailing bytes
		{strings.Repeat("[", 70) + strings.Repeat("]", 70), false}, // deep
	} {
		if got := isCanonicalJSON([]byte(tc.in)); got != tc.want {
			t.Errorf("isCanonicalJSON(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if tc.want {
			if out, err := jcs.Transform([]byte(tc.in)); err != nil || string(out) != tc.in {
				t.Errorf("jcs(%q) = %q, %v", tc.in, out, err)
			}
		}
	}
}

// FuzzIsCanonicalJSON: whatever isCanonicalJSON accepts, jcs leaves unchanged.
func FuzzIsCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null]}`, `"\u0000\b"`, `[-1,0,"é"]`, `{"a":{"b":{}}}`, `1e2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonicalJSON(b) {
			return
		}
		out, err := jcs.Transform(b)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("accepted %q but jcs gives %q, %v", b, out, err)
		}
	})
}

func benchEvent() *HashedEvent {
	s := func(v string) *string { return &v }
	return &HashedEvent{EventID: "evt-0123456789abcdef", EventType: "tool_call", Sequence: 12345,
		PrevHash: s("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
		Raw:      json.RawMessage(`{"args_hash":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","cwd":"/home/x","n":3}`),
		Decision: s("allow"), Tool: s("Bash"), MachineID: s("m-1"), TS: s("2025-06-01T12:00:00+00:00")}
}

func BenchmarkPayloadHash(b *testing.B) {
	e := benchEvent()
	for b.Loop() {
		if _, err := PayloadHash(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventHash(b *testing.B) {
	for _, bc := range []struct {
		name string
		raw  string
	}{
		{"canonical raw", `{"args_hash":"sha256:0123","cwd":"/home/x","n":3}`},
		{"non-canonical raw", `{"n": 3, "cwd": "/home/x", "args_hash": "sha256:0123"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := benchEvent()
			e.Raw = json.RawMessage(bc.raw)
			var scratch []byte
			for b.Loop() {
				var err error
				if scratch, _, err = EventHash(e, scratch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// sortedCanonical sorts keys at every depth and leaves the rest as it is;
// outside its subset it declines and jcs decides.
func TestSortedCanonical(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{`{"b":1,"a":{"d":[{"z":null,"y":true}],"c":"é"}}`, `{"a":{"c":"é","d":[{"y":true,"z":null}]},"b":1}`, true},
		{`{"grant_id":"g","action":"granted","epoch":{"scheme":"s","anchor":"a"}}`, `{"action":"granted","epoch":{"anchor":"a","scheme":"s"},"grant_id":"g"}`, true},
		{`[3,{"b":"x","a":-1}]`, `[3,{"a":-1,"b":"x"}]`, true},
		{`{}`, `{}`, true},
		{`{"a":1,"a":2}`, ``, false},                // a key twice
		{`{"b":1.5,"a":1}`, ``, false},              // not an integer
		{`{"b":"\u003c","a":1}`, ``, false},         // an escape RFC 8785 does not write
		{`{"b":1, "a":1}`, ``, false},               // whitespace
		{`{"é":1,"a":1}`, ``, false},                // a key outside printable ASCII
		{`{"b":1,"a":1}x`, ``, false},               // trailing bytes
		{`{"b":1234567890123456,"a":1}`, ``, false}, // 16 digits
	} {
		got, ok := sortedCanonical([]byte(tc.in))
		if ok != tc.ok || (ok && string(got) != tc.want) {
			t.Errorf("sortedCanonical(%s) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok {
			if j, err := jcs.Transform([]byte(tc.in)); err != nil || string(j) != string(got) {
				t.Errorf("jcs(%s) = %s, %v; sortedCanonical gave %s", tc.in, j, err, got)
			}
		}
	}
}

// FuzzSortedCanonical: whatever sortedCanonical accepts, it canonicalises
// exactly as jcs does.
func FuzzSortedCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":{"d":[{"z":null,"y":true}],"c":"é"}}`, `[{"b":"\u0000","a":-12}]`, `{"a":1,"a":1}`, `{"b":{},"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, ok := sortedCanonical(b)
		if !ok {
			return
		}
		want, err := jcs.Transform(b)
		if err != nil || !bytes.Equal(out, want) {
			t.Fatalf("sortedCanonical(%q) = %q but jcs gives %q, %v", b, out, want, err)
		}
	})
}

// A grant.revoked raw as encoding/json writes it: canonical but for its
// keys' order.
var unsortedRaw = []byte(`{"grant_id":"gr-0123456789abcdef","subagent":"collector-17","parent_agent":null,"allowed_tools":["read_file","grep"],"max_tool_calls":100,"expires_at":"2026-11-27T12:00:00.000000+00:00","created_at":"2026-11-26T12:00:00.000000+00:00","action":"granted","epoch":{"anchor":"a","date_utc":"2026-11-26","epoch_index":3,"quadrant":"q1","scheme":"s","phase":{"name":"p","index":1}},"revoked_at":"2026-11-26T13:00:00.000000+00:00"}`)

func BenchmarkCanonicalUnsorted(b *testing.B) {
	b.Run("jcs", func(b *testing.B) {
		for range b.N {
			if _, err := jcs.Transform(unsortedRaw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sorted", func(b *testing.B) {
		for range b.N {
			if _, ok := sortedCanonical(unsortedRaw); !ok {
				b.Fatal("declined")
			}
		}
	})
}
