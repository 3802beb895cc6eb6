package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/bench"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// The bench's hook workload runs the hook binary (here this test binary,
// which TestMain turns into `auditchain hook`) against a local server: a
// tiny run that checks it works, not a measurement.
func TestBenchHookWorkloadRuns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		res, err := bench.Run(context.Background(), bench.Options{URL: s.URL, DB: dsn, Workloads: []string{"hook"},
			Duration: 400 * time.Millisecond, HookExe: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.Error != "" || len(r.Errors) > 0 || r.Ops == 0 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 {
			t.Fatalf("hook workload: %+v", r)
		}
	})
}
