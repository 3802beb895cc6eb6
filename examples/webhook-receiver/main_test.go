package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/notify/webhook"
)

// The example accepts what the service signs, once per id, and refuses a
// wrong signature and a stale timestamp.
func TestReceiverVerifiesTheServiceSignature(t *testing.T) {
	secret, err := webhook.NewSecret(strings.NewReader(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"type":"grant.revoked","timestamp":"2026-11-26T12:00:00.000000+00:00","data":{"notification_id":"n1","user_id":"u1","severity":"warning","subject":{"grant_id":"g-1","subagent":"collector"}}}`)
	deliver := func(h http.Handler, ts time.Time, sig string) int {
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		req.Header.Set("webhook-id", "n1")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	var out bytes.Buffer
	h := handler(secret, func() time.Time { return now }, &out)
	sig, err := webhook.Sign(secret, "n1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	if code := deliver(h, now, "v1,bm90IGl0 "+sig); code != http.StatusNoContent {
		t.Fatalf("a signed delivery (second of two signatures): %d", code)
	}
	if code := deliver(h, now, sig); code != http.StatusNoContent {
		t.Fatalf("the retry: %d", code)
	}
	if n := strings.Count(out.String(), "grant.revoked"); n != 1 {
		t.Fatalf("printed %d times, want once:\n%s", n, out.String())
	}
	if code := deliver(h, now, "v1,"+strings.Repeat("A", 44)); code != http.StatusUnauthorized {
		t.Errorf("a wrong signature: %d", code)
	}
	old := now.Add(-10 * time.Minute)
	oldSig, _ := webhook.Sign(secret, "n1", old, body)
	if code := deliver(h, old, oldSig); code != http.StatusUnauthorized {
		t.Errorf("a stale timestamp: %d", code)
	}
}
