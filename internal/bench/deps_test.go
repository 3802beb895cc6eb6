package bench

import (
	"testing"

	"github.com/auditchain/auditchain/internal/deptest"
)

// The load generator is a client (tessera's hammer imports only the public
// client): it reaches the server through the public routes and the server
// binary's commands, never through app, store, httpapi or the writer. What
// it may import besides pkg/: the MCP proxy it measures (mcp-proxy), the
// webhook signature its receiver checks, domain, which the proxy uses, and
// metrics, the counters the webhook package's egress keeps (no server state).
func TestBenchImportsNoServer(t *testing.T) {
	deptest.NoServer(t, "/internal/bench", "/internal/mcpserver", "/internal/notify/webhook", "/internal/domain", "/internal/metrics")
}
