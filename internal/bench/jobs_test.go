package bench_test

import (
	"context"
	"testing"

	"github.com/auditchain/auditchain/internal/bench"
)

// grant-expiry creates its grants, and its first run notifies every one,
// the second none (the workload fails otherwise); the store holds one notice
// of three rows per grant.
func TestGrantExpiryWorkload(t *testing.T) {
	url, dsn := startWebhookServer(t) // the bench's cron secret
	const grants = 150
	res, err := bench.Run(context.Background(), bench.Options{URL: url, DB: dsn, Exe: auditchainExe, Workloads: []string{"grant-expiry"},
		Accounts: 3, Prefill: grants})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Error != "" || r.Mode != "job" || r.Ops != grants || r.Extra["notified"] != grants || r.Extra["users"] != 3 {
		t.Fatalf("grant-expiry: %+v", r)
	}
	if n := count(t, dsn, `SELECT count(*) FROM notification_rows WHERE type = 'grant.expiring_24h'`); n != 3*grants {
		t.Fatalf("%d grant.expiring_24h rows, want %d", n, 3*grants)
	}
}
