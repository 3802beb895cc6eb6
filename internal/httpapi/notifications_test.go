package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// eachNotifyEnv runs fn on every store with webhook targets on loopback
// allowed (the receivers are httptest servers on 127.0.0.1), and without
// backoff between attempts.
func eachNotifyEnv(t *testing.T, fn func(t *testing.T, e *env)) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// The test dispatcher makes the rows these tests read, many at one
		// instant: its throttle is lifted here, and tested with its
		// defaults in throttles_test.go.
		fn(t, newNotifyEnv(t, dsn, func(int) time.Duration { return 0 }))
	})
}

// newNotifyEnv is eachNotifyEnv's env on dsn, whose webhook attempts within
// a drain wait backoff.
func newNotifyEnv(t *testing.T, dsn string, backoff func(n int) time.Duration) *env {
	t.Helper()
	return newEnvWith(t, dsn, envOptions{config: func(c *config.Config) {
		c.WebhookAllowPrivate, c.CronSecret = true, "cron-secret"
		c.TestNotifyLimitPerAccount, c.TestNotifyLimitGlobal = 1e6, 1e6
	}, webhookBackoff: backoff})
}

// notices lists every row of the account, following next_cursor, and checks
// each page against the rules of the list.
func (e *env) notices(key, query string, limit int) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	cursor := ""
	for range 1000 {
		q := "?limit=" + strconv.Itoa(limit) + query
		if cursor != "" {
			q += "&cursor=" + urlQueryEscape(cursor)
		}
		r := e.do("GET", "/v1/notifications"+q, key, nil)
		if r.Status != 200 {
			e.t.Fatalf("GET /v1/notifications%s: %d %s", q, r.Status, r.Body)
		}
		var page struct {
			Notifications []map[string]any `json:"notifications"`
			NextCursor    *string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, page.Notifications...)
		if len(page.Notifications) < limit {
			if page.NextCursor != nil {
				e.t.Fatalf("a page of %d (< %d) has next_cursor %q", len(page.Notifications), limit, *page.NextCursor)
			}
			return out
		}
		if page.NextCursor == nil || *page.NextCursor != page.Notifications[limit-1]["created_at"] {
			e.t.Fatalf("a full page's next_cursor = %v, want the created_at of its last row", page.NextCursor)
		}
		cursor = *page.NextCursor
	}
	e.t.Fatal("more than 1000 pages")
	return nil
}

func urlQueryEscape(s string) string { return strings.NewReplacer("+", "%2B", ":", "%3A").Replace(s) }

// rowsOf keeps the rows of type typ, by channel.
func rowsOf(rows []map[string]any, typ string) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, r := range rows {
		if r["type"] == typ {
			out[r["channel"].(string)] = append(out[r["channel"].(string)], r)
		}
	}
	return out
}

// receiver is a webhook endpoint in the test: it verifies every delivery
// with the Standard Webhooks reference library and answers what status
// says.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	status func(n int) int // the answer to the n-th delivery (from 1)
	got    []delivered
}

