package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

// The test clock starts at 2026-11-21T12:00:00Z (harness_test.go).
const (
	inOneHour    = "2026-11-21T13:00:00+00:00"
	inTwoHours   = "2026-11-21T14:00:00+00:00"
	inThreeHours = "2026-11-21T15:00:00+00:00"
	anHourAgo    = "2026-11-21T11:00:00+00:00"
	in400Days    = "2027-12-26T12:00:00+00:00"
)

// snapshot is what a refused request must leave unchanged.
type snapshot struct {
	grants int64
	events any
	tip    any
}

func (e *env) snap(user, key string) snapshot {
	e.t.Helper()
	n, err := e.store.CountGrants(context.Background(), user)
	if err != nil {
		e.t.Fatal(err)
	}
	tip := e.do("GET", "/v1/chain/tip", key, nil).JSON(e.t)
	return snapshot{grants: n, events: tip["event_count"], tip: tip["payload_hash"]}
}

func (e *env) unchanged(t *testing.T, user, key string, before snapshot) {
	t.Helper()
	if after := e.snap(user, key); after != before {
		t.Fatalf("a refused request wrote: before %+v, after %+v", before, after)
	}
}

// grant posts body and wants 201.
func (e *env) grant(key string, body any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/grants", key, body)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create grant: %d %s", r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func (e *env) status(key string, params ...string) map[string]any {
	e.t.Helper()
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	r := e.do("GET", "/v1/grants/status?"+q.Encode(), key, nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("status: %d %s", r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func wantStatus(t *testing.T, m map[string]any, status string) {
	t.Helper()
	if m["status"] != status || m["authorized"] != (status == "authorized") {
		t.Fatalf("status = %v (authorized %v), want %s: %v", m["status"], m["authorized"], status, m)
	}
	if m["reason"] == "" || m["reason"] == nil {
		t.Fatalf("no reason: %v", m)
	}
}

func grantIDOf(m map[string]any) string { return m["grant"].(map[string]any)["grant_id"].(string) }

func TestGrantCreateStatusAndChainEvent(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		m := e.grant(key, map[string]any{"subagent": "researcher", "expires_at": inOneHour, "max_tool_calls": 25,
			"allowed_tools": []string{"search", "fetch"}, "parent_agent": "orchestrator"})
		g := m["grant"].(map[string]any)
		id := g["grant_id"].(string)
		if len(id) != 2+32 || id[:2] != "g-" {
			t.Fatalf("generated grant_id %q", id)
		}
		want := map[string]any{"subagent": "researcher", "parent_agent": "orchestrator", "max_tool_calls": float64(25),
			"expires_at": "2026-11-21T13:00:00.000000+00:00", "created_at": "2026-11-21T12:00:00.000000+00:00", "action": "granted"}
		for k, v := range want {
			if g[k] != v {
				t.Errorf("grant.%s = %v, want %v", k, g[k], v)
			}
		}
		if ep := g["epoch"].(map[string]any); ep["scheme"] != "svc-epoch-v1" || ep["date_utc"] != "2026-11-21" {
			t.Errorf("epoch = %v", ep)
		}
		st := m["status"].(map[string]any)
		wantStatus(t, st, "authorized")
		if st["grant_id"] != id || st["uses"] != float64(0) || st["remaining"] != float64(25) {
			t.Fatalf("status = %v", st)
		}
		if m["delegation"].(map[string]any)["version"] != "svc-delegation-v1" {
			t.Fatalf("delegation = %v", m["delegation"])
		}

		// A client-supplied id is kept; the epoch is the server's.
		m = e.grant(key, map[string]any{"subagent": "writer", "expires_at": inOneHour, "max_tool_calls": 3, "grant_id": "g-00ff"})
		if grantIDOf(m) != "g-00ff" {
			t.Fatalf("grant_id = %v", grantIDOf(m))
		}

		// Both creations are on the chain, through the single append path.
		tip := e.do("GET", "/v1/chain/tip", key, nil).JSON(t)
		if tip["event_count"] != float64(2) {
			t.Fatalf("chain tip = %v", tip)
		}
		r := e.do("POST", "/v1/events/search", key, map[string]any{"event_types": []string{"grant.created"}})
		res := r.JSON(t)["results"].([]any)
		if len(res) != 2 || res[0].(map[string]any)["event_id"] != tip["event_id"] {
			t.Fatalf("grant.created events = %s", r.Body)
		}
	})
}

func TestGrantMalformedWritesNothing(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5, "grant_id": "g-01"})
		before := e.snap(user, key)
		base := func(extra map[string]any, drop ...string) map[string]any {
			m := map[string]any{"subagent": "s2", "expires_at": inOneHour, "max_tool_calls": 5}
			for _, d := range drop {
				delete(m, d)
			}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		cases := []struct {
			name  string
			body  any
			field string
		}{
			// Aliases and near misses name the exact key.
			{"subagent_name", base(map[string]any{"subagent_name": "s2"}, "subagent"), "subagent"},
			{"sub_agent", base(map[string]any{"sub_agent": "s2"}, "subagent"), "subagent"},
			{"agent", base(map[string]any{"agent": "s2"}, "subagent"), "subagent"},
			{"subAgent", base(map[string]any{"subAgent": "s2"}, "subagent"), "subagent"},
			{"alias beside the key", base(map[string]any{"subagent_name": "s2"}), "subagent"},
			{"expiry_seconds", base(map[string]any{"expiry_seconds": 3600}, "expires_at"), "expires_at"},
			{"expires_in", base(map[string]any{"expires_in": 3600}, "expires_at"), "expires_at"},
			{"ttl", base(map[string]any{"ttl": 3600}, "expires_at"), "expires_at"},
			{"expiry", base(map[string]any{"expiry": inOneHour}, "expires_at"), "expires_at"},
			{"expiresAt", base(map[string]any{"expiresAt": inOneHour}, "expires_at"), "expires_at"},
			{"max_calls", base(map[string]any{"max_calls": 5}, "max_tool_calls"), "max_tool_calls"},
			{"budget", base(map[string]any{"budget": 5}, "max_tool_calls"), "max_tool_calls"},
			{"max_tool_call", base(map[string]any{"max_tool_call": 5}, "max_tool_calls"), "max_tool_calls"},
			{"tools", base(map[string]any{"tools": []string{"a"}}), "allowed_tools"},
			{"allowed_tool", base(map[string]any{"allowed_tool": []string{"a"}}), "allowed_tools"},
			{"grant", base(map[string]any{"grant": "g-02"}), "grant_id"},
			{"id", base(map[string]any{"id": "g-02"}), "grant_id"},
			{"parent", base(map[string]any{"parent": "p"}), "parent_agent"},
			// Missing required keys.
			{"missing subagent", base(nil, "subagent"), "subagent"},
			{"missing expires_at", base(nil, "expires_at"), "expires_at"},
			{"missing max_tool_calls", base(nil, "max_tool_calls"), "max_tool_calls"},
			{"null subagent", base(map[string]any{"subagent": nil}), "subagent"},
			{"empty body", "", "subagent"},
			// Unreadable values.
			{"blank subagent", base(map[string]any{"subagent": "  "}), "subagent"},
			{"subagent number", base(map[string]any{"subagent": 7}), "subagent"},
			{"expires_at number", base(map[string]any{"expires_at": 3600}), "expires_at"},
			{"expires_at unparseable", base(map[string]any{"expires_at": "tomorrow"}), "expires_at"},
			{"expires_at without offset", base(map[string]any{"expires_at": "2026-11-21T13:00:00"}), "expires_at"},
			{"max_tool_calls fraction", base(map[string]any{"max_tool_calls": 2.5}), "max_tool_calls"},
			{"max_tool_calls string", base(map[string]any{"max_tool_calls": "5"}), "max_tool_calls"},
			{"max_tool_calls huge", `{"subagent":"s2","expires_at":"` + inOneHour + `","max_tool_calls":1e30}`, "max_tool_calls"},
			{"allowed_tools string", base(map[string]any{"allowed_tools": "a"}), "allowed_tools"},
			{"allowed_tools numbers", base(map[string]any{"allowed_tools": []int{1}}), "allowed_tools"},
			{"grant_id form", base(map[string]any{"grant_id": "grant-1"}), "grant_id"},
			{"grant_id upper hex", base(map[string]any{"grant_id": "g-ABC"}), "grant_id"},
			{"blank parent", base(map[string]any{"parent_agent": ""}), "parent_agent"},
			// Unknown and server-assigned keys.
			{"unknown key", base(map[string]any{"colour": "blue"}), "colour"},
			{"epoch", base(map[string]any{"epoch": map[string]any{}}), "epoch"},
			{"created_at", base(map[string]any{"created_at": inOneHour}), "created_at"},
			{"duplicate key", `{"subagent":"a","subagent":"b","expires_at":"` + inOneHour + `","max_tool_calls":1}`, "subagent"},
			{"not an object", `[1]`, ""},
			{"not JSON", `{"subagent":`, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", "/v1/grants", key, c.body), 422, "malformed_grant")
				if m["field"] != c.field || m["reason"] == "" || m["reason"] == nil {
					t.Fatalf("field = %v (reason %v), want field %q", m["field"], m["reason"], c.field)
				}
			})
		}
		e.unchanged(t, user, key, before)

		// 409 for a live id, 415 for another media type: nothing written either.
		wantProblem(t, e.do("POST", "/v1/grants", key, base(map[string]any{"grant_id": "g-01"})), 409, "grant_id_exists")
		wantProblem(t, e.do("POST", "/v1/grants", key, `{"subagent":"x"}`, "Content-Type", "text/plain"), 415, "unsupported_media_type")
		e.unchanged(t, user, key, before)
	})
}

