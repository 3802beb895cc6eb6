package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

func (e *env) cron(t *testing.T, job string) map[string]any {
	t.Helper()
	r := e.do("POST", "/v1/internal/cron/"+job, "", nil, "X-Cron-Secret", e.cfg.CronSecret)
	if r.Status != 200 {
		t.Fatalf("cron %s: %d %s", job, r.Status, r.Body)
	}
	return r.JSON(t)
}

func appKeyRequest(expires *time.Time) api.CreateKeyRequest {
	if expires == nil {
		return api.CreateKeyRequest{}
	}
	return api.CreateKeyRequest{ExpiresAt: new(domain.FormatTimestamp(*expires))}
}

func swept(t *testing.T, m map[string]any) string {
	t.Helper()
	return fmt.Sprint(m["swept"])
}

// grant-expiry notifies each live grant expiring within a day once per grant
// and expires_at; a second run notifies nobody.
func TestGrantExpiryJob(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("ops@example.com")
		at := func(d time.Duration) string { return e.clock.Now().Add(d).Format(time.RFC3339) }
		soon := grantIDOf(e.grant(key, map[string]any{"subagent": "a", "expires_at": at(2 * time.Hour), "max_tool_calls": 5}))
		e.grant(key, map[string]any{"subagent": "b", "expires_at": at(72 * time.Hour), "max_tool_calls": 5})
		gone := grantIDOf(e.grant(key, map[string]any{"subagent": "c", "expires_at": at(time.Hour), "max_tool_calls": 5}))
		if r := e.do("POST", "/v1/grants/"+gone+"/revoke", key, map[string]any{"subagent": "c"}); r.Status != 200 {
			t.Fatal(r.Status)
		}
		spent := grantIDOf(e.grant(key, map[string]any{"subagent": "d", "expires_at": at(3 * time.Hour), "max_tool_calls": 1}))
		if r := e.do("POST", "/v1/grants/"+spent+"/use", key, map[string]any{"subagent": "d", "n": 1}); r.Status != 200 {
			t.Fatalf("use: %d %s", r.Status, r.Body)
		}
		if got := swept(t, e.cron(t, "grant-expiry")); got != "map[expiring:1 notified:1 users:1]" {
			t.Fatalf("first run: %s", got)
		}
		rows := rowsOf(e.notices(key, "", 100), domain.NoticeGrantExpiring24h)
		if len(rows["in_app"]) != 1 || len(rows["email"]) != 1 || len(rows["webhook"]) != 1 {
			t.Fatalf("grant.expiring_24h rows: %v", rows)
		}
		if got := swept(t, e.cron(t, "grant-expiry")); got != "map[expiring:1 notified:0 users:0]" {
			t.Fatalf("second run: %s", got)
		}
		// The same grant id again with another expiry is another notice.
		if r := e.do("POST", "/v1/grants/"+soon+"/revoke", key, map[string]any{"subagent": "a"}); r.Status != 200 {
			t.Fatal(r.Status)
		}
		e.grant(key, map[string]any{"grant_id": soon, "subagent": "a", "expires_at": at(5 * time.Hour), "max_tool_calls": 5})
		if got := swept(t, e.cron(t, "grant-expiry")); got != "map[expiring:1 notified:1 users:1]" {
			t.Fatalf("after a new expiry: %s", got)
		}
	})
}

// key-expiry warns once per key and window: 7 days, then 24 hours.
func TestKeyExpiryJob(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("ops@example.com")
		exp := e.clock.Now().Add(72 * time.Hour)
		if _, err := e.app.CreateKey(context.Background(), user, appKeyRequest(&exp)); err != nil {
			t.Fatal(err)
		}
		late := e.clock.Now().Add(10 * time.Hour)
		if _, err := e.app.CreateKey(context.Background(), user, appKeyRequest(&late)); err != nil {
			t.Fatal(err)
		}
		if got := swept(t, e.cron(t, "key-expiry")); got != "map[scanned:2 warned_24h:1 warned_7d:1]" {
			t.Fatalf("first run: %s", got)
		}
		if got := swept(t, e.cron(t, "key-expiry")); got != "map[scanned:2 warned_24h:0 warned_7d:0]" {
			t.Fatalf("second run: %s", got)
		}
		e.clock.Advance(50 * time.Hour) // the first key now expires within a day; the second has expired
		if got := swept(t, e.cron(t, "key-expiry")); got != "map[scanned:1 warned_24h:1 warned_7d:0]" {
			t.Fatalf("a day before the first key's expiry: %s", got)
		}
		if got := swept(t, e.cron(t, "key-expiry")); got != "map[scanned:1 warned_24h:0 warned_7d:0]" {
			t.Fatalf("again: %s", got)
		}
		rows := e.notices(key, "", 100)
		if n7, n24 := len(rowsOf(rows, domain.NoticeKeyExpiring7d)["in_app"]), len(rowsOf(rows, domain.NoticeKeyExpiring24h)["in_app"]); n7 != 1 || n24 != 2 {
			t.Fatalf("in_app rows: 7d %d, 24h %d; want 1 and 2", n7, n24)
		}
	})
}

