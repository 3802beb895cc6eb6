package app_test

// Webhook deliveries are fair across accounts (docs/decisions/
// notifications.md "Fairness"; docs/reliability.md "Webhook fairness").

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// 50 accounts whose receivers never answer, 8 rows queued for each and all
// of them in flight, delay no other account: with the scheduler running as
// serve runs it, a healthy account's row reaches its receiver within 2 s of
// being queued (the scheduler's one-second kick included), on both stores.
// The receivers are real HTTP servers on loopback (the test's
// --webhook-allow-private).
func TestHangingReceiversDoNotDelayAnotherAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		const hanging, rowsEach, within = 50, 8, 2 * time.Second
		a, _ := webhookApp(t, dsn)
		ctx := context.Background()

		var (
			mu      sync.Mutex
			reached = map[int]bool{} // hanging receivers a delivery reached
		)
		hang := make(chan struct{})
		hangers := make([]app.Principal, hanging)
		for i := range hangers {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reached[i] = true
				mu.Unlock()
				select { // never answers; the sender gives up at its timeout
				case <-hang:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(srv.Close)
			hangers[i] = hookAccount(t, a, fmt.Sprintf("hang%d@example.com", i), srv.URL)
		}
		arrived := make(chan time.Time, 1)
		healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case arrived <- time.Now():
			default: // a retry: the first arrival is what is measured
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(healthy.Close)
		ph := hookAccount(t, a, "healthy@example.com", healthy.URL)
		// Cleanups run last first: the senders stop before the hanging
		// handlers are released and their servers closed.
		t.Cleanup(func() { close(hang) })
		if err := a.Start(ctx, app.Loops{Scheduler: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)

		// Each queued row kicks the scheduler, as in serve.
		for _, p := range hangers {
			for range rowsEach {
				if _, err := a.TestNotification(ctx, p, api.TestNotificationRequest{Type: new(domain.NoticeGrantRevoked)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The healthy row is queued once every hanging receiver holds a
		// delivery (or after 3 s, a scenario no weaker for the healthy
		// row: the hanging accounts' rows are in flight either way).
		inFlight := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(reached)
		}
		for start := time.Now(); inFlight() < hanging && time.Since(start) < 3*time.Second; {
			time.Sleep(10 * time.Millisecond) // polling the receivers, which the scheduler reaches on its own clock
		}
		if inFlight() == 0 {
			t.Fatal("no hanging receiver was reached within 3 s of its rows being queued")
		}

		queued := time.Now()
		if _, err := a.TestNotification(ctx, ph, api.TestNotificationRequest{Type: new(domain.NoticeGrantRevoked)}); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-arrived:
			t.Logf("the healthy delivery arrived %v after its row was queued", at.Sub(queued).Round(time.Millisecond))
			if d := at.Sub(queued); d > within {
				t.Fatalf("the healthy delivery arrived %v after its row was queued, want within %v", d, within)
			}
		case <-time.After(within):
			t.Fatalf("the healthy delivery did not arrive within %v of its row being queued, while %d accounts' receivers hang", within, hanging)
		}
		// Nor did the hanging accounts wait for one another: each got its
		// first attempt while the others' hung.
		if n := inFlight(); n != hanging {
			t.Fatalf("%d of the %d hanging receivers were reached", n, hanging)
		}
	})
}
