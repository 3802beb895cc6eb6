package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
	acclient "github.com/auditchain/auditchain/pkg/client"
)

// runMCPProxy measures what `auditchain mcp proxy` adds to a tool call: an
// in-process upstream with one tool (echo) is called directly, then through
// the proxy (gate status, use, tool_call and tool_result appends against
// the target server), each for --duration, both over pipes as over stdio. The result's latency is the
// proxied call's; extra holds the direct p50 and the p50 overhead.
func runMCPProxy(ctx context.Context, e *env, res Result) (Result, error) {
	acct := e.accounts[0]
	c, err := acclient.New(e.c.base, acct.key, acclient.WithSurface(acclient.SurfaceMCPStdio))
	if err != nil {
		return res, err
	}
	if _, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new(benchSubagent), MaxToolCalls: new(int64(1_000_000_000)),
		AllowedTools: []string{"echo"}, ExpiresAt: new(time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339))}); err != nil {
		return res, fmt.Errorf("create grant: %w", err)
	}
	up := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "echo", Description: "echoes msg"},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Msg string `json:"msg"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Msg}}}, nil, nil
		})
	// Both sessions run over stdio-like pipes, as a host runs the upstream
	// directly or through `auditchain mcp proxy`.
	direct, closeDirect, err := pipeSession(ctx, func(c net.Conn) error {
		_, err := up.Connect(ctx, &mcp.IOTransport{Reader: c, Writer: c}, nil)
		return err
	})
	if err != nil {
		return res, err
	}
	defer closeDirect()
	upConn, proxyUp := net.Pipe()
	ss, err := up.Connect(ctx, &mcp.IOTransport{Reader: upConn, Writer: upConn}, nil)
	if err != nil {
		return res, err
	}
	defer ss.Close()
	p, err := mcpserver.NewProxy(proxyUp, mcpserver.ProxyOptions{Subagent: benchSubagent, Service: c})
	if err != nil {
		return res, err
	}
	defer p.Close()
	proxied, closeProxied, err := pipeSession(ctx, func(c net.Conn) error {
		go p.Serve(ctx, c, c)
		return nil
	})
	if err != nil {
		return res, err
	}
	defer closeProxied()

	callEcho := func(cs *mcp.ClientSession) func(w *worker) opFunc {
		return func(w *worker) opFunc {
			return func(ctx context.Context, w *worker) (int, error) {
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "bench"}})
				if err == nil && r.IsError {
					err = fmt.Errorf("refused: %v", r.StructuredContent)
				}
				return 1, err
			}
		}
	}
	fmt.Fprintf(e.progress, "bench: %s: direct calls, %d clients, %v\n", e.w.name, e.clients, e.o.Duration)
	d := drive(ctx, e, callEcho(direct), 0)
	if d.abort != nil {
		return res, d.abort
	}
	var directRes Result
	d.fill(&directRes)
	fmt.Fprintf(e.progress, "bench: %s: proxied calls, %d clients, %v\n", e.w.name, e.clients, e.o.Duration)
	lr := drive(ctx, e, callEcho(proxied), 0)
	lr.fill(&res)
	res.Extra = map[string]float64{"direct_p50_ms": directRes.Latency.P50, "direct_p99_ms": directRes.Latency.P99,
		"overhead_p50_ms": res.Latency.P50 - directRes.Latency.P50}
	return res, nil
}

// pipeSession connects a client over a pipe whose other end serve serves.
func pipeSession(ctx context.Context, serve func(net.Conn) error) (*mcp.ClientSession, func(), error) {
	client, server := net.Pipe()
	if err := serve(server); err != nil {
		return nil, nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench-host", Version: "1"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: client, Writer: client}, nil)
	if err != nil {
		server.Close()
		return nil, nil, err
	}
	return cs, func() { cs.Close(); server.Close() }, nil
}