// The digest job sends each account's digest once; a second run sends none.
func TestDigestJob(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		for _, email := range []string{"a@example.com", "b@example.com"} {
			_, key := e.account(email)
			e.do("PUT", "/v1/notifications/preferences", key, map[string]any{"preferences": []map[string]any{
				{"type": "grant.revoked", "channel": "email", "digest": true}}})
			e.revoke(t, key, "s")
		}
		if got := swept(t, e.cron(t, "digest")); got != "map[digests_sent:2 grouped:map[grant.revoked:2] users:2]" {
			t.Fatalf("first run: %s", got)
		}
		if got := swept(t, e.cron(t, "digest")); got != "map[digests_sent:0 grouped:map[] users:0]" {
			t.Fatalf("second run: %s", got)
		}
	})
}

// The operator digest counts the 48-hour window from midnight and mails it
// to --operator-email; without one it is not_configured.
func TestAdminDigestJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.CronSecret, c.OperatorEmail = "cron-secret", "operator@example.com" })
		user, key := e.account("ops@example.com")
		e.key(user, appKeyRequest(nil))
		id := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5}))
		e.do("POST", "/v1/grants/"+id+"/revoke", key, map[string]any{"subagent": "s"})
		e.do("GET", "/v1/grants/status?subagent=s", key, nil, "X-SVC-Surface", "cli")
		m := e.cron(t, "admin-digest")
		c := m["counts"].(map[string]any)
		want := map[string]any{"accounts_new": 1.0, "accounts_total": 1.0, "keys_created": 2.0, "grants_created": 1.0, "grants_revoked": 1.0,
			"errors": nil, "errors_status": "not recorded", "mcp_calls": nil, "mcp_calls_status": "not recorded", "deliveries_failed": nil,
			"window_hours": 48.0, "since": "2026-11-19T00:00:00.000000+00:00", "until": "2026-11-21T12:00:00.000000+00:00",
			"calls_total": 3.0, "webhook_queue_pending_now": 0.0}
		for k, v := range want {
			if c[k] != v {
				t.Errorf("counts.%s = %v, want %v", k, c[k], v)
			}
		}
		if fmt.Sprint(c["calls_by_capability"]) != "map[grants:3]" {
			t.Errorf("calls_by_capability = %v", c["calls_by_capability"])
		}
		if m["delivery_status"] != "sent" || m["recipient"] != "operator@example.com" || m["provider"] != "outbox" {
			t.Fatalf("delivery: %v", m)
		}
		msgs := e.outboxMessages("operator@example.com")
		if len(msgs) != 1 || !strings.Contains(msgs[0], "operator summary") || !strings.Contains(msgs[0], "not recorded") {
			t.Fatalf("operator email: %v", msgs)
		}
	})
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.CronSecret = "cron-secret" })
		m := e.cron(t, "admin-digest")
		if m["delivery_status"] != "not_configured" || m["recipient"] != nil {
			t.Fatalf("without an operator email: %v", m)
		}
	})
}

// The dashboard's figures are exact after a known sequence of calls, and
// after the process flushed its meter and a new one started.
func TestDashboardUsage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, nil)
		_, key := e.account("")
		if r := e.do("POST", "/v1/events", key, map[string]any{"event_id": "evt-1", "event_type": "tool_call", "sequence": 0}); r.Status != 200 {
			t.Fatalf("append: %d %s", r.Status, r.Body)
		}
		id := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5}))
		e.do("GET", "/v1/grants/status?subagent=s", key, nil, "X-SVC-Surface", "sdk")
		e.do("GET", "/v1/grants/status?subagent=nobody", key, nil, "X-SVC-Surface", "hook")
		e.do("POST", "/v1/grants/"+id+"/use", key, map[string]any{"subagent": "s", "n": 2})
		e.do("GET", "/v1/keys", key, nil, "X-SVC-Surface", "carrier-pigeon") // no surface: counted as rest
		check := func(e *env, label string, extraDashboardCalls int) {
			t.Helper()
			r := e.do("GET", "/v1/dashboard/usage", key, nil)
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", label, r.Status, r.Body)
			}
			u := r.JSON(t)
			calls := u["calls_today"].(map[string]any)
			none := 1 + extraDashboardCalls // GET /v1/keys, and the dashboard calls themselves
			if got, want := fmt.Sprint(calls["by_capability"]), fmt.Sprintf("map[events:write:1 grants:4 none:%d]", none); got != want {
				t.Errorf("%s: by_capability %s, want %s", label, got, want)
			}
			if got, want := fmt.Sprint(calls["by_surface"]), fmt.Sprintf("map[hook:1 rest:%d sdk:1]", 3+none); got != want {
				t.Errorf("%s: by_surface %s, want %s", label, got, want)
			}
			if got := fmt.Sprint(u["gate"]); got != "map[authorized:1 no_grant:1]" {
				t.Errorf("%s: gate %s", label, got)
			}
			if got := fmt.Sprint(u["grants"]); got != "map[expired:0 live:1 revoked:0 uses_today:2]" {
				t.Errorf("%s: grants %s", label, got)
			}
			// total and tree_size hold the grant's chain event too; today
			// counts the client's events against the quota.
			if got := fmt.Sprint(u["events"]); got != "map[quota_limit:10000 quota_remaining:9999 today:1 total:2]" {
				t.Errorf("%s: events %s", label, got)
			}
			if u["tree_size"] != 2.0 || u["day"] != "2026-11-21" {
				t.Errorf("%s: %s", label, r.Body)
			}
		}
		check(e, "before a flush", 1)
		if err := e.app.FlushUsage(context.Background()); err != nil {
			t.Fatal(err)
		}
		check(e, "after a flush", 2)
		// A new process over the same store; the first flushes on its way out,
		// as serve's shutdown does.
		if err := e.app.FlushUsage(context.Background()); err != nil {
			t.Fatal(err)
		}
		e2 := newEnv(t, dsn, nil)
		check(e2, "after a restart", 3)
	})
}

