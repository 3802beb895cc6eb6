package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Governance end to end (SPEC.md "Governance", "Proposal (status)").

const govProposalsPath = "/v1/governance/proposals"

var govEventTypes = []string{domain.EventGovernanceProposed, domain.EventGovernanceRatified, domain.EventGovernanceEnacted, domain.EventGovernanceRejected}

// govIdentity is one API key of an account: the Actor identity is its id.
type govIdentity struct{ id, token, machine string }

func (e *env) govIdentity(userID, machine string) govIdentity {
	e.t.Helper()
	k, err := e.app.CreateKey(context.Background(), userID, api.CreateKeyRequest{Machine: new(machine)})
	if err != nil {
		e.t.Fatalf("create key: %v", err)
	}
	return govIdentity{id: k.ID, token: k.APIKey, machine: machine}
}

// propose creates a proposal and returns it; it fails unless 201.
func (e *env) govPropose(tok string, body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", govProposalsPath, tok, body)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("propose: %d %s", r.Status, r.Body)
	}
	return r.JSON(e.t)["proposal"].(map[string]any)
}

func govDenyBody(subagent string, tool any) map[string]any {
	return map[string]any{"kind": "deny_scope", "evidence": map[string]any{"blocked_attempts": 3},
		"subject": map[string]any{"subagent": subagent, "tool": tool}}
}

// transition applies action and fails unless 200.
func (e *env) govTransition(tok, id, action string) map[string]any {
	e.t.Helper()
	r := e.do("POST", govProposalsPath+"/"+id+"/"+action, tok, nil)
	if r.Status != http.StatusOK {
		e.t.Fatalf("%s %s: %d %s", action, id, r.Status, r.Body)
	}
	return r.JSON(e.t)["proposal"].(map[string]any)
}

// tip is GET /v1/chain/tip's body, compared whole to prove nothing was appended.
func (e *env) govTip(tok string) string {
	e.t.Helper()
	r := e.do("GET", "/v1/chain/tip", tok, nil)
	if r.Status != 200 {
		e.t.Fatalf("tip: %d %s", r.Status, r.Body)
	}
	return string(r.Body)
}

