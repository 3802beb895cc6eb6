package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// A refund takes one unit's cost off a budget; a prune deletes the budgets
// idle before its time and keeps the others, and on PostgreSQL skips,
// without waiting, a row another transaction holds; RateState then finds a
// pruned budget idle, as if it had never been used.
func TestRateStatesRefundAndPrune(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		set := func(key string, tat time.Time) {
			t.Helper()
			if err := s.InTx(ctx, func(tx *sql.Tx) error {
				if _, err := s.RateState(ctx, tx, key); err != nil {
					return err
				}
				return s.SetRateState(ctx, tx, key, tat.UnixMicro())
			}); err != nil {
				t.Fatal(err)
			}
		}
		get := func(key string) (tat int64) {
			t.Helper()
			if err := s.InTx(ctx, func(tx *sql.Tx) (err error) { tat, err = s.RateState(ctx, tx, key); return err }); err != nil {
				t.Fatal(err)
			}
			return tat
		}
		set("otp:client:203.0.113.1", t0.Add(-time.Hour)) // idle an hour before t0
		set("otp:client:203.0.113.2", t0.Add(-time.Second))
		set("otp:global", t0.Add(time.Hour)) // in debt past t0
		if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.RefundRate(ctx, tx, "otp:global", 6*time.Minute) }); err != nil {
			t.Fatal(err)
		}
		if got := get("otp:global"); got != t0.Add(54*time.Minute).UnixMicro() {
			t.Fatalf("after a refund: %v", time.UnixMicro(got).UTC())
		}
		var pruned int64
		if err := s.InTx(ctx, func(tx *sql.Tx) (err error) {
			pruned, err = s.PruneRateStates(ctx, tx, t0.Add(-time.Minute))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if pruned != 1 {
			t.Fatalf("%d pruned, want only the state idle before the cutoff", pruned)
		}
		if got := get("otp:client:203.0.113.1"); got != 0 {
			t.Fatalf("a pruned state reads %d, want 0 (never used)", got)
		}
		if got := get("otp:client:203.0.113.2"); got != t0.Add(-time.Second).UnixMicro() {
			t.Fatalf("a state idle after the cutoff was pruned: %d", got)
		}
		if s.Dialect != store.Postgres {
			return
		}
		// A row another transaction holds is skipped, not waited for.
		holder, err := s.WriteDB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := s.RateState(ctx, holder, "otp:client:203.0.113.2"); err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.InTx(wait, func(tx *sql.Tx) (err error) { pruned, err = s.PruneRateStates(wait, tx, t0.Add(time.Hour)); return err }); err != nil {
			t.Fatal(err)
		}
		// The global budget, idle by then, and the row get made for the
		// pruned client (never used); not the held one.
		if pruned != 2 {
			t.Fatalf("%d pruned beside a held row, want 2", pruned)
		}
		holder.Rollback()
		if got := get("otp:client:203.0.113.2"); got != t0.Add(-time.Second).UnixMicro() {
			t.Fatalf("the held state was pruned: %d", got)
		}
	})
}
