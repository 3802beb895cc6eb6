package mcpserver

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// Whatever a host writes, the wire reads on: every answer it writes is a
// JSON-RPC response (or an array of them), and a ping on the next line is
// read as the request it is.
func FuzzWire(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"},{"id":{}}]`,
		`[]`, `[[]]`, `{"jsonrpc":"2.0","id":null,"method":"a"}`, `{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping","params":[1]}`, "\xff\xfe", "{\"a\":1}\r\n\n  \n", `"x"`, `1e999`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		in = append(bytes.ReplaceAll(in, []byte("\n"), []byte(" ")), "\n"+`{"jsonrpc":"2.0","id":"last","method":"ping"}`+"\n"...)
		w := newWire(bytes.NewReader(in), &out, true, slog.New(slog.DiscardHandler))
		var last *message
		for {
			m, err := w.read()
			if err != nil {
				break
			}
			if m.isRequest() {
				last = m
				w.answer(m, nil, nil)
			}
		}
		if last == nil || string(last.id) != `"last"` || last.method != "ping" {
			t.Fatalf("after %q the ping was not read: %+v", in, last)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
			var one map[string]json.RawMessage
			var many []map[string]json.RawMessage
			if json.Unmarshal(line, &one) != nil && json.Unmarshal(line, &many) != nil {
				t.Fatalf("after %q the wire wrote %q", in, line)
			}
			if one != nil && (string(one["jsonrpc"]) != `"2.0"` || one["id"] == nil) {
				t.Fatalf("after %q the wire wrote %q", in, line)
			}
		}
	})
}
