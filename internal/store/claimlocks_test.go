package store_test

import (
	"context"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// Outbox claim locks across PostgreSQL replicas (claimlocks.go): a key one
// replica holds is refused to another at once and free again once
// released; keys are independent, and one replica holds many on its one
// session; when that session dies (a replica killed, its connection cut)
// every key it held is free at once, and the replica that lost it notices
// (Held), gives nothing back on another session, and claims again on a
// new one.
func TestClaimLocksAcrossReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	r1, r2 := storetest.Open(t, dsn), storetest.Open(t, dsn)
	ctx := context.Background()
	// take asks replica who (1 or 2) for key and wants the answer want.
	take := func(who int, key string, want bool) store.ClaimLock {
		t.Helper()
		l, ok, err := []*store.Store{r1, r2}[who-1].TryClaimLock(ctx, key)
		if err != nil || ok != want {
			t.Fatalf("replica %d asks for %s: %v %v, want %v", who, key, ok, err, want)
		}
		return l
	}
	a1 := take(1, "webhook/a", true)
	b1 := take(1, "webhook/b", true) // a second key on the same session
	take(2, "webhook/a", false)      // held by replica 1
	take(2, "email/a", true).Release()
	a1.Release()
	take(2, "webhook/a", true).Release()

	// Replica 1's session dies while it holds b. (Only this test's database:
	// other packages' tests hold claim locks on the same server.)
	var pids []int
	rows, err := r2.DB().QueryContext(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil || len(pids) != 1 {
		t.Fatalf("sessions holding claim locks: %v %v, want replica 1's alone", pids, err)
	}
	// With a timeout, pg_terminate_backend returns once the backend is gone.
	var gone bool
	if err := r2.DB().QueryRowContext(ctx, `SELECT pg_terminate_backend($1, 10000)`, pids[0]).Scan(&gone); err != nil || !gone {
		t.Fatalf("end replica 1's session: %v %v", gone, err)
	}
	b2 := take(2, "webhook/b", true) // freed with replica 1's session
	// Replica 1 finds out at its next statement on the session: a new
	// claim runs on a new session (and b is replica 2's now).
	take(1, "webhook/b", false)
	if b1.Held() {
		t.Fatal("replica 1's lock on b still counts as held after its session died")
	}
	b1.Release() // on a dead session: nothing to give back, nothing else dropped
	d1 := take(1, "webhook/d", true)
	if !d1.Held() {
		t.Fatal("replica 1's lock on its new session does not count as held")
	}
	b2.Release()
	take(2, "webhook/d", false) // held by replica 1 on its new session
	d1.Release()
}
