package verify

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// checkEventLine decodes line both ways: whenever the fast decoder accepts,
// encoding/json must accept too and give an equal value. It reports whether
// the fast decoder accepted.
func checkEventLine(t *testing.T, line []byte) bool {
	t.Helper()
	var fast exportLine
	if !decodeEventLine(line, &fast) {
		if !reflect.DeepEqual(fast, exportLine{}) {
			t.Fatalf("declined %q but wrote %+v", line, fast)
		}
		return false
	}
	var slow exportLine
	if err := json.Unmarshal(line, &slow); err != nil {
		t.Fatalf("fast decoder accepted %q, encoding/json rejects it: %v", line, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("decoders differ on %q\nfast:          %s\nencoding/json: %s", line, dumpLine(fast), dumpLine(slow))
	}
	return true
}

func dumpLine(l exportLine) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// Every event line of the golden exports takes the fast path.
func TestDecodeEventLineGolden(t *testing.T) {
	for _, name := range []string{"export.ndjson", "fragment.ndjson"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		events := 0
		for line := range bytes.Lines(data) {
			line = bytes.TrimSuffix(line, []byte("\n"))
			isEvent := bytes.HasPrefix(line, []byte(`{"kind":"event"`))
			if got := checkEventLine(t, line); got != isEvent {
				t.Errorf("%s: fast decoder accepted=%v for %s", name, got, line)
			}
			if isEvent {
				events++
			}
		}
		if events == 0 {
			t.Fatalf("%s has no event lines", name)
		}
	}
}

func TestDecodeEventLine(t *testing.T) {
	const good = `{"kind":"event","event":{"event_id":"evt-1","event_type":"tool_call","sequence":7,` +
		`"prev_hash":"sha256:00","raw":{"a":[1,-2.5e+3,true,false,null,"\u00e9\n\/"],"b":{}},"decision":"allow",` +
		`"tool":"Bash","machine_id":"m","parent_id":null,"ts":"2025-06-01T12:00:00+00:00",` +
		`"signature":"c2ln","signature_key":null,"payload_hash":"sha256:ff"}}`
	edit := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the base line", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, tc := range []struct {
		name       string
		line       string
		wantAccept bool
	}{
		{"base line", good, true},
		{"raw null", edit(`{"a":[1,-2.5e+3,true,false,null,"\u00e9\n\/"],"b":{}}`, `null`), true},
		{"raw scalar", edit(`{"a":[1,-2.5e+3,true,false,null,"\u00e9\n\/"],"b":{}}`, `-0.0E-0`), true},
		{"raw empty containers", edit(`"b":{}`, `"b":[[],{}]`), true},
		{"raw duplicate keys kept verbatim", edit(`"b":{}`, `"a":1`), true},
		{"raw invalid utf-8 kept verbatim", edit(`"\u00e9\n\/"`, "\"\xff\""), true},
		{"utf-8 strings", edit(`"evt-1"`, `"évt-😀"`), true},
		{"negative sequence", edit(`"sequence":7`, `"sequence":-7`), true},
		{"zero sequence", edit(`"sequence":7`, `"sequence":0`), true},
		{"minus zero sequence", edit(`"sequence":7`, `"sequence":-0`), true},
		{"18-digit sequence", edit(`"sequence":7`, `"sequence":999999999999999999`), true},
		{"all nullable null", `{"kind":"event","event":{"event_id":"","event_type":"","sequence":0,"prev_hash":null,"raw":null,` +
			`"decision":null,"tool":null,"machine_id":null,"parent_id":null,"ts":null,"signature":null,` +
			`"signature_key":null,"payload_hash":""}}`, true},

		// Everything below is declined and left to encoding/json.
		{"19-digit sequence", edit(`"sequence":7`, `"sequence":1000000000000000000`), false},
		{"sequence overflow", edit(`"sequence":7`, `"sequence":99999999999999999999`), false},
		{"fractional sequence", edit(`"sequence":7`, `"sequence":7.0`), false},
		{"exponent sequence", edit(`"sequence":7`, `"sequence":7e0`), false},
		{"leading zero sequence", edit(`"sequence":7`, `"sequence":07`), false},
		{"string sequence", edit(`"sequence":7`, `"sequence":"7"`), false},
		{"null sequence", edit(`"sequence":7`, `"sequence":null`), false},
		{"null event_id", edit(`"evt-1"`, `null`), false},
		{"escape in event_id", edit(`"evt-1"`, `"evt\u002d1"`), false},
		{"newline escape in ts", edit(`"2025-06-01T12:00:00+00:00"`, `"a\nb"`), false},
		{"control character in tool", edit(`"Bash"`, "\"Ba\tsh\""), false},
		{"invalid utf-8 in tool", edit(`"Bash"`, "\"Ba\xffsh\""), false},
		{"number for a string", edit(`"Bash"`, `1`), false},
		{"space after colon", edit(`"tool":"Bash"`, `"tool": "Bash"`), false},
		{"space in raw", edit(`"b":{}`, `"b": {}`), false},
		{"trailing space", good + " ", false},
		{"trailing garbage", good + "x", false},
		{"truncated", good[:len(good)-1], false},
		{"keys reordered", edit(`"decision":"allow","tool":"Bash"`, `"tool":"Bash","decision":"allow"`), false},
		{"key in another case", edit(`"tool":`, `"Tool":`), false},
		{"unknown key", edit(`"tool":"Bash"`, `"tool":"Bash","extra":1`), false},
		{"duplicate key", edit(`"tool":"Bash"`, `"tool":"Bash","tool":"Bash"`), false},
		{"missing key", edit(`"parent_id":null,`, ``), false},
		{"extra top-level member", edit(`"kind":"event",`, `"kind":"event","header":null,`), false},
		{"members swapped", `{"event":{},"kind":"event"}`, false},
		{"other kind", edit(`"kind":"event"`, `"kind":"end"`), false},
		{"raw truncated", edit(`"b":{}}`, `"b":{}`), false},
		{"raw bad escape", edit(`\/`, `\x`), false},
		{"raw short unicode escape", edit(`\u00e9`, `\u00e`), false},
		{"raw bad number", edit(`-2.5e+3`, `-2.5e`), false},
		{"raw leading zero", edit(`-2.5e+3`, `012`), false},
		{"raw bare minus", edit(`-2.5e+3`, `-`), false},
		{"raw trailing comma", edit(`"b":{}`, `"b":{},`), false},
		{"raw bad literal", edit(`true`, `tru`), false},
		{"raw too deep", edit(`"b":{}`, `"b":`+strings.Repeat("[", maxRawDepth+2)+strings.Repeat("]", maxRawDepth+2)), false},
		{"empty", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkEventLine(t, []byte(tc.line)); got != tc.wantAccept {
				t.Fatalf("accepted = %v, want %v", got, tc.wantAccept)
			}
		})
	}
}

