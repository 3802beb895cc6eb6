package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// fakeTools is a tools/list result with every member a host may rely on,
// some of which the SDK's Tool type does not have (execution) or writes
// differently (annotations' bare booleans), on two pages.
const (
	fakeToolsPage1 = `{"tools":[{"name":"echo","title":"Echo","description":"echoes","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"msg":{"type":"string"}}},` +
		`"outputSchema":{"type":"object","properties":{"echoed":{"type":"string"}},"required":["echoed"],"additionalProperties":false},` +
		`"annotations":{"destructiveHint":true,"x-vendor":1},"execution":{"taskSupport":"optional"},` +
		`"icons":[{"src":"data:image/png;base64,AA==","mimeType":"image/png","sizes":["16x16"]}],"_meta":{"vendor.example/k":[1,2]}}],"nextCursor":"page 2"}`
	fakeToolsPage2 = `{"tools":[{"name":"slow","inputSchema":{"type":"object"},"execution":{"taskSupport":"forbidden"}}],"_meta":{"vendor.example/page":2}}`
	fakeEchoResult = `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"echoed":"ok"},"_meta":{"vendor.example/r":1}}`
)

// fakeUpstream is an MCP server written line by line, so that a test
// decides what it says and when.
type fakeUpstream struct {
	conn net.Conn
	// early are lines sent on initialize before its answer; between, after
	// the answer and before the host's notifications/initialized.
	early, between []string
	slow           chan struct{} // closed to let a "slow" call answer
	version        string        // the protocol version it answers; "": the one asked

	mu       sync.Mutex
	received []map[string]json.RawMessage
}

func startFake(t *testing.T, f *fakeUpstream) net.Conn {
	fakeConn, proxyConn := net.Pipe()
	f.conn = fakeConn
	t.Cleanup(func() { fakeConn.Close() })
	go f.run()
	return proxyConn
}

func (f *fakeUpstream) send(line string) { f.conn.Write([]byte(line + "\n")) }

func (f *fakeUpstream) run() {
	dec := json.NewDecoder(f.conn)
	for {
		var m map[string]json.RawMessage
		if dec.Decode(&m) != nil {
			return
		}
		f.mu.Lock()
		f.received = append(f.received, m)
		f.mu.Unlock()
		var method string
		json.Unmarshal(m["method"], &method)
		id := string(m["id"])
		if id == "" {
			continue
		}
		answer := func(result string) { f.send(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`) }
		switch method {
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m["params"], &p)
			if f.version != "" {
				p.ProtocolVersion = f.version
			}
			for _, l := range f.early {
				f.send(l)
			}
			answer(`{"protocolVersion":"` + p.ProtocolVersion + `","capabilities":{"tools":{"listChanged":true},"logging":{},` +
				`"resources":{"subscribe":true},"prompts":{},"completions":{},"tasks":{"requests":{"tools":{"call":{}}}}},` +
				`"serverInfo":{"name":"fake","version":"9"},"instructions":"be kind"}`)
			for _, l := range f.between {
				f.send(l)
			}
		case "tools/list":
			if strings.Contains(string(m["params"]), `"page 2"`) {
				answer(fakeToolsPage2)
			} else {
				answer(fakeToolsPage1)
			}
		case "tools/call":
			if strings.Contains(string(m["params"]), `"slow"`) {
				go func() { <-f.slow; answer(fakeEchoResult) }()
			} else {
				answer(fakeEchoResult)
			}
		case "ping":
			answer(`{}`)
		default:
			f.send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"no"}}`)
		}
	}
}

// got returns what the fake received of method (params raw), in order.
func (f *fakeUpstream) got(method string) []map[string]json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]json.RawMessage
	for _, m := range f.received {
		if string(m["method"]) == `"`+method+`"` {
			out = append(out, m)
		}
	}
	return out
}

// rawProxy starts a proxy between a raw host and up, with svc.
func rawProxy(t *testing.T, up net.Conn, svc mcpserver.Service) (*rawPeer, *mcpserver.Proxy) {
	p, hostConn := startProxy(t, up, mcpserver.ProxyOptions{Subagent: "worker", Service: svc})
	return newRawPeer(t, hostConn), p
}

