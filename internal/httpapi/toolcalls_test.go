package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// POST /v1/tool-calls: the gate's check, one use and the tool_call event in
// one commit (docs/decisions/tool-calls.md).

func (e *env) toolCall(key string, body map[string]any, headers ...string) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/tool-calls", key, body, headers...)
	if r.Status != http.StatusOK {
		e.t.Fatalf("tool call: %d %s", r.Status, r.Body)
	}
	return r.JSON(e.t)
}

func toolCallBody(id, subagent, tool string) map[string]any {
	return map[string]any{"subagent": subagent, "tool": tool, "event_id": id,
		"raw": map[string]any{"input_sha256": "ab12", "host": "test"}}
}

func TestToolCallChecksMetersAndRecordsInOneWrite(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("tc@example.com")
		gid := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 2, "allowed_tools": []string{"bash"}}))
		tip := e.do("GET", "/v1/chain/tip", key, nil).JSON(t)

		got := e.toolCall(key, toolCallBody("evt-tc-1", "s", "bash"), "X-SVC-Surface", "hook")
		if got["decision"] != "allow" || got["gate_status"] != "authorized" || got["metered"] != true || got["grant_id"] != gid ||
			got["uses"] != float64(1) || got["remaining"] != float64(1) || got["subagent"] != "s" || got["proposal_id"] != nil {
			t.Fatalf("allowed call = %v", got)
		}
		ev := got["event"].(map[string]any)
		if ev["event_id"] != "evt-tc-1" || ev["event_type"] != "tool_call" || ev["tool"] != "bash" || ev["decision"] != "allow" ||
			ev["surface"] != "hook" || ev["sequence"] != tip["sequence"].(float64)+1 || ev["prev_hash"] != tip["payload_hash"] {
			t.Fatalf("recorded event = %v (tip before %v)", ev, tip)
		}
		raw := ev["raw"].(map[string]any)
		want := map[string]any{"input_sha256": "ab12", "host": "test", "subagent": "s", "gate_status": "authorized", "grant_id": gid}
		if fmt.Sprint(raw) != fmt.Sprint(want) {
			t.Fatalf("raw = %v, want %v", raw, want)
		}
		if st := e.status(key, "subagent", "s"); st["uses"] != float64(1) {
			t.Fatalf("the use was not metered: %v", st)
		}

		// A retry of the same call (its answer lost) is the stored call,
		// metered once.
		before := e.snap(user, key)
		r := e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-tc-1", "s", "bash"))
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %v %s", r.Status, r.Header, r.Body)
		}
		if m := r.JSON(t); m["decision"] != "allow" || m["metered"] != true || m["event"].(map[string]any)["payload_hash"] != ev["payload_hash"] || m["uses"] != nil {
			t.Fatalf("replay answer = %v", m)
		}
		e.unchanged(t, user, key, before)
		if st := e.status(key, "subagent", "s"); st["uses"] != float64(1) {
			t.Fatalf("a replay was metered again: %v", st)
		}
		// The same id with other content is a conflict, nothing written.
		other := toolCallBody("evt-tc-1", "s", "bash")
		other["raw"] = map[string]any{"input_sha256": "cd34", "host": "test"}
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, other), 409, "event_id_conflict")
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-tc-1", "s2", "bash")), 409, "event_id_conflict")
		e.unchanged(t, user, key, before)

		// A tool the grant does not allow: denied, recorded, not metered.
		got = e.toolCall(key, toolCallBody("evt-tc-2", "s", "curl"))
		if got["decision"] != "deny" || got["gate_status"] != "tool_not_allowed" || got["metered"] != false || got["reason"] == "" {
			t.Fatalf("tool outside the grant = %v", got)
		}
		if ev := got["event"].(map[string]any); ev["decision"] != "deny" || ev["raw"].(map[string]any)["gate_status"] != "tool_not_allowed" {
			t.Fatalf("denied call recorded as %v", ev)
		}
		// The budget's last call, then budget_exhausted.
		if got = e.toolCall(key, toolCallBody("evt-tc-3", "s", "bash")); got["decision"] != "allow" || got["remaining"] != float64(0) {
			t.Fatalf("last call of the budget = %v", got)
		}
		if got = e.toolCall(key, toolCallBody("evt-tc-4", "s", "bash")); got["decision"] != "deny" || got["gate_status"] != "budget_exhausted" || got["metered"] != false {
			t.Fatalf("call past the budget = %v", got)
		}
		if st := e.status(key, "subagent", "s"); st["uses"] != float64(2) {
			t.Fatalf("uses = %v, want 2", st["uses"])
		}

		// No grant: the request's no_grant decides, and the record says so.
		got = e.toolCall(key, toolCallBody("evt-tc-5", "main", "bash"))
		if got["decision"] != "deny" || got["gate_status"] != "no_grant" || got["grant_id"] != nil {
			t.Fatalf("no grant, default = %v", got)
		}
		body := toolCallBody("evt-tc-6", "main", "bash")
		body["no_grant"] = "allow"
		got = e.toolCall(key, body)
		if got["decision"] != "allow" || got["metered"] != false || got["event"].(map[string]any)["raw"].(map[string]any)["no_grant"] != "allow" {
			t.Fatalf("no grant, no_grant allow = %v", got)
		}
		body = toolCallBody("evt-tc-7", "main", "bash")
		body["no_grant"] = "ask"
		if got = e.toolCall(key, body); got["decision"] != "ask" {
			t.Fatalf("no grant, no_grant ask = %v", got)
		}
		// no_grant decides only no_grant: a revoked grant is denied.
		e.do("POST", "/v1/grants/"+gid+"/revoke", key, map[string]any{"subagent": "s"})
		body = toolCallBody("evt-tc-8", "s", "bash")
		body["no_grant"] = "allow"
		if got = e.toolCall(key, body); got["decision"] != "deny" || got["gate_status"] != "revoked" {
			t.Fatalf("revoked grant with no_grant allow = %v", got)
		}
		// An expired grant, through the clock.
		xid := grantIDOf(e.grant(key, map[string]any{"subagent": "x", "expires_at": inOneHour, "max_tool_calls": 5}))
		e.clock.Advance(time.Hour)
		if got = e.toolCall(key, toolCallBody("evt-tc-9", "x", "bash")); got["decision"] != "deny" || got["gate_status"] != "expired" || got["grant_id"] != xid {
			t.Fatalf("expired grant = %v", got)
		}

		if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true {
			t.Fatalf("chain after tool calls: %v", v)
		}
	})
}