func TestGrantReadableButUnusableValues(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		// SPEC.md: an expires_at already past still answers 201, status expired.
		m := e.grant(key, map[string]any{"subagent": "late", "expires_at": anHourAgo, "max_tool_calls": 5})
		wantStatus(t, m["status"].(map[string]any), "expired")
		m = e.grant(key, map[string]any{"subagent": "zero", "expires_at": inOneHour, "max_tool_calls": 0})
		wantStatus(t, m["status"].(map[string]any), "invalid_limit")
		m = e.grant(key, map[string]any{"subagent": "huge", "expires_at": inOneHour, "max_tool_calls": 2_000_000_000})
		wantStatus(t, m["status"].(map[string]any), "invalid_limit")
		m = e.grant(key, map[string]any{"subagent": "far", "expires_at": in400Days, "max_tool_calls": 5})
		wantStatus(t, m["status"].(map[string]any), "invalid_expiry")
		if n := e.do("GET", "/v1/chain/tip", key, nil).JSON(t)["event_count"]; n != float64(4) {
			t.Fatalf("stored grants are recorded too: event_count = %v", n)
		}
	})
}

func TestGrantIDReuse(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5, "grant_id": "g-aa"})
		before := e.snap(user, key)
		// Live under another sub-agent too: the id is the account's.
		wantProblem(t, e.do("POST", "/v1/grants", key, map[string]any{"subagent": "t", "expires_at": inOneHour, "max_tool_calls": 5, "grant_id": "g-aa"}), 409, "grant_id_exists")
		e.unchanged(t, user, key, before)

		// Once the grant is dead its id may be issued again; the gate matches the live one.
		if r := e.do("POST", "/v1/grants/g-aa/revoke", key, map[string]any{"subagent": "s"}); r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		e.clock.Advance(time.Second)
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 7, "grant_id": "g-aa"})
		st := e.status(key, "subagent", "s", "grant_id", "g-aa")
		wantStatus(t, st, "authorized")
		if st["max_tool_calls"] != float64(7) {
			t.Fatalf("matched the dead grant: %v", st)
		}
		if r := e.do("POST", "/v1/grants/g-aa/use", key, map[string]any{"subagent": "s", "n": 7}); r.Status != 200 {
			t.Fatalf("use of the reissued grant: %d %s", r.Status, r.Body)
		}
		if n := e.do("GET", "/v1/grants", key, nil).JSON(t)["count"]; n != float64(2) {
			t.Fatalf("count = %v", n)
		}
	})
}

