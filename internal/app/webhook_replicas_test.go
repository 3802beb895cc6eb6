package app_test

// The webhook outbox under concurrency (docs/reliability.md, "Outbox
// across replicas" and "Webhook egress"): two replicas draining one
// PostgreSQL database send each row once, and one account's slow receiver
// does not hold back another account's delivery.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// webhookApp is an App over a store of dsn that may deliver to loopback
// receivers and retries at once, and that store.
func webhookApp(t *testing.T, dsn string) (*app.App, *store.Store) {
	t.Helper()
	// Rows are queued with test notifications, hundreds an account: their
	// throttle is lifted (it is tested in internal/httpapi).
	st := storetest.Open(t, dsn)
	return apptest.New(t, st, apptest.Options{Config: func(c *config.Config) {
		c.WebhookAllowPrivate = true
		c.TestNotifyLimitPerAccount, c.TestNotifyLimitGlobal = 1e6, 1e6
	}, WebhookBackoff: func(int) time.Duration { return 0 }}), st
}

// hookAccount makes an account with one endpoint at url taking every
// webhook type, and returns the principal of its unscoped key.
func hookAccount(t *testing.T, a *app.App, email, url string) app.Principal {
	t.Helper()
	ctx := context.Background()
	acct, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: email})
	if err != nil {
		t.Fatal(err)
	}
	p := app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
	if _, err := a.CreateWebhook(ctx, p, api.CreateWebhookRequest{URL: &url}); err != nil {
		t.Fatalf("register %s: %v", url, err)
	}
	return p
}

// webhookRowsByStatus returns the ids of userID's webhook rows by status.
func webhookRowsByStatus(t *testing.T, st *store.Store, userID string) map[string][]string {
	t.Helper()
	rows, err := st.Notifications(context.Background(), userID, nil, nil, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		if r.Channel == domain.ChannelWebhook {
			out[r.DeliveryStatus] = append(out[r.DeliveryStatus], r.ID)
		}
	}
	return out
}

