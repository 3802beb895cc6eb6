package mcpserver_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
)

// tipService answers chain_tip; every other method panics.
type tipService struct{ mcpserver.Service }

func (tipService) Tip(context.Context) (*api.ChainTip, error) {
	return &api.ChainTip{EventCount: 7}, nil
}

// stdioServer serves srv as `auditchain mcp` does (StdioTransport) and
// returns the host's end.
func stdioServer(t *testing.T, srv *mcp.Server) *rawPeer {
	hostConn, serverConn := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Run(context.Background(), &mcpserver.StdioTransport{In: serverConn, Out: serverConn})
	}()
	t.Cleanup(func() { hostConn.Close(); serverConn.Close(); <-done })
	return newRawPeer(t, hostConn)
}

// `auditchain mcp` survives what a host sends: a line that is not JSON or
// not a JSON-RPC request is answered (-32700, -32600) and the session goes
// on; ids come back byte for byte; batches are answered as one array where
// the negotiated version has them (2025-03-26) and refused where it does
// not.
func TestStdioServerWire(t *testing.T) {
	start := func(t *testing.T) *rawPeer {
		return stdioServer(t, mcpserver.New(mcpserver.Static(tipService{}), mcpserver.Options{}))
	}
	checkHostWire(t, start)
	checkBatchesByVersion(t, start)

	t.Run("tools/call keeps its id", func(t *testing.T) {
		host := start(t)
		initialize(host, "2025-06-18", "{}")
		got := host.call(`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"chain_tip","arguments":{}}}`)
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":9007199254740993,"result":{`) || !strings.Contains(got, `\"event_count\":7`) {
			t.Fatalf("tools/call answered %s", got)
		}
	})
}

// A panic in any handler of a request (here a tool added without the
// tools' own recovery) is an internal error answer; the session goes on.
func TestStdioServerHandlerPanicIsAnErrorAnswer(t *testing.T) {
	srv := mcpserver.New(mcpserver.Static(tipService{}), mcpserver.Options{})
	srv.AddTool(&mcp.Tool{Name: "boom", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("boom") })
	host := stdioServer(t, srv)
	initialize(host, "2025-06-18", "{}")
	for i := range 2 {
		got := host.call(`{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"tools/call","params":{"name":"boom","arguments":{}}}`)
		if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":`+string(rune('1'+i))+`,"error":{"code":-32603,`) {
			t.Fatalf("a panicking handler answered %s, want -32603", got)
		}
	}
	if got := host.call(`{"jsonrpc":"2.0","id":3,"method":"ping"}`); got != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Fatalf("after the panics the session answers %s", got)
	}
}