// govEvents lists the account's governance.* chain events, newest first.
func (e *env) govEvents(tok string, types ...string) []map[string]any {
	e.t.Helper()
	if len(types) == 0 {
		types = govEventTypes
	}
	r := e.do("POST", "/v1/events/search", tok, map[string]any{"event_types": types, "limit": 1000})
	if r.Status != 200 {
		e.t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	for _, v := range r.JSON(e.t)["results"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func (e *env) govGet(tok, id string) response {
	e.t.Helper()
	return e.do("GET", govProposalsPath+"/"+id, tok, nil)
}

// The model test: every (state, action, actor) against SPEC.md's table,
// through the API, on both stores. Each case drives a fresh proposal into the
// state with real calls, applies the action, and checks the answer, the stored
// proposal, and that exactly one chain event was appended on success and none
// on a refusal.
func TestGovernanceModel(t *testing.T) {
	// SPEC.md "Proposal (status)" transcribed for the HTTP surface; "other" is
	// an identity other than the proposer. Rows marked decision are
	// docs/decisions/governance.md.
	table := []struct {
		state, action, actor string
		next                 string // success: the new status
		code                 string // refusal: the 409 code
	}{
		{"proposed", "ratify", "other", "ratified", ""},
		{"proposed", "ratify", "proposer", "", "separation_of_powers"},
		{"proposed", "enact", "other", "", "not_ratified"},
		{"proposed", "enact", "proposer", "", "not_ratified"},
		{"proposed", "reject", "other", "rejected", ""},
		{"proposed", "reject", "proposer", "rejected", ""}, // decision 4: withdrawing one's own proposal
		{"ratified", "ratify", "other", "", "invalid_transition"},
		{"ratified", "ratify", "proposer", "", "invalid_transition"}, // decision 2: state before identity
		{"ratified", "enact", "other", "enacted", ""},
		{"ratified", "enact", "proposer", "enacted", ""}, // "any permitted caller"
		{"ratified", "reject", "other", "rejected", ""},
		{"ratified", "reject", "proposer", "rejected", ""},
		{"enacted", "ratify", "other", "", "invalid_transition"},
		{"enacted", "ratify", "proposer", "", "invalid_transition"},
		{"enacted", "enact", "other", "", "invalid_transition"},    // decision 1
		{"enacted", "enact", "proposer", "", "invalid_transition"}, // decision 1
		{"enacted", "reject", "other", "", "invalid_transition"},
		{"enacted", "reject", "proposer", "", "invalid_transition"},
		{"rejected", "ratify", "other", "", "invalid_transition"},
		{"rejected", "ratify", "proposer", "", "invalid_transition"},
		{"rejected", "enact", "other", "", "invalid_transition"},    // decision 1
		{"rejected", "enact", "proposer", "", "invalid_transition"}, // decision 1
		{"rejected", "reject", "other", "", "invalid_transition"},
		{"rejected", "reject", "proposer", "", "invalid_transition"},
	}
	// The table is complete: every combination exactly once.
	seen := map[string]bool{}
	for _, c := range table {
		seen[c.state+"/"+c.action+"/"+c.actor] = true
	}
	if len(seen) != 4*3*2 || len(table) != 4*3*2 {
		t.Fatalf("model table covers %d of 24 combinations in %d rows", len(seen), len(table))
	}

	eachEnv(t, func(t *testing.T, e *env) {
		user, _ := e.account("gov@example.com")
		proposer := e.govIdentity(user, "laptop")
		ratifier := e.govIdentity(user, "ci")
		// other shares the proposer's machine label: a different key is a
		// different identity (decision 3).
		other := e.govIdentity(user, "laptop")
		actors := map[string]govIdentity{"proposer": proposer, "other": other}

		for _, c := range table {
			t.Run(c.state+"/"+c.action+"/"+c.actor, func(t *testing.T) {
				p := e.govPropose(proposer.token, govDenyBody("agent-"+c.state, "fs.write"))
				id := p["proposal_id"].(string)
				switch c.state {
				case "ratified":
					e.govTransition(ratifier.token, id, "ratify")
				case "enacted":
					e.govTransition(ratifier.token, id, "ratify")
					e.govTransition(ratifier.token, id, "enact")
				case "rejected":
					e.govTransition(ratifier.token, id, "reject")
				}
				before := e.govGet(proposer.token, id)
				if got := before.JSON(t)["proposal"].(map[string]any)["status"]; got != c.state {
					t.Fatalf("setup reached %v, want %s", got, c.state)
				}
				tipBefore := e.govTip(proposer.token)
				nBefore := len(e.govEvents(proposer.token))

				actor := actors[c.actor]
				r := e.do("POST", govProposalsPath+"/"+id+"/"+c.action, actor.token, nil)

				if c.code != "" {
					wantProblem(t, r, http.StatusConflict, c.code)
					if after := e.govGet(proposer.token, id); !bytes.Equal(after.Body, before.Body) {
						t.Fatalf("a refused %s changed the proposal:\nbefore %s\nafter  %s", c.action, before.Body, after.Body)
					}
					if got := e.govTip(proposer.token); got != tipBefore {
						t.Fatalf("a refused %s appended to the chain: %s -> %s", c.action, tipBefore, got)
					}
					return
				}
				if r.Status != http.StatusOK {
					t.Fatalf("%s: %d %s", c.action, r.Status, r.Body)
				}
				got := r.JSON(t)["proposal"].(map[string]any)
				if got["status"] != c.next {
					t.Fatalf("status = %v, want %s", got["status"], c.next)
				}
				stamp := map[string]string{"ratify": "ratified", "enact": "enacted", "reject": "rejected"}[c.action]
				who := map[string]string{"ratify": "ratifier", "enact": "enactor", "reject": "rejector"}[c.action]
				if got[stamp+"_at"] == nil {
					t.Fatalf("%s_at not set: %v", stamp, got)
				}
				wantActor := map[string]any{"identity": actor.id, "kind": "api_key", "machine": actor.machine}
				if fmt.Sprint(got[who]) != fmt.Sprint(wantActor) {
					t.Fatalf("%s = %v, want %v", who, got[who], wantActor)
				}
				// Everything else is as it was; a later read shows the same.
				prev := before.JSON(t)["proposal"].(map[string]any)
				for k, v := range prev {
					if k == "status" || k == stamp+"_at" || k == who {
						continue
					}
					if fmt.Sprint(got[k]) != fmt.Sprint(v) {
						t.Fatalf("%s changed %s: %v -> %v", c.action, k, v, got[k])
					}
				}
				if read := e.govGet(proposer.token, id).JSON(t)["proposal"]; fmt.Sprint(read) != fmt.Sprint(got) {
					t.Fatalf("read after %s differs:\n%v\n%v", c.action, read, got)
				}
				// Exactly one chain event, of the action's type, by the caller, at the tip.
				evs := e.govEvents(proposer.token)
				if len(evs) != nBefore+1 {
					t.Fatalf("%d governance events appended, want 1", len(evs)-nBefore)
				}
				var tip map[string]any
				json.Unmarshal([]byte(e.govTip(proposer.token)), &tip)
				if evs[0]["event_type"] != domain.EventType(c.action) || evs[0]["event_id"] != tip["event_id"] || evs[0]["api_key_id"] != actor.id {
					t.Fatalf("newest event %v (tip %v), want %s by %s", evs[0], tip, domain.EventType(c.action), actor.id)
				}
			})
		}
	})
}

// Creation: the proposer is the caller as an Actor, governance.proposed is
// appended, evidence.threshold is the configured one.
func TestGovernanceCreate(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, _ := e.account("gov@example.com")
		a := e.govIdentity(user, "laptop")
		tipBefore := e.govTip(a.token)
		r := e.do("POST", govProposalsPath, a.token, map[string]any{
			"kind": "deny_scope", "note": "keeps writing to /etc",
			"evidence": map[string]any{"blocked_attempts": 7, "threshold": 1},
			"subject":  map[string]any{"subagent": "writer", "tool": "fs.write"},
		})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		p := r.JSON(t)["proposal"].(map[string]any)
		if !strings.HasPrefix(p["proposal_id"].(string), "prop-") || p["status"] != "proposed" || p["kind"] != "deny_scope" || p["note"] != "keeps writing to /etc" {
			t.Fatalf("proposal: %v", p)
		}
		if ev := p["evidence"].(map[string]any); ev["blocked_attempts"] != float64(7) || ev["threshold"] != float64(3) {
			t.Fatalf("evidence = %v, want blocked_attempts 7 and the configured threshold 3", ev)
		}
		if fmt.Sprint(p["proposer"]) != fmt.Sprint(map[string]any{"identity": a.id, "kind": "api_key", "machine": "laptop"}) {
			t.Fatalf("proposer = %v", p["proposer"])
		}
		if p["proposed_at"] != "2026-11-21T12:00:00.000000+00:00" {
			t.Fatalf("proposed_at = %v", p["proposed_at"])
		}
		for _, k := range []string{"ratified_at", "ratifier", "enacted_at", "enactor", "rejected_at", "rejector"} {
			if v, ok := p[k]; !ok || v != nil {
				t.Fatalf("%s = %v (present %v), want null", k, v, ok)
			}
		}
		if e.govTip(a.token) == tipBefore {
			t.Fatal("creation appended nothing")
		}
		evs := e.govEvents(a.token)
		if len(evs) != 1 || evs[0]["event_type"] != "governance.proposed" || evs[0]["api_key_id"] != a.id {
			t.Fatalf("events = %v", evs)
		}
		// The event's raw records the proposal (covered by payload_hash).
		stored, err := e.store.EventByID(context.Background(), nil, user, evs[0]["event_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		json.Unmarshal(stored.Raw, &raw)
		if raw["proposal_id"] != p["proposal_id"] || raw["kind"] != "deny_scope" || fmt.Sprint(raw["subject"]) != fmt.Sprint(p["subject"]) {
			t.Fatalf("governance.proposed raw = %s", stored.Raw)
		}
	})
}

// evidence.threshold records the configured threshold, and the configured
// threshold is what blocked_attempts must reach.
func TestGovernanceConfiguredThreshold(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.GovernanceThreshold = 5 })
		_, tok := e.account("gov@example.com")
		body := func(n int) map[string]any {
			return map[string]any{"kind": "policy_note", "evidence": map[string]any{"blocked_attempts": n, "threshold": 1},
				"subject": map[string]any{"subagent": "s"}}
		}
		tipBefore := e.govTip(tok)
		m := wantProblem(t, e.do("POST", govProposalsPath, tok, body(4)), 422, "threshold_not_met")
		if m["threshold"] != float64(5) || m["blocked_attempts"] != float64(4) {
			t.Fatalf("problem = %v", m)
		}
		if e.govTip(tok) != tipBefore {
			t.Fatal("a refused proposal appended to the chain")
		}
		p := e.govPropose(tok, body(5))
		if ev := p["evidence"].(map[string]any); ev["threshold"] != float64(5) {
			t.Fatalf("evidence.threshold = %v, want the configured 5", ev["threshold"])
		}
	})
}