type delivered struct {
	ID, Timestamp string
	Body          map[string]any
	Verified      bool
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	rc := &receiver{t: t, status: status}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		verified := false
		if rc.secret != "" {
			wh, err := standardwebhooks.NewWebhook(rc.secret)
			// The test clock is days behind the wall clock the library's
			// tolerance reads: the timestamp is checked by the test instead.
			verified = err == nil && wh.VerifyIgnoringTimestamp(body, r.Header) == nil
		}
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		rc.got = append(rc.got, delivered{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"), Body: m, Verified: verified})
		n := len(rc.got)
		rc.mu.Unlock()
		w.WriteHeader(rc.status(n))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivered {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func always(code int) func(int) int { return func(int) int { return code } }

// register makes rc an endpoint of key's account for types (nil: default).
func (e *env) register(key string, rc *receiver, types []string) map[string]any {
	e.t.Helper()
	body := map[string]any{"url": rc.srv.URL + "/hook"}
	if types != nil {
		body["types"] = types
	}
	r := e.do("POST", "/v1/webhooks", key, body)
	if r.Status != 201 {
		e.t.Fatalf("POST /v1/webhooks: %d %s", r.Status, r.Body)
	}
	m := r.JSON(e.t)
	rc.mu.Lock()
	rc.secret = m["secret"].(string)
	rc.mu.Unlock()
	return m
}

func (e *env) drain(t *testing.T) map[string]any {
	t.Helper()
	r := e.do("POST", "/v1/internal/cron/webhooks", "", nil, "X-Cron-Secret", e.cfg.CronSecret)
	if r.Status != 200 {
		t.Fatalf("drain: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["webhooks"].(map[string]any)
}

func (e *env) revoke(t *testing.T, key, subagent string) string {
	t.Helper()
	id := grantIDOf(e.grant(key, map[string]any{"subagent": subagent, "expires_at": inOneHour, "max_tool_calls": 10}))
	if r := e.do("POST", "/v1/grants/"+id+"/revoke", key, map[string]any{"subagent": subagent}); r.Status != 200 {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	return id
}

// A revoke that revokes writes exactly one grant.revoked row per channel, in
// its transaction; revoking again (already_revoked) writes none.
func TestRevokeWritesOneRowPerChannel(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		e.register(key, newReceiver(t, always(204)), nil)
		id := e.revoke(t, key, "collector")
		got := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)
		want := map[string]string{"in_app": "sent", "email": "queued", "webhook": "queued"}
		if len(got) != len(want) {
			t.Fatalf("grant.revoked rows by channel: %v", got)
		}
		for ch, status := range want {
			if len(got[ch]) != 1 || got[ch][0]["delivery_status"] != status || got[ch][0]["severity"] != "warning" {
				t.Errorf("%s rows: %v, want one %s row of severity warning", ch, got[ch], status)
			}
		}
		if got["in_app"][0]["sent_at"] == nil || got["email"][0]["sent_at"] != nil {
			t.Errorf("sent_at: in_app %v, email %v", got["in_app"][0]["sent_at"], got["email"][0]["sent_at"])
		}
		again := e.do("POST", "/v1/grants/"+id+"/revoke", key, map[string]any{"subagent": "collector"})
		if again.Status != 200 || again.JSON(t)["outcome"] != "already_revoked" {
			t.Fatalf("second revoke: %d %s", again.Status, again.Body)
		}
		if n := len(rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)["in_app"]); n != 1 {
			t.Errorf("after already_revoked: %d in_app rows, want still 1", n)
		}
	})
}

// An account without email gets its email row failed; without an endpoint
// its webhook row is pending.
func TestNoticeRowsOfAnAccountWithoutEmailOrEndpoint(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("")
		e.revoke(t, key, "s")
		got := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)
		if got["email"][0]["delivery_status"] != "failed" || got["webhook"][0]["delivery_status"] != "pending" ||
			got["in_app"][0]["delivery_status"] != "sent" {
			t.Fatalf("rows: %v", got)
		}
	})
}

// A notice's final rows (in_app sent, webhook pending, and the email row of
// an account without email) are stored as one row and expanded when listed
// (docs/decisions/notifications.md "Rows"); each keeps an id of its own that
// redelivery finds. Only the failed email row can be redelivered: it then
// lists once, queued, with the same id and created_at, and its outcome
// settles there.
func TestFinalRowsByIDAndRedelivered(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("")
		e.revoke(t, key, "s")
		before := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)
		redeliver := func(k, id string) response {
			return e.do("POST", "/v1/notifications/"+id+"/redeliver", k, nil)
		}
		for ch, status := range map[string]string{"in_app": "sent", "webhook": "pending"} {
			p := wantProblem(t, redeliver(key, before[ch][0]["id"].(string)), 409, "notification_not_failed")
			if p["delivery_status"] != status {
				t.Errorf("%s row's 409 names %v, want %s", ch, p["delivery_status"], status)
			}
		}
		email := before["email"][0]
		id := email["id"].(string)
		_, otherKey := e.account("")
		wantProblem(t, redeliver(otherKey, id), 404, "notification_not_found")
		// The same stamp with other random bits names no row.
		forged := id[:len(id)-1] + "0"
		if forged == id {
			forged = id[:len(id)-1] + "1"
		}
		wantProblem(t, redeliver(key, forged), 404, "notification_not_found")

		r := redeliver(key, id)
		if r.Status != 200 {
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
		if n := r.JSON(t)["notification"].(map[string]any); n["id"] != id || n["delivery_status"] != "queued" || n["created_at"] != email["created_at"] {
			t.Fatalf("redelivered: %v, want %s queued at %v", n, id, email["created_at"])
		}
		wantProblem(t, redeliver(key, id), 409, "notification_not_failed")
		after := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)
		if len(after["email"]) != 1 || after["email"][0]["id"] != id || after["email"][0]["delivery_status"] != "queued" ||
			after["email"][0]["created_at"] != email["created_at"] {
			t.Fatalf("email rows after redelivery: %v", after["email"])
		}
		for _, ch := range []string{"in_app", "webhook"} {
			if !maps.Equal(after[ch][0], before[ch][0]) {
				t.Errorf("%s row changed: %v, was %v", ch, after[ch][0], before[ch][0])
			}
		}
		// Still no address: the mailer fails it again, and it can go again.
		if res, err := e.app.SendQueuedEmail(context.Background()); err != nil || res.Failed < 1 {
			t.Fatalf("send: %+v %v", res, err)
		}
		if got := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)["email"]; len(got) != 1 || got[0]["delivery_status"] != "failed" {
			t.Fatalf("email rows after the mailer: %v", got)
		}
		if r := redeliver(key, id); r.Status != 200 {
			t.Fatalf("second redeliver: %d %s", r.Status, r.Body)
		}
	})
}

