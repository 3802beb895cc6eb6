package store_test

import (
	"context"
	"testing"

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
	a1, ok, err := r1.TryClaimLock(ctx, "webhook/a")
	if err != nil || !ok {
		t.Fatalf("replica 1 takes a: %v %v", ok, err)
	}
	b1, ok, err := r1.TryClaimLock(ctx, "webhook/b")
	if err != nil || !ok {
		t.Fatalf("replica 1 takes b too: %v %v", ok, err)
	}
	if _, ok, err := r2.TryClaimLock(ctx, "webhook/a"); err != nil || ok {
		t.Fatalf("replica 2 took a while replica 1 holds it: %v %v", ok, err)
	}
	c2, ok, err := r2.TryClaimLock(ctx, "email/a")
	if err != nil || !ok {
		t.Fatalf("replica 2 takes another outbox's key of the same account: %v %v", ok, err)
	}
	c2.Release()
	a1.Release()
	a2, ok, err := r2.TryClaimLock(ctx, "webhook/a")
	if err != nil || !ok {
		t.Fatalf("replica 2 takes a once replica 1 released it: %v %v", ok, err)
	}
	a2.Release()

	// Replica 1's session dies while it holds b.
	var pids []int
	rows, err := r2.DB().QueryContext(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted`)
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
	b2, ok, err := r2.TryClaimLock(ctx, "webhook/b")
	if err != nil || !ok {
		t.Fatalf("replica 2 takes b once replica 1's session died: %v %v", ok, err)
	}
	// Replica 1 finds out at its next statement on the session: a new
	// claim runs on a new session (and b is replica 2's now).
	if _, ok, err := r1.TryClaimLock(ctx, "webhook/b"); err != nil || ok {
		t.Fatalf("replica 1 took b again while replica 2 holds it: %v %v", ok, err)
	}
	if b1.Held() {
		t.Fatal("replica 1's lock on b still counts as held after its session died")
	}
	b1.Release() // on a dead session: nothing to give back, nothing else dropped
	d1, ok, err := r1.TryClaimLock(ctx, "webhook/d")
	if err != nil || !ok || !d1.Held() {
		t.Fatalf("replica 1 claims on its new session: %v %v", ok, err)
	}
	b2.Release()
	if _, ok, err := r2.TryClaimLock(ctx, "webhook/d"); err != nil || ok {
		t.Fatalf("replica 2 took d while replica 1 holds it on its new session: %v %v", ok, err)
	}
	d1.Release()
}