// subject.scope is a synonym stored as tool.
func TestGovernanceScopeIsTool(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, tok := e.account("gov@example.com")
		for _, subj := range []map[string]any{
			{"subagent": "s", "scope": "fs.write"},
			{"subagent": "s", "scope": "fs.write", "tool": "fs.write"},
			{"subagent": "s", "scope": "fs.write", "tool": nil},
		} {
			p := e.govPropose(tok, map[string]any{"kind": "deny_scope", "evidence": map[string]any{"blocked_attempts": 3}, "subject": subj})
			want := map[string]any{"subagent": "s", "tool": "fs.write"}
			if fmt.Sprint(p["subject"]) != fmt.Sprint(want) {
				t.Fatalf("subject %v stored as %v, want %v", subj, p["subject"], want)
			}
			read := e.govGet(tok, p["proposal_id"].(string)).JSON(t)["proposal"].(map[string]any)
			if fmt.Sprint(read["subject"]) != fmt.Sprint(want) {
				t.Fatalf("read subject = %v", read["subject"])
			}
		}
		// Neither tool nor scope: the whole sub-agent.
		p := e.govPropose(tok, map[string]any{"kind": "deny_scope", "evidence": map[string]any{"blocked_attempts": 3}, "subject": map[string]any{"subagent": "s"}})
		if sub := p["subject"].(map[string]any); sub["tool"] != nil {
			t.Fatalf("tool = %v, want null", sub["tool"])
		}
	})
}