// The proxy survives what a host sends, as `auditchain mcp` does.
func TestProxyHostWire(t *testing.T) {
	start := func(t *testing.T) *rawPeer {
		host, _ := rawProxy(t, startFake(t, &fakeUpstream{}), &recordingService{})
		return host
	}
	checkHostWire(t, start)
	checkBatchesByVersion(t, start)

	t.Run("a call keeps its id through the upstream", func(t *testing.T) {
		host := start(t)
		initialize(host, "2025-06-18", "{}")
		for _, id := range []string{"9007199254740993", `"x\"y"`, "-0", "1.5"} {
			got := host.call(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"m"}}}`)
			if got != `{"jsonrpc":"2.0","id":`+id+`,"result":`+fakeEchoResult+`}` {
				t.Fatalf("tools/call with id %s answered %s", id, got)
			}
		}
	})
}

// Every message an upstream may send early — before it answers initialize,
// or between its answer and the host's notifications/initialized (as
// server-everything does with tools/list_changed) — leaves the proxy
// whole: the host connects, lists and calls, and gets the upstream's
// notifications after its initialize, never before.
func TestProxySurvivesEarlyUpstreamMessages(t *testing.T) {
	early := map[string]string{
		"tools/list_changed":     `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		"resources/list_changed": `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`,
		"resources/updated":      `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x"}}`,
		"prompts/list_changed":   `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`,
		"message":                `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"starting"}}`,
		"progress":               `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
		"cancelled":              `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`,
		"tasks/status":           `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"x","status":"working"}}`,
		"elicitation/complete":   `{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"e"}}`,
		"unknown notification":   `{"jsonrpc":"2.0","method":"notifications/vendor/thing","params":{}}`,
		"ping request":           `{"jsonrpc":"2.0","id":"up-ping","method":"ping"}`,
		"roots/list request":     `{"jsonrpc":"2.0","id":"up-roots","method":"roots/list"}`,
		"an answer to nothing":   `{"jsonrpc":"2.0","id":999,"result":{}}`,
		"not JSON":               `starting server on stdio...`,
	}
	var all []string
	for _, l := range early {
		all = append(all, l)
	}
	run := func(t *testing.T, f *fakeUpstream, wantListChanged bool) {
		var listChanged atomic.Int64
		host, _ := proxyHost(t, startFake(t, f), mcpserver.ProxyOptions{Subagent: "worker", Service: &recordingService{}},
			&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged.Add(1) }})
		ctx := context.Background()
		if _, err := host.ListTools(ctx, nil); err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "m"}})
		if err != nil || res.IsError {
			t.Fatalf("tools/call: %+v %v", res, err)
		}
		for deadline := time.Now().Add(5 * time.Second); wantListChanged && listChanged.Load() == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the host got no tools/list_changed")
			}
		}
	}
	for name, line := range early {
		t.Run("before the answer: "+name, func(t *testing.T) {
			run(t, &fakeUpstream{early: []string{line}}, name == "tools/list_changed")
		})
		t.Run("before initialized: "+name, func(t *testing.T) {
			run(t, &fakeUpstream{between: []string{line}}, name == "tools/list_changed")
		})
	}
	t.Run("all of them, both times", func(t *testing.T) {
		f := &fakeUpstream{early: all, between: all}
		run(t, f, false)
		// The upstream's roots/list was answered by the host, the ping by
		// the proxy.
		deadline := time.Now().Add(5 * time.Second)
		for {
			var answered []string
			f.mu.Lock()
			for _, m := range f.received {
				if m["method"] == nil {
					answered = append(answered, string(m["id"]))
				}
			}
			f.mu.Unlock()
			if slices.Contains(answered, `"up-ping"`) && slices.Contains(answered, `"up-roots"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the upstream's requests got answers for %v only", answered)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// The tools reach the host exactly as the upstream lists them, page by
