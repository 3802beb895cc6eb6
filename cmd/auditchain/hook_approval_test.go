package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// A call an approval rule holds, through `auditchain hook` as the host runs
// it (a process per call): refused at once naming the approval (no
// --approval-wait); once another key approves, the model's retry of the same
// call runs on it; with --approval-wait the hook waits for the decision and
// runs the call; a denied one is refused. Both stores.
func TestHookWaitsForApproval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newHookWorld(t, dsn)
		ctx := context.Background()
		person := w.holdBash(t)
		pending := func() string {
			t.Helper()
			l, err := person.Approvals(ctx, api.ApprovalPending, 0)
			if err != nil || len(l.Approvals) == 0 {
				t.Fatalf("pending approvals: %v %v", l, err)
			}
			return l.Approvals[0].ApprovalID
		}
		deploy := map[string]any{"command": "make deploy"}

		// No wait: refused, the reason names the approval and says to try later.
		out, _, exit := hookProcess(t, w.env, claudeCall("PreToolUse", "toolu_a1", "Bash", deploy, nil), "--host", "claude-code")
		id := pending()
		if exit != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, id) || !strings.Contains(out, "try the same call again later") {
			t.Fatalf("held call: exit %d %s", exit, out)
		}
		// Still pending: the retry is refused again, and no second approval is asked for.
		if out, _, _ := hookProcess(t, w.env, claudeCall("PreToolUse", "toolu_a2", "Bash", deploy, nil), "--host", "claude-code"); !strings.Contains(out, id) {
			t.Fatalf("retry while pending: %s", out)
		}
		if l, _ := person.Approvals(ctx, "", 0); len(l.Approvals) != 1 {
			t.Fatalf("approvals after a retry = %d, want 1", len(l.Approvals))
		}
		if _, err := person.Approve(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		if out, errOut, exit := hookProcess(t, w.env, claudeCall("PreToolUse", "toolu_a3", "Bash", deploy, nil), "--host", "claude-code"); exit != 0 || out != "{}\n" {
			t.Fatalf("retry once approved: exit %d %q %s", exit, out, errOut)
		}
		if u := w.uses(t, "worker"); u != 1 {
			t.Fatalf("uses = %d, want 1", u)
		}

		// --approval-wait: the hook waits, and runs the call once approved.
		done := make(chan string, 1)
		go func() {
			out, _, _ := hookProcess(t, w.env, claudeCall("PreToolUse", "toolu_b1", "Bash", map[string]any{"command": "make release"}, nil),
				"--host", "claude-code", "--timeout", "20s", "--approval-wait", "15s")
			done <- out
		}()
		var waiting string
		for waiting == "" {
			if l, err := person.Approvals(ctx, api.ApprovalPending, 0); err == nil && len(l.Approvals) > 0 {
				waiting = l.Approvals[0].ApprovalID
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if _, err := person.Approve(ctx, waiting, new("go")); err != nil {
			t.Fatal(err)
		}
		if out := <-done; out != "{}\n" {
			t.Fatalf("waiting hook: %q", out)
		}
		// A denial while it waits: refused.
		go func() {
			out, _, _ := hookProcess(t, w.env, claudeCall("PreToolUse", "toolu_c1", "Bash", map[string]any{"command": "rm -rf /"}, nil),
				"--host", "claude-code", "--timeout", "20s", "--approval-wait", "15s")
			done <- out
		}()
		waiting = ""
		for waiting == "" {
			if l, err := person.Approvals(ctx, api.ApprovalPending, 0); err == nil && len(l.Approvals) > 0 {
				waiting = l.Approvals[0].ApprovalID
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if _, err := person.Deny(ctx, waiting, nil); err != nil {
			t.Fatal(err)
		}
		if out := <-done; !strings.Contains(out, `"permissionDecision":"deny"`) || !strings.Contains(out, "approval_denied") {
			t.Fatalf("denied while waiting: %q", out)
		}
		if rep := w.verifyOffline(t); rep.ApprovedCalls != 2 {
			t.Fatalf("export proves %d approved calls, want 2", rep.ApprovedCalls)
		}
	})
}

// holdBash puts the hook world's Bash calls by "worker" under an approval
// rule and returns a person's client: another key of the account, holding
// only the approvals capability (another identity than the hook's).
func (w *hookWorld) holdBash(t *testing.T) *client.Client {
	t.Helper()
	if _, err := w.c.CreateApprovalRule(context.Background(), api.ApprovalRuleRequest{Subagent: new("worker"), Tool: new("Bash")}); err != nil {
		t.Fatal(err)
	}
	person, err := client.New(w.s.URL, w.s.Key(t, w.user, api.CreateKeyRequest{Scopes: []string{"approvals"}}))
	if err != nil {
		t.Fatal(err)
	}
	return person
}
