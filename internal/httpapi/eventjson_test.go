package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/pkg/api"
)

// strictEvent is what the body reader makes of an append body (the slow
// path): one object of the event's exact keys, each once, values of their
// types, the text rule throughout, nothing after it.
func strictEvent(b []byte) (api.EventInput, bool) {
	in, err := decodeBody[api.EventInput](b, nil)
	return in, err == nil
}

// strictBatch is what the body reader makes of a batch body whose rows all
// read as events (decodeBatch's path when the fast path says no).
func strictBatch(b []byte) (*string, []api.EventInput, bool) {
	body, err := decodeBody[batchBody](b, nil)
	return body.ClientMachine, body.Events, err == nil
}

const typicalEvent = `{"decision":"allow","event_id":"evt-1a2b","event_type":"tool_call","machine_id":null,"parent_id":null,` +
	`"prev_hash":"sha256:` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `","raw":{"tool_input":{"cmd_sha256":"ab"}},` +
	`"sequence":41,"signature":null,"signature_key":null,"tool":"bash","ts":"2026-11-26T06:00:00.000000Z"}`

// The shapes clients send take the fast path, and give what the body reader
// gives; anything else is declined, so that the body reader decides (and
// names the error).
func TestDecodeEventFast(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		fast bool
	}{
		{"typical", typicalEvent, true},
		{"spaced", " \n{ \"event_id\" : \"evt-1\" ,\t\"sequence\":0, \"raw\" : [ 1 , {\"a\":\"}\\\"]\"} ] }\r\n", true},
		{"empty object", `{}`, true},
		{"null raw", `{"raw":null,"sequence":-0}`, true},
		{"string raw with an escape", `{"raw":"\u00e9\n"}`, true},
		{"raw with \\u0000", `{"raw":{"a":"\u0000"}}`, false},
		{"raw with a lone surrogate", `{"raw":{"a":"\ud800"}}`, false},
		{"raw with a surrogate pair", `{"raw":{"a":"\ud83d\ude00"}}`, false},
		{"raw with an escaped backslash before u0000", `{"raw":{"a":"\\u0000"}}`, true},
		{"raw with invalid UTF-8", "{\"raw\":{\"a\":\"\xff\"}}", false},
		{"raw with invalid UTF-8 in a key", "{\"raw\":{\"\xfe\":1}}", false},
		{"raw with UTF-8", `{"raw":{"répertoire":"é"}}`, true},
		{"non-ASCII string", `{"tool":"répertoire"}`, true},
		{"escape in a field", `{"tool":"a\"b"}`, false},
		{"invalid UTF-8", "{\"tool\":\"a\xffb\"}", false},
		{"key in another case", `{"Event_ID":"evt-1"}`, false},
		{"key given twice", `{"tool":"a","tool":"b"}`, false},
		{"unknown field", `{"extra":1}`, false},
		{"fractional sequence", `{"sequence":1.0}`, false},
		{"exponent", `{"sequence":1e2}`, false},
		{"leading zero", `{"sequence":01}`, false},
		{"sequence too large", `{"sequence":9223372036854775808}`, false},
		{"sequence as a string", `{"sequence":"1"}`, false},
		{"bad raw", `{"raw":{"a":}}`, false},
		{"raw cut short", `{"raw":{"a":"b`, false},
		{"trailing comma", `{"tool":"a",}`, false},
		{"data after the object", `{"tool":"a"} {}`, false},
		{"not an object", `[1]`, false},
		{"raw nested 64 deep", `{"raw":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, true},
		{"raw nested 65 deep", `{"raw":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`, false},
		// encoding/json refuses a body nested deeper than 10,000 levels: raw's
		// own levels and the object around it count.
		{"raw nested to encoding/json's limit", `{"raw":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := decodeEventFast([]byte(tc.body))
			if ok != tc.fast {
				t.Fatalf("fast path took it: %v, want %v", ok, tc.fast)
			}
			if !ok {
				return
			}
			want, valid := strictEvent([]byte(tc.body))
			if !valid || !reflect.DeepEqual(got, want) {
				t.Fatalf("fast path gave %+v, the body reader %+v (valid %v)", got, want, valid)
			}
		})
	}
}