func TestToolCallObeysGovernance(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, root := e.account("tc-gov@example.com")
		proposer, ratifier := e.govIdentity(user, "agent"), e.govIdentity(user, "human")
		e.grant(root, map[string]any{"subagent": "worker", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash", "read_file"}})
		id := e.govPropose(proposer.token, govDenyBody("worker", "bash"))["proposal_id"].(string)
		e.govTransition(ratifier.token, id, "ratify")
		e.govTransition(ratifier.token, id, "enact")
		got := e.toolCall(root, toolCallBody("evt-tcg-1", "worker", "bash"))
		if got["decision"] != "deny" || got["gate_status"] != "denied_by_governance" || got["proposal_id"] != id || got["metered"] != false {
			t.Fatalf("governed call = %v", got)
		}
		if raw := got["event"].(map[string]any)["raw"].(map[string]any); raw["proposal_id"] != id {
			t.Fatalf("the record does not name the rule: %v", raw)
		}
		if got = e.toolCall(root, toolCallBody("evt-tcg-2", "worker", "read_file")); got["decision"] != "allow" {
			t.Fatalf("a tool outside the rule = %v", got)
		}
	})
}

func TestToolCallRefusalsWriteNothing(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("tc-bad@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10})
		before := e.snap(user, key)
		with := func(k string, v any) map[string]any {
			b := toolCallBody("evt-bad-1", "s", "bash")
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
			return b
		}
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"missing subagent", with("subagent", nil), "subagent"},
			{"blank subagent", with("subagent", " "), "subagent"},
			{"missing tool", with("tool", nil), "tool"},
			{"empty tool", with("tool", ""), "tool"},
			{"missing event_id", with("event_id", nil), "event_id"},
			{"bad event_id", with("event_id", "tc-1"), "event_id"},
			{"empty event_id", with("event_id", ""), "event_id"},
			{"result without event_id", with("results", []any{map[string]any{"raw": map[string]any{}}}), "results[0].event_id"},
			{"result with an empty event_id", with("results", []any{map[string]any{"event_id": ""}}), "results[0].event_id"},
			{"result with the call's event_id", with("results", []any{map[string]any{"event_id": "evt-bad-1"}}), "results[0].event_id"},
			{"raw not an object", with("raw", []any{1}), "raw"},
			{"raw holds gate_status", with("raw", map[string]any{"gate_status": "authorized"}), "raw.gate_status"},
			{"raw holds subagent", with("raw", map[string]any{"subagent": "other"}), "raw.subagent"},
			{"raw holds grant_id", with("raw", map[string]any{"grant_id": "g"}), "raw.grant_id"},
			{"unknown no_grant", with("no_grant", "maybe"), "no_grant"},
			{"empty no_grant", with("no_grant", ""), "no_grant"},
			{"bad ts", with("ts", "yesterday"), "ts"},
			{"unknown key", with("decision", "allow"), "decision"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := e.do("POST", "/v1/tool-calls", key, c.body)
				if r.Status != 422 {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				if c.field != "" && !bytes.Contains(r.Body, []byte(`"`+c.field+`"`)) {
					t.Fatalf("the problem does not name %s: %s", c.field, r.Body)
				}
			})
		}
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, ""), 400, "malformed_json")
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-bad-3", "s", "bash"), "X-SVC-Surface", "carrier-pigeon"),
			422, "validation_error")
		e.unchanged(t, user, key, before)
		if st := e.status(key, "subagent", "s"); st["uses"] != float64(0) {
			t.Fatalf("a refused call was metered: %v", st)
		}
		// A key without one of the two scopes is refused (foundation_test
		// covers every pairing).
		onlyGrants := e.key(user, api.CreateKeyRequest{Scopes: []string{"grants"}})
		wantProblem(t, e.do("POST", "/v1/tool-calls", onlyGrants, toolCallBody("evt-bad-2", "s", "bash")), 403, "scope_missing")
		e.unchanged(t, user, key, before)
	})
}