// Every refusal of the governance routes: status and code, and nothing written.
func TestGovernanceErrorsWriteNothing(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, tok := e.account("gov@example.com")
		ok := func() map[string]any {
			return map[string]any{"kind": "deny_scope", "evidence": map[string]any{"blocked_attempts": 3}, "subject": map[string]any{"subagent": "s", "tool": "t"}}
		}
		with := func(mut func(m map[string]any)) map[string]any { m := ok(); mut(m); return m }
		cases := []struct {
			name   string
			body   any
			status int
			code   string
			field  string
		}{
			{"below threshold", with(func(m map[string]any) { m["evidence"] = map[string]any{"blocked_attempts": 2} }), 422, "threshold_not_met", ""},
			{"negative attempts", with(func(m map[string]any) { m["evidence"] = map[string]any{"blocked_attempts": -1} }), 422, "threshold_not_met", ""},
			{"unknown kind", with(func(m map[string]any) { m["kind"] = "deny" }), 422, "validation_error", "kind"},
			{"unknown kind below threshold", with(func(m map[string]any) {
				m["kind"] = "ban"
				m["evidence"] = map[string]any{"blocked_attempts": 0}
			}), 422, "validation_error", "kind"},
			{"missing kind", with(func(m map[string]any) { delete(m, "kind") }), 422, "validation_error", "kind"},
			{"missing evidence", with(func(m map[string]any) { delete(m, "evidence") }), 422, "validation_error", "evidence"},
			{"missing blocked_attempts", with(func(m map[string]any) { m["evidence"] = map[string]any{"threshold": 3} }), 422, "validation_error", "evidence.blocked_attempts"},
			{"blocked_attempts not an integer", with(func(m map[string]any) { m["evidence"] = map[string]any{"blocked_attempts": "3"} }), 422, "validation_error", "evidence.blocked_attempts"},
			{"missing subject", with(func(m map[string]any) { delete(m, "subject") }), 422, "validation_error", "subject"},
			{"missing subagent", with(func(m map[string]any) { m["subject"] = map[string]any{"tool": "t"} }), 422, "validation_error", "subject.subagent"},
			{"blank subagent", with(func(m map[string]any) { m["subject"] = map[string]any{"subagent": " "} }), 422, "validation_error", "subject.subagent"},
			{"blank tool", with(func(m map[string]any) { m["subject"] = map[string]any{"subagent": "s", "tool": ""} }), 422, "validation_error", "subject.tool"},
			{"scope differs from tool", with(func(m map[string]any) { m["subject"] = map[string]any{"subagent": "s", "tool": "a", "scope": "b"} }), 422, "validation_error", "subject.scope"},
			{"unknown field", with(func(m map[string]any) { m["subagent"] = "s" }), 422, "validation_error", "subagent"},
			{"malformed json", `{"kind":`, 400, "malformed_json", ""},
			{"empty body", "", 400, "malformed_json", ""},
		}
		tipBefore := e.govTip(tok)
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := wantProblem(t, e.do("POST", govProposalsPath, tok, c.body), c.status, c.code)
				if c.field != "" {
					errs, _ := m["errors"].([]any)
					if len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
						t.Fatalf("errors = %v, want field %q", m["errors"], c.field)
					}
				}
			})
		}
		wantProblem(t, e.do("GET", govProposalsPath+"?status=pending", tok, nil), 422, "validation_error")
		if e.govTip(tok) != tipBefore {
			t.Fatal("a refused proposal appended to the chain")
		}

		// Transition bodies: optional, strict when present.
		p := e.govPropose(tok, ok())
		id := p["proposal_id"].(string)
		tipBefore2 := e.govTip(tok)
		wantProblem(t, e.do("POST", govProposalsPath+"/"+id+"/reject", tok, map[string]any{"why": "x"}), 422, "validation_error")
		wantProblem(t, e.do("POST", govProposalsPath+"/"+id+"/reject", tok, map[string]any{"reason": 7}), 422, "validation_error")
		wantProblem(t, e.do("POST", govProposalsPath+"/"+id+"/reject", tok, `{"reason":`), 400, "malformed_json")
		wantProblem(t, e.do("POST", govProposalsPath+"/"+id+"/enact", tok, nil), 409, "not_ratified")
		wantProblem(t, e.do("POST", govProposalsPath+"/"+id+"/ratify", tok, nil), 409, "separation_of_powers")
		if e.govTip(tok) != tipBefore2 {
			t.Fatal("a refused transition appended to the chain")
		}
		if st := e.govGet(tok, id).JSON(t)["proposal"].(map[string]any)["status"]; st != "proposed" {
			t.Fatalf("status = %v after refusals", st)
		}

		// Only the one good proposal was written, and its one event.
		if n := e.do("GET", govProposalsPath, tok, nil).JSON(t)["count"]; n != float64(1) {
			t.Fatalf("count = %v, want 1", n)
		}
		if evs := e.govEvents(tok); len(evs) != 1 {
			t.Fatalf("%d governance events, want 1", len(evs))
		}
	})
}