// With the scheduler running, a queued webhook row is drained soon (the
// kick), and GET /v1/internal/jobs shows every job, its cadence, next run
// and this replica's last run.
func TestSchedulerDrainsSoonAndShowsItsJobs(t *testing.T) {
	eachNotifyEnv(t, func(t *testing.T, e *env) {
		r := e.do("GET", "/v1/internal/jobs", "", nil, "X-Cron-Secret", e.cfg.CronSecret)
		if m := r.JSON(t); r.Status != 200 || m["scheduler"] != false {
			t.Fatalf("jobs before the scheduler: %d %s", r.Status, r.Body)
		}
		started := time.Now()
		if err := e.app.Start(context.Background(), app.Loops{Scheduler: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.app.Close)

		_, key := e.account("ops@example.com")
		rc := newReceiver(t, always(204))
		e.register(key, rc, []string{"grant.revoked"})
		e.revoke(t, key, "s")
		deadline := time.Now().Add(10 * time.Second)
		for len(rc.deliveries()) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // waiting on a condition the scheduler meets on its own clock
		}
		if len(rc.deliveries()) != 1 {
			t.Fatalf("%d deliveries within 10 s of the row being queued, want 1", len(rc.deliveries()))
		}

		var body struct {
			Scheduler bool
			Jobs      []struct {
				Job, Cadence string
				NextRun      *string `json:"next_run"`
				ThisReplica  *struct {
					Trigger, Outcome string
				} `json:"this_replica"`
			}
		}
		// The delivery arrived; the run ends once its rows are settled.
		for {
			r = e.do("GET", "/v1/internal/jobs", "", nil, "X-Cron-Secret", e.cfg.CronSecret)
			if err := json.Unmarshal(r.Body, &body); err != nil || !body.Scheduler {
				t.Fatalf("jobs: %s", r.Body)
			}
			done := false
			for _, j := range body.Jobs {
				done = done || (j.Job == "webhooks" && j.ThisReplica != nil)
			}
			if done || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cadence := map[string]string{}
		for _, j := range body.Jobs {
			cadence[j.Job] = j.Cadence
			if j.NextRun == nil {
				t.Errorf("%s: no next_run", j.Job)
			}
			// The kick drains the row, unless the test ran across one of the
			// job's own 2-minute due times (real clock): then that scheduled
			// run may have come first and drained it.
			crossedDueTime := time.Now().After(started.Truncate(2 * time.Minute).Add(2 * time.Minute))
			if j.Job == "webhooks" && (j.ThisReplica == nil || j.ThisReplica.Outcome != "ok" ||
				(j.ThisReplica.Trigger != "kick" && !(crossedDueTime && j.ThisReplica.Trigger == "schedule"))) {
				t.Errorf("webhooks' last run here: %+v", j.ThisReplica)
			}
		}
		want := map[string]string{"webhooks": "every 2m0s", "digest": "daily at 14:00 UTC", "grant-expiry": "every 6h0m0s",
			"key-expiry": "every 1h0m0s", "admin-digest": "daily at 07:00 UTC", "anchor": "every 1h0m0s",
			"approval-expiry": "every 1m0s"}
		if fmt.Sprint(cadence) != fmt.Sprint(want) {
			t.Errorf("cadences %v, want %v", cadence, want)
		}
		wantProblem(t, e.do("GET", "/v1/internal/jobs", "", nil), 401, "unauthorized")
	})
}