// Over the daily quota a tool call is 429 whatever it sent (an invalid or
// malformed body included: the quota is checked first), and the grant is
// not metered: the use and the record are one write.
func TestToolCallOverQuotaMetersNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 1 })
		user, key := e.account("tc-quota@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
		e.toolCall(key, toolCallBody("evt-q-1", "s", "bash")) // the day's one event
		before := e.snap(user, key)
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-q-2", "s", "bash")), 429, "daily_quota_exceeded")
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, map[string]any{"subagent": "s"}), 429, "daily_quota_exceeded")
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, "{not json"), 429, "daily_quota_exceeded") // the quota before the body
		e.unchanged(t, user, key, before)
		if st := e.status(key, "subagent", "s"); st["uses"] != float64(1) {
			t.Fatalf("uses = %v, want 1: a refused call was metered", st["uses"])
		}
	})
}

// concurrentToolCalls sends 300 tool calls against a budget of 100, spread
// over envs, and checks that exactly 100 were allowed, every call is on the
// record with its decision, and the chain verifies.
func concurrentToolCalls(t *testing.T, envs []*env, key string) {
	t.Helper()
	e := envs[0]
	gid := grantIDOf(e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 100, "allowed_tools": []string{"bash"}}))
	const calls = 300
	decisions := toolCallsAtOnce(t, envs, key, calls, func(i int) any {
		return toolCallBody(fmt.Sprintf("evt-cc-%d", i), "s", "bash")
	})
	if decisions["allow/authorized/true"] != 100 || decisions["deny/budget_exhausted/false"] != calls-100 || len(decisions) != 2 {
		t.Fatalf("decisions = %v, want exactly 100 allowed and %d denied for the budget", decisions, calls-100)
	}
	st := e.status(key, "subagent", "s", "grant_id", gid)
	if st["uses"] != float64(100) || st["status"] != "budget_exhausted" {
		t.Fatalf("meter = %v", st)
	}
	r := e.do("POST", "/v1/events/search", key, map[string]any{"event_types": []string{"tool_call"}, "limit": 1000})
	if r.Status != 200 {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	recorded := map[string]int{}
	for _, ev := range r.JSON(t)["results"].([]any) {
		recorded[fmt.Sprint(ev.(map[string]any)["decision"])]++
	}
	if recorded["allow"] != 100 || recorded["deny"] != calls-100 {
		t.Fatalf("the record holds %v, want 100 allow and %d deny", recorded, calls-100)
	}
	if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true {
		t.Fatalf("chain: %v", v)
	}
}

