package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkApprovalUse times the approved call's compare-and-set on SQLite
// (UseApproval), 16 uses to a commit, in the order the approvals were made,
// over 100 accounts: the writer's cost of a resend beyond a plain call
// (issue #38; docs/performance.md "Approvals at speed"). It reports the
// WAL frames (pages) each use adds to its commit. Run it with a fixed count
// of commits, which the prepared approvals must cover:
//
//	go test -run '^$' -bench ApprovalUse -benchtime 1000x ./internal/store/
func BenchmarkApprovalUse(b *testing.B) {
	const accounts, approvals, perCommit = 100, 20000, 16
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "store.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	created := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	aps := make([]Approval, approvals)
	err = s.InTx(ctx, func(tx *sql.Tx) error {
		for i := range aps {
			at := created.Add(time.Duration(i) * time.Millisecond)
			aps[i] = Approval{UserID: fmt.Sprintf("usr_%022d", i%accounts), ApprovalID: fmt.Sprintf("ap-%032x", i*7919),
				RuleID: "rule-0123456789abcdef", Subagent: "bench-sub", Tool: "bash", ArgsSHA256: fmt.Sprintf("%064x", i),
				CallEventID: fmt.Sprintf("evt-held-b1234-%d", i), RequestedBy: "key_0123456789abcdef", RequestedKind: "api_key",
				Status: ApprovalPending, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
			if err := s.InsertApproval(ctx, tx, &aps[i]); err != nil {
				return err
			}
		}
		for _, a := range aps {
			if ok, err := s.DecideApproval(ctx, tx, a.UserID, a.ApprovalID, ApprovalApproved, "key_fedcba9876543210", "api_key",
				nil, created); err != nil || !ok {
				return fmt.Errorf("approve %s: %v", a.ApprovalID, err)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.write.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	var next, frames int64
	for b.Loop() {
		if next+perCommit > approvals {
			b.Fatalf("the %d prepared approvals are spent: run fewer commits (-benchtime %dx)", approvals, approvals/perCommit)
		}
		before := s.walCkpt.frames.Load()
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for _, a := range aps[next : next+perCommit] {
				ok, err := s.UseApproval(ctx, tx, a.UserID, a.ApprovalID, a.Subagent, a.Tool, a.ArgsSHA256,
					fmt.Sprintf("evt-sent-b1234-%d", next), created.Add(time.Minute))
				if err != nil || !ok {
					return fmt.Errorf("use %s: %v", a.ApprovalID, err)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if d := s.walCkpt.frames.Load() - before; d > 0 { // a background checkpoint resets the count
			frames += d
		}
		next += perCommit
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next), "ns/use")
	b.ReportMetric(float64(frames)/float64(next), "frames/use")
}
