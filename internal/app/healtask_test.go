package app_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// The periodic heal task runs on the scheduler's wait loop (schedule.Loop),
// in fake time: a scan at each period's end and none between, a restart with
// another period moving the cadence, no scan after stop or after shutdown
// (SPEC.md "Chain heal": the task is per process).
func TestHealTaskScansOncePerPeriodOnTheSchedulersLoop(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		synctest.Test(t, func(t *testing.T) {
			a := apptest.New(t, storetest.Open(t, dsn), apptest.Options{})
			ctx := context.Background()
			acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: "heal-task@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
			for seq := range int64(3) {
				id, typ := fmt.Sprintf("evt-heal-%d", seq), "note"
				var prev *string
				if seq > 0 {
					tip, err := a.ChainTip(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					prev = tip.PayloadHash
				}
				s := seq
				if _, err := a.Append(ctx, p, api.EventInput{EventID: &id, EventType: &typ, Sequence: &s, PrevHash: prev}, "rest"); err != nil {
					t.Fatal(err)
				}
			}
			lastScan := func() string {
				synctest.Wait()
				if s := a.HealStatus(p).LastScan; s != nil {
					if !s.Clean || s.TotalEvents != 3 {
						t.Fatalf("scan: %+v", s)
					}
					return s.ScannedAt
				}
				return ""
			}
			start := time.Now()
			at := func(d time.Duration) string { return domain.FormatTimestamp(start.Add(d)) }
			sleepUntil := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

			task, err := a.HealAutoStart(ctx, p, 60)
			if err != nil || !task.Running || task.TaskID == nil {
				t.Fatalf("start: %+v, %v", task, err)
			}
			sleepUntil(59 * time.Second)
			if got := lastScan(); got != "" {
				t.Fatalf("scanned at %s, before the first period ended", got)
			}
			sleepUntil(60 * time.Second)
			if got := lastScan(); got != at(60*time.Second) {
				t.Fatalf("last scan %q, want one at the end of the first period %s", got, at(60*time.Second))
			}
			sleepUntil(150 * time.Second)
			if got := lastScan(); got != at(120*time.Second) {
				t.Fatalf("last scan %q, want %s", got, at(120*time.Second))
			}

			// The same period again is the same task; another period replaces it
			// and its cadence counts from the restart.
			same, _ := a.HealAutoStart(ctx, p, 60)
			if *same.TaskID != *task.TaskID {
				t.Fatalf("restarting with the same period made a new task %s", *same.TaskID)
			}
			moved, _ := a.HealAutoStart(ctx, p, 300)
			if *moved.TaskID == *task.TaskID || moved.PeriodSeconds != 300 {
				t.Fatalf("another period kept the task: %+v", moved)
			}
			sleepUntil(449 * time.Second) // the old task would have scanned at 180…420
			if got := lastScan(); got != at(120*time.Second) {
				t.Fatalf("last scan %q: the replaced task still runs, or the new one ran early", got)
			}
			sleepUntil(450 * time.Second)
			if got := lastScan(); got != at(450*time.Second) {
				t.Fatalf("last scan %q, want %s (300 s after the restart)", got, at(450*time.Second))
			}

			// The task only scans: repairs stay an explicit heal run.
			if tip, err := a.ChainTip(ctx, p); err != nil || tip.EventCount != 3 {
				t.Fatalf("the periodic task wrote: %+v, %v", tip, err)
			}

			if stop := a.HealAutoStop(p); !stop.Stopped {
				t.Fatalf("stop: %+v", stop)
			}
			sleepUntil(2000 * time.Second)
			if got := lastScan(); got != at(450*time.Second) {
				t.Fatalf("scanned at %s after stop", got)
			}

			// Shutdown ends the running tasks; none starts afterwards.
			if _, err := a.HealAutoStart(ctx, p, 60); err != nil {
				t.Fatal(err)
			}
			a.Close()
			if s := a.HealStatus(p); s.AutoRunning {
				t.Fatal("a task runs after shutdown")
			}
			if again, _ := a.HealAutoStart(ctx, p, 60); again.Running {
				t.Fatalf("a task started after shutdown: %+v", again)
			}
			sleepUntil(3000 * time.Second)
			if got := lastScan(); got != at(450*time.Second) {
				t.Fatalf("scanned at %s after shutdown", got)
			}
		})
	})
}