func TestGrantOverreach(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		e.grant(key, map[string]any{"subagent": "parent", "expires_at": inTwoHours, "max_tool_calls": 10, "allowed_tools": []string{"a", "b"}})
		child := func(extra map[string]any) map[string]any {
			m := map[string]any{"subagent": "child", "parent_agent": "parent", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"a"}}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		before := e.snap(user, key)
		cases := []struct {
			name  string
			extra map[string]any
			want  []any
		}{
			{"tools", map[string]any{"allowed_tools": []string{"a", "c"}}, []any{"allowed_tools"}},
			{"expiry", map[string]any{"expires_at": inThreeHours}, []any{"expires_at"}},
			{"budget", map[string]any{"max_tool_calls": 11}, []any{"max_tool_calls"}},
			{"all", map[string]any{"allowed_tools": []string{"z"}, "expires_at": inThreeHours, "max_tool_calls": 99}, []any{"allowed_tools", "expires_at", "max_tool_calls"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", "/v1/grants", key, child(c.extra)), 403, "grant_overreach")
				if !reflect.DeepEqual(m["violations"], c.want) {
					t.Fatalf("violations = %v, want %v", m["violations"], c.want)
				}
			})
		}
		e.unchanged(t, user, key, before)

		// Within the parent's bounds (equal counts as within).
		e.grant(key, child(map[string]any{"expires_at": inTwoHours, "allowed_tools": []string{"a", "b"}}))
		// A parent with no live grant sets no bounds.
		e.grant(key, map[string]any{"subagent": "orphan", "parent_agent": "nobody", "expires_at": inThreeHours, "max_tool_calls": 1000})
	})
}

