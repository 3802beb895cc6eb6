package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// TestApprovalsInBrowser walks the approvals panel in Chromium: a call an
// API key makes, held by a rule, appears pending without a reload; the
// signed-in person approves it with a note, and the agent's resend runs
// once (the next is approval_used); another is denied, and its resend is
// refused. The sub-agent, the tool and the arguments' text carry hostile
// payloads that must stay inert.
func TestApprovalsInBrowser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		browser(t)
		e := newEnv(t, dsn)
		const email = "approver@example.com"
		userID, key := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		sub, tool := hostile[1], hostile[3]
		e.holdCalls(key, sub, tool)
		// One waiting before the page is opened, without text.
		early := e.heldCall(key, "evt-b-early", sub, tool, "early", "")

		tb := newTab(t, e)
		tb.signIn(t, e, email)
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/approvals"), chromedp.WaitVisible(chromedp.CSS("#live.on")))
		if got := tb.text(t, "#pending-"+early); !strings.Contains(got, sub) || !strings.Contains(got, tool) || !strings.Contains(got, "Text not sent") {
			t.Errorf("the waiting call's row:\n%s", got)
		}

		// A note being typed survives the live refresh a new call brings.
		tb.run(t, chromedp.SendKeys(chromedp.CSS("#note-"+early), "half a note"),
			chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
		typedThrough := e.heldCall(key, "evt-b-typed", sub, tool, "typed", "")
		tb.waitRow(t, typedThrough)
		if got := eval[string](t, tb, `document.getElementById("note-`+early+`").value`); got != "half a note" {
			t.Errorf("the note typed before the refresh is %q", got)
		}
		tb.run(t, chromedp.Evaluate[chromedp.Void](`document.getElementById("note-`+early+`").value = ""`))

		// A call by the API key appears live, its text shown as text.
		argsText := `{"command":"` + hostile[0] + hostile[4] + `"}`
		id := e.heldCall(key, "evt-b-live", sub, tool, argsText, argsText)
		tb.waitRow(t, id)
		if got := tb.text(t, "#pending-"+id+" pre.argstext"); got != argsText {
			t.Errorf("the arguments' text shows %q, want %q", got, argsText)
		}
		if got := tb.text(t, "#pending-"+id); !strings.Contains(got, sub) || !strings.Contains(got, "exactly the input being approved") {
			t.Errorf("the live row:\n%s", got)
		}
		if got := tb.text(t, "#pending-"+id+" .countdown"); !strings.HasPrefix(got, "in ") {
			t.Errorf("the expiry shows %q", got)
		}
		tb.checkInert(t)

		// Approve with a note; the resend is allowed once.
		tb.run(t,
			chromedp.SendKeys(chromedp.CSS("#note-"+id), "checked the command"),
			settledClick(`button[aria-label="Approve `+id+`"]`),
			chromedp.WaitVisible(chromedp.CSS("#done")))
		if got, _ := e.srv.App.Approval(ctx, p, id, 0); got.Status != api.ApprovalApproved || got.Note == nil || *got.Note != "checked the command" ||
			got.DecidedBy == nil || got.DecidedBy.Kind != "session" {
			t.Fatalf("after approve: %+v", got)
		}
		resend := func(eventID, approvalID, input string) api.ToolCallResponse {
			t.Helper()
			var res api.ToolCallResponse
			if st := e.api("POST", "/v1/tool-calls", key, map[string]any{"subagent": sub, "tool": tool, "event_id": eventID,
				"approval_id": approvalID, "raw": map[string]any{"tool_input_sha256": sha256Hex(input)}}, &res); st != http.StatusOK {
				t.Fatalf("resend: %d", st)
			}
			return res
		}
		if res := resend("evt-b-run", id, argsText); res.Decision != api.DecisionAllow || !res.Metered {
			t.Fatalf("the approved call sent again: %+v", res)
		}
		if res := resend("evt-b-again", id, argsText); res.Decision != api.DecisionDeny || res.GateStatus != api.GateApprovalUsed {
			t.Fatalf("sent a second time: %+v", res)
		}

		// Deny the early one; its resend is refused.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/approvals"), chromedp.WaitVisible(chromedp.CSS("#pending-"+early)),
			settledClick(`button[aria-label="Deny `+early+`"]`),
			chromedp.WaitVisible(chromedp.CSS("#decided-"+early)))
		if got := tb.text(t, "#done"); !strings.HasPrefix(got, "Denied") {
			t.Errorf("after deny: %q", got)
		}
		if res := resend("evt-b-denied", early, "early"); res.Decision != api.DecisionDeny || res.GateStatus != api.GateApprovalDenied {
			t.Fatalf("the denied call sent again: %+v", res)
		}
		if got := tb.text(t, "#decided"); !strings.Contains(got, "used") || !strings.Contains(got, "denied") || !strings.Contains(got, "checked the command") {
			t.Errorf("the decided table:\n%s", got)
		}
		tb.checkInert(t)

		// The picture: one waiting with its text, two decided.
		waiting := e.heldCall(key, "evt-b-pic", sub, tool, argsText, argsText)
		tb.waitRow(t, waiting)
		tb.screenshot(t, "approvals")
		tb.axe(t)
		tb.checkInert(t)
	})
}

// waitRow waits, without reloading, for approval id's pending row.
func (tb *tab) waitRow(t *testing.T, id string) {
	t.Helper()
	tb.run(t, chromedp.Poll[chromedp.Void](`document.getElementById("pending-`+id+`") !== null`, chromedp.WithPollingTimeout(15*time.Second)))
}
