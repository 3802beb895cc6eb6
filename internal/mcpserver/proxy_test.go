package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
)

// upstream is a small MCP server: echo answers its message, shell counts
// calls that must never arrive.
type upstream struct {
	server         *mcp.Server
	echoes, shells atomic.Int64
}

type echoIn struct {
	Msg string `json:"msg"`
	N   int    `json:"n,omitempty"`
}

func newUpstream() *upstream {
	u := &upstream{server: mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)}
	mcp.AddTool(u.server, &mcp.Tool{Name: "echo", Description: "echoes msg"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			u.echoes.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Msg}}}, nil, nil
		})
	mcp.AddTool(u.server, &mcp.Tool{Name: "shell", Description: "runs a command"},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct {
			Cmd string `json:"cmd"`
		}) (*mcp.CallToolResult, any, error) {
			u.shells.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil, nil
		})
	return u
}

// proxied starts a proxy for subagent in front of u and returns the host's
// session with it; both sides run over pipes, as over stdio.
func proxied(t *testing.T, u *upstream, svc mcpserver.Service, subagent string, failOpen bool) (*mcp.ClientSession, *mcpserver.Proxy) {
	t.Helper()
	upConn, proxyUp := net.Pipe()
	ss, err := u.server.Connect(context.Background(), &mcp.IOTransport{Reader: upConn, Writer: upConn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return proxyHost(t, proxyUp, mcpserver.ProxyOptions{Subagent: subagent, Service: svc, FailOpen: failOpen}, nil)
}

// startProxy starts a proxy in front of the upstream at the other end of up
// and returns it with the host's end of its stdio.
func startProxy(t *testing.T, up io.ReadWriteCloser, opts mcpserver.ProxyOptions) (*mcpserver.Proxy, net.Conn) {
	t.Helper()
	p, err := mcpserver.NewProxy(up, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	hostConn, proxyConn := net.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		p.Serve(context.Background(), proxyConn, proxyConn)
	}()
	t.Cleanup(func() { <-served })
	return p, hostConn
}

// proxyHost starts a proxy in front of the upstream at the other end of
// up, and connects a host (the SDK's client, with opts) to it.
func proxyHost(t *testing.T, up io.ReadWriteCloser, opts mcpserver.ProxyOptions, clientOpts *mcp.ClientOptions) (*mcp.ClientSession, *mcpserver.Proxy) {
	t.Helper()
	p, hostConn := startProxy(t, up, opts)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, clientOpts).Connect(context.Background(),
		&mcp.IOTransport{Reader: hostConn, Writer: hostConn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, p
}

// proxyRefused calls a tool through the proxy that must be refused, and
// returns the refusal's code. A refusal is text only (it must satisfy any
// output schema of the upstream tool), with the code in _meta.
func proxyRefused(t *testing.T, host *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := host.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 {
		t.Fatalf("%s: %+v, want a refusal: isError, one text, no structured content", name, res)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	var r mcpserver.Refusal
	b, _ := json.Marshal(res.Meta[mcpserver.RefusalMetaKey])
	if !ok || json.Unmarshal(b, &r) != nil || !strings.HasPrefix(text.Text, "refused: "+r.Code+": ") {
		t.Fatalf("%s: refusal %+v with _meta %s", name, res.Content[0], b)
	}
	return r.Code
}

func grant(t *testing.T, c *client.Client, subagent string, max int64, tools ...string) {
	t.Helper()
	if _, err := c.CreateGrant(context.Background(), api.CreateGrantRequest{Subagent: new(subagent), MaxToolCalls: new(max),
		AllowedTools: tools, ExpiresAt: new(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))}); err != nil {
		t.Fatal(err)
	}
}

// exported reads the account's export, checks it with the offline verifier
// and returns its events by event_id.
func exported(t *testing.T, s *httpapitest.Server, token string) map[string]verify.ExportEvent {
	t.Helper()
	return exportedFrom(t, s, token, 0)
}

// exportedFrom is exported for a chain that starts at sequence first: a
// client's batch row may take any sequence (CONTRACT.md "Batch"), and the
// offline verifier reports the sequences below it as a gap, the only
// finding allowed here; every link after it is checked.
func exportedFrom(t *testing.T, s *httpapitest.Server, token string, first int64) map[string]verify.ExportEvent {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+"/v1/chain/export", nil)
	req.Header.Set("X-API-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d %s", resp.StatusCode, body)
	}
	rep, err := verify.VerifyExport(bytes.NewReader(body), s.App.ServicePublicKey())
	var ve *verify.Error
	if first > 0 && errors.As(err, &ve) && ve.Kind == verify.KindGap && len(rep.Breaks) == 0 &&
		slices.Equal(rep.Gaps, []verify.Gap{{MissingFrom: 0, MissingTo: first - 1}}) {
		err = nil
	}
	if err != nil {
		t.Fatalf("the offline verifier refuses the chain: %v", err)
	}
	events := map[string]verify.ExportEvent{}
	lines := bufio.NewScanner(bytes.NewReader(body))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var l struct{ Event *verify.ExportEvent }
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Event != nil {
			events[l.Event.EventID] = *l.Event
		}
	}
	return events
}

