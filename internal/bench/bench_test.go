package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/bench"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/store"
)

// startServer runs the API in-process over a fresh SQLite store, quotas lifted.
func startServer(t *testing.T) (url, dsn string) {
	t.Helper()
	dsn = "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	cfg, err := config.Parse(append([]string{"--db", dsn}, bench.LiftedQuotas...), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	a := apptest.New(t, st, apptest.Options{Config: func(c *config.Config) { *c = cfg }, Log: log, Bus: dsn})
	h := httpapi.NewServer(a, cfg, log, api.OpenAPIJSON())
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv.URL, dsn
}

func TestAppendAndBatchEndToEnd(t *testing.T) {
	url, dsn := startServer(t)
	var progress bytes.Buffer
	res, err := bench.Run(context.Background(), bench.Options{
		URL: url, DB: dsn, Workloads: []string{"append", "batch", "hot"},
		Duration: 700 * time.Millisecond, Clients: 4, Accounts: 6, BatchSize: 50, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3", len(res))
	}
	for _, r := range res {
		if r.Error != "" || len(r.Errors) > 0 || r.Ops == 0 || r.OpsPerSec <= 0 || r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 {
			t.Errorf("%s: %+v", r.Workload, r)
		}
	}
	if b := res[1]; b.ItemsPerOp != 50 || math.Abs(b.ItemsPerSec-50*b.OpsPerSec) > 1e-6*b.ItemsPerSec {
		t.Errorf("batch items: %v per op, %v/s at %v ops/s", b.ItemsPerOp, b.ItemsPerSec, b.OpsPerSec)
	}
	var table, js bytes.Buffer
	if err := bench.WriteTable(&table, res); err != nil || !strings.Contains(table.String(), "append") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
	if err := bench.WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	var doc struct{ Results []bench.Result }
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || len(doc.Results) != 3 || doc.Results[0].Ops != res[0].Ops {
		t.Fatalf("json round trip: %v\n%s", err, js.String())
	}
}

// Routes other people are building answer 501 here: the workload must say so.
func TestUnbuiltRouteIsReported(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Workloads: []string{"heal-scan"},
		Duration: 200 * time.Millisecond, Prefill: 100, BatchSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	if e := res[0].Error; e != "" && !strings.Contains(e, "501") {
		t.Fatalf("heal-scan error %q does not name the 501", e)
	}
}

func TestBadOptions(t *testing.T) {
	if _, err := bench.Run(context.Background(), bench.Options{Workloads: []string{"nope"}}); err == nil ||
		!strings.Contains(err.Error(), "append") {
		t.Fatalf("unknown workload: %v", err)
	}
	if _, err := bench.Run(context.Background(), bench.Options{URL: "http://x", Workloads: []string{"append"}}); err == nil {
		t.Fatal("--url without --db accepted")
	}
}

func TestRestartNeedsItsOwnServer(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Workloads: []string{"restart"}, Prefill: 10, BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if e := res[0].Error; !strings.Contains(e, "--url") {
		t.Fatalf("restart against --url: error %q", e)
	}
}

// --prefill 0 on a store that already holds a chain measures that chain again.
func TestPrefillZeroReusesTheLongestChain(t *testing.T) {
	url, dsn := startServer(t)
	o := bench.Options{URL: url, DB: dsn, Workloads: []string{"search"}, Duration: 200 * time.Millisecond, Prefill: 300, BatchSize: 100}
	if res, err := bench.Run(context.Background(), o); err != nil || res[0].Error != "" {
		t.Fatalf("first run: %v %s", err, res[0].Error)
	}
	o.Prefill = 0
	res, err := bench.Run(context.Background(), o)
	if err != nil || res[0].Error != "" || res[0].Prefill != 300 || res[0].Ops == 0 {
		t.Fatalf("second run: %v %+v", err, res[0])
	}
}

// otp-verify spends one prepared code per operation in an open loop at 200
// verifications a second unless told otherwise, every one signing in.
func TestOTPVerifyWorkload(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Workloads: []string{"otp-verify"},
		Duration: 300 * time.Millisecond, Clients: 4})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Error != "" || len(r.Errors) > 0 || r.Mode != "open" || r.Rate != 200 || r.Ops < 30 {
		t.Fatalf("otp-verify: %+v", r)
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var sessions int64
	if err := st.DB().QueryRow(`SELECT count(*) FROM sessions`).Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	if sessions < r.Ops {
		t.Fatalf("%d sessions stored for %d verifications", sessions, r.Ops)
	}
}

// --session authenticates the workload's requests with session cookies: the
// events it appends carry no API key.
func TestSessionCredentialWorkload(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Workloads: []string{"append", "gate-status"},
		Duration: 300 * time.Millisecond, Clients: 2, Accounts: 3, Session: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" || len(r.Errors) > 0 || r.Ops == 0 {
			t.Fatalf("%s with sessions: %+v", r.Workload, r)
		}
	}
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var byKey, bySession int64
	if err := st.DB().QueryRow(`SELECT count(api_key_id), count(*) - count(api_key_id) FROM events`).Scan(&byKey, &bySession); err != nil {
		t.Fatal(err)
	}
	if byKey != 0 || bySession < res[0].Ops {
		t.Fatalf("events by key %d, by session %d; %d appends measured", byKey, bySession, res[0].Ops)
	}
}
