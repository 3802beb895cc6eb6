package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/bench"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// The bench's hook workloads run the hook binary (here this test binary,
// which TestMain turns into `auditchain hook`) against a local server, before
// and after a tool: a tiny run that checks they work, not a measurement.
func TestBenchHookWorkloadRuns(t *testing.T) {
	exe := cliWrapper(t)
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		res, err := bench.Run(context.Background(), bench.Options{URL: s.URL, DB: dsn, Exe: exe, Workloads: []string{"hook", "hook-result"},
			Duration: 400 * time.Millisecond, HookExe: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Error != "" || len(r.Errors) > 0 || r.Ops == 0 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 {
				t.Fatalf("%s workload: %+v", r.Workload, r)
			}
		}
		if len(res) != 2 {
			t.Fatalf("%d results, want 2", len(res))
		}
	})
}

// A bench against a server of another build (Options.Exe, here this test
// binary behind a wrapper, so another file) on its own scratch store: the
// accounts are made by that binary's admin create-account, which refuses a
// sqlite: file that does not exist, so the bench starts the store as an
// empty file.
func TestBenchForeignServerOnAScratchStore(t *testing.T) {
	res, err := bench.Run(context.Background(), bench.Options{Exe: cliWrapper(t), Workloads: []string{"append"}, Accounts: 2, Clients: 2,
		Duration: 300 * time.Millisecond, Warmup: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Error != "" || r.Ops == 0 {
		t.Fatalf("append against another build: %+v", r)
	}
}

// cliWrapper is an executable file that runs this test binary as the
// auditchain command (TestMain's asCLIEnv): the bench runs it as serve and
// as admin create-account.
func cliWrapper(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "auditchain")
	wrapper := "#!/bin/sh\n" + asCLIEnv + "=1 exec " + strconv.Quote(self) + " \"$@\"\n"
	if err := os.WriteFile(exe, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}
