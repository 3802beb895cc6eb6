package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// idleTicker never ticks: what a loop does, it does on its own account.
type idleTicker struct{}

func (idleTicker) C() <-chan time.Time { return nil }
func (idleTicker) Stop()               {}

// Close flushes the usage counted since the last flush: the usage of the
// last requests before a shutdown is stored, not lost with the process.
func TestCloseFlushesTheLastUsage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := storetest.Open(t, dsn)
		a := apptest.New(t, st, apptest.Options{})
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Start(ctx, app.Loops{UsageFlush: idleTicker{}}); err != nil {
			t.Fatal(err)
		}
		a.CountCall(acct.UserID, "grants:read", "rest")
		a.Close()

		// Another process reads what is stored: it holds no counts of its own.
		u, err := apptest.New(t, st, apptest.Options{}).DashboardUsage(ctx, app.Principal{UserID: acct.UserID})
		if err != nil {
			t.Fatal(err)
		}
		if got := u.CallsToday.ByCapability["grants:read"]; got != 1 {
			t.Fatalf("calls stored after Close: %d, want 1 (%+v)", got, u.CallsToday)
		}
	})
}