// A notice's rows follow every change to what decides them made since the
// account's last notice (this process remembers what it last read and
// writes only while that still holds): preferences, an endpoint registered,
// an endpoint deleted.
func TestNoticeRowsFollowChangesBetweenNotices(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		status := func(step string, want map[string]string) {
			t.Helper()
			e.revoke(t, key, "s-"+step)
			// Newest first: the rows of the revoke just made lead the list.
			rows := e.notices(key, "", 50)
			got := map[string]string{}
			for _, r := range rows[:min(len(want), len(rows))] {
				if r["type"] == domain.NoticeGrantRevoked {
					got[r["channel"].(string)] = r["delivery_status"].(string)
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: the revoke's rows %v, want %v", step, got, want)
			}
		}
		status("first", map[string]string{"in_app": "sent", "email": "queued", "webhook": "pending"})
		status("again", map[string]string{"in_app": "sent", "email": "queued", "webhook": "pending"})
		if r := e.do("PUT", "/v1/notifications/preferences", key, map[string]any{"preferences": []map[string]any{
			{"type": "grant.revoked", "channel": "email", "digest": true}}}); r.Status != 200 {
			t.Fatalf("PUT preferences: %d %s", r.Status, r.Body)
		}
		status("digest", map[string]string{"in_app": "sent", "email": "suppressed_digest", "webhook": "pending"})
		hook := e.register(key, newReceiver(t, always(204)), nil)
		status("endpoint", map[string]string{"in_app": "sent", "email": "suppressed_digest", "webhook": "queued"})
		if r := e.do("DELETE", "/v1/webhooks/"+hook["id"].(string), key, nil); r.Status/100 != 2 {
			t.Fatalf("DELETE webhook: %d %s", r.Status, r.Body)
		}
		status("no endpoint", map[string]string{"in_app": "sent", "email": "suppressed_digest", "webhook": "pending"})
		if r := e.do("PUT", "/v1/notifications/preferences", key, map[string]any{"preferences": []map[string]any{
			{"type": "grant.revoked", "channel": "in_app", "enabled": false}}}); r.Status != 200 {
			t.Fatalf("PUT preferences: %d %s", r.Status, r.Body)
		}
		status("no in_app", map[string]string{"email": "suppressed_digest", "webhook": "pending"})
	})
}

