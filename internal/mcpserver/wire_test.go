package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawPeer speaks raw JSON-RPC lines on one end of a pipe: what a host or
// an upstream server writes, byte for byte.
type rawPeer struct {
	t     *testing.T
	conn  net.Conn
	lines chan string
}

func newRawPeer(t *testing.T, conn net.Conn) *rawPeer {
	p := &rawPeer{t: t, conn: conn, lines: make(chan string, 64)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(conn)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return p
}

func (p *rawPeer) send(line string) {
	p.t.Helper()
	if _, err := p.conn.Write([]byte(line + "\n")); err != nil {
		p.t.Fatalf("write %s: %v", line, err)
	}
}

// next is the next line the other side wrote.
func (p *rawPeer) next() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("the other side closed the stream")
		}
		return l
	case <-time.After(10 * time.Second):
		p.t.Fatal("no line within 10 s")
	}
	return ""
}

// nextMessage is the next line as a JSON object, its members raw.
func (p *rawPeer) nextMessage() map[string]json.RawMessage {
	p.t.Helper()
	l := p.next()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		p.t.Fatalf("not a JSON object: %s", l)
	}
	return m
}

// call sends a request line and returns the answer line.
func (p *rawPeer) call(line string) string {
	p.t.Helper()
	p.send(line)
	return p.next()
}

// wireCase is a line a host sends, and the line it must get back: want
// lists substrings of the answer, and id the answer's id byte for byte
// ("" for a batch).
type wireCase struct {
	name, send string
	id         string
	want       []string
}

// hostWireCases hold for any stdio server of the project (the proxy and
// `auditchain mcp`) before initialize: JSON-RPC 2.0's answers to what is
// not a request, ids kept as sent, and a batch answered as one array.
var hostWireCases = []wireCase{
	{"not JSON", `{"jsonrpc":"2.0","id":1,"method":"ping"`, "null", []string{`"code":-32700`}},
	{"not JSON at all", `hello`, "null", []string{`"code":-32700`}},
	{"id of the wrong type", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", []string{`"code":-32600`}},
	{"id null in a request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, "null", []string{`"code":-32600`}},
	{"no jsonrpc member", `{"id":2,"method":"ping"}`, "2", []string{`"code":-32600`}},
	{"method not a string", `{"jsonrpc":"2.0","id":3,"method":7}`, "3", []string{`"code":-32600`}},
	{"params not structured", `{"jsonrpc":"2.0","id":4,"method":"ping","params":1}`, "4", []string{`"code":-32600`}},
	{"a JSON scalar", `42`, "null", []string{`"code":-32600`}},
	{"empty batch", `[]`, "null", []string{`"code":-32600`}},
	{"id above 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, "9007199254740993", []string{`"result":{}`}},
	{"id beyond int64", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, "123456789012345678901234567890", []string{`"result":{}`}},
	{"negative id", `{"jsonrpc":"2.0","id":-9007199254740993,"method":"ping"}`, "-9007199254740993", []string{`"result":{}`}},
	{"id with an exponent", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, "1e3", []string{`"result":{}`}},
	{"a line over 16 MiB", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 16<<20) + `"}}`, "null", []string{`"code":-32600`}},
	{"string id with escapes", `{"jsonrpc":"2.0","id":"a\"b\u00e9\\","method":"ping"}`, `"a\"b\u00e9\\"`, []string{`"result":{}`}},
}

// checkHostWire sends each case to a fresh session of the server and
// checks the answer, and that the session goes on (a ping after it is
// answered). Then a batch is answered as one array, with its ids.
func checkHostWire(t *testing.T, start func(t *testing.T) *rawPeer) {
	for _, c := range hostWireCases {
		t.Run(c.name, func(t *testing.T) {
			host := start(t)
			got := host.call(c.send)
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(got), &m); err != nil {
				t.Fatalf("answer %s: %v", got, err)
			}
			if string(m["id"]) != c.id || string(m["jsonrpc"]) != `"2.0"` {
				t.Fatalf("answer %s, want id %s", got, c.id)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Fatalf("answer %s, want %s in it", got, w)
				}
			}
			if after := host.call(`{"jsonrpc":"2.0","id":"after","method":"ping"}`); after != `{"jsonrpc":"2.0","id":"after","result":{}}` {
				t.Fatalf("after %s the session answers %s", c.name, after)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		host := start(t)
		got := host.call(`[{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"none"}},` +
			`{"jsonrpc":"2.0","id":"b","method":"ping"},{"jsonrpc":"2.0","id":{},"method":"ping"}]`)
		var answers []map[string]json.RawMessage
		if err := json.Unmarshal([]byte(got), &answers); err != nil {
			t.Fatalf("a batch is answered %s, want an array", got)
		}
		var ids []string
		for _, a := range answers {
			ids = append(ids, string(a["id"]))
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{`"b"`, "9007199254740993", "null"}) {
			t.Fatalf("batch answers %s, want the two pings' ids and null for the invalid member", got)
		}
		// A batch of notifications has no answer: the next line is the
		// ping's.
		host.send(`[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"none"}}]`)
		if got := host.call(`{"jsonrpc":"2.0","id":"after","method":"ping"}`); got != `{"jsonrpc":"2.0","id":"after","result":{}}` {
			t.Fatalf("after a batch of notifications the next line is %s", got)
		}
	})
}

// initialize sends initialize for protocol version and returns its answer.
func initialize(host *rawPeer, version string, capabilities string) map[string]json.RawMessage {
	host.t.Helper()
	host.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":` + capabilities + `,"clientInfo":{"name":"raw-host","version":"1"}}}`)
	m := host.nextMessage()
	if m["result"] == nil {
		host.t.Fatalf("initialize: %v", m)
	}
	host.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// checkBatchesByVersion: under 2025-03-26 a batch is answered; from
// 2025-06-18 on, a batch is refused (-32600, id null) and the session goes
// on.
func checkBatchesByVersion(t *testing.T, start func(t *testing.T) *rawPeer) {
	t.Run("2025-03-26 answers batches", func(t *testing.T) {
		host := start(t)
		initialize(host, "2025-03-26", "{}")
		got := host.call(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
		if got != `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]` &&
			got != `[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]` {
			t.Fatalf("a batch under 2025-03-26 is answered %s", got)
		}
	})
	t.Run("2025-06-18 refuses batches", func(t *testing.T) {
		host := start(t)
		initialize(host, "2025-06-18", "{}")
		got := host.call(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) {
			t.Fatalf("a batch under 2025-06-18 is answered %s, want -32600 with id null", got)
		}
		if after := host.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); after != `{"jsonrpc":"2.0","id":3,"result":{}}` {
			t.Fatalf("after a refused batch the session answers %s", after)
		}
	})
}