func TestGrantStatusEveryStatus(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		mk := func(sub string, extra map[string]any) string {
			m := map[string]any{"subagent": sub, "expires_at": inOneHour, "max_tool_calls": 3, "allowed_tools": []string{"search"}}
			for k, v := range extra {
				m[k] = v
			}
			return grantIDOf(e.grant(key, m))
		}
		mk("ok", nil)
		wantStatus(t, e.status(key, "subagent", "ok"), "authorized")
		wantStatus(t, e.status(key, "subagent", "ok", "tool", "search"), "authorized")
		wantStatus(t, e.status(key, "subagent", "ok", "tool", "delete"), "tool_not_allowed")
		st := e.status(key, "subagent", "nobody")
		wantStatus(t, st, "no_grant")
		if _, ok := st["grant_id"]; ok || st["uses"] != float64(0) || st["remaining"] != float64(0) {
			t.Fatalf("no_grant carries a grant: %v", st)
		}
		// Exact matching: case and whitespace count.
		wantStatus(t, e.status(key, "subagent", "OK"), "no_grant")
		wantStatus(t, e.status(key, "subagent", " ok"), "no_grant")

		rid := mk("rev", nil)
		e.do("POST", "/v1/grants/"+rid+"/revoke", key, map[string]any{"subagent": "rev"})
		wantStatus(t, e.status(key, "subagent", "rev"), "revoked")

		bid := mk("spent", nil)
		e.do("POST", "/v1/grants/"+bid+"/use", key, map[string]any{"subagent": "spent", "n": 3})
		st = e.status(key, "subagent", "spent")
		wantStatus(t, st, "budget_exhausted")
		if st["uses"] != float64(3) || st["remaining"] != float64(0) {
			t.Fatalf("uses/remaining = %v/%v", st["uses"], st["remaining"])
		}
		mk("limit", map[string]any{"max_tool_calls": -1})
		wantStatus(t, e.status(key, "subagent", "limit"), "invalid_limit")
		mk("far", map[string]any{"expires_at": in400Days})
		wantStatus(t, e.status(key, "subagent", "far"), "invalid_expiry")

		// Expiry by the passing of time.
		e.clock.Advance(time.Hour)
		wantStatus(t, e.status(key, "subagent", "ok"), "expired")

		// 422 malformed_query: missing, blank, aliased; nothing written.
		before := e.snap(user, key)
		wantProblem(t, e.do("GET", "/v1/grants/status", key, nil), 422, "malformed_query")
		wantProblem(t, e.do("GET", "/v1/grants/status?subagent=", key, nil), 422, "malformed_query")
		wantProblem(t, e.do("GET", "/v1/grants/status?subagent=%20%20", key, nil), 422, "malformed_query")
		m := wantProblem(t, e.do("GET", "/v1/grants/status?subagent_name=ok", key, nil), 422, "malformed_query")
		if m["field"] != "subagent" {
			t.Fatalf("field = %v", m["field"])
		}
		e.unchanged(t, user, key, before)
	})
}

