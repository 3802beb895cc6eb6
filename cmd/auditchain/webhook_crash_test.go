package main

// The outbox crash test the reliability targets ask for: `auditchain
// serve` is killed with SIGKILL in the middle of a webhook drain, while a
// receiver holds a delivery, and restarted on the same database. No queued
// row may be lost, and a row delivered again carries the webhook-id it
// carried the first time.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store/storetest"
)

// cronDrainWebhooks calls the webhooks job of the server at base.
func cronDrainWebhooks(client *http.Client, base, secret string) (int, []byte, error) {
	req, err := http.NewRequest("POST", base+"/v1/internal/cron/webhooks", nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Cron-Secret", secret)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	return resp.StatusCode, body.Bytes(), err
}

// webhookRowStatuses reads the account's webhook rows (id → delivery_status)
// through GET /v1/notifications.
func webhookRowStatuses(t *testing.T, client *crashClient, key string) map[string]string {
	t.Helper()
	status, body, err := client.do("GET", "/v1/notifications?limit=500", key, nil)
	if err != nil || status != 200 {
		t.Fatalf("list notifications: %d %s %v", status, body, err)
	}
	var page struct {
		Notifications []struct {
			ID             string `json:"id"`
			Channel        string `json:"channel"`
			DeliveryStatus string `json:"delivery_status"`
		} `json:"notifications"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &page); err != nil || page.NextCursor != nil {
		t.Fatalf("list notifications: %v, a second page %v: %s", err, page.NextCursor, body)
	}
	rows := map[string]string{}
	for _, n := range page.Notifications {
		if n.Channel == "webhook" {
			rows[n.ID] = n.DeliveryStatus
		}
	}
	return rows
}

func TestKillDuringWebhookDrainLosesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// More rows than an endpoint is sent at once, so the kill finds rows
		// delivered, one held and some not yet tried.
		const rows, secret = 12, "crash-cron-secret"
		key := createAccounts(t, dsn, 1, "webhookcrash")[0]

		// The receiver records every webhook-id and holds the first delivery
		// until the test releases it.
		var (
			mu       sync.Mutex
			received = map[string]int{}
			firstID  string
		)
		held, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("webhook-id")
			mu.Lock()
			received[id]++
			first := firstID == ""
			if first {
				firstID = id
			}
			mu.Unlock()
			if first {
				close(held)
				<-release
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(receiver.Close)
		// Runs before the receiver closes (cleanups run last first), which
		// waits for the held handler.
		t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

		// The test drives the drain itself: no scheduled or kicked drains.
		// It queues its rows with test notifications, more than their
		// hourly throttle's default.
		args := []string{"--db", dsn, "--webhook-allow-private", "--cron-secret", secret, "--scheduler=false",
			"--test-notification-limit-per-account", "100"}
		server := startChild(t, args...)
		client := &crashClient{http: &http.Client{Timeout: 30 * time.Second}}
		client.base.Store(&server.base)

		status, body, err := client.do("POST", "/v1/webhooks", key, map[string]any{"url": receiver.URL + "/hook", "types": []string{"grant.revoked"}})
		if err != nil || status != 201 {
			t.Fatalf("register the endpoint: %d %s %v", status, body, err)
		}
		for i := range rows {
			status, body, err := client.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked"})
			if err != nil || status != 200 {
				t.Fatalf("test notification %d: %d %s %v", i, status, body, err)
			}
			var res struct {
				DeliveryStatus map[string]string `json:"delivery_status"`
			}
			if err := json.Unmarshal(body, &res); err != nil || res.DeliveryStatus["webhook"] != "queued" {
				t.Fatalf("test notification %d: %s, want a queued webhook row", i, body)
			}
		}
		queued := webhookRowStatuses(t, client, key)
		if len(queued) != rows {
			t.Fatalf("%d webhook rows before the drain, want %d: %v", len(queued), rows, queued)
		}

		// The drain hangs on the held delivery; the server dies under it.
		drained := make(chan error, 1)
		go func() {
			status, body, err := cronDrainWebhooks(client.http, server.base, secret)
			if err == nil {
				err = fmt.Errorf("the drain answered %d %s although its server was killed", status, body)
			} else {
				err = nil // the connection died with the server, as it should
			}
			drained <- err
		}()
		select {
		case <-held:
		case <-time.After(15 * time.Second):
			t.Fatal("no delivery reached the receiver within 15 s of the drain")
		}
		server.kill(t)
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		releaseOnce.Do(func() { close(release) })
		mu.Lock()
		before := len(received)
		mu.Unlock()

		start := time.Now()
		server = startChild(t, args...)
		client.base.Store(&server.base)
		// What the killed drain did was never settled: every row is still
		// queued (on PostgreSQL, its transaction died with its connection).
		for id, s := range webhookRowStatuses(t, client, key) {
			if s != "queued" {
				t.Errorf("row %s is %s after the kill, want queued", id, s)
			}
		}
		status, body, err = cronDrainWebhooks(client.http, server.base, secret)
		if err != nil || status != 200 {
			t.Fatalf("drain after the restart: %d %s %v", status, body, err)
		}
		var res struct {
			Webhooks struct{ Drained, Sent, Failed int }
		}
		if err := json.Unmarshal(body, &res); err != nil || res.Webhooks.Sent != rows || res.Webhooks.Failed != 0 {
			t.Fatalf("drain after the restart: %s (%v), want all %d rows sent", body, err, rows)
		}
		t.Logf("the first drain reached the receiver with %d rows; the second drain ended %v after the restart", before, time.Since(start).Round(time.Millisecond))

		// Every row arrived, nothing else did, and the row held when the
		// server died came again under the same webhook-id.
		mu.Lock()
		defer mu.Unlock()
		for id := range queued {
			if received[id] == 0 {
				t.Errorf("row %s never reached the receiver", id)
			}
		}
		twice := 0
		for id, n := range received {
			if _, ok := queued[id]; !ok {
				t.Errorf("webhook-id %q arrived %d times but is no queued row", id, n)
			}
			if n > 1 {
				twice++
			}
		}
		if received[firstID] < 2 {
			t.Errorf("the row held when the server died (%s) arrived %d times, want again after the restart", firstID, received[firstID])
		}
		t.Logf("%d of %d rows arrived twice, each under its one webhook-id", twice, rows)
		for id, s := range webhookRowStatuses(t, client, key) {
			if s != "sent" {
				t.Errorf("row %s ends %s, want sent", id, s)
			}
		}
		server.kill(t)
	})
}