func TestToolCallConcurrentBudgetExactSQLite(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	_, key := e.account("tc-cc@example.com")
	concurrentToolCalls(t, []*env{e}, key)
}

func TestToolCallConcurrentBudgetExactTwoPostgresReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	one, two := newEnv(t, dsn, nil), newEnv(t, dsn, nil)
	_, key := one.account("tc-cc@example.com")
	concurrentToolCalls(t, []*env{one, two}, key)
}

// Results of earlier calls ride with the next call: recorded before it in
// the same commit, once, and never at the cost of the call's own checks.
func TestToolCallRecordsEarlierResults(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("tc-results@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
		first := e.toolCall(key, toolCallBody("evt-r-call1", "s", "bash"))["event"].(map[string]any)
		result := func(id, parent, digest string) map[string]any {
			return map[string]any{"event_id": id, "parent_id": parent, "tool": "bash", "raw": map[string]any{"result_sha256": digest}}
		}
		body := toolCallBody("evt-r-call2", "s", "bash")
		body["results"] = []any{result("evt-r-res1", "evt-r-call1", "aa"), result("evt-r-res0", "evt-r-call0", "bb")}
		got := e.toolCall(key, body, "X-SVC-Surface", "mcp_stdio")
		call := got["event"].(map[string]any)
		if call["sequence"] != first["sequence"].(float64)+3 {
			t.Fatalf("the call is at %v, want after its two results (first call at %v)", call["sequence"], first["sequence"])
		}
		r := e.do("GET", "/v1/events/evt-r-res1", key, nil)
		if r.Status != 200 {
			t.Fatalf("result: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)["event"].(map[string]any)
		if res["event_type"] != "tool_result" || res["parent_id"] != "evt-r-call1" || res["sequence"] != first["sequence"].(float64)+1 ||
			res["surface"] != "mcp_stdio" || res["decision"] != nil {
			t.Fatalf("the result is recorded as %v", res)
		}

		// Sent again (its answer was lost): left out, the call recorded.
		before := e.snap(user, key)
		body = toolCallBody("evt-r-call3", "s", "bash")
		body["results"] = []any{result("evt-r-res1", "evt-r-call1", "aa"), result("evt-r-res2", "evt-r-call2", "cc")}
		if got = e.toolCall(key, body); got["event"].(map[string]any)["sequence"] != before.events.(float64)+1 {
			t.Fatalf("with one result already stored: call at %v, %v events before", got["event"].(map[string]any)["sequence"], before.events)
		}
		if after := e.snap(user, key); after.events != before.events.(float64)+2 {
			t.Fatalf("%v events after, want %v + the new result and the call", after.events, before.events)
		}

		// A stored id with other content: a conflict, nothing written, not metered.
		before = e.snap(user, key)
		uses := e.status(key, "subagent", "s")["uses"]
		body = toolCallBody("evt-r-call4", "s", "bash")
		body["results"] = []any{result("evt-r-res1", "evt-r-call1", "different")}
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, body), 409, "event_id_conflict")
		for _, c := range []struct {
			name    string
			results any
			field   string
		}{
			{"too many", func() []any {
				var out []any
				for i := range 17 {
					out = append(out, result(fmt.Sprintf("evt-r-many%d", i), "evt-r-call1", "aa"))
				}
				return out
			}(), "results"},
			{"bad raw", []any{map[string]any{"event_id": "evt-r-x", "raw": []any{1}}}, "results[0].raw"},
			{"bad id", []any{map[string]any{"event_id": "x"}}, "results[0].event_id"},
			{"missing id", []any{map[string]any{"raw": map[string]any{}}}, "results[0].event_id"},
			{"the call's id", []any{result("evt-r-call4", "evt-r-call1", "aa")}, "results[0].event_id"},
			{"twice", []any{result("evt-r-t", "evt-r-call1", "aa"), result("evt-r-t", "evt-r-call1", "aa")}, "results[1].event_id"},
			{"unknown key", []any{map[string]any{"event_id": "evt-r-u", "decision": "allow"}}, "results[0].decision"},
		} {
			t.Run(c.name, func(t *testing.T) {
				body := toolCallBody("evt-r-call4", "s", "bash")
				body["results"] = c.results
				r := e.do("POST", "/v1/tool-calls", key, body)
				if r.Status != 422 || !bytes.Contains(r.Body, []byte(`"`+c.field+`"`)) {
					t.Fatalf("%d %s, want 422 naming %s", r.Status, r.Body, c.field)
				}
			})
		}
		e.unchanged(t, user, key, before)
		if u := e.status(key, "subagent", "s")["uses"]; u != uses {
			t.Fatalf("uses %v after refused calls, want %v", u, uses)
		}
		if v := e.do("GET", "/v1/chain/verify", key, nil).JSON(t); v["valid"] != true {
			t.Fatalf("chain: %v", v)
		}
	})
}

