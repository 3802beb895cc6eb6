package app_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// Two PostgreSQL replicas asking for the same periods of a job at once get
// each period exactly once between them; a replica that took a period and
// died (never finished) holds that period only: the next is free.
func TestJobPeriodsRunOnOneReplica(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	replicas := []*app.App{apptest.New(t, storetest.Open(t, dsn), apptest.Options{}), apptest.New(t, storetest.Open(t, dsn), apptest.Options{})}
	ctx := context.Background()
	start := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	const periods = 60
	var granted [2]atomic.Int64
	var wg sync.WaitGroup
	for i, a := range replicas {
		wg.Go(func() {
			for p := range periods {
				ok, err := a.AcquireJobPeriod(ctx, app.JobWebhooks, start.Add(time.Duration(p)*2*time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					granted[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := granted[0].Load() + granted[1].Load(); got != periods {
		t.Fatalf("%d + %d periods granted, want %d in all", granted[0].Load(), granted[1].Load(), periods)
	}
	// Replica 0 takes the next period and dies mid-run: nothing is ever
	// recorded for it. The period after is granted as usual.
	next := start.Add(periods * 2 * time.Minute)
	if ok, err := replicas[0].AcquireJobPeriod(ctx, app.JobWebhooks, next); err != nil || !ok {
		t.Fatalf("the next period: %v %v", ok, err)
	}
	if ok, _ := replicas[1].AcquireJobPeriod(ctx, app.JobWebhooks, next); ok {
		t.Fatal("a period granted twice")
	}
	if ok, err := replicas[1].AcquireJobPeriod(ctx, app.JobWebhooks, next.Add(2*time.Minute)); err != nil || !ok {
		t.Fatalf("the period after a dead replica's: %v %v", ok, err)
	}
}
