package mcpserver_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// A call an approval rule holds, through the proxy: refused at once naming
// the approval (no wait), never reaching the upstream; the model's retry
// once another key approved it runs on it; with ApprovalWait the proxy
// waits for the decision and relays the call; the chain proves both
// approved calls offline.
func TestProxyWaitsForApproval(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		ctx := context.Background()
		c, person := heldEchoWorld(t, s, "proxy-ap@example.com")
		pending := func() string {
			t.Helper()
			for {
				l, err := person.Approvals(ctx, api.ApprovalPending, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(l.Approvals) > 0 {
					return l.Approvals[0].ApprovalID
				}
				time.Sleep(10 * time.Millisecond)
			}
		}

		u := newUpstream()
		host, _ := proxied(t, u, c, "worker", false)
		args := map[string]any{"msg": "ship it"}
		res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		id := pending()
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, id) ||
			!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "try the same call again later") || u.echoes.Load() != 0 {
			t.Fatalf("held call: %+v %v (upstream saw %d)", res, err, u.echoes.Load())
		}
		if _, err := person.Approve(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		res, err = host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil || res.IsError || u.echoes.Load() != 1 {
			t.Fatalf("retry once approved: %+v %v", res, err)
		}

		// With a wait: the proxy relays the call once it is approved.
		upConn, proxyUp := net.Pipe()
		ss, err := u.server.Connect(ctx, &mcp.IOTransport{Reader: upConn, Writer: upConn}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		waiting, _ := proxyHost(t, proxyUp, mcpserver.ProxyOptions{Subagent: "worker", Service: c, ApprovalWait: 20 * time.Second}, nil)
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			r, _ := waiting.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "and again"}})
			done <- r
		}()
		if _, err := person.Approve(ctx, pending(), nil); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r == nil || r.IsError || u.echoes.Load() != 2 {
			t.Fatalf("waiting proxy: %+v (upstream saw %d)", r, u.echoes.Load())
		}
	})
}

// heldEchoWorld makes an account whose sub-agent "worker" may call echo,
// each call held by an approval rule: the proxy's client (surface
// mcp_stdio) and a person's client, a key holding only approvals.
func heldEchoWorld(t *testing.T, s *httpapitest.Server, email string) (agent, person *client.Client) {
	t.Helper()
	user, token := s.Account(t, email)
	agent, err := client.New(s.URL, token, client.WithSurface(client.SurfaceMCPStdio))
	if err != nil {
		t.Fatal(err)
	}
	if person, err = client.New(s.URL, s.Key(t, user, api.CreateKeyRequest{Scopes: []string{"approvals"}})); err != nil {
		t.Fatal(err)
	}
	grant(t, agent, "worker", 10, "echo")
	if _, err := agent.CreateApprovalRule(context.Background(), api.ApprovalRuleRequest{Subagent: new("worker"), Tool: new("echo")}); err != nil {
		t.Fatal(err)
	}
	return agent, person
}