// The quota admits a call and its results together or refuses them all.
func TestToolCallResultsShareTheQuota(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 3 })
		user, key := e.account("tc-rq@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
		e.toolCall(key, toolCallBody("evt-rq-1", "s", "bash"))
		before := e.snap(user, key)
		body := toolCallBody("evt-rq-2", "s", "bash")
		body["results"] = []any{map[string]any{"event_id": "evt-rq-r1", "parent_id": "evt-rq-1"}, map[string]any{"event_id": "evt-rq-r0"}}
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, body), 429, "daily_quota_exceeded")
		e.unchanged(t, user, key, before)
		if u := e.status(key, "subagent", "s")["uses"]; u != float64(1) {
			t.Fatalf("uses = %v, want 1", u)
		}
	})
}

// A resent call (its answer lost) is answered with the stored call, metered
// once; results it carries that are not on the record yet are recorded, and
// over the quota it is still answered when nothing is left to write.
func TestToolCallReplays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.DailyEventQuota = 5 })
		user, key := e.account("tc-replay@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
		e.toolCall(key, toolCallBody("evt-rp-1", "s", "bash"))
		denied := e.toolCall(key, toolCallBody("evt-rp-2", "s", "curl"))

		// The same call with a new result: the result is recorded, the call
		// replayed, not metered again.
		body := toolCallBody("evt-rp-1", "s", "bash")
		body["ts"] = "2026-11-21T12:00:09+00:00" // a host's second run stamps its own time
		body["results"] = []any{map[string]any{"event_id": "evt-rp-r1", "parent_id": "evt-rp-1", "raw": map[string]any{"h": "1"}}}
		r := e.do("POST", "/v1/tool-calls", key, body)
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" || r.JSON(t)["decision"] != "allow" {
			t.Fatalf("replay with a new result: %d %v %s", r.Status, r.Header, r.Body)
		}
		if r := e.do("GET", "/v1/events/evt-rp-r1", key, nil); r.Status != 200 {
			t.Fatalf("the result a replay carried is not on the record: %d %s", r.Status, r.Body)
		}
		if u := e.status(key, "subagent", "s")["uses"]; u != float64(1) {
			t.Fatalf("uses = %v, want 1", u)
		}
		// A denied call replays as denied.
		if m := e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-rp-2", "s", "curl")).JSON(t); m["decision"] != "deny" ||
			m["metered"] != false || m["event"].(map[string]any)["payload_hash"] != denied["event"].(map[string]any)["payload_hash"] {
			t.Fatalf("denied replay = %v", m)
		}
		// Another no_grant is another call.
		body = toolCallBody("evt-rp-3", "nobody", "bash")
		e.toolCall(key, body)
		body["no_grant"] = "allow"
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, body), 409, "event_id_conflict")

		// The day's quota is used up (5: three calls, one result, one more call).
		e.toolCall(key, toolCallBody("evt-rp-4", "s", "bash"))
		before := e.snap(user, key)
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-rp-5", "s", "bash")), 429, "daily_quota_exceeded")
		// Over the quota, a resent call with nothing left to write is answered.
		r = e.do("POST", "/v1/tool-calls", key, toolCallBody("evt-rp-4", "s", "bash"))
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay over the quota: %d %s", r.Status, r.Body)
		}
		// With a result that is not stored it is refused: that result cannot be written.
		body = toolCallBody("evt-rp-4", "s", "bash")
		body["results"] = []any{map[string]any{"event_id": "evt-rp-r4", "parent_id": "evt-rp-4"}}
		wantProblem(t, e.do("POST", "/v1/tool-calls", key, body), 429, "daily_quota_exceeded")
		e.unchanged(t, user, key, before)
		if u := e.status(key, "subagent", "s")["uses"]; u != float64(2) {
			t.Fatalf("uses = %v, want 2", u)
		}
	})
}

