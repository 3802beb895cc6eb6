package webhook_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/auditchain/auditchain/internal/notify/webhook"
)

var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

const testBody = `{"type":"event.appended","data":{"seq":42}}`

func testDelivery(t *testing.T, url string) webhook.Delivery {
	return webhook.Delivery{
		URL:       url,
		MsgID:     "msg_2vYgmT1pQxV0",
		Timestamp: testNow,
		Body:      []byte(testBody),
		Secret:    testSecret(t, 7),
	}
}

// localEgress may reach the httptest servers, which listen on loopback.
func localEgress(o webhook.Options) *webhook.Egress {
	o.AllowPrivate = true
	return webhook.NewEgress(o)
}

type received struct {
	method string
	header http.Header
	body   []byte
}

func TestDeliverSendsSignedRequest(t *testing.T) {
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{method: r.Method, header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	d := testDelivery(t, srv.URL+"/hooks")
	// The reference library checks the timestamp against its wall clock.
	d.Timestamp = time.Now()
	a := localEgress(webhook.Options{}).Deliver(context.Background(), d)
	if !a.OK || a.StatusCode != http.StatusNoContent || a.Err != "" {
		t.Fatalf("Deliver = %+v, want OK with 204", a)
	}
	if a.Duration <= 0 {
		t.Errorf("Duration = %v, want > 0", a.Duration)
	}

	r := <-got
	if r.method != http.MethodPost {
		t.Errorf("method = %s, want POST", r.method)
	}
	if !bytes.Equal(r.body, d.Body) {
		t.Errorf("body = %q, want %q", r.body, d.Body)
	}
	for name, want := range map[string]string{
		"content-type":      "application/json",
		"user-agent":        "auditchain-webhooks",
		"webhook-id":        d.MsgID,
		"webhook-timestamp": strconv.FormatInt(d.Timestamp.Unix(), 10),
	} {
		if v := r.header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	receiver, err := standardwebhooks.NewWebhook(d.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.Verify(r.body, r.header); err != nil {
		t.Errorf("reference library rejects the delivered request: %v", err)
	}
}

func TestDeliverReportsStatus(t *testing.T) {
	for _, tc := range []struct {
		status  int
		wantOK  bool
		wantErr string
	}{
		{status: http.StatusOK, wantOK: true},
		{status: http.StatusAccepted, wantOK: true},
		{status: http.StatusNoContent, wantOK: true},
		{status: http.StatusNotModified, wantErr: "redirect not followed (status 304)"},
		{status: http.StatusBadRequest, wantErr: "status 400"},
		{status: http.StatusGone, wantErr: "status 410"},
		{status: http.StatusInternalServerError, wantErr: "status 500"},
	} {
		srv, hits := countingServer(t, tc.status)
		a := localEgress(webhook.Options{}).Deliver(context.Background(), testDelivery(t, srv.URL))
		if a.OK != tc.wantOK || a.StatusCode != tc.status || a.Err != tc.wantErr {
			t.Errorf("status %d: Deliver = %+v, want OK %v, Err %q", tc.status, a, tc.wantOK, tc.wantErr)
		}
		if hits.Load() != 1 {
			t.Errorf("status %d: receiver got %d requests, want 1", tc.status, hits.Load())
		}
	}
}

func TestDeliverDoesNotFollowRedirects(t *testing.T) {
	target, targetHits := countingServer(t, http.StatusNoContent)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusFound)
	}))
	defer redirector.Close()

	a := localEgress(webhook.Options{}).Deliver(context.Background(), testDelivery(t, redirector.URL))
	if a.OK || a.StatusCode != http.StatusFound || a.Err != "redirect not followed (status 302)" {
		t.Errorf("Deliver = %+v, want a failed attempt with status 302", a)
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("redirect target got %d requests, want 0", n)
	}
}

func TestDeliverCapsResponseBody(t *testing.T) {
	const endless = 1 << 30
	var written atomic.Int64
	handlerDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		// Stops when the client hangs up, long before a gigabyte.
		for written.Load() < endless {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	a := localEgress(webhook.Options{}).Deliver(context.Background(), testDelivery(t, srv.URL))
	if !a.OK || a.StatusCode != http.StatusOK {
		t.Errorf("Deliver = %+v, want OK with 200", a)
	}
	select {
	case <-handlerDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("receiver still writing after the attempt returned (%d bytes so far)", written.Load())
	}
	// What the server wrote before noticing includes the kernel's socket
	// buffers on both sides, a few MB on loopback; the client read 64 KiB.
	if n := written.Load(); n >= 64<<20 {
		t.Errorf("receiver wrote %d bytes before the client hung up, want well under 1 GiB", n)
	}
}

func TestDeliverTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	a := localEgress(webhook.Options{Timeout: 200 * time.Millisecond}).
		Deliver(context.Background(), testDelivery(t, srv.URL))
	if a.OK || a.StatusCode != 0 || a.Err != "timeout after 200ms" {
		t.Errorf("Deliver = %+v, want a timeout after 200ms", a)
	}
	if a.Duration < 200*time.Millisecond {
		t.Errorf("Duration = %v, want at least the 200ms timeout", a.Duration)
	}
}

func TestDeliverCanceledByCaller(t *testing.T) {
	srv, hits := countingServer(t, http.StatusNoContent)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := localEgress(webhook.Options{}).Deliver(ctx, testDelivery(t, srv.URL))
	if a.OK || a.Err != "canceled" {
		t.Errorf("Deliver = %+v, want canceled", a)
	}
	if hits.Load() != 0 {
		t.Errorf("receiver got %d requests, want 0", hits.Load())
	}
}

func TestDeliverFailsWithoutReceiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	for _, tc := range []struct {
		url, secret, wantErr string
	}{
		{url: "http://" + addr + "/x", wantErr: "connection refused"},
		{url: "ftp://" + addr + "/x", wantErr: "webhook url must use http or https"},
		{url: "http://" + addr + "/x", secret: "nope", wantErr: "webhook secret must start with whsec_"},
	} {
		d := testDelivery(t, tc.url)
		if tc.secret != "" {
			d.Secret = tc.secret
		}
		a := localEgress(webhook.Options{}).Deliver(context.Background(), d)
		if a.OK || a.StatusCode != 0 || a.Err != tc.wantErr {
			t.Errorf("Deliver(%s) = %+v, want Err %q", tc.url, a, tc.wantErr)
		}
	}
}

// Deliveries to one receiver share connections: a new one per delivery would
// cap throughput at the handshake rate.
func TestDeliverReusesConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	e := localEgress(webhook.Options{})
	for i := range 50 {
		if a := e.Deliver(context.Background(), testDelivery(t, srv.URL)); !a.OK {
			t.Fatalf("delivery %d: %+v", i, a)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("50 sequential deliveries opened %d connections, want 1", n)
	}
}

func BenchmarkDeliverLocal(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	e := localEgress(webhook.Options{})
	secret, err := webhook.NewSecret(bytes.NewReader(make([]byte, 32)))
	if err != nil {
		b.Fatal(err)
	}
	d := webhook.Delivery{URL: srv.URL, MsgID: "msg_bench", Timestamp: testNow, Body: []byte(testBody), Secret: secret}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if a := e.Deliver(context.Background(), d); !a.OK {
				b.Errorf("Deliver = %+v", a)
				return
			}
		}
	})
}