// FuzzDecodeEventLine: whatever the fast decoder accepts, encoding/json
// accepts and decodes to an equal value.
func FuzzDecodeEventLine(f *testing.F) {
	for _, name := range []string{"export.ndjson", "fragment.ndjson"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			f.Add(bytes.TrimSuffix(line, []byte("\n")))
		}
	}
	f.Add([]byte(`{"kind":"event","event":{"event_id":"","event_type":"","sequence":-0,"prev_hash":null,"raw":[1e5,"\ud800"],` +
		`"decision":null,"tool":null,"machine_id":null,"parent_id":null,"ts":null,"signature":null,` +
		`"signature_key":null,"payload_hash":""}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		checkEventLine(t, line)
	})
}

func BenchmarkDecodeEventLine(b *testing.B) {
	data, err := os.ReadFile("testdata/export.ndjson")
	if err != nil {
		b.Fatal(err)
	}
	var line []byte
	for l := range bytes.Lines(data) {
		if bytes.HasPrefix(l, []byte(`{"kind":"event"`)) {
			line = bytes.TrimSuffix(l, []byte("\n"))
			break
		}
	}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var l exportLine
			if !decodeEventLine(line, &l) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var l exportLine
			if err := json.Unmarshal(line, &l); err != nil {
				b.Fatal(err)
			}
		}
	})
}
