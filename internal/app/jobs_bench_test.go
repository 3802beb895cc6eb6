package app_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/cputime"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// BenchmarkGrantExpirySweep runs the grant-expiry job's first run (every
// grant notified) over AUDITCHAIN_BENCH_GRANTS grants (default 10,000) of 100
// accounts, stored directly (no chain events): the job's own cost without
// the bench's minutes of HTTP setup. The bench workload (`auditchain bench
// grant-expiry`) is what docs/performance.md quotes. AUDITCHAIN_BENCH_DB
// names a fresh SQLite file to run on and keep. cpu-µs/grant is the whole
// process's CPU (the writer, the reading goroutine, GC) per grant notified:
// on a shared box a steadier figure than the time.
func BenchmarkGrantExpirySweep(b *testing.B) {
	n := 10_000
	if v, err := strconv.Atoi(os.Getenv("AUDITCHAIN_BENCH_GRANTS")); err == nil && v > 0 {
		n = v
	}
	for _, backend := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			var cpu time.Duration
			defer func() { b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/grant") }()
			for range b.N {
				b.StopTimer()
				dsn := storetest.DSN(b, backend)
				if keep := os.Getenv("AUDITCHAIN_BENCH_DB"); keep != "" && backend == storetest.SQLite {
					dsn = "sqlite:" + keep // kept, to read its B-trees' sizes (dbstat)
				}
				st := storetest.Open(b, dsn)
				a := apptest.New(b, st, apptest.Options{})
				prepareExpiringGrants(b, a, st, 100, n)
				cpu0, _ := cputime.Process()
				b.StartTimer()
				res, err := a.GrantExpirySweep(context.Background())
				if err != nil || res.Notified != n {
					b.Fatalf("sweep: %+v, %v", res, err)
				}
				b.StopTimer()
				cpu1, _ := cputime.Process()
				cpu += cpu1 - cpu0
				b.StartTimer()
			}
		})
	}
}

// prepareExpiringGrants stores n grants expiring in 12 hours, round-robin
// over as many new accounts as accounts says.
func prepareExpiringGrants(b testing.TB, a *app.App, st *store.Store, accounts, n int) {
	b.Helper()
	ctx := context.Background()
	users := make([]string, accounts)
	for i := range users {
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
		if err != nil {
			b.Fatal(err)
		}
		users[i] = acct.UserID
	}
	now := time.Now().UTC()
	err := st.InTx(ctx, func(tx *sql.Tx) error {
		for i := range n {
			var id [16]byte
			copy(id[:], fmt.Sprintf("%016d", i))
			g := store.Grant{UserID: users[i%accounts], GrantID: "g-" + hex.EncodeToString(id[:]), Subagent: "sub-" + strconv.Itoa(i),
				AllowedTools: []string{}, MaxToolCalls: 10, ExpiresAt: now.Add(12 * time.Hour), CreatedAt: now,
				Epoch: []byte(`{}`), Token: []byte(`{}`)}
			if err := st.InsertGrant(ctx, tx, &g); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