// 404 proposal_not_found for an unknown id and for another account's id,
// byte for byte alike, on every route that names a proposal; nothing written.
func TestGovernanceNotFoundAcrossAccounts(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, mine := e.account("a@example.com")
		_, theirs := e.account("b@example.com")
		id := e.govPropose(theirs, govDenyBody("s", nil))["proposal_id"].(string)
		tipMine, tipTheirs := e.govTip(mine), e.govTip(theirs)
		for _, rt := range []struct{ method, suffix string }{{"GET", ""}, {"POST", "/ratify"}, {"POST", "/enact"}, {"POST", "/reject"}} {
			foreign := e.do(rt.method, govProposalsPath+"/"+id+rt.suffix, mine, nil)
			missing := e.do(rt.method, govProposalsPath+"/prop-00000000000000000000000000000000"+rt.suffix, mine, nil)
			wantProblem(t, foreign, 404, "proposal_not_found")
			wantProblem(t, missing, 404, "proposal_not_found")
			if !bytes.Equal(foreign.Body, missing.Body) {
				t.Fatalf("%s%s: another account's id answers\n%s\nbut a missing id\n%s", rt.method, rt.suffix, foreign.Body, missing.Body)
			}
		}
		if e.govTip(mine) != tipMine || e.govTip(theirs) != tipTheirs {
			t.Fatal("a 404 wrote to a chain")
		}
		if st := e.govGet(theirs, id).JSON(t)["proposal"].(map[string]any)["status"]; st != "proposed" {
			t.Fatalf("another account moved the proposal to %v", st)
		}
		if n := e.do("GET", govProposalsPath, mine, nil).JSON(t)["count"]; n != float64(0) {
			t.Fatalf("another account's proposal is listed: count %v", n)
		}
	})
}

// Separation of powers compares identities: the proposer's key cannot ratify
// whatever else the request carries; another key on the same machine can.
func TestGovernanceSeparationOfPowersByIdentity(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, _ := e.account("gov@example.com")
		proposer := e.govIdentity(user, "laptop")
		sameMachine := e.govIdentity(user, "laptop")
		id := e.govPropose(proposer.token, govDenyBody("s", "t"))["proposal_id"].(string)
		for _, h := range [][]string{
			nil,
			{"X-SVC-Surface", "mcp"},
			{"X-Machine-Id", "elsewhere"},
			{"X-SVC-Surface", "cli", "X-Machine", "ci", "X-Forwarded-For", "10.0.0.9"},
		} {
			r := e.do("POST", govProposalsPath+"/"+id+"/ratify", proposer.token, map[string]any{"reason": "me again"}, h...)
			wantProblem(t, r, 409, "separation_of_powers")
		}
		// The empty body and a JSON null are the same as no body.
		wantProblem(t, e.do("POST", govProposalsPath+"/"+id+"/ratify", proposer.token, "null"), 409, "separation_of_powers")
		p := e.govTransition(sameMachine.token, id, "ratify")
		if r := p["ratifier"].(map[string]any); r["identity"] != sameMachine.id || r["machine"] != "laptop" {
			t.Fatalf("ratifier = %v", r)
		}
	})
}

// Reasons are stored and recorded in the transition's chain event.
func TestGovernanceReasonRecorded(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, _ := e.account("gov@example.com")
		a, b := e.govIdentity(user, "m1"), e.govIdentity(user, "m2")
		id := e.govPropose(a.token, govDenyBody("s", "t"))["proposal_id"].(string)
		if r := e.do("POST", govProposalsPath+"/"+id+"/ratify", b.token, map[string]any{"reason": "seen the logs"}); r.Status != 200 {
			t.Fatalf("ratify: %d %s", r.Status, r.Body)
		}
		if r := e.do("POST", govProposalsPath+"/"+id+"/reject", a.token, map[string]any{"reason": "duplicate of another rule"}); r.Status != 200 {
			t.Fatalf("reject: %d %s", r.Status, r.Body)
		}
		sp, err := e.store.ProposalByID(context.Background(), nil, user, id)
		if err != nil {
			t.Fatal(err)
		}
		if sp.RatifyReason == nil || *sp.RatifyReason != "seen the logs" || sp.RejectReason == nil || *sp.RejectReason != "duplicate of another rule" || sp.EnactReason != nil {
			t.Fatalf("reasons: %v %v %v", sp.RatifyReason, sp.EnactReason, sp.RejectReason)
		}
		// Rejected after ratification keeps its ratifier (decision 5).
		if sp.Ratifier == nil || sp.Ratifier.Identity != b.id || sp.Rejector == nil || sp.Rejector.Identity != a.id {
			t.Fatalf("actors: %+v %+v", sp.Ratifier, sp.Rejector)
		}
		evs := e.govEvents(a.token, "governance.rejected")
		if len(evs) != 1 {
			t.Fatalf("rejected events: %v", evs)
		}
		stored, err := e.store.EventByID(context.Background(), nil, user, evs[0]["event_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		json.Unmarshal(stored.Raw, &raw)
		if raw["proposal_id"] != id || raw["reason"] != "duplicate of another rule" || raw["from"] != "ratified" || raw["status"] != "rejected" ||
			raw["actor"].(map[string]any)["identity"] != a.id {
			t.Fatalf("governance.rejected raw = %s", stored.Raw)
		}
	})
}

