package console_test

// The approvals panel's rules over HTTP: the same use case and refusals as
// POST /v1/approvals/{id}/approve and /deny, shown on the panel.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// sha256Hex is the lowercase hex SHA-256 of s.
func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// holdCalls gives subagent a grant for tool and a rule holding its calls of
// tool, through the API with key.
func (e *env) holdCalls(key, subagent, tool string) {
	e.t.Helper()
	if st := e.api("POST", "/v1/grants", key, map[string]any{"subagent": subagent, "allowed_tools": []string{tool}, "max_tool_calls": 10,
		"expires_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)}, nil); st != http.StatusCreated {
		e.t.Fatalf("grant: %d", st)
	}
	if st := e.api("POST", "/v1/approval-rules", key, map[string]any{"subagent": subagent, "tool": tool}, nil); st != http.StatusCreated {
		e.t.Fatalf("rule: %d", st)
	}
}

// heldCall makes a call a rule holds, through the API with key (argsText
// sent as approval_args_text unless ""), and returns its approval id.
func (e *env) heldCall(key, eventID, subagent, tool, input, argsText string) string {
	e.t.Helper()
	body := map[string]any{"subagent": subagent, "tool": tool, "event_id": eventID, "raw": map[string]any{"tool_input_sha256": sha256Hex(input)}}
	if argsText != "" {
		body["approval_args_text"] = argsText
	}
	var res api.ToolCallResponse
	if st := e.api("POST", "/v1/tool-calls", key, body, &res); st != http.StatusOK || res.Decision != api.DecisionAsk || res.Approval == nil {
		e.t.Fatalf("held call: %d %+v", st, res)
	}
	return res.Approval.ApprovalID
}

// TestApprovalsPanelHTTP: an empty panel shows the connect help; a call an
// API key made is listed pending with its sub-agent, tool, digest and the
// arguments' text (escaped), in the page and in the live rows; a decision
// without CSRF is refused; approve with a note and deny go through the use
// case (the approver a session), a second decision is 409
// approval_not_pending on the panel; a call the viewer's own session made is
// shown its buttons disabled with the reason and refused 409
// separation_of_powers if sent anyway.
func TestApprovalsPanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "approver@example.com"
		userID, key := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		c := client(t)
		tok := signIn(t, e, c, email)

		r := do(t, c, "GET", e.srv.URL+"/console/approvals", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, "Nothing recorded yet") || !strings.Contains(r.body, `id="no-pending"`) ||
			!strings.Contains(r.body, `<li><a href="/console/approvals" aria-current="page">Approvals</a></li>`) {
			t.Fatalf("an empty approvals panel: %d\n%s", r.status, r.body)
		}

		const sub, tool = `work<b>er</b>`, `ba<i>sh</i>`
		e.holdCalls(key, sub, tool)
		input := `{"command":"<script>window.__pwned=1</script>"}`
		id := e.heldCall(key, "evt-ap-1", sub, tool, input, input)
		plain := e.heldCall(key, "evt-ap-2", sub, tool, "ls", "")

		r = do(t, c, "GET", e.srv.URL+"/console/approvals", nil)
		if strings.Contains(r.body, "<b>er</b>") || strings.Contains(r.body, "<i>sh</i>") || strings.Contains(r.body, "<script>window") {
			t.Fatalf("client-written values are not escaped:\n%s", r.body)
		}
		row := regexp.MustCompile(`(?s)<tr id="pending-` + id + `">.*?</tr>`).FindString(r.body)
		for _, want := range []string{"work&lt;b&gt;er&lt;/b&gt;", "ba&lt;i&gt;sh&lt;/i&gt;", sha256Hex(input),
			`&lt;script&gt;window.__pwned=1&lt;/script&gt;`, "this is exactly the input being approved",
			`action="/console/approvals/` + id + `/approve"`, `formaction="/console/approvals/` + id + `/deny"`, `name="csrf" value="` + tok + `"`,
			"asked by api_key", `class="countdown"`} {
			if !strings.Contains(row, want) {
				t.Errorf("the pending row lacks %q:\n%s", want, row)
			}
		}
		if plainRow := regexp.MustCompile(`(?s)<tr id="pending-` + plain + `">.*?</tr>`).FindString(r.body); !strings.Contains(plainRow, "Text not sent") {
			t.Errorf("a call without text:\n%s", plainRow)
		}
		if strings.Contains(r.body, "Nothing recorded yet") || strings.Index(r.body, "pending-"+plain) > strings.Index(r.body, "pending-"+id) {
			t.Errorf("pending, newest first, without the connect help:\n%s", r.body)
		}
		// The live rows: the same, alone.
		frag := do(t, c, "GET", e.srv.URL+"/console/approvals/rows", nil)
		if frag.status != http.StatusOK || strings.Contains(frag.body, "<html") || !strings.Contains(frag.body, `<tr id="pending-`+id+`">`) ||
			!strings.Contains(frag.body, `value="`+tok+`"`) {
			t.Fatalf("the rows: %d\n%s", frag.status, frag.body)
		}

		// Approve: CSRF first, then the use case with the note.
		if r := do(t, c, "POST", e.srv.URL+"/console/approvals/"+id+"/approve", url.Values{"note": {"ok"}}); r.status != http.StatusForbidden {
			t.Fatalf("approve without CSRF: %d", r.status)
		}
		// A note over the API's cap (max:"note") is refused as the API refuses it.
		if r := do(t, c, "POST", e.srv.URL+"/console/approvals/"+id+"/approve", url.Values{"csrf": {tok}, "note": {strings.Repeat("n", 4097)}}); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.body, "note: must be at most 4096 bytes") {
			t.Fatalf("a note over the cap: %d\n%s", r.status, r.body)
		}
		if got, _ := e.srv.App.Approval(ctx, p, id, 0); got.Status != api.ApprovalPending {
			t.Fatalf("a refused form decided: %s", got.Status)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/approvals/"+id+"/approve", url.Values{"csrf": {tok}, "note": {"<i>checked</i> the command"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/approvals?done=approved" {
			t.Fatalf("approve: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
		}
		got, _ := e.srv.App.Approval(ctx, p, id, 0)
		if got.Status != api.ApprovalApproved || got.DecidedBy == nil || got.DecidedBy.Kind != app.KindSession || got.Note == nil ||
			*got.Note != "<i>checked</i> the command" || got.ArgsText != nil {
			t.Fatalf("the approved approval: %+v", got)
		}
		// Decided: 409 approval_not_pending, on the panel above the rows.
		r = do(t, c, "POST", e.srv.URL+"/console/approvals/"+id+"/deny", url.Values{"csrf": {tok}})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "409 approval_not_pending") ||
			strings.Index(r.body, `id="refused"`) < strings.Index(r.body, `id="pending-h"`) || strings.Index(r.body, `id="refused"`) > strings.Index(r.body, `id="rows"`) {
			t.Fatalf("a second decision: %d\n%s", r.status, r.body)
		}
		// Deny the other.
		r = do(t, c, "POST", e.srv.URL+"/console/approvals/"+plain+"/deny", url.Values{"csrf": {tok}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/approvals?done=denied" {
			t.Fatalf("deny: %d %q", r.status, r.header.Get("Location"))
		}
		r = do(t, c, "GET", e.srv.URL+"/console/approvals?done=approved", nil)
		if !strings.Contains(r.body, `id="done"`) || !strings.Contains(r.body, `id="no-pending"`) || strings.Contains(r.body, "<i>checked</i>") ||
			!regexp.MustCompile(`(?s)<tr id="decided-`+id+`">.*approved.*session <code class="hash">.*&lt;i&gt;checked&lt;/i&gt; the command`).MatchString(r.body) ||
			!regexp.MustCompile(`(?s)<tr id="decided-`+plain+`">.*denied`).MatchString(r.body) {
			t.Errorf("after the decisions:\n%s", r.body)
		}
		// The approved call runs once.
		var res api.ToolCallResponse
		e.api("POST", "/v1/tool-calls", key, map[string]any{"subagent": sub, "tool": tool, "event_id": "evt-ap-3", "approval_id": id,
			"raw": map[string]any{"tool_input_sha256": sha256Hex(input)}}, &res)
		if res.Decision != api.DecisionAllow || !res.Metered {
			t.Fatalf("the approved call sent again: %+v", res)
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/approvals/ap-0000/approve", url.Values{"csrf": {tok}}); r.status != http.StatusNotFound ||
			!strings.Contains(r.body, "approval_not_found") {
			t.Errorf("a missing approval: %d", r.status)
		}

		// The session's own call: disabled with the reason, and refused.
		var session string
		for _, ck := range c.Jar.Cookies(mustURL(t, e.srv.URL+"/console/")) {
			if ck.Name == api.SessionCookie {
				session = ck.Value
			}
		}
		sp, err := e.srv.App.AuthenticateSession(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		own, err := e.srv.App.GateToolCall(ctx, sp, api.ToolCallRequest{Subagent: new(sub), Tool: new(tool), EventID: new("evt-ap-own"),
			Raw: []byte(`{"tool_input_sha256":"` + sha256Hex("own") + `"}`)}, "dashboard")
		if err != nil || own.Approval == nil {
			t.Fatalf("the session's own call: %+v %v", own, err)
		}
		ownID := own.Approval.ApprovalID
		r = do(t, c, "GET", e.srv.URL+"/console/approvals", nil)
		if !strings.Contains(r.body, `<button type="button" disabled aria-describedby="why-`+ownID+`">Approve</button>`) ||
			!strings.Contains(r.body, "another identity must decide it (separation of powers)") ||
			strings.Contains(r.body, `action="/console/approvals/`+ownID+`/approve"`) {
			t.Errorf("the session's own call is not shown disabled with its reason:\n%s", r.body)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/approvals/"+ownID+"/approve", url.Values{"csrf": {tok}})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "409 separation_of_powers") {
			t.Fatalf("the session approves its own call: %d\n%s", r.status, r.body)
		}
		// Counted as the API counts its approvals routes, on surface dashboard.
		if u, err := e.srv.App.DashboardUsage(ctx, p); err != nil || u.CallsToday.ByCapability["approvals"] < 8 {
			t.Errorf("usage: %v %+v", err, u.CallsToday)
		}
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