// page; initialize reaches the upstream with exactly the host's
// capabilities, and the host sees the upstream's answer with only the
// capabilities the proxy relays.
func TestProxyRelaysToolsAndCapabilitiesUnchanged(t *testing.T) {
	for _, caps := range []string{`{}`, `{"roots":{"listChanged":true},"sampling":{}}`} {
		t.Run(caps, func(t *testing.T) {
			f := &fakeUpstream{}
			host, _ := rawProxy(t, startFake(t, f), &recordingService{})
			init := initialize(host, "2025-11-25", caps)
			var result struct {
				Capabilities json.RawMessage `json:"capabilities"`
				ServerInfo   json.RawMessage `json:"serverInfo"`
				Instructions string          `json:"instructions"`
			}
			json.Unmarshal(init["result"], &result)
			if string(result.Capabilities) != `{"logging":{},"tools":{"listChanged":true}}` ||
				string(result.ServerInfo) != `{"name":"fake","version":"9"}` || result.Instructions != "be kind" {
				t.Fatalf("the host's initialize result is %s", init["result"])
			}
			var sent struct {
				Capabilities json.RawMessage `json:"capabilities"`
				ClientInfo   json.RawMessage `json:"clientInfo"`
			}
			json.Unmarshal(f.got("initialize")[0]["params"], &sent)
			if string(sent.Capabilities) != caps || string(sent.ClientInfo) != `{"name":"raw-host","version":"1"}` {
				t.Fatalf("the upstream got capabilities %s, client %s; want the host's %s", sent.Capabilities, sent.ClientInfo, caps)
			}
			if got := host.call(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); got != `{"jsonrpc":"2.0","id":1,"result":`+fakeToolsPage1+`}` {
				t.Fatalf("tools/list page 1 is\n%s\nwant\n%s", got, fakeToolsPage1)
			}
			if got := host.call(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"page 2"}}`); got != `{"jsonrpc":"2.0","id":2,"result":`+fakeToolsPage2+`}` {
				t.Fatalf("tools/list page 2 is %s", got)
			}
			// What the proxy does not relay is refused, not sent upstream.
			for _, method := range []string{"resources/list", "resources/read", "prompts/get", "completion/complete", "tasks/list"} {
				got := host.call(`{"jsonrpc":"2.0","id":3,"method":"` + method + `","params":{}}`)
				if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,`) || len(f.got(method)) != 0 {
					t.Fatalf("%s: %s", method, got)
				}
			}
		})
	}
}

// The proxy relays protocol versions up to 2025-11-25: a host asking for a
// later one is offered 2025-11-25. A task-augmented call is refused (no tasks
// capability is declared); a tool the upstream does not have goes through
// the gate, and the upstream's answer reaches the host.
func TestProxyProtocolVersionsAndCalls(t *testing.T) {
	f := &fakeUpstream{}
	svc := &recordingService{}
	host, _ := rawProxy(t, startFake(t, f), svc)
	init := initialize(host, "2026-07-28", "{}")
	var asked struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	json.Unmarshal(f.got("initialize")[0]["params"], &asked)
	if asked.ProtocolVersion != "2025-11-25" || !strings.Contains(string(init["result"]), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("a host asking for 2026-07-28: the upstream was asked %q, the host got %s", asked.ProtocolVersion, init["result"])
	}
	got := host.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"task":{"ttl":1000}}}`)
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,`) || len(f.got("tools/call")) != 0 {
		t.Fatalf("a task-augmented call: %s", got)
	}
	got = host.call(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nosuch","arguments":{}}}`)
	if got != `{"jsonrpc":"2.0","id":2,"result":`+fakeEchoResult+`}` || len(f.got("tools/call")) != 1 {
		t.Fatalf("a call of a tool the upstream lacks: %s", got)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.gated != 1 {
		t.Fatalf("the gate was asked %d times, want 1 (the task-augmented call never reaches it)", svc.gated)
	}
}

// An upstream answering a protocol version the proxy does not relay fails
// the host's initialize.
func TestProxyRefusesAnUnknownUpstreamVersion(t *testing.T) {
	host, _ := rawProxy(t, startFake(t, &fakeUpstream{version: "2030-01-01"}), &recordingService{})
	got := host.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}`)
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":0,"error":{"code":-32603,`) || !strings.Contains(got, "2030-01-01") {
		t.Fatalf("initialize answered %s", got)
	}
}