// The listing: newest first, status and exact sub-agent filters, count.
func TestGovernanceListFiltersAndOrder(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, _ := e.account("gov@example.com")
		a, b := e.govIdentity(user, "m1"), e.govIdentity(user, "m2")
		// The clock stands still: order must not depend on it.
		p1 := e.govPropose(a.token, govDenyBody("alpha", nil))["proposal_id"]
		p2 := e.govPropose(a.token, govDenyBody("beta", "t"))["proposal_id"]
		p3 := e.govPropose(a.token, govDenyBody("alpha", "t"))["proposal_id"]
		p4 := e.govPropose(a.token, govDenyBody("Alpha", "t"))["proposal_id"]
		e.govTransition(b.token, p2.(string), "ratify")
		e.govTransition(b.token, p3.(string), "reject")

		list := func(query string) []any {
			t.Helper()
			r := e.do("GET", govProposalsPath+query, a.token, nil)
			if r.Status != 200 {
				t.Fatalf("list %s: %d %s", query, r.Status, r.Body)
			}
			m := r.JSON(t)
			ps := m["proposals"].([]any)
			if m["count"] != float64(len(ps)) {
				t.Fatalf("count %v != %d", m["count"], len(ps))
			}
			ids := make([]any, len(ps))
			for i, p := range ps {
				ids[i] = p.(map[string]any)["proposal_id"]
			}
			return ids
		}
		for _, c := range []struct {
			query string
			want  []any
		}{
			{"", []any{p4, p3, p2, p1}},
			{"?status=", []any{p4, p3, p2, p1}},
			{"?status=proposed", []any{p4, p1}},
			{"?status=ratified", []any{p2}},
			{"?status=rejected", []any{p3}},
			{"?status=enacted", []any{}},
			{"?subagent=alpha", []any{p3, p1}},
			{"?subagent=Alpha", []any{p4}},
			{"?subagent=alp", []any{}},
			{"?status=proposed&subagent=alpha", []any{p1}},
		} {
			if got := list(c.query); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("list %q = %v, want %v", c.query, got, c.want)
			}
		}
	})
}

// 100 distinct identities ratify one proposal at once: exactly one wins, the
// others answer 409 invalid_transition, and one governance.ratified event is
// appended. On SQLite, and on two replicas sharing one PostgreSQL database.
func TestGovernanceConcurrentRatify(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		govRaceRatify(t, newEnv(t, storetest.DSN(t, storetest.SQLite), manyKeys))
	})
	t.Run("postgres-two-replicas", func(t *testing.T) {
		dsn := storetest.DSN(t, storetest.Postgres)
		govRaceRatify(t, newEnv(t, dsn, manyKeys), newEnv(t, dsn, manyKeys))
	})
}

// manyKeys lets an account hold a key for each of govRaceRatify's 100
// racers, beyond --max-keys-per-account's default.
func manyKeys(c *config.Config) { c.MaxKeys = 1000 }

