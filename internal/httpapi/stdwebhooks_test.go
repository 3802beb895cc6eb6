package httpapi_test

// Webhook deliveries judged by a verifier that is not ours (CONTRACT.md
// "Webhooks": deliveries follow the Standard Webhooks specification): the
// real drain sends to a receiver in Node where the standardwebhooks library
// from npm verifies each delivery, and its verdict alone decides.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/internal/realprog"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// verdict is the Node receiver's line about one delivery.
type verdict struct {
	Path      string `json:"path"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Verified  bool   `json:"verified"`
	Type      string `json:"type"`
	// BodyTimestamp is the body's timestamp (the row's creation).
	BodyTimestamp string `json:"body_timestamp"`
	ErrorName     string `json:"error_name"`
	Error         string `json:"error"`
}

// nodeReceiver is testdata/stdwebhooks-receiver.mjs running under node.
type nodeReceiver struct {
	t     *testing.T
	url   string
	stdin io.WriteCloser

	mu       sync.Mutex
	partial  []byte
	port     int
	secrets  map[string]bool
	verdicts []verdict
	stderr   bytes.Buffer
	changed  chan struct{} // signalled after every line
}

// startNodeReceiver starts the receiver, which lives until the test ends.
func startNodeReceiver(t *testing.T, modules string) *nodeReceiver {
	t.Helper()
	rc := &nodeReceiver{t: t, secrets: map[string]bool{}, changed: make(chan struct{}, 1)}
	cmd := exec.CommandContext(t.Context(), "node", "testdata/stdwebhooks-receiver.mjs", modules)
	cmd.Stdout = rc
	cmd.Stderr = &lockedWriter{mu: &rc.mu, w: &rc.stderr}
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	rc.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatalf("node: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	t.Cleanup(func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, v := range rc.verdicts {
			if v.Verified {
				t.Logf("standardwebhooks accepted %s %s at %s", v.Type, v.ID, v.Path)
			} else {
				t.Logf("standardwebhooks refused %s at %s: %s: %s", v.ID, v.Path, v.ErrorName, v.Error)
			}
		}
	})
	rc.waitFor("the receiver's port", func() bool { return rc.port != 0 })
	rc.url = "http://127.0.0.1:" + strconv.Itoa(rc.port)
	return rc
}

// Write takes the receiver's stdout, one JSON line at a time.
func (rc *nodeReceiver) Write(p []byte) (int, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.partial = append(rc.partial, p...)
	for {
		line, rest, ok := bytes.Cut(rc.partial, []byte("\n"))
		if !ok {
			break
		}
		rc.partial = rest
		var m struct {
			Port   int     `json:"port"`
			Secret *string `json:"secret"`
			verdict
		}
		if err := json.Unmarshal(line, &m); err != nil {
			fmt.Fprintf(&rc.stderr, "not a JSON line on stdout: %q\n", line)
			continue
		}
		switch {
		case m.Port != 0:
			rc.port = m.Port
		case m.Secret != nil:
			rc.secrets[*m.Secret] = true
		default:
			rc.verdicts = append(rc.verdicts, m.verdict)
		}
	}
	select {
	case rc.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor waits until cond (called under rc.mu) holds, failing the test
// after 10 s.
func (rc *nodeReceiver) waitFor(what string, cond func() bool) {
	rc.t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		rc.mu.Lock()
		ok := cond()
		rc.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-rc.changed:
		case <-deadline.C:
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.t.Fatalf("node receiver: no %s within 10 s; verdicts %+v; stderr:\n%s", what, rc.verdicts, rc.stderr.String())
		}
	}
}

// trust tells the receiver the secret of deliveries to path.
func (rc *nodeReceiver) trust(path, secret string) {
	rc.t.Helper()
	line, _ := json.Marshal(map[string]string{"path": path, "secret": secret})
	if _, err := rc.stdin.Write(append(line, '\n')); err != nil {
		rc.t.Fatalf("node receiver stdin: %v", err)
	}
	rc.waitFor("secret for "+path, func() bool { return rc.secrets[path] })
}

// verdictsAt waits for n verdicts on deliveries to path and returns them.
// The receiver prints each before answering, and a drain returns after its
// answers: n is there when the drain has returned, or soon after.
func (rc *nodeReceiver) verdictsAt(path string, n int) []verdict {
	rc.t.Helper()
	var got []verdict
	rc.waitFor(fmt.Sprintf("%d verdicts at %s", n, path), func() bool {
		got = nil
		for _, v := range rc.verdicts {
			if v.Path == path {
				got = append(got, v)
			}
		}
		return len(got) >= n
	})
	if len(got) != n {
		rc.t.Fatalf("%d deliveries at %s, want %d: %+v", len(got), path, n, got)
	}
	return got
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// setClock sets the service's clock to at.
func setClock(e *env, at time.Time) { e.clock.Advance(at.Sub(e.clock.Now())) }

// onWallClock sets the service's clock to the wall clock the library's
// tolerance reads (five minutes either way), instead of the harness's fixed
// day.
func onWallClock(e *env) { setClock(e, time.Now()) }

// hookAt registers url as an endpoint of key's account taking types, and
// tells rc the secret of deliveries to path.
func (e *env) hookAt(rc *nodeReceiver, key, url, path string, types []string) (id string) {
	e.t.Helper()
	r := e.do("POST", "/v1/webhooks", key, map[string]any{"url": url + path, "types": types})
	if r.Status != 201 {
		e.t.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Body)
	}
	m := r.JSON(e.t)
	rc.trust(path, m["secret"].(string))
	return m["id"].(string)
}

// revokeNow creates a grant for subagent that expires an hour after the
// service's clock, and revokes it.
func (e *env) revokeNow(key, subagent string) string {
	e.t.Helper()
	id := grantIDOf(e.grant(key, map[string]any{"subagent": subagent,
		"expires_at": e.clock.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05+00:00"), "max_tool_calls": 10}))
	if r := e.do("POST", "/v1/grants/"+id+"/revoke", key, map[string]any{"subagent": subagent}); r.Status != 200 {
		e.t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	return id
}

// webhookRow is the account's one webhook row of typ.
func (e *env) webhookRow(key, typ string) map[string]any {
	e.t.Helper()
	rows := rowsOf(e.notices(key, "", 50), typ)[domain.ChannelWebhook]
	if len(rows) != 1 {
		e.t.Fatalf("%d webhook rows of %s, want 1", len(rows), typ)
	}
	return rows[0]
}

// The library accepts every delivery the drain makes: a grant.revoked from a
// real revoke (its subject with non-ASCII and HTML-escaped characters) and a
// test notice of every type with a webhook channel, each delivered once with
// the row's id as webhook-id, and each row sent because the library said so.
func TestStandardWebhooksLibraryAcceptsEveryDelivery(t *testing.T) {
	modules := realprog.NodeModules(t)
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		onWallClock(e)
		rc := startNodeReceiver(t, modules)
		_, key := e.account("ops@example.com")
		e.hookAt(rc, key, rc.url, "/hooks/ops", nil)

		e.revokeNow(key, "réviseur <ops> & ✓")
		types := domain.WebhookTypes()
		for _, typ := range types {
			if r := e.do("POST", "/v1/notifications/test", key, map[string]any{"type": typ, "severity": "critical"}); r.Status != 200 {
				t.Fatalf("test notice %s: %d %s", typ, r.Status, r.Body)
			}
		}
		want := len(types) + 1
		if res := e.drain(t); res["drained"] != float64(want) || res["sent"] != float64(want) {
			t.Fatalf("drain: %v, want %d drained and sent", res, want)
		}

		rows := map[string]string{} // webhook row id → type
		for _, r := range e.notices(key, "", 50) {
			if r["channel"] == domain.ChannelWebhook {
				if r["delivery_status"] != domain.DeliverySent {
					t.Errorf("row %v: %v, want sent", r["id"], r["delivery_status"])
				}
				rows[r["id"].(string)] = r["type"].(string)
			}
		}
		got := rc.verdictsAt("/hooks/ops", want)
		for _, v := range got {
			if !v.Verified {
				t.Errorf("the library refused delivery %s: %s: %s", v.ID, v.ErrorName, v.Error)
			}
			if typ, ok := rows[v.ID]; !ok || v.Type != typ {
				t.Errorf("delivery %s of type %q: rows %v", v.ID, v.Type, rows)
			}
			delete(rows, v.ID)
		}
		if len(rows) != 0 {
			t.Errorf("rows never delivered: %v", rows)
		}
	})
}

// tamperingProxy forwards each delivery to the receiver at to, passing the
// request's body and headers through alter first, and answers what the
// receiver answered.
func tamperingProxy(t *testing.T, to string, alter func(h http.Header, body []byte) []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		h := r.Header.Clone()
		body = alter(h, body)
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, to+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		for _, name := range []string{"Content-Type", "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
			req.Header.Set(name, h.Get(name))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The receiver really verifies: a delivery whose body a proxy changed by one
// byte, or that a proxy re-signed with another secret, is refused by the
// library (no matching signature), every attempt, and the row fails; the
// same proxy passing deliveries through unchanged is accepted.
func TestStandardWebhooksLibraryRefusesAlteredDeliveries(t *testing.T) {
	modules := realprog.NodeModules(t)
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		onWallClock(e)
		rc := startNodeReceiver(t, modules)
		wrongSecret, err := webhook.NewSecret(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name     string
			alter    func(h http.Header, body []byte) []byte
			verified bool
		}{
			{"unchanged", func(_ http.Header, body []byte) []byte { return body }, true},
			{"one-byte", func(_ http.Header, body []byte) []byte {
				// "warning" → "Warning": the same JSON shape, one byte apart.
				i := bytes.Index(body, []byte(`"warning"`))
				if i < 0 {
					t.Errorf("no severity warning in %s", body)
					return body
				}
				out := slices.Clone(body)
				out[i+1] = 'W'
				return out
			}, false},
			{"wrong-secret", func(h http.Header, body []byte) []byte {
				sec, err := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64)
				if err != nil {
					t.Errorf("webhook-timestamp %q: %v", h.Get("Webhook-Timestamp"), err)
				}
				sig, err := webhook.Sign(wrongSecret, h.Get("Webhook-Id"), time.Unix(sec, 0), body)
				if err != nil {
					t.Error(err)
				}
				h.Set("Webhook-Signature", sig)
				return body
			}, false},
		}
		keys, hooks := map[string]string{}, map[string]string{}
		for _, c := range cases {
			_, keys[c.name] = e.account(c.name + "@example.com")
			hooks[c.name] = e.hookAt(rc, keys[c.name], tamperingProxy(t, rc.url, c.alter), "/hooks/"+c.name, []string{domain.NoticeGrantRevoked})
			e.revokeNow(keys[c.name], "collector")
		}
		if res := e.drain(t); res["drained"] != float64(3) || res["sent"] != float64(1) || res["failed"] != float64(2) {
			t.Fatalf("drain: %v, want 3 drained, 1 sent, 2 failed", res)
		}
		for _, c := range cases {
			row := e.webhookRow(keys[c.name], domain.NoticeGrantRevoked)
			attempts := 1
			if !c.verified {
				attempts = 3
			}
			for _, v := range rc.verdictsAt("/hooks/"+c.name, attempts) {
				if v.ID != row["id"] || v.Verified != c.verified {
					t.Errorf("%s: delivery %+v of row %v, want verified %v", c.name, v, row["id"], c.verified)
				}
				if !c.verified && (v.ErrorName != "WebhookVerificationError" || v.Error != "No matching signature found") {
					t.Errorf("%s: the library said %s: %s, want no matching signature", c.name, v.ErrorName, v.Error)
				}
			}
			wantStatus, wantCode := domain.DeliverySent, float64(204)
			if !c.verified {
				wantStatus, wantCode = domain.DeliveryFailed, 400
			}
			if row["delivery_status"] != wantStatus {
				t.Errorf("%s: row %v, want %s", c.name, row["delivery_status"], wantStatus)
			}
			ds := e.do("GET", "/v1/webhooks/"+hooks[c.name]+"/deliveries", keys[c.name], nil).JSON(t)["deliveries"].([]any)
			if len(ds) != attempts {
				t.Fatalf("%s: attempts listed %v, want %d", c.name, ds, attempts)
			}
			for _, d := range ds {
				if d.(map[string]any)["status_code"] != wantCode {
					t.Errorf("%s: attempt %v, want status %v", c.name, d, wantCode)
				}
			}
		}
	})
}

// Every attempt is signed at its own time (CONTRACT.md: webhook-timestamp
// and the signature are per attempt; the id alone is stable), so the
// library's five-minute tolerance never refuses a retry for the age of the
// row: a row whose three attempts were refused as too old (the service's
// clock an hour behind) is accepted when redelivered an hour later, with the
// same id and the body's timestamp still the row's; and within one drain, an
// attempt refused as stale is followed by one the library accepts once the
// backoff has passed.
func TestStandardWebhooksLibraryTimestampOfEachAttempt(t *testing.T) {
	modules := realprog.NodeModules(t)
	storetest.Each(t, func(t *testing.T, dsn string) {
		// Attempts within a drain retry at once until the test lets the
		// backoff catch the clock up with the wall clock.
		var catchUp atomic.Bool
		var e *env
		e = newNotifyEnv(t, dsn, func(int) time.Duration {
			if catchUp.Load() {
				onWallClock(e)
			}
			return 0
		})
		rc := startNodeReceiver(t, modules)
		wall := time.Now()

		// Redelivery, an hour after the row was queued.
		setClock(e, wall.Add(-time.Hour))
		_, key := e.account("late@example.com")
		e.hookAt(rc, key, rc.url, "/hooks/late", []string{domain.NoticeGrantRevoked})
		e.revokeNow(key, "collector")
		if res := e.drain(t); res["failed"] != float64(1) {
			t.Fatalf("drain an hour behind: %v, want the row failed", res)
		}
		row := e.webhookRow(key, domain.NoticeGrantRevoked)
		for _, v := range rc.verdictsAt("/hooks/late", 3) {
			if v.Verified || v.Error != "Message timestamp too old" || v.ID != row["id"] {
				t.Errorf("attempt an hour behind: %+v, want refused as too old", v)
			}
		}
		onWallClock(e)
		if r := e.do("POST", "/v1/notifications/"+row["id"].(string)+"/redeliver", key, nil); r.Status != 200 {
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
		if res := e.drain(t); res["sent"] != float64(1) {
			t.Fatalf("drain after redeliver: %v", res)
		}
		if v := rc.verdictsAt("/hooks/late", 4)[3]; !v.Verified || v.ID != row["id"] || v.BodyTimestamp != row["created_at"] {
			t.Errorf("redelivery: %+v, want accepted with id %v and the body's timestamp %v", v, row["id"], row["created_at"])
		}
		if row := e.webhookRow(key, domain.NoticeGrantRevoked); row["delivery_status"] != domain.DeliverySent {
			t.Errorf("row after redelivery: %v", row["delivery_status"])
		}

		// A retry within one drain: the backoff before it lets the clock
		// catch up with the wall clock.
		setClock(e, wall.Add(-6*time.Minute))
		_, key = e.account("retry@example.com")
		e.hookAt(rc, key, rc.url, "/hooks/retry", []string{domain.NoticeGrantRevoked})
		e.revokeNow(key, "collector")
		catchUp.Store(true)
		if res := e.drain(t); res["sent"] != float64(1) {
			t.Fatalf("drain with a stale first attempt: %v", res)
		}
		got := rc.verdictsAt("/hooks/retry", 2)
		if got[0].Verified || got[0].Error != "Message timestamp too old" || !got[1].Verified || got[0].ID != got[1].ID {
			t.Errorf("attempts %+v, want the first refused as too old and the retry of the same id accepted", got)
		}
	})
}