func TestDecodeBatchFast(t *testing.T) {
	rows := strings.Repeat(typicalEvent+",", 3) + typicalEvent
	for _, tc := range []struct {
		name string
		body string
		fast bool
	}{
		{"typical", `{"client_machine":"m1","events":[` + rows + `]}`, true},
		{"events only", `{"events":[` + rows + `]}`, true},
		{"no events", `{"events":[]}`, true},
		{"machine null, after the events", `{"events":[{}],"client_machine":null}`, true},
		{"events missing", `{"client_machine":"m1"}`, false},
		{"events null", `{"events":null}`, false},
		{"events twice", `{"events":[],"events":[]}`, false},
		{"Events", `{"Events":[]}`, false},
		{"client_machine over its cap", `{"client_machine":"` + strings.Repeat("m", 257) + `","events":[]}`, false},
		{"a null row", `{"events":[null]}`, false},
		{"a bad row", `{"events":[{"sequence":"x"}]}`, false},
		{"unknown key", `{"events":[],"other":1}`, false},
		{"missing comma", `{"events":[] "client_machine":null}`, false},
		{"a raw nested to encoding/json's limit", `{"events":[{"raw":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, got, ok := decodeBatchFast([]byte(tc.body))
			if ok != tc.fast {
				t.Fatalf("fast path took it: %v, want %v", ok, tc.fast)
			}
			if !ok {
				return
			}
			wantM, want, valid := strictBatch([]byte(tc.body))
			if !valid || !reflect.DeepEqual(m, wantM) || !reflect.DeepEqual(got, want) {
				t.Fatalf("fast path gave %v %+v, the body reader %v %+v (valid %v)", m, got, wantM, want, valid)
			}
		})
	}
}

// Wherever the fast path takes a body, the body reader takes it too and
// gives the same event.
func FuzzEventJSON(f *testing.F) {
	for _, s := range []string{typicalEvent, `{}`, `{"raw":null}`, `{"raw":"\u00e9"}`, `{"sequence":-0}`, `{"tool":"a","tool":"b"}`,
		`{"raw":[1,{"a":"]}"}]}`, `{"sequence":12345678901234567}`, " {\"ts\" :\"x\"} ", `{"raw":{"a":"\u0000"}}`,
		`{"raw":"\ud800\udc00"}`, "{\"raw\":\"\xc3\"}", `{"Tool":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeEventFast(b)
		if !ok {
			return
		}
		want, valid := strictEvent(b)
		if !valid {
			t.Fatalf("fast path took %q, which the body reader refuses", b)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast path gave %s, the body reader %s", b, show(got), show(want))
		}
		// And as the only row of a batch.
		body := append(append([]byte(`{"events":[`), b...), ']', '}')
		_, rows, ok := decodeBatchFast(body)
		if _, wantRows, valid := strictBatch(body); ok && (!valid || !reflect.DeepEqual(rows, wantRows)) {
			t.Fatalf("%q as a batch row: fast path gave %+v, the body reader %+v (valid %v)", b, rows, wantRows, valid)
		}
	})
}

// Wherever the fast path takes a whole batch body, the body reader takes it
// too and gives the same machine and rows.
func FuzzBatchJSON(f *testing.F) {
	for _, s := range []string{`{"client_machine":"m1","events":[` + typicalEvent + `,{}]}`, `{"events":[]}`,
		`{"events":[{}],"client_machine":null}`, `{"events":[],"events":[]}`, `{"events":[null]}`, `{"client_machine":"m"}`,
		` { "events" : [ { "raw" : [ 1 ] } ] , "client_machine" : "x" } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, rows, ok := decodeBatchFast(b)
		if !ok {
			return
		}
		wantM, want, valid := strictBatch(b)
		if !valid || !reflect.DeepEqual(m, wantM) || !reflect.DeepEqual(rows, want) {
			t.Fatalf("%q: fast path gave %v %+v, the body reader %v %+v (valid %v)", b, m, rows, wantM, want, valid)
		}
	})
}

func show(in api.EventInput) string {
	b, _ := json.Marshal(in)
	return fmt.Sprintf("%s (raw %q)", b, in.Raw)
}

func BenchmarkDecodeBatch(b *testing.B) {
	body := []byte(`{"client_machine":null,"events":[` + strings.Repeat(typicalEvent+",", 499) + typicalEvent + `]}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := decodeBatchFast(body); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("body reader", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := strictBatch(body); !ok {
				b.Fatal("declined")
			}
		}
	})
}

// BenchmarkDecodeEvent is a single append's body on the fast path.
func BenchmarkDecodeEvent(b *testing.B) {
	body := []byte(typicalEvent)
	for b.Loop() {
		if _, ok := decodeEventFast(body); !ok {
			b.Fatal("declined")
		}
	}
}