func TestGrantShadowingAndGrantIDRestriction(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		older := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inTwoHours, "max_tool_calls": 5, "allowed_tools": []string{"a"}}))
		e.clock.Advance(time.Minute)
		// A newer grant that fails (revoked) never shadows the older live one.
		newer := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5, "allowed_tools": []string{"b"}}))
		st := e.status(key, "subagent", "s")
		if st["grant_id"] != newer {
			t.Fatalf("most recent live grant should win: %v", st)
		}
		// Shadowing is per call: tool a is allowed by the older grant only.
		if st := e.status(key, "subagent", "s", "tool", "a"); st["grant_id"] != older || st["status"] != "authorized" {
			t.Fatalf("tool a: %v", st)
		}
		e.do("POST", "/v1/grants/"+newer+"/revoke", key, map[string]any{"subagent": "s"})
		st = e.status(key, "subagent", "s")
		wantStatus(t, st, "authorized")
		if st["grant_id"] != older {
			t.Fatalf("revoked newer grant shadowed the older one: %v", st)
		}
		// grant_id restricts the check.
		st = e.status(key, "subagent", "s", "grant_id", newer)
		wantStatus(t, st, "revoked")
		if st["grant_id"] != newer {
			t.Fatalf("grant_id restriction: %v", st)
		}
		wantStatus(t, e.status(key, "subagent", "s", "grant_id", "g-ffff"), "no_grant")
		wantStatus(t, e.status(key, "subagent", "other", "grant_id", older), "no_grant")
		// Once everything has failed, the newest grant's own status answers.
		e.clock.Advance(3 * time.Hour)
		st = e.status(key, "subagent", "s")
		if st["grant_id"] != newer || st["status"] != "revoked" {
			t.Fatalf("all failed: want the newest grant's status: %v", st)
		}
	})
}

func TestGrantListNewestFirst(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		if m := e.do("GET", "/v1/grants", key, nil).JSON(t); m["count"] != float64(0) || len(m["grants"].([]any)) != 0 {
			t.Fatalf("empty list = %v", m)
		}
		a := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5}))
		e.clock.Advance(time.Second)
		b := grantIDOf(e.grant(key, map[string]any{"subagent": "t", "expires_at": inOneHour, "max_tool_calls": 5}))
		e.clock.Advance(time.Second)
		c := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": anHourAgo, "max_tool_calls": 5}))
		e.do("POST", "/v1/grants/"+b+"/revoke", key, map[string]any{"subagent": "t"})

		m := e.do("GET", "/v1/grants", key, nil).JSON(t)
		gs := m["grants"].([]any)
		if m["count"] != float64(3) || len(gs) != 3 {
			t.Fatalf("list = %v", m)
		}
		wantOrder := []struct{ id, state string }{{c, "expired"}, {b, "revoked"}, {a, "authorized"}}
		for i, w := range wantOrder {
			g := gs[i].(map[string]any)
			if g["grant_id"] != w.id || g["state"] != w.state || g["state_reason"] == "" {
				t.Fatalf("grants[%d] = %v, want %s %s", i, g, w.id, w.state)
			}
		}
		if gs[1].(map[string]any)["revoked_at"] == nil {
			t.Fatalf("revoked grant lacks revoked_at: %v", gs[1])
		}
		m = e.do("GET", "/v1/grants?subagent=s", key, nil).JSON(t)
		if m["count"] != float64(2) || m["grants"].([]any)[0].(map[string]any)["grant_id"] != c {
			t.Fatalf("filtered list = %v", m)
		}
		// Another account sees none of them.
		_, other := e.account("b@example.com")
		if n := e.do("GET", "/v1/grants", other, nil).JSON(t)["count"]; n != float64(0) {
			t.Fatalf("other account sees %v grants", n)
		}
		wantStatus(t, e.status(other, "subagent", "s"), "no_grant")
	})
}

