package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// The approvals verbs end to end through run() against the real API on
// both stores: a rule, a held call (made through pkg/client, as the hook
// and the proxy make it), watch, separation of powers, approve, the call
// run once, deny, and the rule deleted.
func TestApprovalVerbs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		userID, agentKey := s.Account(t, "cli-ap@example.com")
		approverKey := s.Key(t, userID, api.CreateKeyRequest{Scopes: []string{"approvals"}})
		agent, approver := cliEnv(s.URL, agentKey), cliEnv(s.URL, approverKey)
		runJSON(t, agent, 0, "grants", "create", "--subagent", "deployer", "--tools", "shell", "--max-calls", "5")
		rule := runJSON(t, agent, 0, "approval-rules", "create", "--subagent", "deployer", "--tool", "*", "--ttl", "5m")
		if rule["ttl_seconds"] != float64(300) || rule["tool"] != "*" {
			t.Fatalf("approval-rules create: %v", rule)
		}
		if out, _, err := runOut(t, agent, "approval-rules", "list"); err != nil || !strings.Contains(out, "rule_id="+rule["rule_id"].(string)) {
			t.Fatalf("approval-rules list: %v %q", err, out)
		}

		c, err := client.New(s.URL, agentKey)
		if err != nil {
			t.Fatal(err)
		}
		sub, tool := "deployer", "shell"
		digest := strings.Repeat("ab", 32)
		call := func() *api.ToolCallResponse {
			t.Helper()
			raw, _ := json.Marshal(map[string]string{"tool_input_sha256": digest})
			res, err := c.GateToolCall(context.Background(), api.ToolCallRequest{Subagent: &sub, Tool: &tool, Raw: raw})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		held := call()
		if held.Decision != "ask" || held.Approval == nil {
			t.Fatalf("held call: %+v", held)
		}
		id := held.Approval.ApprovalID

		// watch prints the pending approval as one JSON line.
		out, _, err := runOut(t, approver, "approvals", "watch", "--count", "1")
		if err != nil || !strings.Contains(out, `"approval_id":"`+id+`"`) || strings.Count(out, "\n") != 1 {
			t.Fatalf("approvals watch: %v %q", err, out)
		}
		if l := runJSON(t, approver, 0, "approvals", "list", "--status", "pending"); len(l["approvals"].([]any)) != 1 {
			t.Fatalf("approvals list: %v", l)
		}
		// The key that made the call may not approve it (exit 1, the problem printed).
		if p := runJSON(t, agent, 1, "approvals", "approve", id); p["code"] != "separation_of_powers" {
			t.Fatalf("approve by the caller: %v", p)
		}
		if a := runJSON(t, approver, 0, "approvals", "approve", id, "--note", "ok"); a["status"] != "approved" || a["note"] != "ok" {
			t.Fatalf("approve: %v", a)
		}
		if a := runJSON(t, approver, 0, "approvals", "get", id, "--wait", "1s"); a["status"] != "approved" {
			t.Fatalf("get --wait: %v", a)
		}
		// The call sent again with the approval id runs once.
		raw, _ := json.Marshal(map[string]string{"tool_input_sha256": digest})
		again, err := c.GateToolCall(context.Background(), api.ToolCallRequest{Subagent: &sub, Tool: &tool, Raw: raw, ApprovalID: &id})
		if err != nil || again.Decision != "allow" || !again.Metered {
			t.Fatalf("approved call: %+v %v", again, err)
		}

		// Deny another; deleting the rule lets calls run without asking.
		id2 := call().Approval.ApprovalID
		if a := runJSON(t, approver, 0, "approvals", "deny", id2); a["status"] != "denied" {
			t.Fatalf("deny: %v", a)
		}
		if out, _, err := runOut(t, agent, "approval-rules", "delete", rule["rule_id"].(string)); err != nil || !strings.HasPrefix(out, "deleted: ") {
			t.Fatalf("approval-rules delete: %v %q", err, out)
		}
		if res := call(); res.Decision != "allow" {
			t.Fatalf("after the rule's deletion: %+v", res)
		}

		// The export proves the approved call offline.
		dir := t.TempDir()
		export, _, err := runOut(t, agent, "chain", "export")
		if err != nil {
			t.Fatal(err)
		}
		pubDoc, _, err := runOut(t, agent, "chain", "public-key")
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(filepath.Join(dir, "export.ndjson"), []byte(export), 0o600))
		must(t, os.WriteFile(filepath.Join(dir, "key.json"), []byte(pubDoc), 0o600))
		rep := runJSON(t, noEnv, 0, "verify", "export", filepath.Join(dir, "export.ndjson"), "--service-key", filepath.Join(dir, "key.json"))
		if rep["valid"] != true || rep["approved_calls"] != float64(1) {
			t.Fatalf("verify export: %v", rep)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