func rawOf(t *testing.T, e verify.ExportEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Raw, &m); err != nil {
		t.Fatalf("raw of %s: %v", e.EventID, err)
	}
	return m
}

func ofType(events map[string]verify.ExportEvent, typ string) []verify.ExportEvent {
	var out []verify.ExportEvent
	for _, e := range events {
		if e.EventType == typ {
			out = append(out, e)
		}
	}
	return out
}

// The proxy end to end: the upstream's tools are served unchanged; an
// allowed call reaches the upstream and is recorded as a tool_call and a
// tool_result (parent_id the call) carrying the hashes of the canonical
// arguments and result, never their text; a refused call never reaches the
// upstream and is a tool error with the gate's code; the chain verifies
// offline afterwards.
func TestProxyGatesAndRecords(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		ctx := context.Background()
		_, token := s.Account(t, "proxy@example.com")
		c, err := client.New(s.URL, token, client.WithSurface(client.SurfaceMCPStdio))
		if err != nil {
			t.Fatal(err)
		}
		grant(t, c, "worker", 10, "echo")
		u := newUpstream()
		host, p := proxied(t, u, c, "worker", false)

		if got := toolNames(t, host); len(got) != 2 || got[0] != "echo" || got[1] != "shell" {
			t.Fatalf("the proxy serves %v, want the upstream's echo and shell", got)
		}

		args := map[string]any{"n": 2, "msg": "a secret text"}
		res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "a secret text" {
			t.Fatalf("allowed call: %+v, %v", res, err)
		}
		if u.echoes.Load() != 1 {
			t.Fatalf("the upstream saw %d echo calls, want 1", u.echoes.Load())
		}

		if code := proxyRefused(t, host, "shell", map[string]any{"cmd": "rm -rf /"}); code != "tool_not_allowed" {
			t.Fatalf("refused call: %q, want tool_not_allowed", code)
		}
		if u.shells.Load() != 0 {
			t.Fatal("a refused call reached the upstream")
		}

		p.Flush()
		events := exported(t, s, token)
		calls, results := ofType(events, api.EventToolCall), ofType(events, api.EventToolResult)
		if len(calls) != 2 || len(results) != 1 {
			t.Fatalf("%d tool_call and %d tool_result events, want 2 and 1", len(calls), len(results))
		}
		argsJSON, _ := json.Marshal(args)
		wantArgs, _ := mcpserver.ArgumentsHash(argsJSON)
		resJSON, _ := json.Marshal(res) // the upstream's result, as the SDK wrote it
		wantRes, _ := mcpserver.ResultHash(resJSON)
		result := results[0]
		call := events[*result.ParentID]
		if call.EventType != api.EventToolCall || *call.Decision != "allow" || *call.Tool != "echo" {
			t.Fatalf("the result's parent is %+v, want the allowed echo call", call)
		}
		if r := rawOf(t, call); r["arguments_sha256"] != wantArgs || r["upstream_tool"] != "echo" || r["subagent"] != "worker" ||
			r["gate_status"] != "authorized" || r["grant_id"] == nil {
			t.Fatalf("tool_call raw %v, want arguments_sha256 %s", r, wantArgs)
		}
		if r := rawOf(t, result); r["result_sha256"] != wantRes || r["is_error"] != false {
			t.Fatalf("tool_result raw %v, want result_sha256 %s", r, wantRes)
		}
		for _, e := range events {
			if bytes.Contains(e.Raw, []byte("secret")) || bytes.Contains(e.Raw, []byte("rm -rf")) {
				t.Fatalf("event %s carries the call's text: %s", e.EventID, e.Raw)
			}
		}
		var denied verify.ExportEvent
		for _, e := range calls {
			if *e.Tool == "shell" {
				denied = e
			}
		}
		if denied.Decision == nil || *denied.Decision != "deny" || rawOf(t, denied)["gate_status"] != "tool_not_allowed" {
			t.Fatalf("the refused call is recorded as %+v", denied)
		}
		// The echo's result went with the next call's request, recorded just
		// before it in the same commit (docs/mcp.md).
		if result.Sequence != denied.Sequence-1 || result.Sequence <= call.Sequence {
			t.Fatalf("echo call %d, its result %d, the next call %d: the result did not ride with the next call",
				call.Sequence, result.Sequence, denied.Sequence)
		}
	})
}

