package httpapi_test

import (
	"strings"
	"testing"
	"time"
)

// The gate obeys enacted governance (SPEC.md "Grant gate answer": proposal
// enacted → denied_by_governance for that sub-agent and tool, naming the
// proposal; a rejected proposal never appears as a reason).
func TestGateObeysGovernance(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, root := e.account("gov-gate@example.com")
		proposer, ratifier := e.govIdentity(user, "agent"), e.govIdentity(user, "human")
		expires := e.clock.Now().Add(24 * time.Hour).Format(time.RFC3339)
		g := e.grant(root, map[string]any{"subagent": "worker", "expires_at": expires, "max_tool_calls": 10, "allowed_tools": []string{"read_file", "bash"}})
		gid := grantIDOf(g)
		enact := func(body map[string]any) string {
			p := e.govPropose(proposer.token, body)
			id := p["proposal_id"].(string)
			e.govTransition(ratifier.token, id, "ratify")
			e.govTransition(ratifier.token, id, "enact")
			return id
		}
		denied := func(tool string, proposalID string) {
			t.Helper()
			params := []string{"subagent", "worker"}
			if tool != "" {
				params = append(params, "tool", tool)
			}
			s := e.status(root, params...)
			wantStatus(t, s, "denied_by_governance")
			if s["proposal_id"] != proposalID {
				t.Fatalf("tool %q: proposal_id %v, want %s", tool, s["proposal_id"], proposalID)
			}
		}
		authorized := func(tool string) map[string]any {
			t.Helper()
			params := []string{"subagent", "worker"}
			if tool != "" {
				params = append(params, "tool", tool)
			}
			s := e.status(root, params...)
			wantStatus(t, s, "authorized")
			if _, ok := s["proposal_id"]; ok {
				t.Fatalf("authorized answer names a proposal: %v", s)
			}
			return s
		}

		// A rejected proposal never becomes a reason.
		rejected := e.govPropose(proposer.token, govDenyBody("worker", "bash"))["proposal_id"].(string)
		e.govTransition(ratifier.token, rejected, "ratify")
		e.govTransition(ratifier.token, rejected, "reject")
		if s := authorized("bash"); strings.Contains(s["reason"].(string), rejected) {
			t.Fatalf("a rejected proposal is named: %v", s)
		}
		// Ratified but not enacted: not yet in force.
		pending := e.govPropose(proposer.token, govDenyBody("worker", "bash"))["proposal_id"].(string)
		e.govTransition(ratifier.token, pending, "ratify")
		authorized("bash")

		// Deny on one tool: that tool only; other tools and tool-less calls pass.
		denyBash := pending
		e.govTransition(ratifier.token, denyBash, "enact")
		denied("bash", denyBash)
		authorized("read_file")
		authorized("")
		// A use names no tool, so a deny on one tool does not stop it.
		if r := e.do("POST", "/v1/grants/"+gid+"/use", root, map[string]any{"subagent": "worker", "n": 1}); r.Status != 200 {
			t.Fatalf("use under a tool deny: %d %s", r.Status, r.Body)
		}

		// Deny on the whole sub-agent: every tool and the tool-less call.
		e.clock.Advance(time.Second)
		denyAll := enact(govDenyBody("worker", nil))
		denied("read_file", denyAll)
		denied("", denyAll)
		denied("bash", denyAll)
		r := e.do("POST", "/v1/grants/"+gid+"/use", root, map[string]any{"subagent": "worker", "n": 1})
		if m := wantProblem(t, r, 409, "not_authorized"); m["gate_status"] != "denied_by_governance" {
			t.Fatalf("use under a sub-agent deny: %v", m)
		}

		// allow_scope on the whole sub-agent, enacted later, supersedes both denies.
		e.clock.Advance(time.Second)
		allow := map[string]any{"kind": "allow_scope", "evidence": map[string]any{"blocked_attempts": 3}, "subject": map[string]any{"subagent": "worker", "tool": nil}}
		enact(allow)
		authorized("bash")
		authorized("read_file")
		authorized("")
		if r := e.do("POST", "/v1/grants/"+gid+"/use", root, map[string]any{"subagent": "worker", "n": 1}); r.Status != 200 {
			t.Fatalf("use after allow_scope: %d %s", r.Status, r.Body)
		}

		// A newer deny on one tool takes effect again; a policy_note changes nothing.
		e.clock.Advance(time.Second)
		again := enact(govDenyBody("worker", "bash"))
		denied("bash", again)
		e.clock.Advance(time.Second)
		enact(map[string]any{"kind": "policy_note", "evidence": map[string]any{"blocked_attempts": 3}, "subject": map[string]any{"subagent": "worker", "tool": "bash"}, "note": "watch it"})
		denied("bash", again)
		authorized("read_file")

		// Another sub-agent is never affected.
		e.grant(root, map[string]any{"subagent": "worker-2", "expires_at": expires, "max_tool_calls": 10, "allowed_tools": []string{"bash"}})
		wantStatus(t, e.status(root, "subagent", "worker-2", "tool", "bash"), "authorized")
	})
}