func TestNotificationPreferences(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		r := e.do("GET", "/v1/notifications/preferences", key, nil)
		if r.Status != 200 {
			t.Fatalf("GET preferences: %d %s", r.Status, r.Body)
		}
		var prefs struct{ Preferences []map[string]any }
		if err := json.Unmarshal(r.Body, &prefs); err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, nt := range domain.NoticeTypes {
			want += len(nt.Channels)
		}
		if len(prefs.Preferences) != want {
			t.Fatalf("%d preference rows, want %d (every type and declared channel)", len(prefs.Preferences), want)
		}
		for _, p := range prefs.Preferences {
			if p["enabled"] != true || p["digest"] != false {
				t.Errorf("default row %v", p)
			}
			if p["type"] == domain.NoticeBreakingChange && p["mandatory"] != true {
				t.Errorf("breaking_change.announce not mandatory: %v", p)
			}
		}

		r = e.do("PUT", "/v1/notifications/preferences", key, map[string]any{"preferences": []map[string]any{
			{"type": "grant.revoked", "channel": "in_app", "enabled": false},
			{"type": "grant.revoked", "channel": "email", "digest": true},
			{"type": "no.such.type", "channel": "email"},
			{"type": "key.created", "channel": "webhook"},
			{"type": "breaking_change.announce", "channel": "email", "enabled": false},
			{"type": "key.expiring_24h", "channel": "email", "digest": true},
		}})
		if r.Status != 200 {
			t.Fatalf("PUT preferences: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		if res["accepted"] != float64(2) {
			t.Errorf("accepted = %v, want 2", res["accepted"])
		}
		var reasons []string
		for _, rej := range res["rejected"].([]any) {
			reasons = append(reasons, rej.(map[string]any)["reason"].(string))
		}
		if !slices.Equal(reasons, []string{"unknown_type", "channel_not_declared", "mandatory_type_cannot_be_disabled", "digest_not_available"}) {
			t.Errorf("rejected reasons = %v", reasons)
		}
		r = e.do("GET", "/v1/notifications/preferences", key, nil)
		_ = json.Unmarshal(r.Body, &prefs)
		for _, p := range prefs.Preferences {
			switch {
			case p["type"] == "grant.revoked" && p["channel"] == "in_app" && p["enabled"] != false,
				p["type"] == "grant.revoked" && p["channel"] == "email" && p["digest"] != true,
				p["type"] == "breaking_change.announce" && p["enabled"] != true:
				t.Errorf("after PUT: %v", p)
			}
		}

		// The preferences decide the next revoke's rows: no in_app row, the
		// email held for the digest.
		e.revoke(t, key, "s")
		got := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)
		if len(got["in_app"]) != 0 || len(got["email"]) != 1 || got["email"][0]["delivery_status"] != "suppressed_digest" ||
			got["email"][0]["digest"] != true {
			t.Fatalf("rows under the preferences: %v", got)
		}

		// Body errors answer 422 and store nothing.
		for _, body := range []any{map[string]any{}, map[string]any{"preferences": []map[string]any{{"channel": "email"}}}} {
			wantProblem(t, e.do("PUT", "/v1/notifications/preferences", key, body), 422, "validation_error")
		}
	})
}

// Pages never lose or repeat a row, even when every row was written at the
// same instant (the test clock stands still): for an account whose rows are
// all final (stored one row per notice, docs/decisions/notifications.md
// "Rows"), and for one whose final rows and queued email rows interleave.
func TestNotificationPagesAcrossEqualTimestamps(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, withEmail := e.account("ops@example.com")
		_, key := e.account("")
		for _, k := range []string{key, withEmail} {
			for range 12 {
				if r := e.do("POST", "/v1/notifications/test", k, map[string]any{"type": "governance.proposed"}); r.Status != 200 {
					t.Fatalf("test: %d %s", r.Status, r.Body)
				}
			}
		}
		for _, k := range []string{key, withEmail} {
			all := e.notices(k, "", 500)
			if len(all) < 36 {
				t.Fatalf("%d rows, want at least 36", len(all))
			}
			for _, limit := range []int{1, 2, 5, 7, 12, 50} {
				paged := e.notices(k, "", limit)
				if len(paged) != len(all) {
					t.Fatalf("limit %d: %d rows, want %d", limit, len(paged), len(all))
				}
				seen := map[any]bool{}
				for i, r := range paged {
					if seen[r["id"]] {
						t.Fatalf("limit %d: row %v repeated", limit, r["id"])
					}
					seen[r["id"]] = true
					if r["id"] != all[i]["id"] {
						t.Fatalf("limit %d: row %d is %v, want %v (newest first)", limit, i, r["id"], all[i]["id"])
					}
					if i > 0 && r["created_at"].(string) >= paged[i-1]["created_at"].(string) {
						t.Fatalf("limit %d: not newest first at %d", limit, i)
					}
				}
			}
		}
		all := e.notices(key, "", 500)
		// ?severity= filters; another value is 422.
		for _, r := range e.notices(key, "&severity=info", 50) {
			if r["severity"] != "info" {
				t.Errorf("severity=info listed %v", r)
			}
		}
		if n := len(e.notices(key, "&severity=critical", 50)); n != 0 {
			t.Errorf("severity=critical listed %d rows", n)
		}
		wantProblem(t, e.do("GET", "/v1/notifications?severity=loud", key, nil), 422, "validation_error")
		wantProblem(t, e.do("GET", "/v1/notifications?cursor=yesterday", key, nil), 422, "validation_error")
		wantProblem(t, e.do("GET", "/v1/notifications?limit=0", key, nil), 422, "validation_error")
		if r := e.do("GET", "/v1/notifications", key, nil); len(r.JSON(t)["notifications"].([]any)) != min(len(all), 50) {
			t.Errorf("default page: %s", r.Body)
		}
	})
}

