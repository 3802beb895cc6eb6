package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/pkg/api"
)

// The arguments' text of a held call (docs/approvals.md "The arguments'
// text"): off by default, kept only beside the pending approval, never on
// the chain or in an export.

// TestApprovalArgsText: without approval_args_text the approval has no
// text; with it, GET /v1/approvals/{id} shows it (and whether it hashes to
// the digest) while pending, the list does not, the tool_call event and the
// export hold no trace of it, and the decision forgets it; over the cap or
// against the text rule it is 422 and nothing is written.
func TestApprovalArgsText(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		s := e.approvalSetup("args@example.com")

		// Default off: absent.
		plain := e.heldCall(s.agent, "evt-at-0", "ls")
		got := e.do("GET", "/v1/approvals/"+plain, s.approver, nil).JSON(t)
		if _, ok := got["args_text"]; ok {
			t.Fatalf("an approval without text shows args_text: %v", got)
		}
		if _, ok := got["args_text_matches"]; ok {
			t.Fatalf("an approval without text shows args_text_matches: %v", got)
		}

		// With the text: the canonical input, so it matches the digest.
		const secret = `{"command":"rm -rf build && echo SECRET-ARGS-7f3a"}`
		sum := sha256.Sum256([]byte(secret))
		digest := hex.EncodeToString(sum[:])
		body := map[string]any{"subagent": "s", "tool": "bash", "event_id": "evt-at-1",
			"raw": map[string]any{"tool_input_sha256": digest}, "approval_args_text": secret}
		res := e.toolCall(s.agent, body)
		id := res["approval"].(map[string]any)["approval_id"].(string)
		got = e.do("GET", "/v1/approvals/"+id, s.approver, nil).JSON(t)
		if got["args_text"] != secret || got["args_text_matches"] != true {
			t.Fatalf("the approval's text = %v / %v", got["args_text"], got["args_text_matches"])
		}
		// Text that is not the bound input reads as not matching.
		other := e.toolCall(s.agent, map[string]any{"subagent": "s", "tool": "bash", "event_id": "evt-at-2",
			"raw": map[string]any{"tool_input_sha256": digestOf("x")}, "approval_args_text": "cut…"})
		otherID := other["approval"].(map[string]any)["approval_id"].(string)
		if g := e.do("GET", "/v1/approvals/"+otherID, s.approver, nil).JSON(t); g["args_text"] != "cut…" || g["args_text_matches"] != false {
			t.Fatalf("a text that is not the input: %v / %v", g["args_text"], g["args_text_matches"])
		}
		// The list never carries it.
		if r := e.do("GET", "/v1/approvals", s.approver, nil); strings.Contains(string(r.Body), "SECRET-ARGS") || strings.Contains(string(r.Body), "args_text") {
			t.Fatalf("the list carries the text: %s", r.Body)
		}
		// Neither the event nor the export.
		if raw := e.rawOf(s.user, "evt-at-1"); strings.Contains(fmt.Sprint(raw), "SECRET-ARGS") {
			t.Fatalf("the event holds the text: %v", raw)
		}
		exp := e.do("GET", "/v1/chain/export", s.agent, nil)
		if exp.Status != http.StatusOK || strings.Contains(string(exp.Body), "SECRET-ARGS") || strings.Contains(string(exp.Body), "approval_args_text") {
			t.Fatalf("the export: %d, holds the text: %v", exp.Status, strings.Contains(string(exp.Body), "SECRET-ARGS"))
		}
		// A replay of the call (its answer lost) is the same call, text or not.
		delete(body, "approval_args_text")
		if r := e.do("POST", "/v1/tool-calls", s.agent, body); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay without the text: %d %s", r.Status, r.Body)
		}

		// Decided: forgotten.
		if r := e.do("POST", "/v1/approvals/"+id+"/approve", s.approver, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		if g := e.do("GET", "/v1/approvals/"+id, s.approver, nil).JSON(t); g["args_text"] != nil {
			t.Fatalf("a decided approval still shows its text: %v", g)
		}
		var n int
		if err := e.store.DB().QueryRow(`SELECT COUNT(*) FROM approval_args WHERE approval_id = $1`, id).Scan(&n); err != nil || n != 0 {
			t.Fatalf("kept rows of the decided approval: %d (%v)", n, err)
		}

		// Refused: over the cap, or against the text rule; nothing written.
		countEvents := func() (n int) {
			t.Helper()
			if err := e.store.DB().QueryRow(`SELECT COUNT(*) FROM events`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		events := countEvents()
		for name, txt := range map[string]string{"over the cap": strings.Repeat("a", api.MaxApprovalArgsText+1), "NUL": "a\x00b"} {
			r := e.do("POST", "/v1/tool-calls", s.agent, map[string]any{"subagent": "s", "tool": "bash", "event_id": "evt-at-bad",
				"raw": map[string]any{"tool_input_sha256": digestOf("y")}, "approval_args_text": txt})
			if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "approval_args_text") {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		if r := e.do("GET", "/v1/approvals?status=pending", s.approver, nil).JSON(t)["approvals"].([]any); len(r) != 2 {
			t.Errorf("pending after the refusals = %d, want 2", len(r))
		}
		if n := countEvents(); n != events {
			t.Errorf("the refused calls wrote %d events", n-events)
		}
	})
}

// TestApprovalArgsTextExpiry: the expiry job forgets the text of the
// approvals it marks, and an approval past its time shows none before.
func TestApprovalArgsTextExpiry(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		e.restart(e.dsn, envOptions{config: func(c *config.Config) { c.CronSecret = "s" }}, nil)
		s := e.approvalSetup("args-exp@example.com")
		res := e.toolCall(s.agent, map[string]any{"subagent": "s", "tool": "bash", "event_id": "evt-ae-1",
			"raw": map[string]any{"tool_input_sha256": digestOf("z")}, "approval_args_text": "z"})
		id := res["approval"].(map[string]any)["approval_id"].(string)
		e.clock.Advance(2 * time.Minute)
		if g := e.do("GET", "/v1/approvals/"+id, s.approver, nil).JSON(t); g["status"] != "expired" || g["args_text"] != nil {
			t.Fatalf("past its time: %v", g)
		}
		if r := e.do("POST", "/v1/internal/cron/approval-expiry", "", nil, "X-Cron-Secret", "s"); r.Status != 200 {
			t.Fatalf("cron: %d %s", r.Status, r.Body)
		}
		var n int
		if err := e.store.DB().QueryRow(`SELECT COUNT(*) FROM approval_args`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("kept rows after the expiry job: %d (%v)", n, err)
		}
	})
}

