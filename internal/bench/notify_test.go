package bench_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/bench"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi"
	"github.com/auditchain/auditchain/internal/store"
)

// startWebhookServer is startServer with what webhook-deliver needs of a
// server it does not start: loopback endpoints allowed, the bench's cron
// secret, and the caps and throttles the bench lifts.
func startWebhookServer(t *testing.T) (url, dsn string) {
	t.Helper()
	dsn = "sqlite:" + filepath.Join(t.TempDir(), "bench.db")
	args := append([]string{"--db", dsn, "--webhook-allow-private", "--cron-secret", bench.CronSecret}, bench.LiftedQuotas...)
	cfg, err := config.Parse(args, bench.LiftedEnv, io.Discard)
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
	a := apptest.New(t, st, apptest.Options{Config: func(c *config.Config) { *c = cfg }, Log: log})
	h := httpapi.NewServer(a, cfg, log, api.OpenAPIJSON())
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv.URL, dsn
}

func count(t *testing.T, dsn, query string, args ...any) int64 {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var n int64
	if err := st.DB().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// webhook-deliver queues its rows, drains them to its receiver, and every
// row arrives exactly once, signed; the store agrees every row was sent.
func TestWebhookDeliverWorkload(t *testing.T) {
	url, dsn := startWebhookServer(t)
	const rows = 300
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Exe: auditchainExe, Workloads: []string{"webhook-deliver"},
		Accounts: 3, Prefill: rows})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Error != "" || len(r.Errors) > 0 || r.Mode != "drain" || r.Accounts != 3 || r.Ops != rows || r.OpsPerSec <= 0 {
		t.Fatalf("webhook-deliver: %+v", r)
	}
	x := r.Extra
	if x["distinct_webhook_ids"] != rows || x["duplicates"] != 0 || x["sent_reported"] != rows || x["failed_reported"] != 0 ||
		x["drains"] < 1 || x["endpoints"] != 3 {
		t.Fatalf("webhook-deliver extras: %v", x)
	}
	if n := count(t, dsn, `SELECT count(*) FROM notifications WHERE channel = 'webhook' AND delivery_status = 'sent'`); n != rows {
		t.Fatalf("%d webhook rows sent in the store, want %d", n, rows)
	}
	if n := count(t, dsn, `SELECT count(*) FROM webhook_deliveries`); n != rows {
		t.Fatalf("%d delivery attempts stored, want %d (one each)", n, rows)
	}
}

// Without the cron secret the drain is refused and the workload says so.
func TestWebhookDeliverNeedsTheCronSecret(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Exe: auditchainExe, Workloads: []string{"webhook-deliver"},
		Accounts: 1, Prefill: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Error == "" {
		t.Fatalf("webhook-deliver against a server without --webhook-allow-private/--cron-secret: %+v", res[0])
	}
}

// revoke revokes a distinct live grant per operation, every one answering
// 200 revoked: in an open loop at its rate, and in a closed loop until the
// --prefill grants are spent; each revoke wrote its grant.revoked notice.
func TestRevokeWorkload(t *testing.T) {
	url, dsn := startServer(t)
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Exe: auditchainExe, Workloads: []string{"revoke"},
		Duration: 400 * time.Millisecond, Warmup: 100 * time.Millisecond, Rate: 200, Clients: 4, Accounts: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	// Grants prepared: rate × (warmup + duration) and a margin of clients + 64.
	if r.Error != "" || len(r.Errors) > 0 || r.Mode != "open" || r.Ops < 40 || r.Latency.P99 <= 0 || r.Prefill != 100+4+64 {
		t.Fatalf("revoke, open loop: %+v", r)
	}
	revoked := count(t, dsn, `SELECT count(*) FROM grants WHERE revoked_at IS NOT NULL`)
	if revoked < r.Ops {
		t.Fatalf("%d grants revoked for %d revokes measured", revoked, r.Ops)
	}
	if n := count(t, dsn, `SELECT count(*) FROM notification_rows WHERE type = 'grant.revoked' AND channel = 'in_app'`); n != revoked {
		t.Fatalf("%d grant.revoked notices for %d revoked grants", n, revoked)
	}

	// Closed loop: 150 grants, all revoked, then the workers stop.
	res, err = bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Exe: auditchainExe, Workloads: []string{"revoke"},
		Duration: 20 * time.Second, Clients: 4, Accounts: 3, Prefill: 150})
	if err != nil {
		t.Fatal(err)
	}
	r = res[0]
	if r.Error != "" || len(r.Errors) > 0 || r.Mode != "closed" || r.Ops != 150 || r.Prefill != 150 || r.Seconds >= 20 {
		t.Fatalf("revoke, closed loop over 150 grants: %+v", r)
	}
	if n := count(t, dsn, `SELECT count(*) FROM grants WHERE revoked_at IS NOT NULL`); n != revoked+150 {
		t.Fatalf("%d grants revoked, want %d", n, revoked+150)
	}
}