func TestGrantUse(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		id := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "parent_agent": "p", "expires_at": inOneHour, "max_tool_calls": 10}))
		before := e.snap(user, key)
		r := e.do("POST", "/v1/grants/"+id+"/use", key, map[string]any{"subagent": "s", "n": 4})
		if r.Status != 200 {
			t.Fatalf("use: %d %s", r.Status, r.Body)
		}
		want := map[string]any{"grant_id": id, "outcome": "consumed", "parent_agent": "p", "remaining": float64(6), "subagent": "s", "uses": float64(4)}
		if got := r.JSON(t); !reflect.DeepEqual(got, want) {
			t.Fatalf("use = %v, want %v", got, want)
		}
		// The meter is not the record: a use appends nothing to the chain.
		if after := e.snap(user, key); after.events != before.events {
			t.Fatalf("a use appended a chain event")
		}

		use := func(body any) response { return e.do("POST", "/v1/grants/"+id+"/use", key, body) }
		beforeRefusals := e.snap(user, key)
		// n that does not fit is refused whole.
		m := wantProblem(t, use(map[string]any{"subagent": "s", "n": 7}), 409, "budget_exhausted")
		if m["uses"] != float64(4) || m["remaining"] != float64(6) {
			t.Fatalf("budget_exhausted body = %v", m)
		}
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"missing subagent", map[string]any{"n": 1}, "subagent"},
			{"blank subagent", map[string]any{"subagent": " ", "n": 1}, "subagent"},
			{"missing n", map[string]any{"subagent": "s"}, "n"},
			{"zero n", map[string]any{"subagent": "s", "n": 0}, "n"},
			{"negative n", map[string]any{"subagent": "s", "n": -2}, "n"},
			{"fraction n", map[string]any{"subagent": "s", "n": 1.5}, "n"},
			{"string n", map[string]any{"subagent": "s", "n": "1"}, "n"},
			{"alias count", map[string]any{"subagent": "s", "count": 1}, "n"},
			{"alias sub_agent", map[string]any{"sub_agent": "s", "n": 1}, "subagent"},
			{"unknown key", map[string]any{"subagent": "s", "n": 1, "tool": "x"}, "tool"},
			{"empty body", "", "subagent"},
		} {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, use(c.body), 422, "malformed_use")
				if m["field"] != c.field {
					t.Fatalf("field = %v, want %s", m["field"], c.field)
				}
			})
		}
		// The gate must authorize the grant.
		m = wantProblem(t, e.do("POST", "/v1/grants/g-0bad/use", key, map[string]any{"subagent": "s", "n": 1}), 409, "not_authorized")
		if m["gate_status"] != "no_grant" {
			t.Fatalf("gate_status = %v", m["gate_status"])
		}
		m = wantProblem(t, use(map[string]any{"subagent": "S", "n": 1}), 409, "not_authorized")
		if m["gate_status"] != "no_grant" {
			t.Fatalf("gate_status = %v", m["gate_status"])
		}
		if st := e.status(key, "subagent", "s"); st["uses"] != float64(4) {
			t.Fatalf("refused uses recorded: %v", st)
		}
		e.unchanged(t, user, key, beforeRefusals)

		// Reaching the budget exactly is accepted; the next check answers budget_exhausted.
		if r := use(map[string]any{"subagent": "s", "n": 6}); r.Status != 200 || r.JSON(t)["remaining"] != float64(0) {
			t.Fatalf("use to the budget: %d %s", r.Status, r.Body)
		}
		wantStatus(t, e.status(key, "subagent", "s"), "budget_exhausted")
		m = wantProblem(t, use(map[string]any{"subagent": "s", "n": 1}), 409, "budget_exhausted")
		if m["uses"] != float64(10) || m["remaining"] != float64(0) {
			t.Fatalf("budget_exhausted body = %v", m)
		}

		// Revoked and expired grants are not authorized.
		rid := grantIDOf(e.grant(key, map[string]any{"subagent": "r", "expires_at": inOneHour, "max_tool_calls": 10}))
		e.do("POST", "/v1/grants/"+rid+"/revoke", key, map[string]any{"subagent": "r"})
		m = wantProblem(t, e.do("POST", "/v1/grants/"+rid+"/use", key, map[string]any{"subagent": "r", "n": 1}), 409, "not_authorized")
		if m["gate_status"] != "revoked" {
			t.Fatalf("gate_status = %v", m["gate_status"])
		}
		xid := grantIDOf(e.grant(key, map[string]any{"subagent": "x", "expires_at": inOneHour, "max_tool_calls": 10}))
		e.clock.Advance(time.Hour)
		m = wantProblem(t, e.do("POST", "/v1/grants/"+xid+"/use", key, map[string]any{"subagent": "x", "n": 1}), 409, "not_authorized")
		if m["gate_status"] != "expired" {
			t.Fatalf("gate_status = %v", m["gate_status"])
		}
	})
}