func TestNotificationTestDispatcher(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		rc := newReceiver(t, always(204))
		e.register(key, rc, nil)
		const body = "test-body-7c1"
		r := e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked", "body": body, "severity": "critical"})
		if r.Status != 200 {
			t.Fatalf("test: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		if fmt.Sprint(res["dispatched"]) != "[in_app email webhook]" {
			t.Errorf("dispatched = %v", res["dispatched"])
		}
		if st := res["delivery_status"].(map[string]any); st["in_app"] != "sent" || st["email"] != "queued" || st["webhook"] != "queued" {
			t.Errorf("delivery_status = %v", st)
		}
		// The severity asked goes into the push, never into the row.
		for _, row := range e.notices(key, "", 50) {
			if row["type"] == "grant.revoked" && row["severity"] != "warning" {
				t.Errorf("row severity %v, want the type's warning", row["severity"])
			}
		}
		e.drain(t)
		got := rc.deliveries()
		if len(got) != 1 || got[0].Body["data"].(map[string]any)["severity"] != "critical" {
			t.Fatalf("push: %+v", got)
		}
		// The body goes into the email, never into the push: the webhook
		// payload carries no text (CONTRACT.md "Notifications").
		if push, _ := json.Marshal(got[0].Body); strings.Contains(string(push), body) {
			t.Errorf("the push carries the body: %s", push)
		}
		if _, err := e.app.SendQueuedEmail(context.Background()); err != nil {
			t.Fatal(err)
		}
		mailed := false
		for _, m := range e.outboxMessages("ops@example.com") {
			mailed = mailed || strings.Contains(m, body)
		}
		if !mailed {
			t.Errorf("no email to ops@example.com carries the body %q", body)
		}
		// An account with email and no endpoint: its final rows (in_app,
		// the pending webhook) are stamped before its queued email, yet the
		// answer still names the channels in the type's order.
		_, noEndpoint := e.account("other@example.com")
		r = e.do("POST", "/v1/notifications/test", noEndpoint, map[string]any{"type": "grant.revoked"})
		if r.Status != 200 {
			t.Fatalf("test: %d %s", r.Status, r.Body)
		}
		res = r.JSON(t)
		if fmt.Sprint(res["dispatched"]) != "[in_app email webhook]" {
			t.Errorf("dispatched without an endpoint = %v", res["dispatched"])
		}
		if st := res["delivery_status"].(map[string]any); st["in_app"] != "sent" || st["email"] != "queued" || st["webhook"] != "pending" {
			t.Errorf("delivery_status without an endpoint = %v", st)
		}
		wantProblem(t, e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "no.such"}), 400, "unknown_notification_type")
		wantProblem(t, e.do("POST", "/v1/notifications/test", key, map[string]any{}), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked", "severity": "loud"}), 422, "validation_error")
	})
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.Env = "production" })
		_, key := e.account("prod-user@example.com")
		_, adminKey := e.adminAccount("prod-root@example.com")
		wantProblem(t, e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked"}), 403,
			"test_endpoint_requires_admin_in_production")
		if r := e.do("POST", "/v1/notifications/test", adminKey, map[string]any{"type": "grant.revoked"}); r.Status != 200 {
			t.Fatalf("administrator in production: %d %s", r.Status, r.Body)
		}
	})
}

// outboxMessages reads the messages in the environment's outbox sent to to.
func (e *env) outboxMessages(to string) []string {
	e.t.Helper()
	entries, err := os.ReadDir(e.outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".eml") || strings.HasPrefix(ent.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(e.outbox + "/" + ent.Name())
		if err != nil {
			e.t.Fatal(err)
		}
		if strings.Contains(string(b), "To: <"+to+">") || strings.Contains(string(b), "To: "+to) {
			out = append(out, string(b))
		}
	}
	return out
}