// TestApprovalExpiredListMergesMarkedAndDue: status=expired lists the rows
// the job marked and those past due it has not marked yet (pending or
// approved), together newest first and within the limit.
func TestApprovalExpiredListMergesMarkedAndDue(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		s := e.approvalSetup("exp-list@example.com")
		held := func(n string) string {
			id := e.heldCall(s.agent, "evt-el-"+n, n)
			e.clock.Advance(time.Second)
			return id
		}
		a, b := held("a"), held("b")
		e.clock.Advance(70 * time.Second)
		if n, err := e.app.ApprovalExpirySweep(t.Context()); err != nil || n.Expired != 2 {
			t.Fatalf("sweep: %+v %v", n, err)
		}
		c, d := held("c"), held("d")
		if r := e.do("POST", "/v1/approvals/"+c+"/approve", s.approver, nil); r.Status != 200 {
			t.Fatalf("approve: %d %s", r.Status, r.Body)
		}
		e.clock.Advance(70 * time.Second)
		fresh := held("e")
		ids := func(query string) []string {
			var out []string
			for _, ap := range e.do("GET", "/v1/approvals?"+query, s.approver, nil).JSON(t)["approvals"].([]any) {
				out = append(out, ap.(map[string]any)["approval_id"].(string))
			}
			return out
		}
		if got, want := ids("status=expired"), []string{d, c, b, a}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("expired = %v, want %v", got, want)
		}
		if got, want := ids("status=expired&limit=3"), []string{d, c, b}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("expired, limit 3 = %v, want %v", got, want)
		}
		if got := ids("status=pending"); fmt.Sprint(got) != fmt.Sprint([]string{fresh}) {
			t.Errorf("pending = %v, want [%s]", got, fresh)
		}
	})
}