// A host's cancellation follows its call upstream under the id the proxy
// gave it there, no answer follows, and the call's tool_result says it was
// cancelled.
func TestProxyRelaysCancellation(t *testing.T) {
	f := &fakeUpstream{slow: make(chan struct{})}
	defer close(f.slow)
	svc := &recordingService{}
	host, p := rawProxy(t, startFake(t, f), svc)
	initialize(host, "2025-11-25", "{}")
	host.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	var upID json.RawMessage
	for deadline := time.Now().Add(5 * time.Second); upID == nil; time.Sleep(5 * time.Millisecond) {
		if calls := f.got("tools/call"); len(calls) == 1 {
			upID = calls[0]["id"]
		} else if time.Now().After(deadline) {
			t.Fatal("the call did not reach the upstream")
		}
	}
	host.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"user"}}`)
	for deadline := time.Now().Add(5 * time.Second); len(f.got("notifications/cancelled")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cancellation did not reach the upstream")
		}
	}
	var params struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	json.Unmarshal(f.got("notifications/cancelled")[0]["params"], &params)
	if string(params.RequestID) != string(upID) || params.Reason != "user" {
		t.Fatalf("the upstream got cancelled %+v, want requestId %s", params, upID)
	}
	if got := host.call(`{"jsonrpc":"2.0","id":"p","method":"ping"}`); got != `{"jsonrpc":"2.0","id":"p","result":{}}` {
		t.Fatalf("after the cancellation the host got %s", got)
	}
	// The call's goroutine records the result once it sees the
	// cancellation.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.Flush()
		svc.mu.Lock()
		raw := slices.Clone(svc.appendedRaw)
		svc.mu.Unlock()
		if len(raw) == 1 && strings.Contains(raw[0], `"cancelled":true`) {
			break
		}
		if len(raw) > 0 || time.Now().After(deadline) {
			t.Fatalf("recorded %v, want one tool_result saying cancelled", raw)
		}
	}
}

// panickyService panics on its first gate call.
type panickyService struct {
	recordingService
	calls atomic.Int64
}

func (s *panickyService) GateToolCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	if s.calls.Add(1) == 1 {
		panic("the gate fell over")
	}
	return s.recordingService.GateToolCall(ctx, req)
}

// A panic while serving a call is an internal error answer; the session
// goes on.
func TestProxyPanicIsAnErrorAnswer(t *testing.T) {
	host, _ := rawProxy(t, startFake(t, &fakeUpstream{}), &panickyService{})
	initialize(host, "2025-11-25", "{}")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"msg":"m"}}}`
	if got := host.call(call); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,`) {
		t.Fatalf("a panicking call answered %s", got)
	}
	if got := host.call(call); got != `{"jsonrpc":"2.0","id":1,"result":`+fakeEchoResult+`}` {
		t.Fatalf("the next call answered %s", got)
	}
}

// When the upstream exits, a call under way is answered with an error and
// Serve returns.
func TestProxyUpstreamExit(t *testing.T) {
	f := &fakeUpstream{slow: make(chan struct{})}
	up := startFake(t, f)
	p, err := mcpserver.NewProxy(up, mcpserver.ProxyOptions{Subagent: "worker", Service: &recordingService{}})
	if err != nil {
		t.Fatal(err)
	}
	hostConn, proxyConn := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- p.Serve(context.Background(), proxyConn, proxyConn) }()
	host := newRawPeer(t, hostConn)
	initialize(host, "2025-11-25", "{}")
	host.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	for deadline := time.Now().Add(5 * time.Second); len(f.got("tools/call")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the call did not reach the upstream")
		}
	}
	f.conn.Close()
	if got := host.next(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,`) {
		t.Fatalf("the call under way was answered %s", got)
	}
	select {
	case err := <-served:
		if err == nil {
			t.Fatal("Serve returned nil when the upstream exited")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return when the upstream exited")
	}
	p.Close()
}