func TestGrantRevoke(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		id := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10}))
		before := e.snap(user, key)
		for _, c := range []struct {
			name      string
			path      string
			body      any
			status    int
			code      string
			wantField string
		}{
			{"unknown id", "/v1/grants/g-99/revoke", map[string]any{"subagent": "s"}, 404, "no_grant", ""},
			{"other sub-agent", "/v1/grants/" + id + "/revoke", map[string]any{"subagent": "t"}, 404, "no_grant", ""},
			{"missing subagent", "/v1/grants/" + id + "/revoke", map[string]any{}, 422, "malformed_revoke", "subagent"},
			{"empty body", "/v1/grants/" + id + "/revoke", "", 422, "malformed_revoke", "subagent"},
			{"blank subagent", "/v1/grants/" + id + "/revoke", map[string]any{"subagent": ""}, 422, "malformed_revoke", "subagent"},
			{"aliased subagent", "/v1/grants/" + id + "/revoke", map[string]any{"subagent_name": "s"}, 422, "malformed_revoke", "subagent"},
			{"subagent number", "/v1/grants/" + id + "/revoke", map[string]any{"subagent": 1}, 422, "malformed_revoke", "subagent"},
		} {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", c.path, key, c.body), c.status, c.code)
				if c.wantField != "" && m["field"] != c.wantField {
					t.Fatalf("field = %v", m["field"])
				}
			})
		}
		e.unchanged(t, user, key, before)

		r := e.do("POST", "/v1/grants/"+id+"/revoke", key, map[string]any{"subagent": "s"})
		if r.Status != 200 {
			t.Fatalf("revoke: %d %s", r.Status, r.Body)
		}
		m := r.JSON(t)
		after := m["status_after"].(map[string]any)
		if m["outcome"] != "revoked" || m["grant_id"] != id || m["subagent"] != "s" || after["status"] != "revoked" ||
			after["authorized"] != false || after["subagent"] != "s" || after["reason"] == "" {
			t.Fatalf("revoke = %v", m)
		}
		once := e.snap(user, key)
		if once.events != float64(2) {
			t.Fatalf("revoke appended %v events in all, want 2", once.events)
		}
		// The gate answers revoked from the next check.
		wantStatus(t, e.status(key, "subagent", "s"), "revoked")

		// A second revoke reports already_revoked and appends nothing.
		e.clock.Advance(time.Minute)
		r = e.do("POST", "/v1/grants/"+id+"/revoke", key, map[string]any{"subagent": "s"})
		if r.Status != 200 || r.JSON(t)["outcome"] != "already_revoked" || r.JSON(t)["revoked_at"] != m["revoked_at"] {
			t.Fatalf("second revoke: %d %s", r.Status, r.Body)
		}
		e.unchanged(t, user, key, once)

		res := e.do("POST", "/v1/events/search", key, map[string]any{"event_types": []string{"grant.revoked"}}).JSON(t)["results"].([]any)
		if len(res) != 1 {
			t.Fatalf("grant.revoked events = %v", res)
		}
		ev := e.do("GET", "/v1/events/"+res[0].(map[string]any)["event_id"].(string), key, nil).JSON(t)["event"].(map[string]any)
		if ev["sequence"] != float64(1) || ev["event_type"] != "grant.revoked" {
			t.Fatalf("grant.revoked event = %v", ev)
		}

		// status_after is the sub-agent's: another live grant still authorizes it.
		a := grantIDOf(e.grant(key, map[string]any{"subagent": "two", "expires_at": inOneHour, "max_tool_calls": 1}))
		e.clock.Advance(time.Second)
		b := grantIDOf(e.grant(key, map[string]any{"subagent": "two", "expires_at": inOneHour, "max_tool_calls": 1}))
		after = e.do("POST", "/v1/grants/"+b+"/revoke", key, map[string]any{"subagent": "two"}).JSON(t)["status_after"].(map[string]any)
		if after["status"] != "authorized" {
			t.Fatalf("status_after with %s still live = %v", a, after)
		}
	})
}