func govRaceRatify(t *testing.T, replicas ...*env) {
	e := replicas[0]
	user, _ := e.account("gov@example.com")
	proposer := e.govIdentity(user, "proposer")
	id := e.govPropose(proposer.token, govDenyBody("s", "t"))["proposal_id"].(string)
	const n = 100
	ids := make([]govIdentity, n)
	for i := range ids {
		ids[i] = e.govIdentity(user, fmt.Sprintf("m%d", i))
	}
	type result struct {
		status int
		code   string
		body   []byte
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Minute}
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			srv := replicas[i%len(replicas)].srv
			req, _ := http.NewRequest("POST", srv.URL+govProposalsPath+"/"+id+"/ratify", nil)
			req.Header.Set("X-API-Key", ids[i].token)
			resp, err := client.Do(req)
			if err != nil {
				results[i] = result{status: -1, code: err.Error()}
				return
			}
			defer resp.Body.Close()
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			var m map[string]any
			json.Unmarshal(buf.Bytes(), &m)
			code, _ := m["code"].(string)
			results[i] = result{status: resp.StatusCode, code: code, body: buf.Bytes()}
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, r := range results {
		switch {
		case r.status == 200:
			if winner >= 0 {
				t.Fatalf("two ratifies succeeded: %d and %d", winner, i)
			}
			winner = i
		case r.status == 409 && r.code == "invalid_transition":
		default:
			t.Fatalf("ratify %d answered %d %s %s", i, r.status, r.code, r.body)
		}
	}
	if winner < 0 {
		t.Fatal("no ratify succeeded")
	}
	evs := e.govEvents(proposer.token, "governance.ratified")
	if len(evs) != 1 || evs[0]["api_key_id"] != ids[winner].id {
		t.Fatalf("governance.ratified events = %v, want one by %s", evs, ids[winner].id)
	}
	for _, r := range replicas {
		p := r.govGet(proposer.token, id).JSON(t)["proposal"].(map[string]any)
		if p["status"] != "ratified" || p["ratifier"].(map[string]any)["identity"] != ids[winner].id {
			t.Fatalf("proposal after the race: %v", p)
		}
	}
}

// EnactedRules, which the gate obeys: only enacted proposals, with the effect
// domain.GovernanceDenial gives them. (Gate-level tests through
// /v1/grants/status belong to the gate.)
func TestGovernanceEnactedRules(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		user, _ := e.account("gov@example.com")
		a, b := e.govIdentity(user, "m1"), e.govIdentity(user, "m2")
		enact := func(body map[string]any) string {
			id := e.govPropose(a.token, body)["proposal_id"].(string)
			e.govTransition(b.token, id, "ratify")
			e.govTransition(a.token, id, "enact")
			return id
		}
		kind := func(k string, subagent string, tool any) map[string]any {
			m := govDenyBody(subagent, tool)
			m["kind"] = k
			return m
		}
		str := func(s string) *string { return &s }
		rules := func() []domain.GovernanceRule {
			t.Helper()
			rs, err := e.app.EnactedRules(ctx, nil, user)
			if err != nil {
				t.Fatal(err)
			}
			return rs
		}
		denied := func(subagent string, tool *string) string {
			id, ok := domain.GovernanceDenial(rules(), subagent, tool)
			if !ok {
				return ""
			}
			return id
		}

		if rs := rules(); len(rs) != 0 {
			t.Fatalf("rules of a new account: %v", rs)
		}

		// Deny on one tool: that tool only.
		toolDeny := enact(govDenyBody("writer", "fs.write"))
		if got := denied("writer", str("fs.write")); got != toolDeny {
			t.Fatalf("writer/fs.write denied by %q, want %s", got, toolDeny)
		}
		if got := denied("writer", str("fs.read")); got != "" {
			t.Fatalf("writer/fs.read denied by %s", got)
		}
		if got := denied("writer", nil); got != "" {
			t.Fatalf("writer without tool denied by %s", got)
		}

		// Deny on the whole sub-agent: every tool, and no tool.
		agentDeny := enact(govDenyBody("rogue", nil))
		for _, tool := range []*string{nil, str("x"), str("fs.write")} {
			if got := denied("rogue", tool); got != agentDeny {
				t.Fatalf("rogue/%v denied by %q, want %s", tool, got, agentDeny)
			}
		}

		// allow_scope enacted later supersedes the earlier deny of its subject,
		// although the clock has not moved (enacted_at increases in chain order).
		allow := enact(kind("allow_scope", "rogue", nil))
		for _, tool := range []*string{nil, str("x")} {
			if got := denied("rogue", tool); got != "" {
				t.Fatalf("rogue/%v still denied by %s after allow %s", tool, got, allow)
			}
		}
		// ... and a newer deny supersedes the allow again.
		e.clock.Advance(time.Second)
		again := enact(govDenyBody("rogue", "x"))
		if got := denied("rogue", str("x")); got != again {
			t.Fatalf("rogue/x denied by %q, want %s", got, again)
		}
		if got := denied("rogue", str("y")); got != "" {
			t.Fatalf("rogue/y denied by %s", got)
		}

		// policy_note: a rule with no gate effect.
		note := enact(kind("policy_note", "quiet", nil))
		if got := denied("quiet", nil); got != "" {
			t.Fatalf("policy_note denied: %s", got)
		}

		// Rejected (after ratification or straight away) and merely ratified
		// proposals are never rules, so never named.
		rej := e.govPropose(a.token, govDenyBody("held", nil))["proposal_id"].(string)
		e.govTransition(b.token, rej, "ratify")
		e.govTransition(a.token, rej, "reject")
		rej2 := e.govPropose(a.token, govDenyBody("held", "t"))["proposal_id"].(string)
		e.govTransition(a.token, rej2, "reject")
		ratified := e.govPropose(a.token, govDenyBody("held", nil))["proposal_id"].(string)
		e.govTransition(b.token, ratified, "ratify")
		for _, tool := range []*string{nil, str("t")} {
			if got := denied("held", tool); got != "" {
				t.Fatalf("held/%v denied by %s: only enacted proposals are rules", tool, got)
			}
		}

		rs := rules()
		var ids []string
		for i, r := range rs {
			ids = append(ids, r.ProposalID)
			if i > 0 && !r.EnactedAt.After(rs[i-1].EnactedAt) {
				t.Fatalf("enacted_at does not increase: %v then %v", rs[i-1].EnactedAt, r.EnactedAt)
			}
		}
		want := []string{toolDeny, agentDeny, allow, again, note}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("rules = %v, want %v (oldest enactment first)", ids, want)
		}
		if rs[1].Tool != nil || rs[0].Tool == nil || *rs[0].Tool != "fs.write" || rs[2].Kind != "allow_scope" || rs[1].Subagent != "rogue" {
			t.Fatalf("rules: %+v", rs)
		}

		// Inside a transaction (as the gate calls it) the answer is the same.
		err := e.store.InTx(ctx, func(tx *sql.Tx) error {
			in, err := e.app.EnactedRules(ctx, tx, user)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(rs, in); diff != "" {
				t.Errorf("rules in a transaction differ (-read pool +tx):\n%s", diff)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Another account sees none of them.
		other, _ := e.account("other@example.com")
		if rs, err := e.app.EnactedRules(ctx, nil, other); err != nil || len(rs) != 0 {
			t.Fatalf("another account's rules: %v %v", rs, err)
		}
	})
}

