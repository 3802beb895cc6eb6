package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Per-call approvals through the API (CONTRACT.md "Approvals";
// docs/approvals.md).

const digestA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const digestB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// approvalCall is a tool call of s/bash whose input digest is digest,
// sent with approvalID when it is not "".
func approvalCall(id, digest, approvalID string) map[string]any {
	body := map[string]any{"subagent": "s", "tool": "bash", "event_id": id,
		"raw": map[string]any{"tool_input_sha256": digest, "host": "test"}}
	if approvalID != "" {
		body["approval_id"] = approvalID
	}
	return body
}

// serviceEvents lists the account's events of one type, newest first,
// each with its raw as stored (reads of the record leave raw out).
func (e *env) serviceEvents(user, key, eventType string) []map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/events/search", key, map[string]any{"event_types": []string{eventType}, "limit": 1000})
	if r.Status != 200 {
		e.t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	for _, ev := range r.JSON(e.t)["results"].([]any) {
		m := ev.(map[string]any)
		id := m["event_id"].(string)
		stored, err := e.store.EventsByIDs(context.Background(), nil, user, []string{id})
		if err != nil {
			e.t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal(stored[id].Raw, &raw); err != nil {
			e.t.Fatalf("raw of %s: %v", id, err)
		}
		m["raw"] = raw
		out = append(out, m)
	}
	return out
}

// approvalSetup is an account with a grant for s (bash), a rule making
// s/bash wait for approval, the agent's key and an approver's key limited
// to the approvals capability.
func approvalSetup(e *env, email string) (user, agent, approver string) {
	e.t.Helper()
	user, agent = e.account(email)
	e.grant(agent, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
	approver = e.key(user, api.CreateKeyRequest{Scopes: []string{"approvals"}})
	r := e.do("POST", "/v1/approval-rules", agent, map[string]any{"subagent": "s", "tool": "bash", "ttl_seconds": 120})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create rule: %d %s", r.Status, r.Body)
	}
	return user, agent, approver
}

// ask sends a call the rule matches and returns its pending approval.
func (e *env) ask(agent, eventID, digest string) map[string]any {
	e.t.Helper()
	got := e.toolCall(agent, approvalCall(eventID, digest, ""))
	if got["decision"] != "ask" || got["metered"] != false {
		e.t.Fatalf("asked call = %v", got)
	}
	return got["approval"].(map[string]any)
}

func TestApprovalFullCycleThroughTheAPI(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, agent, approver := approvalSetup(e, "approve@example.com")

		// The rule is listed and on the chain.
		rules := e.do("GET", "/v1/approval-rules", agent, nil).JSON(t)["rules"].([]any)
		if len(rules) != 1 || rules[0].(map[string]any)["ttl_seconds"] != float64(120) || rules[0].(map[string]any)["tool"] != "bash" {
			t.Fatalf("rules = %v", rules)
		}
		if evs := e.serviceEvents(user, agent, "approval_rule.created"); len(evs) != 1 {
			t.Fatalf("approval_rule.created events = %v", evs)
		}

		// Without the input's digest, a matching call is refused: nothing written.
		before := e.snap(user, agent)
		noDigest := approvalCall("evt-ap-0", digestA, "")
		noDigest["raw"] = map[string]any{"host": "test"}
		p := wantProblem(t, e.do("POST", "/v1/tool-calls", agent, noDigest), 422, "validation_error")
		if !strings.Contains(fmt.Sprint(p), "raw.tool_input_sha256") {
			t.Fatalf("the 422 does not name raw.tool_input_sha256: %v", p)
		}
		e.unchanged(t, user, agent, before)

		// The call answers ask: a pending approval, nothing metered, the
		// tool_call recording ask and the approval id.
		got := e.toolCall(agent, approvalCall("evt-ap-1", digestA, ""))
		ap := got["approval"].(map[string]any)
		id := ap["approval_id"].(string)
		if got["decision"] != "ask" || got["metered"] != false || ap["status"] != "pending" || ap["args_sha256"] != digestA ||
			ap["expires_at"] != "2026-11-21T12:02:00.000000+00:00" {
			t.Fatalf("ask = %v", got)
		}
		ev := got["event"].(map[string]any)
		if ev["decision"] != "ask" || ev["raw"].(map[string]any)["approval_id"] != id {
			t.Fatalf("the ask's event = %v", ev)
		}
		if st := e.status(agent, "subagent", "s"); st["uses"] != float64(0) {
			t.Fatalf("an ask was metered: %v", st)
		}
		// A replay of the ask is the ask.
		if r := e.do("POST", "/v1/tool-calls", agent, approvalCall("evt-ap-1", digestA, "")); r.Status != 200 ||
			r.JSON(t)["decision"] != "ask" || r.JSON(t)["metered"] != false || r.JSON(t)["approval"].(map[string]any)["approval_id"] != id {
			t.Fatalf("replayed ask: %d %s", r.Status, r.Body)
		}
		// approval.requested was emitted.
		if !strings.Contains(string(e.do("GET", "/v1/notifications", agent, nil).Body), "approval.requested") {
			t.Fatalf("no approval.requested notice")
		}

		// Sent again while pending: denied approval_pending, not metered.
		got = e.toolCall(agent, approvalCall("evt-ap-2", digestA, id))
		if got["decision"] != "deny" || got["gate_status"] != "approval_pending" || got["metered"] != false {
			t.Fatalf("pending resend = %v", got)
		}

		// Listed pending, newest first; readable by id.
		list := e.do("GET", "/v1/approvals?status=pending", approver, nil).JSON(t)["approvals"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["approval_id"] != id || list[0].(map[string]any)["call_event_id"] != "evt-ap-1" {
			t.Fatalf("pending list = %v", list)
		}

		// Separation of powers: the identity that made the call may not decide it.
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/approve", agent, nil), 409, "separation_of_powers")
		// Another account's approval is a missing one.
		_, stranger := e.account("stranger@example.com")
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/approve", stranger, nil), 404, "approval_not_found")
		wantProblem(t, e.do("GET", "/v1/approvals/"+id, stranger, nil), 404, "approval_not_found")

		r := e.do("POST", "/v1/approvals/"+id+"/approve", approver, map[string]any{"note": "looks fine"})
		if r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		decided := r.JSON(t)
		by := decided["decided_by"].(map[string]any)
		if decided["status"] != "approved" || by["kind"] != "api_key" || by["identity"] == decided["requested_by"].(map[string]any)["identity"] ||
			decided["note"] != "looks fine" {
			t.Fatalf("approved = %v", decided)
		}
		granted := e.serviceEvents(user, agent, "approval.granted")
		if len(granted) != 1 {
			t.Fatalf("approval.granted events = %v", granted)
		}
		if a := granted[0]["raw"].(map[string]any)["approver"].(map[string]any); a["identity"] != by["identity"] || a["kind"] != "api_key" {
			t.Fatalf("approval.granted names %v, want %v", a, by)
		}
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/deny", approver, nil), 409, "approval_not_pending")

		// Another call (other arguments, or another tool) cannot use it.
		got = e.toolCall(agent, approvalCall("evt-ap-3", digestB, id))
		if got["decision"] != "deny" || got["gate_status"] != "approval_mismatch" || got["metered"] != false {
			t.Fatalf("mismatched resend = %v", got)
		}

		// The approved call runs once: metered then, recorded allow with the id.
		got = e.toolCall(agent, approvalCall("evt-ap-4", digestA, id))
		if got["decision"] != "allow" || got["metered"] != true || got["uses"] != float64(1) ||
			got["approval"].(map[string]any)["status"] != "used" || got["event"].(map[string]any)["raw"].(map[string]any)["approval_id"] != id {
			t.Fatalf("approved resend = %v", got)
		}
		got = e.toolCall(agent, approvalCall("evt-ap-5", digestA, id))
		if got["decision"] != "deny" || got["gate_status"] != "approval_used" || got["metered"] != false {
			t.Fatalf("second use = %v", got)
		}
		if st := e.status(agent, "subagent", "s"); st["uses"] != float64(1) {
			t.Fatalf("uses after one approved call = %v", st)
		}
		one := e.do("GET", "/v1/approvals/"+id, approver, nil).JSON(t)
		if one["status"] != "used" || one["used_event_id"] != "evt-ap-4" {
			t.Fatalf("used approval = %v", one)
		}
		// The resend with the approval id under the ask's event id is not the ask.
		wantProblem(t, e.do("POST", "/v1/tool-calls", agent, approvalCall("evt-ap-1", digestA, id)), 409, "event_id_conflict")

		// Deleting the rule: 204, on the chain; calls run without asking.
		ruleID := rules[0].(map[string]any)["rule_id"].(string)
		if r := e.do("DELETE", "/v1/approval-rules/"+ruleID, agent, nil); r.Status != 204 {
			t.Fatalf("delete rule: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("DELETE", "/v1/approval-rules/"+ruleID, agent, nil), 404, "approval_rule_not_found")
		if evs := e.serviceEvents(user, agent, "approval_rule.deleted"); len(evs) != 1 {
			t.Fatalf("approval_rule.deleted events = %v", evs)
		}
		if got := e.toolCall(agent, approvalCall("evt-ap-6", digestA, "")); got["decision"] != "allow" {
			t.Fatalf("call without a rule = %v", got)
		}
	})
}

func TestApprovalDeniedAndExpiredCalls(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, agent, approver := approvalSetup(e, "deny@example.com")

		// Denied by a signed-in person (a session holds the approvals
		// capability): the call sent again is denied approval_denied.
		signedIn, cookie := e.signIn("deny@example.com")
		if signedIn != user {
			t.Fatalf("signed in to %s, want %s", signedIn, user)
		}
		id := e.ask(agent, "evt-dn-1", digestA)["approval_id"].(string)
		r := e.do("POST", "/v1/approvals/"+id+"/deny", "", map[string]any{"note": "no"}, "Cookie", "auditchain_session="+cookie)
		if r.Status != 200 || r.JSON(t)["status"] != "denied" || r.JSON(t)["decided_by"].(map[string]any)["kind"] != "session" {
			t.Fatalf("deny: %d %s", r.Status, r.Body)
		}
		evs := e.serviceEvents(user, agent, "approval.denied")
		if len(evs) != 1 || evs[0]["raw"].(map[string]any)["approver"].(map[string]any)["kind"] != "session" ||
			evs[0]["raw"].(map[string]any)["note"] != "no" {
			t.Fatalf("approval.denied events = %v", evs)
		}
		if got := e.toolCall(agent, approvalCall("evt-dn-2", digestA, id)); got["gate_status"] != "approval_denied" || got["decision"] != "deny" {
			t.Fatalf("denied resend = %v", got)
		}
		// An id the account does not have: a mismatch.
		if got := e.toolCall(agent, approvalCall("evt-dn-3", digestA, "ap-nothing")); got["gate_status"] != "approval_mismatch" {
			t.Fatalf("unknown approval = %v", got)
		}

		// Expired: approved too late, or sent again too late.
		late := e.ask(agent, "evt-ex-1", digestA)["approval_id"].(string)
		approved := e.ask(agent, "evt-ex-2", digestB)["approval_id"].(string)
		if r := e.do("POST", "/v1/approvals/"+approved+"/approve", approver, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		e.clock.Advance(121 * time.Second)
		wantProblem(t, e.do("POST", "/v1/approvals/"+late+"/approve", approver, nil), 409, "approval_not_pending")
		if got := e.toolCall(agent, approvalCall("evt-ex-3", digestB, approved)); got["gate_status"] != "approval_expired" || got["metered"] != false {
			t.Fatalf("expired resend = %v", got)
		}
		// Reads say expired before the job has run.
		if got := e.do("GET", "/v1/approvals/"+late, approver, nil).JSON(t); got["status"] != "expired" {
			t.Fatalf("read of an expired approval = %v", got)
		}

		// The job marks them, and writes nothing else.
		ctx := context.Background()
		row, err := e.store.ApprovalByID(ctx, nil, user, late)
		if err != nil || row.Status != store.ApprovalPending {
			t.Fatalf("before the job: %v %v", row.Status, err)
		}
		before := e.snap(user, agent)
		res, err := e.app.ApprovalExpirySweep(ctx)
		if err != nil || res.Expired != 2 {
			t.Fatalf("expiry job = %+v, %v", res, err)
		}
		e.unchanged(t, user, agent, before)
		for _, id := range []string{late, approved} {
			if row, err := e.store.ApprovalByID(ctx, nil, user, id); err != nil || row.Status != store.ApprovalExpired {
				t.Fatalf("after the job %s: %v %v", id, row.Status, err)
			}
		}
		if res, err := e.app.ApprovalExpirySweep(ctx); err != nil || res.Expired != 0 {
			t.Fatalf("second run = %+v, %v", res, err)
		}
		list := e.do("GET", "/v1/approvals?status=expired", approver, nil).JSON(t)["approvals"].([]any)
		if len(list) != 2 {
			t.Fatalf("expired list = %v", list)
		}
		wantProblem(t, e.do("GET", "/v1/approvals?status=stale", approver, nil), 422, "malformed_query")
	})
}

// The long-poll outlives --request-timeout (here shorter than the wait).
func TestApprovalLongPoll(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.RequestTimeout = 500 * time.Millisecond })
		_, agent, approver := approvalSetup(e, "poll@example.com")
		id := e.ask(agent, "evt-lp-1", digestA)["approval_id"].(string)

		// Pending through the whole wait: answered pending after it.
		start := time.Now()
		if got := e.do("GET", "/v1/approvals/"+id+"?wait=1", approver, nil).JSON(t); got["status"] != "pending" {
			t.Fatalf("after the wait = %v", got)
		}
		if d := time.Since(start); d < time.Second {
			t.Fatalf("a wait of 1 s answered after %v", d)
		}
		wantProblem(t, e.do("GET", "/v1/approvals/"+id+"?wait=31", approver, nil), 422, "malformed_query")

		// A decision answers the wait at once.
		done := make(chan map[string]any, 1)
		go func() {
			done <- e.do("GET", "/v1/approvals/"+id+"?wait=30", approver, nil).JSON(t)
		}()
		start = time.Now()
		if r := e.do("POST", "/v1/approvals/"+id+"/approve", approver, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		select {
		case got := <-done:
			if got["status"] != "approved" {
				t.Fatalf("woken poll = %v", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the poll was not woken by the decision")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("woken after %v", d)
		}
	})
}