func TestDigestRun(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("ops@example.com")
		_, adminKey := e.adminAccount("root@example.com")
		r := e.do("PUT", "/v1/notifications/preferences", key, map[string]any{"preferences": []map[string]any{
			{"type": "grant.revoked", "channel": "email", "digest": true},
			{"type": "governance.proposed", "channel": "email", "digest": true},
		}})
		if r.Status != 200 || r.JSON(t)["accepted"] != float64(2) {
			t.Fatalf("PUT: %d %s", r.Status, r.Body)
		}
		e.revoke(t, key, "a")
		e.revoke(t, key, "b")
		e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "governance.proposed"})

		wantProblem(t, e.do("POST", "/v1/notifications/digest/run", key, map[string]any{"user_id": user}), 403, "admin_only")
		wantProblem(t, e.do("POST", "/v1/notifications/digest/run", adminKey, map[string]any{}), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/notifications/digest/run", adminKey, map[string]any{"user_id": "00000000-0000-0000-0000-000000000000"}), 404, "account_not_found")

		before := len(e.outboxMessages("ops@example.com"))
		r = e.do("POST", "/v1/notifications/digest/run", adminKey, map[string]any{"user_id": user})
		if r.Status != 200 {
			t.Fatalf("digest: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		if res["digest_sent"] != true || res["user_id"] != user ||
			fmt.Sprint(res["grouped"]) != "map[governance.proposed:1 grant.revoked:2]" {
			t.Fatalf("digest: %s", r.Body)
		}
		msgs := e.outboxMessages("ops@example.com")
		if len(msgs) != before+1 {
			t.Fatalf("%d messages after the digest, want %d", len(msgs), before+1)
		}
		digest := msgs[len(msgs)-1]
		for _, want := range []string{"digest", "grant.revoked", "2", "governance.proposed"} {
			if !strings.Contains(digest, want) {
				t.Errorf("digest email lacks %q:\n%s", want, digest)
			}
		}
		// A second run in a row sends nothing.
		r = e.do("POST", "/v1/notifications/digest/run", adminKey, map[string]any{"user_id": user})
		if res := r.JSON(t); res["digest_sent"] != false || len(res["grouped"].(map[string]any)) != 0 {
			t.Fatalf("second digest: %s", r.Body)
		}
		if n := len(e.outboxMessages("ops@example.com")); n != before+1 {
			t.Errorf("the second digest mailed: %d messages", n)
		}
	})
}

// Queued email goes through the mailer: sent, or failed after the mailer's
// tries; a failed row is redelivered.
func TestNotificationEmailThroughTheMailer(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		e.revoke(t, key, "s")
		res, err := e.app.SendQueuedEmail(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// key.created of the account's first key, and grant.revoked.
		if res.Sent != 2 || res.Failed != 0 {
			t.Fatalf("send: %+v", res)
		}
		rows := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)
		if rows["email"][0]["delivery_status"] != "sent" || rows["email"][0]["sent_at"] == nil {
			t.Fatalf("email row: %v", rows["email"])
		}
		found := false
		for _, m := range e.outboxMessages("ops@example.com") {
			found = found || (strings.Contains(m, "Grant revoked") && strings.Contains(m, "subagent: s"))
		}
		if !found {
			t.Fatal("no grant.revoked email in the outbox")
		}

		// A mail server that keeps refusing for now: the row fails after
		// the mailer's three tries.
		smtpd := &mailtest.Server{RcptError: &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}}
		smtpd.Start(t, nil)
		failing, err := mail.New("smtp://"+smtpd.Addr(), mail.Options{Backoff: func(int) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		working := e.mail.use(failing)
		e.revoke(t, key, "t")
		if res, err := e.app.SendQueuedEmail(context.Background()); err != nil || res.Failed != 1 {
			t.Fatalf("send to a refusing server: %+v %v", res, err)
		}
		var failed map[string]any
		for _, r := range rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)["email"] {
			if r["delivery_status"] == "failed" {
				failed = r
			}
		}
		if failed == nil {
			t.Fatal("no failed email row")
		}
		fid := failed["id"].(string)
		wantProblem(t, e.do("POST", "/v1/notifications/"+rows["email"][0]["id"].(string)+"/redeliver", key, nil), 409, "notification_not_failed")
		_, otherKey := e.account("other@example.com")
		wantProblem(t, e.do("POST", "/v1/notifications/"+fid+"/redeliver", otherKey, nil), 404, "notification_not_found")
		r := e.do("POST", "/v1/notifications/"+fid+"/redeliver", key, nil)
		if r.Status != 200 || r.JSON(t)["notification"].(map[string]any)["delivery_status"] != "queued" {
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
		e.mail.use(working)
		if res, err := e.app.SendQueuedEmail(context.Background()); err != nil || res.Sent < 1 {
			t.Fatalf("send after redeliver: %+v %v", res, err)
		}
		for _, r := range rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)["email"] {
			if r["id"] == fid && r["delivery_status"] != "sent" {
				t.Fatalf("redelivered row: %v", r)
			}
		}
	})
}