// Results already on the record cost one read, not a write per result.
func TestToolCallManyStoredResults(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("tc-many@example.com")
		e.grant(key, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
		var results []any
		for i := range api.MaxToolCallResults {
			results = append(results, map[string]any{"event_id": fmt.Sprintf("evt-mr-%d", i), "raw": map[string]any{"i": i}})
		}
		body := toolCallBody("evt-mr-call1", "s", "bash")
		body["results"] = results
		e.toolCall(key, body)
		before := e.snap(user, key)
		body = toolCallBody("evt-mr-call2", "s", "bash")
		body["results"] = results // every one stored already
		got := e.toolCall(key, body)
		if after := e.snap(user, key); after.events != before.events.(float64)+1 || got["decision"] != "allow" {
			t.Fatalf("%v events after, want %v + the call alone: %v", after.events, before.events, got)
		}
	})
}

// toolCallsAtOnce sends n tool calls at once, call i with body(i),
// spread over envs (replicas of one store), and counts their answers by
// decision/gate_status/metered; any answer but 200 fails the test.
func toolCallsAtOnce(t *testing.T, envs []*env, key string, n int, body func(i int) any) map[string]int {
	t.Helper()
	var mu sync.Mutex
	decisions := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			status, m, err := envs[i%len(envs)].post("/v1/tool-calls", key, body(i))
			if err != nil || status != 200 {
				errs <- fmt.Errorf("tool call %d answered %d: %v (%v)", i, status, m, err)
				return
			}
			mu.Lock()
			decisions[fmt.Sprint(m["decision"], "/", m["gate_status"], "/", m["metered"])]++
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return decisions
}