// downService is a real client that cannot reach the service while down
// is set (a network error, as when the service is away).
type downService struct {
	*client.Client
	down atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

func (s *downService) GateToolCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Client.GateToolCall(ctx, req)
}

func (s *downService) AppendNext(ctx context.Context, ev client.Event) (*api.AppendResponse, error) {
	if s.down.Load() {
		return nil, errDown
	}
	return s.Client.AppendNext(ctx, ev)
}

// --fail-open: a call let through while the service is away has its
// tool_call recorded when the service is back, marked fail_open, before its
// tool_result: no tool_result on the record has a parent that is not. The
// records the proxy sends alone (the fail-open tool_call, the results after
// it) go on once a client pushed the tip to 2^52, the highest sequence a
// client may choose: the service numbers them (POST /v1/events/append), each
// linked to the event before it (the offline verifier checks every link).
func TestProxyFailOpenRecordsTheCallBeforeItsResult(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		for _, top := range []bool{false, true} {
			t.Run(map[bool]string{false: "from an empty chain", true: "above 2^52"}[top], func(t *testing.T) {
				proxyFailOpen(t, s, top)
			})
		}
	})
}

func proxyFailOpen(t *testing.T, s *httpapitest.Server, top bool) {
	_, token := s.Account(t, fmt.Sprintf("failopen-%v@example.com", top))
	c, err := client.New(s.URL, token, client.WithRetries(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var from int64 // the sequence the proxy's events start above
	if top {
		from = domain.MaxClientSequence
		res, err := c.AppendBatch(context.Background(), api.BatchRequest{Events: []api.EventInput{{EventID: "evt-client-top",
			EventType: "note", Sequence: from}}})
		if err != nil || res.Ingested != 1 {
			t.Fatalf("a batch row at 2^52: %+v, %v", res, err)
		}
	}
	grant(t, c, "worker", 10, "echo")
	svc := &downService{Client: c}
	u := newUpstream()
	upConn, proxyUp := net.Pipe()
	ss, err := u.server.Connect(context.Background(), &mcp.IOTransport{Reader: upConn, Writer: upConn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	host, p := proxyHost(t, proxyUp, mcpserver.ProxyOptions{Subagent: "worker", Service: svc, FailOpen: true,
		Now: func() time.Time { return time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC) }}, nil)

	svc.down.Store(true)
	if _, isErr := call(t, host, "echo", map[string]any{"msg": "while away"}); isErr || u.echoes.Load() != 1 {
		t.Fatalf("fail open: isError %v, %d upstream calls", isErr, u.echoes.Load())
	}
	svc.down.Store(false)
	if _, isErr := call(t, host, "echo", map[string]any{"msg": "back"}); isErr {
		t.Fatal("the call after the service came back was refused")
	}
	p.Flush()

	events := exportedFrom(t, s, token, from)
	calls, failOpen := 0, 0
	for _, e := range ofType(events, api.EventToolCall) {
		calls++
		if r := rawOf(t, e); r["fail_open"] == true {
			failOpen++
			if r["called_at"] != "2026-11-28T12:00:00Z" || *e.Decision != "allow" || r["subagent"] != "worker" {
				t.Fatalf("the fail-open tool_call is %+v, raw %v", e, r)
			}
		}
	}
	results := ofType(events, api.EventToolResult)
	if calls != 2 || failOpen != 1 || len(results) != 2 {
		t.Fatalf("%d tool_calls (%d fail-open) and %d tool_results, want 2 (1) and 2", calls, failOpen, len(results))
	}
	for _, r := range results {
		parent, ok := events[*r.ParentID]
		if !ok || parent.Sequence >= r.Sequence {
			t.Fatalf("the tool_result %s has parent %s, which is not on the record before it", r.EventID, *r.ParentID)
		}
	}
	for _, e := range events {
		if e.Sequence < from {
			t.Fatalf("%s at %d, below the client's row at %d", e.EventID, e.Sequence, from)
		}
	}
}