// concurrentUses sends 500 uses of random n in 1..5 against grantID, spread
// over the given servers, and returns the accepted n and the refusals' codes.
func concurrentUses(t *testing.T, envs []*env, key, grantID string) (accepted int64, codes map[string]int) {
	t.Helper()
	const calls = 500
	var mu sync.Mutex
	codes = map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := rand.IntN(5) + 1
			e := envs[i%len(envs)]
			status, m, err := e.post("/v1/grants/"+grantID+"/use", key, map[string]any{"subagent": "s", "n": n})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch status {
			case 200:
				accepted += int64(n)
			case 409:
				codes[fmt.Sprint(m["code"])]++
			default:
				errs <- fmt.Errorf("use answered %d: %v", status, m)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return accepted, codes
}

// post sends body to path with key and decodes the JSON answer; unlike do
// it may run on any goroutine (it never fails the test itself).
func (e *env) post(path, key string, body any) (status int, answer map[string]any, err error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest("POST", e.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer, err
}

func checkBudgetExact(t *testing.T, e *env, key, grantID string, accepted int64, codes map[string]int) {
	t.Helper()
	if accepted != 100 {
		t.Fatalf("accepted n sum = %d, want exactly the budget 100 (demand exceeds it); refusals %v", accepted, codes)
	}
	for code := range codes {
		if code != "budget_exhausted" {
			t.Fatalf("refusal code %q", code)
		}
	}
	st := e.status(key, "subagent", "s", "grant_id", grantID)
	if st["uses"] != float64(100) || st["remaining"] != float64(0) || st["status"] != "budget_exhausted" {
		t.Fatalf("meter after the storm: %v (refused calls must record nothing)", st)
	}
}

func TestGrantConcurrentUsesSQLite(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	_, key := e.account("a@example.com")
	id := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 100}))
	accepted, codes := concurrentUses(t, []*env{e}, key, id)
	checkBudgetExact(t, e, key, id, accepted, codes)
}

func TestGrantConcurrentUsesTwoPostgresReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	one, two := newEnv(t, dsn, nil), newEnv(t, dsn, nil)
	_, key := one.account("a@example.com")
	id := grantIDOf(one.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 100}))
	accepted, codes := concurrentUses(t, []*env{one, two}, key, id)
	checkBudgetExact(t, two, key, id, accepted, codes)
	if tip := one.do("GET", "/v1/chain/tip", key, nil).JSON(t); tip["event_count"] != float64(1) {
		t.Fatalf("uses wrote chain events: %v", tip)
	}
}

func TestDelegationTokenVerifiesWithPublishedKey(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, key := e.account("a@example.com")
		m := e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 5, "allowed_tools": []string{"a<b>&"}})
		token, err := json.Marshal(m["delegation"])
		if err != nil {
			t.Fatal(err)
		}
		r := e.do("GET", "/v1/delegation/public-key", "", nil) // public: no credential
		if r.Status != 200 {
			t.Fatalf("public key: %d %s", r.Status, r.Body)
		}
		pk := r.JSON(t)
		raw, err := base64.StdEncoding.DecodeString(pk["public_key"].(string))
		if err != nil || len(raw) != ed25519.PublicKeySize {
			t.Fatalf("public_key = %v", pk)
		}
		pub := ed25519.PublicKey(raw)
		if pk["algorithm"] != "ed25519" || pk["key_id"] != verify.ServiceKeyID(pub) || pk["key_id"] != e.app.ServiceKeyID() {
			t.Fatalf("public key document = %v", pk)
		}
		tok, err := verify.VerifyToken(token, pub)
		if err != nil {
			t.Fatalf("token from POST /v1/grants does not verify: %v", err)
		}
		// The signed grant is the response's grant.
		var signed, shown map[string]any
		json.Unmarshal(tok.Grant, &signed)
		shown = m["grant"].(map[string]any)
		if !reflect.DeepEqual(signed, shown) {
			t.Fatalf("signed grant %v != response grant %v", signed, shown)
		}
		if tok.ServiceKeyID != pk["key_id"] || tok.Binding.GrantID != grantIDOf(m) {
			t.Fatalf("token = %+v", tok)
		}

		// A changed grant field breaks the order signature.
		var changed map[string]any
		json.Unmarshal(token, &changed)
		changed["grant"].(map[string]any)["max_tool_calls"] = 6
		bad, _ := json.Marshal(changed)
		if _, err := verify.VerifyToken(bad, pub); err == nil {
			t.Fatal("a changed grant verified")
		}
		// Another key does not verify the binding.
		other, _, _ := ed25519.GenerateKey(nil)
		if _, err := verify.VerifyToken(token, other); err == nil {
			t.Fatal("token verified under another key")
		}
	})
}

// The service key survives restarts: a second server over the same store
// publishes the same key, and tokens issued before still verify.
func TestDelegationKeyIsStable(t *testing.T) {
	dsn := storetest.DSN(t, storetest.SQLite)
	first := newEnv(t, dsn, nil)
	second := newEnv(t, dsn, nil)
	a := first.do("GET", "/v1/delegation/public-key", "", nil).JSON(t)
	b := second.do("GET", "/v1/delegation/public-key", "", nil).JSON(t)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("key changed across servers on one store: %v vs %v", a, b)
	}
}
