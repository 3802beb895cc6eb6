package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/bench"
)

// The MCP workloads run with tiny sizes: gate checks through /v1/mcp answer
// authorized, and the proxy workload reports its overhead over direct calls.
func TestMCPWorkloads(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Exe: auditchainExe, Workloads: []string{"mcp-gate", "mcp-proxy"},
		Duration: time.Second, Warmup: 100 * time.Millisecond, Clients: 2, Accounts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" || len(r.Errors) > 0 || r.Ops == 0 {
			t.Fatalf("%s: %+v", r.Workload, r)
		}
	}
	if _, ok := res[1].Extra["overhead_p50_ms"]; !ok || res[1].Extra["direct_p50_ms"] <= 0 {
		t.Fatalf("mcp-proxy reports no overhead: %+v", res[1].Extra)
	}
}