// The proposals list comes in pages (limit, cursor; newest first), and the
// free text of a proposal is capped: a note of 900,000 bytes was once stored
// and copied into its chain event (issue 18).
func TestGovernanceListPagesAndCaps(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		_, tok := e.account("a@example.com")
		var ids []string
		for i := range 5 {
			p := e.govPropose(tok, govDenyBody(fmt.Sprintf("sub-%d", i), nil))
			ids = append([]string{p["proposal_id"].(string)}, ids...) // newest first
		}
		var got []string
		path := govProposalsPath + "?limit=2"
		for pages := 0; ; pages++ {
			r := e.do("GET", path, tok, nil)
			m := r.JSON(t)
			if r.Status != 200 || pages > 3 {
				t.Fatalf("%s: %d %s", path, r.Status, r.Body)
			}
			ps := m["proposals"].([]any)
			if m["count"] != float64(len(ps)) || len(ps) > 2 {
				t.Fatalf("page %d: %s", pages, r.Body)
			}
			for _, p := range ps {
				got = append(got, p.(map[string]any)["proposal_id"].(string))
			}
			next, full := m["next_cursor"].(float64)
			if full != (len(ps) == 2) {
				t.Fatalf("page %d of %d: next_cursor %v", pages, len(ps), m["next_cursor"])
			}
			if !full {
				break
			}
			path = fmt.Sprintf("%s?limit=2&cursor=%d", govProposalsPath, int64(next))
		}
		if diff := cmp.Diff(ids, got); diff != "" {
			t.Fatalf("pages (-want +got):\n%s", diff)
		}
		if m := e.do("GET", govProposalsPath, tok, nil).JSON(t); len(m["proposals"].([]any)) != 5 || m["next_cursor"] != nil {
			t.Fatalf("default page: %v", m)
		}
		for _, q := range []string{"limit=0", "limit=201", "limit=x", "limit=-1", "cursor=x", "cursor=-1"} {
			field, _, _ := strings.Cut(q, "=")
			m := wantProblem(t, e.do("GET", govProposalsPath+"?"+q, tok, nil), 422, "validation_error")
			if !namesField(m, field) {
				t.Fatalf("%s: %v", q, m)
			}
		}

		body := func(note, subagent string) map[string]any {
			b := govDenyBody(subagent, nil)
			b["note"] = note
			return b
		}
		before := e.fingerprint()
		for _, c := range []struct {
			body  map[string]any
			field string
		}{
			{body(strings.Repeat("n", domain.MaxNoteBytes+1), "s"), "note"},
			{body("n", strings.Repeat("s", domain.MaxNameBytes+1)), "subject.subagent"},
		} {
			m := wantProblem(t, e.do("POST", govProposalsPath, tok, c.body), 422, "validation_error")
			if !namesField(m, c.field) {
				t.Fatalf("%v", m)
			}
		}
		if e.fingerprint() != before {
			t.Fatal("an over-long proposal wrote")
		}
		e.govPropose(tok, body(strings.Repeat("n", domain.MaxNoteBytes), strings.Repeat("s", domain.MaxNameBytes)))
	})
}