// Concurrent calls spend the budget exactly: with 5 calls left, 5 of 12
// concurrent calls reach the upstream and the rest are refused.
func TestProxyBudgetExactUnderConcurrency(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		ctx := context.Background()
		_, token := s.Account(t, "burst@example.com")
		c, err := client.New(s.URL, token)
		if err != nil {
			t.Fatal(err)
		}
		grant(t, c, "burst", 5, "echo")
		u := newUpstream()
		host, p := proxied(t, u, c, "burst", false)

		var wg sync.WaitGroup
		var allowed, refusedN atomic.Int64
		for i := range 12 {
			wg.Go(func() {
				res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "m", "n": i}})
				switch {
				case err != nil:
					t.Errorf("call %d: %v", i, err)
				case res.IsError:
					refusedN.Add(1)
				default:
					allowed.Add(1)
				}
			})
		}
		wg.Wait()
		if allowed.Load() != 5 || refusedN.Load() != 7 || u.echoes.Load() != 5 {
			t.Fatalf("%d allowed, %d refused, %d reached the upstream; want 5, 7, 5", allowed.Load(), refusedN.Load(), u.echoes.Load())
		}
		st, err := c.GrantStatus(ctx, api.GrantStatusQuery{Subagent: "burst"})
		if err != nil {
			t.Fatal(err)
		}
		if st.Uses != 5 || st.Remaining != 0 {
			t.Fatalf("the grant shows %d uses, %d remaining; want 5, 0", st.Uses, st.Remaining)
		}
		p.Flush()
		events := exported(t, s, token)
		if n := len(ofType(events, api.EventToolResult)); n != 5 {
			t.Fatalf("%d tool_result events, want 5", n)
		}
	})
}

// With the service unreachable the proxy refuses (fail closed); with
// --fail-open the call goes through.
func TestProxyFailsClosed(t *testing.T) {
	dead, err := client.New("http://127.0.0.1:1", "ak_none", client.WithRetries(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	u := newUpstream()
	closed, _ := proxied(t, u, dead, "worker", false)
	if code := proxyRefused(t, closed, "echo", map[string]any{"msg": "x"}); code != mcpserver.CodeUnreachable {
		t.Fatalf("fail closed: %q", code)
	}
	if u.echoes.Load() != 0 {
		t.Fatal("a call reached the upstream while the service was unreachable")
	}
	open, _ := proxied(t, u, dead, "worker", true)
	if _, isErr := call(t, open, "echo", map[string]any{"msg": "x"}); isErr || u.echoes.Load() != 1 {
		t.Fatalf("fail open: isError %v, %d upstream calls", isErr, u.echoes.Load())
	}
}
