// Command webhook-receiver is a minimal receiver of auditchain webhooks: it
// checks each delivery's Standard Webhooks signature and timestamp, drops
// repeats by webhook-id, and prints what to poll. Standard library only.
//
//	WEBHOOK_SECRET=whsec_… go run ./examples/webhook-receiver -addr 127.0.0.1:9000
//
// A delivery is a prompt to poll, not the fact: on grant.revoked, ask the
// gate (GET /v1/grants/status) before trusting the sub-agent again.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tolerance is how far a delivery's timestamp may be from our clock: older
// deliveries are replays.
const tolerance = 5 * time.Minute

// verify checks the webhook-signature header of a delivery: "v1," + base64
// HMAC-SHA256 over "id.timestamp.body" with the secret's key, any of the
// space-separated signatures matching, in constant time.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return errors.New("the secret is not whsec_ + base64")
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		return errors.New("missing webhook-id or webhook-timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("timestamp outside the tolerance")
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		version, b64, ok := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if ok && version == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no valid signature")
}

// push is the body of a delivery.
type push struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		NotificationID string         `json:"notification_id"`
		UserID         string         `json:"user_id"`
		Severity       string         `json:"severity"`
		Subject        map[string]any `json:"subject"`
	} `json:"data"`
}

func handler(secret string, now func() time.Time, out io.Writer) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{} // a real receiver keeps these for longer than the tolerance, durably
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := verify(secret, r.Header, body, now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		id := r.Header.Get("webhook-id")
		mu.Lock()
		repeat := seen[id]
		seen[id] = true
		mu.Unlock()
		if !repeat { // a retry of a delivery we took carries the same id
			var p push
			if err := json.Unmarshal(body, &p); err != nil {
				http.Error(w, "body", http.StatusBadRequest)
				return
			}
			fmt.Fprintf(out, "%s %s (%s): %v — poll the service\n", id, p.Type, p.Data.Severity, p.Data.Subject)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen address")
	flag.Parse()
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" {
		log.Fatal("set WEBHOOK_SECRET to the secret POST /v1/webhooks returned")
	}
	log.Printf("receiving on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, handler(secret, time.Now, os.Stdout)))
}