func TestWebhookRegistration(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		_, otherKey := e.account("other@example.com")
		rc := newReceiver(t, always(204))
		created := e.register(key, rc, nil)
		if !strings.HasPrefix(created["secret"].(string), "whsec_") ||
			fmt.Sprint(created["types"]) != fmt.Sprint(slices.Sorted(slices.Values(domain.WebhookTypes()))) {
			t.Fatalf("created: %v", created)
		}
		id := created["id"].(string)
		r := e.do("GET", "/v1/webhooks", key, nil)
		if strings.Contains(string(r.Body), "whsec_") || strings.Contains(string(r.Body), "secret") {
			t.Fatalf("the list shows a secret: %s", r.Body)
		}
		if hooks := r.JSON(t)["webhooks"].([]any); len(hooks) != 1 || hooks[0].(map[string]any)["id"] != id {
			t.Fatalf("list: %s", r.Body)
		}
		if hooks := e.do("GET", "/v1/webhooks", otherKey, nil).JSON(t)["webhooks"].([]any); len(hooks) != 0 {
			t.Fatalf("another account sees %v", hooks)
		}
		for _, c := range []struct {
			body any
			code string
		}{
			{map[string]any{}, "validation_error"},
			{map[string]any{"url": rc.srv.URL, "types": []string{"key.created"}}, "validation_error"},
			{map[string]any{"url": rc.srv.URL, "types": []string{"no.such"}}, "validation_error"},
			{map[string]any{"url": rc.srv.URL, "types": []string{}}, "validation_error"},
			{map[string]any{"url": "ftp://example.com/x"}, "webhook_url_refused"},
			{map[string]any{"url": "not a url"}, "webhook_url_refused"},
		} {
			wantProblem(t, e.do("POST", "/v1/webhooks", key, c.body), 422, c.code)
		}
		wantProblem(t, e.do("GET", "/v1/webhooks/"+id+"/deliveries", otherKey, nil), 404, "webhook_not_found")
		wantProblem(t, e.do("DELETE", "/v1/webhooks/"+id, otherKey, nil), 404, "webhook_not_found")
		if r := e.do("GET", "/v1/webhooks/"+id+"/deliveries", key, nil); r.Status != 200 || len(r.JSON(t)["deliveries"].([]any)) != 0 {
			t.Fatalf("deliveries: %d %s", r.Status, r.Body)
		}
		if r := e.do("DELETE", "/v1/webhooks/"+id, key, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("DELETE", "/v1/webhooks/"+id, key, nil), 404, "webhook_not_found")
		for range 10 {
			e.register(key, rc, []string{"grant.revoked"})
		}
		wantProblem(t, e.do("POST", "/v1/webhooks", key, map[string]any{"url": rc.srv.URL}), 409, "too_many_webhooks")
	})
	// Without --webhook-allow-private, internal targets are refused.
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, nil)
		_, key := e.account("strict@example.com")
		for _, u := range []string{"http://127.0.0.1:8080/h", "http://localhost/h", "http://10.0.0.1/h", "http://169.254.169.254/latest",
			"http://[::1]/h", "http://[::ffff:127.0.0.1]/h", "http://0.0.0.0/h", "http://192.168.1.10/h"} {
			m := wantProblem(t, e.do("POST", "/v1/webhooks", key, map[string]any{"url": u}), 422, "webhook_url_refused")
			if m["url"] != u {
				t.Errorf("%s: problem names url %v", u, m["url"])
			}
		}
		if n := e.count("webhooks"); n != 0 {
			t.Errorf("%d webhooks stored after refusals", n)
		}
	})
}