// Two replicas over one PostgreSQL database drain the same queued rows at
// the same moment: every row reaches its receiver exactly once (a claim
// holds its account's lock, so a replica skips an account the other is
// sending for, and the holder claims until the account's outbox is empty),
// every row ends sent, and the replicas' sent counts add up to the rows.
func TestTwoReplicasDrainEachRowOnce(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	a1, st1 := webhookApp(t, dsn)
	a2, st2 := webhookApp(t, dsn)

	var mu sync.Mutex
	received := map[string]int{} // webhook-id → deliveries
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	// More rows per account than one claim takes, so a replica may come
	// to an account between two of the other's claims.
	const accounts, perAccount = 4, 150
	ctx := context.Background()
	users := make([]app.Principal, accounts)
	for i := range users {
		users[i] = hookAccount(t, a1, fmt.Sprintf("replicas%d@example.com", i), receiver.URL+fmt.Sprintf("/hook/%d", i))
	}
	var wg sync.WaitGroup
	for _, p := range users {
		wg.Go(func() {
			for range perAccount {
				if _, err := a1.TestNotification(ctx, p, api.TestNotificationRequest{Type: new(domain.NoticeGrantRevoked)}); err != nil {
					t.Errorf("queue a row: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	queued := map[string]bool{}
	for _, p := range users {
		byStatus := webhookRowsByStatus(t, st1, p.UserID)
		if len(byStatus[domain.DeliveryQueued]) != perAccount || len(byStatus) != 1 {
			t.Fatalf("account %s before the drains: webhook rows by status %v, want %d queued", p.UserID, statusCounts(byStatus), perAccount)
		}
		for _, id := range byStatus[domain.DeliveryQueued] {
			queued[id] = true
		}
	}

	start := make(chan struct{})
	results := make([]api.DrainCounts, 2)
	errs := make([]error, 2)
	for i, a := range []*app.App{a1, a2} {
		wg.Go(func() {
			<-start
			results[i], errs[i] = a.DrainWebhooks(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: drain: %v", i+1, err)
		}
	}
	t.Logf("replica 1 %+v, replica 2 %+v", results[0], results[1])

	mu.Lock()
	defer mu.Unlock()
	for id, n := range received {
		if !queued[id] {
			t.Errorf("webhook-id %q arrived %d times but is no queued row", id, n)
		} else if n != 1 {
			t.Errorf("row %s arrived %d times, want once", id, n)
		}
	}
	for id := range queued {
		if received[id] == 0 {
			t.Errorf("row %s never arrived", id)
		}
	}
	for _, p := range users {
		if byStatus := webhookRowsByStatus(t, st2, p.UserID); len(byStatus[domain.DeliverySent]) != perAccount || len(byStatus) != 1 {
			t.Errorf("account %s after the drains: webhook rows by status %v, want %d sent", p.UserID, statusCounts(byStatus), perAccount)
		}
	}
	sent := results[0].Sent + results[1].Sent
	if sent != len(queued) || results[0].Failed+results[1].Failed != 0 {
		t.Errorf("the drains sent %d and %d (failed %d and %d); want %d sent in all, none failed",
			results[0].Sent, results[1].Sent, results[0].Failed, results[1].Failed, len(queued))
	}
}

func statusCounts(byStatus map[string][]string) map[string]int {
	out := make(map[string]int, len(byStatus))
	for s, ids := range byStatus {
		out[s] = len(ids)
	}
	return out
}

// One account's receiver that does not answer holds back only that
// account's delivery: another account's row is delivered and settled sent
// while the first receiver is still inside its handler, and the slow row is
// sent once its receiver answers (docs/reliability.md: "others'
// deliveries not delayed").
func TestSlowReceiverDoesNotDelayAnother(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		a, st := webhookApp(t, dsn)
		ctx := context.Background()

		slowEntered, slowLeft, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var enterOnce, leaveOnce, releaseOnce sync.Once
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			enterOnce.Do(func() { close(slowEntered) })
			select {
			case <-release:
			case <-r.Context().Done(): // the sender gave up: not what this test waits for
			}
			w.WriteHeader(http.StatusNoContent)
			leaveOnce.Do(func() { close(slowLeft) })
		}))
		t.Cleanup(slow.Close)
		fastGot := make(chan string, 1)
		fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case fastGot <- r.Header.Get("webhook-id"):
			default: // a second delivery: the test has failed already
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(fast.Close)
		// Runs before the servers close (cleanups run last first), so a
		// failing test never leaves the slow handler, or the drain, waiting.
		drained := make(chan struct{})
		t.Cleanup(func() {
			releaseOnce.Do(func() { close(release) })
			<-drained
		})

		// The slow account's row is queued first, and a drain serves the
		// account with the oldest queued row first: a drain that served
		// accounts one at a time would reach it first and hold the fast one
		// behind it, failing this test.
		pa := hookAccount(t, a, "slow@example.com", slow.URL)
		pb := hookAccount(t, a, "fast@example.com", fast.URL)
		for _, p := range []app.Principal{pa, pb} {
			if _, err := a.TestNotification(ctx, p, api.TestNotificationRequest{Type: new(domain.NoticeGrantRevoked)}); err != nil {
				t.Fatal(err)
			}
		}
		rowA, rowB := webhookRowsByStatus(t, st, pa.UserID)[domain.DeliveryQueued], webhookRowsByStatus(t, st, pb.UserID)[domain.DeliveryQueued]
		if len(rowA) != 1 || len(rowB) != 1 {
			t.Fatalf("queued webhook rows: %d of the slow account, %d of the fast one; want 1 each", len(rowA), len(rowB))
		}

		var res api.DrainCounts
		var drainErr error
		go func() {
			defer close(drained)
			res, drainErr = a.DrainWebhooks(ctx)
		}()

		// The slow receiver holds its delivery from here on.
		select {
		case <-slowEntered:
		case <-time.After(5 * time.Second):
			t.Fatal("the slow account's delivery never reached its receiver")
		}
		select {
		case id := <-fastGot:
			if id != rowB[0] {
				t.Fatalf("the fast receiver got webhook-id %q, want %s", id, rowB[0])
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the fast account's delivery did not arrive within 5 s while the slow receiver held its own")
		}
		// Settled too, not merely sent: the slow account's claim does not
		// hold the fast one's settle back.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := st.NotificationByID(ctx, nil, pb.UserID, rowB[0])
			if err != nil {
				t.Fatal(err)
			}
			if n.DeliveryStatus == domain.DeliverySent {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fast account's row is still %s 5 s after its receiver took it", n.DeliveryStatus)
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case <-slowLeft:
			t.Fatal("the slow receiver's handler returned before it was released: the test proved nothing")
		default:
		}
		if n, err := st.NotificationByID(ctx, nil, pa.UserID, rowA[0]); err != nil || n.DeliveryStatus != domain.DeliveryQueued {
			t.Fatalf("the slow account's row while its receiver holds it: %+v %v, want queued", n.DeliveryStatus, err)
		}

		releaseOnce.Do(func() { close(release) })
		<-drained
		if drainErr != nil {
			t.Fatal(drainErr)
		}
		if res.Sent != 2 || res.Failed != 0 {
			t.Errorf("drain: %+v, want 2 sent", res)
		}
		if n, err := st.NotificationByID(ctx, nil, pa.UserID, rowA[0]); err != nil || n.DeliveryStatus != domain.DeliverySent {
			t.Errorf("the slow account's row after its receiver answered: %q %v, want sent", n.DeliveryStatus, err)
		}
	})
}
