package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md).

// digestOf is a stand-in tool_input_sha256.
func digestOf(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// heldCallBody is a tool call carrying the digest of input (and
// approvalID, when not "").
func heldCallBody(id, subagent, tool, input, approvalID string) map[string]any {
	b := map[string]any{"subagent": subagent, "tool": tool, "event_id": id,
		"raw": map[string]any{"tool_input_sha256": digestOf(input), "host": "test"}}
	if approvalID != "" {
		b["approval_id"] = approvalID
	}
	return b
}

// approvalSetup is an account with a grant for sub-agent s (budget 10) and
// a rule holding s's bash; agent is the key that makes the calls, approver
// another key holding only the approvals capability.
type approvalSetup struct {
	user, agent, approver, ruleID string
}

func (e *env) approvalSetup(email string) approvalSetup {
	e.t.Helper()
	user, agent := e.account(email)
	approver := e.key(user, api.CreateKeyRequest{Scopes: []string{"approvals"}})
	e.grant(agent, map[string]any{"subagent": "s", "expires_at": inOneHour, "max_tool_calls": 10, "allowed_tools": []string{"bash", "curl"}})
	r := e.do("POST", "/v1/approval-rules", agent, map[string]any{"subagent": "s", "tool": "bash", "ttl_seconds": 60})
	if r.Status != http.StatusCreated {
		e.t.Fatalf("create rule: %d %s", r.Status, r.Body)
	}
	return approvalSetup{user: user, agent: agent, approver: approver, ruleID: r.JSON(e.t)["rule_id"].(string)}
}

// heldCall makes a call the rule holds and returns its approval id.
func (e *env) heldCall(key, eventID, input string) string {
	e.t.Helper()
	got := e.toolCall(key, heldCallBody(eventID, "s", "bash", input, ""))
	ap, _ := got["approval"].(map[string]any)
	if got["decision"] != "ask" || got["metered"] != false || ap == nil || ap["status"] != "pending" || ap["args_sha256"] != digestOf(input) {
		e.t.Fatalf("held call = %v", got)
	}
	return ap["approval_id"].(string)
}

// rawOf reads a stored event's raw.
func (e *env) rawOf(user, eventID string) map[string]any {
	e.t.Helper()
	evs, err := e.store.EventsByIDs(context.Background(), nil, user, []string{eventID})
	if err != nil || len(evs) != 1 {
		e.t.Fatalf("event %s: %v %v", eventID, evs, err)
	}
	var m map[string]any
	if err := json.Unmarshal(evs[eventID].Raw, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// eventsOfType lists the ids of the account's events of type typ.
func (e *env) eventsOfType(key, typ string) []string {
	e.t.Helper()
	r := e.do("POST", "/v1/events/search", key, map[string]any{"event_types": []string{typ}, "limit": 100})
	if r.Status != 200 {
		e.t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	var page struct {
		Events []api.Event `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, ev := range page.Events {
		ids = append(ids, ev.EventID)
	}
	return ids
}

func TestApprovalFullCycle(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		s := e.approvalSetup("ap@example.com")
		if ids := e.eventsOfType(s.agent, "approval_rule.created"); len(ids) != 1 {
			t.Fatalf("approval_rule.created events = %v", ids)
		}
		rules := e.do("GET", "/v1/approval-rules", s.agent, nil).JSON(t)["rules"].([]any)
		if len(rules) != 1 || rules[0].(map[string]any)["ttl_seconds"] != float64(60) {
			t.Fatalf("rules = %v", rules)
		}

		// A call no rule holds runs as before.
		if got := e.toolCall(s.agent, heldCallBody("evt-ap-0", "s", "curl", "x", "")); got["decision"] != "allow" || got["approval"] != nil {
			t.Fatalf("call no rule holds = %v", got)
		}
		// The held call: ask, nothing metered, recorded with the approval id.
		id := e.heldCall(s.agent, "evt-ap-1", "rm -rf build")
		if st := e.status(s.agent, "subagent", "s"); st["uses"] != float64(1) {
			t.Fatalf("uses after the held call = %v, want 1", st["uses"])
		}
		raw := e.rawOf(s.user, "evt-ap-1")
		if raw["approval_id"] != id || raw["gate_status"] != "approval_pending" {
			t.Fatalf("held call's raw = %v", raw)
		}
		list := e.do("GET", "/v1/approvals?status=pending", s.approver, nil).JSON(t)["approvals"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["approval_id"] != id || list[0].(map[string]any)["call_event_id"] != "evt-ap-1" {
			t.Fatalf("pending approvals = %v", list)
		}
		// The notice was written.
		ns := e.do("GET", "/v1/notifications", s.agent, nil)
		if ns.Status != 200 || !strings.Contains(string(ns.Body), `"approval.requested"`) {
			t.Fatalf("approval.requested notices: %d %s", ns.Status, ns.Body)
		}

		// The agent's own key may not approve its call.
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/approve", s.agent, nil), 409, "separation_of_powers")
		// A key without the approvals capability may not either.
		grantsOnly := e.key(s.user, api.CreateKeyRequest{Scopes: []string{"grants"}})
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/approve", grantsOnly, nil), 403, "scope_missing")

		// Sent again before approval: approval_pending, nothing metered.
		got := e.toolCall(s.agent, heldCallBody("evt-ap-2", "s", "bash", "rm -rf build", id))
		if got["decision"] != "deny" || got["gate_status"] != "approval_pending" || got["metered"] != false {
			t.Fatalf("resend while pending = %v", got)
		}

		// A long-poll wakes when another identity approves.
		waited := make(chan response, 1)
		go func() { waited <- e.do("GET", "/v1/approvals/"+id+"?wait=20", s.approver, nil) }()
		for e.app.Hub().Len() == 0 { // the poll is waiting once it has subscribed
			time.Sleep(time.Millisecond)
		}
		ap := e.do("POST", "/v1/approvals/"+id+"/approve", s.approver, map[string]any{"note": "looks right"})
		if ap.Status != 200 || ap.JSON(t)["status"] != "approved" {
			t.Fatalf("approve: %d %s", ap.Status, ap.Body)
		}
		select {
		case r := <-waited:
			if r.Status != 200 || r.JSON(t)["status"] != "approved" {
				t.Fatalf("long-poll: %d %s", r.Status, r.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the long-poll did not wake on the approval")
		}
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/deny", s.approver, nil), 409, "approval_not_pending")
		granted := e.eventsOfType(s.agent, "approval.granted")
		if len(granted) != 1 {
			t.Fatalf("approval.granted events = %v", granted)
		}
		g := e.rawOf(s.user, granted[0])
		if g["approval_id"] != id || g["args_sha256"] != digestOf("rm -rf build") ||
			fmt.Sprint(g["approver"]) == fmt.Sprint(g["requested_by"]) || g["approver"].(map[string]any)["kind"] != "api_key" || g["note"] != "looks right" {
			t.Fatalf("approval.granted raw = %v", g)
		}

		// Another argument: approval_mismatch; then the call itself runs once.
		if got = e.toolCall(s.agent, heldCallBody("evt-ap-3", "s", "bash", "rm -rf /", id)); got["gate_status"] != "approval_mismatch" || got["decision"] != "deny" {
			t.Fatalf("other arguments = %v", got)
		}
		got = e.toolCall(s.agent, heldCallBody("evt-ap-4", "s", "bash", "rm -rf build", id))
		if got["decision"] != "allow" || got["metered"] != true || got["uses"] != float64(2) {
			t.Fatalf("approved call = %v", got)
		}
		if raw := e.rawOf(s.user, "evt-ap-4"); raw["approval_id"] != id || raw["gate_status"] != "authorized" {
			t.Fatalf("approved call's raw = %v", raw)
		}
		// Its answer lost, the same resend is answered as stored, metered once;
		// the held call's own event_id with the approval id is another call.
		if r := e.do("POST", "/v1/tool-calls", s.agent, heldCallBody("evt-ap-4", "s", "bash", "rm -rf build", id)); r.Status != 200 ||
			r.Header.Get("Idempotent-Replayed") != "true" || r.JSON(t)["decision"] != "allow" {
			t.Fatalf("replayed resend: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("POST", "/v1/tool-calls", s.agent, heldCallBody("evt-ap-1", "s", "bash", "rm -rf build", id)), 409, "event_id_conflict")
		if got = e.toolCall(s.agent, heldCallBody("evt-ap-5", "s", "bash", "rm -rf build", id)); got["gate_status"] != "approval_used" || got["metered"] != false {
			t.Fatalf("second use = %v", got)
		}
		one := e.do("GET", "/v1/approvals/"+id, s.approver, nil).JSON(t)
		if one["status"] != "used" || one["used_event_id"] != "evt-ap-4" || one["decided_by"] == nil {
			t.Fatalf("used approval = %v", one)
		}
		// GET /v1/grants/status keeps SPEC's values.
		if st := e.status(s.agent, "subagent", "s", "tool", "bash"); st["status"] != "authorized" || st["uses"] != float64(2) {
			t.Fatalf("grant status = %v", st)
		}

		// Deleting the rule: an event, and calls run again without asking.
		if r := e.do("DELETE", "/v1/approval-rules/"+s.ruleID, s.agent, nil); r.Status != 204 {
			t.Fatalf("delete rule: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("DELETE", "/v1/approval-rules/"+s.ruleID, s.agent, nil), 404, "approval_rule_not_found")
		if ids := e.eventsOfType(s.agent, "approval_rule.deleted"); len(ids) != 1 {
			t.Fatalf("approval_rule.deleted events = %v", ids)
		}
		if got = e.toolCall(s.agent, heldCallBody("evt-ap-6", "s", "bash", "ls", "")); got["decision"] != "allow" {
			t.Fatalf("after the rule's deletion = %v", got)
		}
	})
}

func TestApprovalDenialsAndRefusals(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		s := e.approvalSetup("apd@example.com")

		// A held call without a digest: 422 naming it, nothing written.
		before := e.snap(s.user, s.agent)
		r := e.do("POST", "/v1/tool-calls", s.agent, toolCallBody("evt-d-0", "s", "bash"))
		if p := wantProblem(t, r, 422, "validation_error"); fmt.Sprint(p["errors"]) == "" || !strings.Contains(string(r.Body), "raw.tool_input_sha256") {
			t.Fatalf("missing digest: %s", r.Body)
		}
		e.unchanged(t, s.user, s.agent, before)
		// The service's member may not be sent.
		b := heldCallBody("evt-d-0", "s", "bash", "x", "")
		b["raw"].(map[string]any)["approval_id"] = "ap-x"
		wantProblem(t, e.do("POST", "/v1/tool-calls", s.agent, b), 422, "validation_error")

		// Denied by a signed-in person: the event says session.
		id := e.heldCall(s.agent, "evt-d-1", "a")
		_, cookie := e.signIn("apd@example.com")
		if r := e.withSession("POST", "/v1/approvals/"+id+"/deny", cookie, map[string]any{"note": "no"}); r.Status != 200 || r.JSON(t)["status"] != "denied" {
			t.Fatalf("deny by session: %d %s", r.Status, r.Body)
		}
		denied := e.eventsOfType(s.agent, "approval.denied")
		if len(denied) != 1 || e.rawOf(s.user, denied[0])["approver"].(map[string]any)["kind"] != "session" {
			t.Fatalf("approval.denied = %v", denied)
		}
		if got := e.toolCall(s.agent, heldCallBody("evt-d-2", "s", "bash", "a", id)); got["gate_status"] != "approval_denied" || got["decision"] != "deny" {
			t.Fatalf("resend after deny = %v", got)
		}

		// Expired: by time alone, then marked by the job (which writes no event).
		id = e.heldCall(s.agent, "evt-d-3", "b")
		e.clock.Advance(61 * time.Second)
		if got := e.toolCall(s.agent, heldCallBody("evt-d-4", "s", "bash", "b", id)); got["gate_status"] != "approval_expired" {
			t.Fatalf("resend after expiry = %v", got)
		}
		wantProblem(t, e.do("POST", "/v1/approvals/"+id+"/approve", s.approver, nil), 409, "approval_not_pending")
		tip := e.do("GET", "/v1/chain/tip", s.agent, nil).JSON(t)
		n, err := e.app.ApprovalExpirySweep(context.Background())
		if err != nil || n.Expired != 1 {
			t.Fatalf("expiry job = %+v, %v", n, err)
		}
		if after := e.do("GET", "/v1/chain/tip", s.agent, nil).JSON(t); after["sequence"] != tip["sequence"] {
			t.Fatalf("the expiry job wrote an event: %v then %v", tip, after)
		}
		if l := e.do("GET", "/v1/approvals?status=expired", s.approver, nil).JSON(t)["approvals"].([]any); len(l) != 1 {
			t.Fatalf("expired list = %v", l)
		}

		// Another account's approval: 404, and approval_mismatch on a call.
		other := e.approvalSetup("apo@example.com")
		oid := e.heldCall(other.agent, "evt-o-1", "c")
		wantProblem(t, e.do("GET", "/v1/approvals/"+oid, s.approver, nil), 404, "approval_not_found")
		wantProblem(t, e.do("POST", "/v1/approvals/"+oid+"/approve", s.approver, nil), 404, "approval_not_found")
		if got := e.toolCall(s.agent, heldCallBody("evt-d-5", "s", "bash", "c", oid)); got["gate_status"] != "approval_mismatch" {
			t.Fatalf("another account's approval = %v", got)
		}

		// Bad queries and bodies.
		wantProblem(t, e.do("GET", "/v1/approvals?status=maybe", s.approver, nil), 422, "validation_error")
		wantProblem(t, e.do("GET", "/v1/approvals/"+oid+"?wait=31", s.approver, nil), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/approval-rules", s.agent, map[string]any{"subagent": "s", "tool": "x", "ttl_seconds": 29}), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/approval-rules", s.agent, map[string]any{"tool": "x"}), 422, "validation_error")
	})
}

// A long-poll past its wait answers the approval still pending.
func TestApprovalWaitTimesOut(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		s := e.approvalSetup("apw@example.com")
		id := e.heldCall(s.agent, "evt-w-1", "a")
		start := time.Now()
		r := e.do("GET", "/v1/approvals/"+id+"?wait=1", s.approver, nil)
		if r.Status != 200 || r.JSON(t)["status"] != "pending" || time.Since(start) < time.Second {
			t.Fatalf("wait=1: %d %s after %v", r.Status, r.Body, time.Since(start))
		}
	})
}

// The expiry job marks the pending approval expired, and not the used one:
// a use leaves the row 'approved' with used_at set (store.UseApproval),
// which reads as used before the job and after it, when the job has stored
// 'used' and taken the row out of the live rows' index.
func TestApprovalExpiryCronRoute(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		e.restart(e.dsn, envOptions{config: func(c *config.Config) { c.CronSecret = "s" }}, nil)
		s := e.approvalSetup("apc@example.com")
		pending := e.heldCall(s.agent, "evt-c-1", "a")
		used := e.heldCall(s.agent, "evt-c-2", "b")
		if r := e.do("POST", "/v1/approvals/"+used+"/approve", s.approver, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		if got := e.toolCall(s.agent, heldCallBody("evt-c-3", "s", "bash", "b", used)); got["decision"] != "allow" {
			t.Fatalf("resend = %v", got)
		}
		stored := func() (status string) {
			t.Helper()
			if err := e.store.DB().QueryRow(`SELECT status FROM approvals WHERE approval_id = $1`, used).Scan(&status); err != nil {
				t.Fatal(err)
			}
			return status
		}
		reads := func(when string) {
			t.Helper()
			v := e.do("GET", "/v1/approvals/"+used, s.approver, nil).JSON(t)
			if v["status"] != "used" || v["used_event_id"] != "evt-c-3" || v["used_at"] == nil {
				t.Fatalf("used approval %s = %v", when, v)
			}
			for status, want := range map[string]int{"used": 1, "approved": 0} {
				list := e.do("GET", "/v1/approvals?status="+status, s.approver, nil).JSON(t)["approvals"].([]any)
				if len(list) != want {
					t.Fatalf("%s list %s = %v, want %d", status, when, list, want)
				}
			}
			list := e.do("GET", "/v1/approvals?status=expired", s.approver, nil).JSON(t)["approvals"].([]any)
			if len(list) != 1 || list[0].(map[string]any)["approval_id"] != pending {
				t.Fatalf("expired list %s = %v, want only %s", when, list, pending)
			}
		}
		if st := stored(); st != "approved" {
			t.Fatalf("stored status after the use = %q, want approved (the use sets used_at only)", st)
		}
		e.clock.Advance(2 * time.Minute)
		reads("before the job")
		r := e.do("POST", "/v1/internal/cron/approval-expiry", "", nil, "X-Cron-Secret", "s")
		if r.Status != 200 || fmt.Sprint(r.JSON(t)["swept"]) != "map[expired:1]" {
			t.Fatalf("cron approval-expiry: %d %s", r.Status, r.Body)
		}
		if st := stored(); st != "used" {
			t.Fatalf("stored status after the job = %q, want used", st)
		}
		reads("after the job")
	})
}

// concurrentApprovedResends sends 50 resends of one approved call at once,
// spread over envs: exactly one runs (metered), the rest are approval_used,
// and the record holds one allow carrying the approval id.
func concurrentApprovedResends(t *testing.T, envs []*env) {
	t.Helper()
	e := envs[0]
	s := e.approvalSetup("ap-cc@example.com")
	id := e.heldCall(s.agent, "evt-cc-held", "deploy")
	if r := envs[len(envs)-1].do("POST", "/v1/approvals/"+id+"/approve", s.approver, nil); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	const resends = 50
	decisions := toolCallsAtOnce(t, envs, s.agent, resends, func(i int) any {
		return heldCallBody(fmt.Sprintf("evt-cc-%d", i), "s", "bash", "deploy", id)
	})
	if decisions["allow/authorized/true"] != 1 || decisions["deny/approval_used/false"] != resends-1 || len(decisions) != 2 {
		t.Fatalf("decisions = %v, want exactly one allowed and %d approval_used", decisions, resends-1)
	}
	if st := e.status(s.agent, "subagent", "s"); st["uses"] != float64(1) {
		t.Fatalf("uses = %v, want 1", st["uses"])
	}
	if v := e.do("GET", "/v1/chain/verify", s.agent, nil).JSON(t); v["valid"] != true {
		t.Fatalf("chain: %v", v)
	}
}

// ruleChangesSeen: a call decided on envs[0] obeys every rule created or
// deleted before it on envs[len-1], though envs[0] keeps the rules it read
// (by the generation on the account's head row): a rule created holds the
// next call, a rule deleted no longer does, the shortest ttl decides.
func ruleChangesSeen(t *testing.T, envs []*env) {
	t.Helper()
	a, b := envs[0], envs[len(envs)-1]
	s := a.approvalSetup("ap-rules@example.com")
	call := func(id, tool string) map[string]any {
		t.Helper()
		return a.toolCall(s.agent, heldCallBody(id, "s", tool, id, ""))
	}
	// The bash rule is read (and kept); curl runs.
	if got := call("evt-r-1", "bash"); got["decision"] != "ask" {
		t.Fatalf("bash under its rule = %v", got)
	}
	if got := call("evt-r-2", "curl"); got["decision"] != "allow" {
		t.Fatalf("curl without a rule = %v", got)
	}
	r := b.do("POST", "/v1/approval-rules", s.agent, map[string]any{"subagent": "s", "tool": "curl", "ttl_seconds": 120})
	if r.Status != http.StatusCreated {
		t.Fatalf("create curl rule: %d %s", r.Status, r.Body)
	}
	curlRule := r.JSON(t)["rule_id"].(string)
	if got := call("evt-r-3", "curl"); got["decision"] != "ask" {
		t.Fatalf("curl after its rule was created elsewhere = %v", got)
	}
	if r := b.do("DELETE", "/v1/approval-rules/"+curlRule, s.agent, nil); r.Status/100 != 2 {
		t.Fatalf("delete curl rule: %d %s", r.Status, r.Body)
	}
	if got := call("evt-r-4", "curl"); got["decision"] != "allow" {
		t.Fatalf("curl after its rule was deleted elsewhere = %v", got)
	}
	r = b.do("POST", "/v1/approval-rules", s.agent, map[string]any{"subagent": "*", "tool": "*", "ttl_seconds": 30})
	if r.Status != http.StatusCreated {
		t.Fatalf("create wildcard rule: %d %s", r.Status, r.Body)
	}
	wild := r.JSON(t)["rule_id"].(string)
	for _, tool := range []string{"bash", "curl"} {
		got := call("evt-r-5-"+tool, tool)
		ap, _ := got["approval"].(map[string]any)
		if got["decision"] != "ask" || ap == nil {
			t.Fatalf("%s under the wildcard rule = %v", tool, got)
		}
		if rule := a.do("GET", "/v1/approvals/"+ap["approval_id"].(string), s.approver, nil).JSON(t)["rule_id"]; rule != wild {
			t.Fatalf("%s held by rule %v, want the shortest-lived %s", tool, rule, wild)
		}
	}
}

func TestApprovalRuleChangesSQLite(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	ruleChangesSeen(t, []*env{e})
}

func TestApprovalRuleChangesTwoPostgresReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	ruleChangesSeen(t, []*env{newEnv(t, dsn, nil), newEnv(t, dsn, nil)})
}

func TestApprovalUsedOnceConcurrentSQLite(t *testing.T) {
	concurrentApprovedResends(t, []*env{newEnv(t, storetest.DSN(t, storetest.SQLite), nil)})
}

func TestApprovalUsedOnceConcurrentTwoPostgresReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	concurrentApprovedResends(t, []*env{newEnv(t, dsn, nil), newEnv(t, dsn, nil)})
}

// A pending long-poll holds no database connection while it waits (issue
// #38): three times as many ?wait= polls as the store's pool has
// connections (storetest.Open: 6) wait at once with no connection in use,
// a write (the approval) goes through while they wait, and each poll then
// answers approved.
func TestApprovalWaitHoldsNoConnection(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		s := e.approvalSetup("ap-nc@example.com")
		id := e.heldCall(s.agent, "evt-nc-1", "a")
		const polls = 18
		var returned atomic.Int32
		answers := make(chan response, polls)
		for range polls {
			go func() {
				r := e.do("GET", "/v1/approvals/"+id+"?wait=25", s.approver, nil)
				returned.Add(1)
				answers <- r
			}()
		}
		// Waiting: every poll subscribed, and no connection in use.
		deadline := time.Now().Add(15 * time.Second)
		for e.app.Hub().Len() < polls || e.store.ConnsInUse() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("polls subscribed %d of %d, connections in use %d", e.app.Hub().Len(), polls, e.store.ConnsInUse())
			}
			time.Sleep(time.Millisecond)
		}
		if n := returned.Load(); n != 0 {
			t.Fatalf("%d polls answered before the decision", n)
		}
		start := time.Now()
		if r := e.do("POST", "/v1/approvals/"+id+"/approve", s.approver, nil); r.Status != 200 {
			t.Fatalf("approve while %d polls wait: %d %s", polls, r.Status, r.Body)
		}
		for range polls {
			r := <-answers
			if r.Status != 200 || r.JSON(t)["status"] != "approved" {
				t.Fatalf("poll: %d %s", r.Status, r.Body)
			}
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("the polls answered %v after the approval", d)
		}
	})
}

// A long-poll on one replica wakes when another replica approves.
func TestApprovalWaitWakesAcrossPostgresReplicas(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	one, two := newEnv(t, dsn, nil), newEnv(t, dsn, nil)
	s := one.approvalSetup("ap-x@example.com")
	id := one.heldCall(s.agent, "evt-x-1", "a")
	waited := make(chan response, 1)
	start := time.Now()
	go func() { waited <- one.do("GET", "/v1/approvals/"+id+"?wait=25", s.approver, nil) }()
	for one.app.Hub().Len() == 0 { // the poll is waiting once it has subscribed
		time.Sleep(time.Millisecond)
	}
	if r := two.do("POST", "/v1/approvals/"+id+"/deny", s.approver, nil); r.Status != 200 {
		t.Fatalf("deny on the other replica: %d %s", r.Status, r.Body)
	}
	r := <-waited
	if r.Status != 200 || r.JSON(t)["status"] != "denied" || time.Since(start) > 20*time.Second {
		t.Fatalf("long-poll: %d %s after %v", r.Status, r.Body, time.Since(start))
	}
}