// Deliveries are signed per Standard Webhooks (checked with the reference
// library), thin, and retried: a receiver answering 500 three times fails
// the row within one drain; redelivered, it is sent with the same id.
func TestWebhookDeliveryRetriesAndRedelivery(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("ops@example.com")
		rc := newReceiver(t, func(n int) int {
			if n <= 3 {
				return 500
			}
			return 204
		})
		hook := e.register(key, rc, []string{"grant.revoked"})
		gid := e.revoke(t, key, "collector")
		res := e.drain(t)
		if res["drained"] != float64(1) || res["failed"] != float64(1) || res["sent"] != float64(0) {
			t.Fatalf("drain against 500s: %v", res)
		}
		got := rc.deliveries()
		if len(got) != 3 {
			t.Fatalf("%d attempts, want 3", len(got))
		}
		row := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)["webhook"][0]
		if row["delivery_status"] != "failed" {
			t.Fatalf("row after three 500s: %v", row)
		}
		for _, d := range got {
			if d.ID != row["id"] || !d.Verified {
				t.Fatalf("delivery %+v: want id %v and a signature the reference library verifies", d, row["id"])
			}
			if d.Timestamp != strconv.FormatInt(e.clock.Now().Unix(), 10) {
				t.Errorf("webhook-timestamp %s, want the clock's %d", d.Timestamp, e.clock.Now().Unix())
			}
			data := d.Body["data"].(map[string]any)
			subject := data["subject"].(map[string]any)
			if d.Body["type"] != "grant.revoked" || data["notification_id"] != row["id"] || data["user_id"] != user ||
				data["severity"] != "warning" || subject["grant_id"] != gid || subject["subagent"] != "collector" {
				t.Errorf("push body %v", d.Body)
			}
		}
		ds := e.do("GET", "/v1/webhooks/"+hook["id"].(string)+"/deliveries", key, nil).JSON(t)["deliveries"].([]any)
		if len(ds) != 3 {
			t.Fatalf("deliveries listed: %v", ds)
		}
		for _, d := range ds {
			if d := d.(map[string]any); d["status_code"] != float64(500) || d["error"] == nil {
				t.Errorf("attempt %v", d)
			}
		}
		if r := e.do("POST", "/v1/notifications/"+row["id"].(string)+"/redeliver", key, nil); r.Status != 200 {
			t.Fatalf("redeliver: %d %s", r.Status, r.Body)
		}
		if res := e.drain(t); res["sent"] != float64(1) {
			t.Fatalf("drain after redeliver: %v", res)
		}
		got = rc.deliveries()
		if len(got) != 4 || got[3].ID != row["id"] || !got[3].Verified {
			t.Fatalf("redelivery: %+v", got)
		}
		if row := rowsOf(e.notices(key, "", 50), domain.NoticeGrantRevoked)["webhook"][0]; row["delivery_status"] != "sent" || row["sent_at"] == nil {
			t.Fatalf("row after redelivery: %v", row)
		}
		if res := e.drain(t); res["drained"] != float64(0) {
			t.Fatalf("an empty drain: %v", res)
		}
		resp, err := e.srv.Client().Get(e.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`auditchain_webhook_attempts_total{outcome="failed"} 3`, `auditchain_webhook_attempts_total{outcome="ok"} 1`,
			`auditchain_webhook_rows_total{outcome="failed"} 1`, `auditchain_webhook_rows_total{outcome="sent"} 1`} {
			if !strings.Contains(string(metrics), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// A 429 for the daily quota writes one rate.limit_hit notice per account and
// hour, though the request was refused.
func TestRateLimitHitOncePerHour(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 1 })
		_, key := e.account("")
		appendN := func() {
			tip := e.do("GET", "/v1/chain/tip", key, nil).JSON(t)
			seq := float64(0)
			if s, ok := tip["sequence"].(float64); ok {
				seq = s + 1
			}
			body := map[string]any{"event_id": fmt.Sprintf("evt-%d", time.Now().UnixNano()), "event_type": "tool_call", "sequence": seq}
			if h := tip["payload_hash"]; h != nil {
				body["prev_hash"] = h
			}
			r := e.do("POST", "/v1/events", key, body)
			if r.Status != 201 && r.Status != 200 && r.Status != 429 {
				t.Fatalf("append: %d %s", r.Status, r.Body)
			}
		}
		appendN()
		for range 3 {
			appendN() // over the quota: 429
		}
		hits := rowsOf(e.notices(key, "", 50), domain.NoticeRateLimitHit)
		if len(hits["in_app"]) != 1 || len(hits["email"]) != 1 {
			t.Fatalf("rate.limit_hit rows after three 429s: %v", hits)
		}
		e.clock.Advance(time.Hour)
		appendN()
		if n := len(rowsOf(e.notices(key, "", 50), domain.NoticeRateLimitHit)["in_app"]); n != 2 {
			t.Fatalf("an hour later: %d in_app rows, want 2", n)
		}
	})
}

// Proposals created and enacted, and keys created, write their notices.
func TestEmittersWriteTheirNotices(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("ops@example.com")
		other := e.govIdentity(user, "reviewer")
		prop := e.govPropose(key, govDenyBody("collector", nil))
		e.govTransition(other.token, prop["proposal_id"].(string), "ratify")
		e.govTransition(key, prop["proposal_id"].(string), "enact")
		rows := e.notices(key, "", 50)
		if n := len(rowsOf(rows, domain.NoticeKeyCreated)["in_app"]); n != 2 {
			t.Errorf("key.created in_app rows = %d, want 2 (the first key and the reviewer's)", n)
		}
		for _, typ := range []string{domain.NoticeGovernanceProposed, domain.NoticeGovernanceEnacted} {
			got := rowsOf(rows, typ)
			if len(got["in_app"]) != 1 || len(got["email"]) != 1 || len(got["webhook"]) != 1 {
				t.Errorf("%s rows: %v, want one per channel", typ, got)
			}
		}
	})
}
