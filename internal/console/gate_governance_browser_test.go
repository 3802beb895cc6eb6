package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// TestGateGovernanceInBrowser walks the gate and governance panels in
// Chromium: a grant is created from the form and listed; a child broader
// than it is refused beside the form with the API's code; a child within it
// is drawn under it in the tree; it is revoked through the confirmation
// page. A proposal is made; its proposer's session sees ratify disabled with
// the reason; a second browser signed in to the account — another identity —
// ratifies and enacts it, and the rule is in force. Sub-agent names and the
// note carry hostile payloads that must stay inert.
func TestGateGovernanceInBrowser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		browser(t)
		e := newEnv(t, dsn)
		const email = "gatekeeper@example.com"
		userID, _ := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		tb := newTab(t, e)
		tb.signIn(t, e, email)

		// Gate: empty, then a grant created from the form.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/gate"), chromedp.WaitVisible(chromedp.CSS("#g-subagent")))
		if got := tb.text(t, "main"); !strings.Contains(got, "Nothing recorded yet") {
			t.Errorf("an empty gate lacks the connect help:\n%s", got)
		}
		createGrant := func(subagent, parent, tools, budget, wait string) {
			t.Helper()
			tb.fill(t, map[string]string{"#g-subagent": subagent, "#g-parent": parent, "#g-tools": tools, "#g-budget": budget})
			tb.run(t,
				settledClick(`form[action="/console/gate"] button`),
				chromedp.WaitVisible(chromedp.CSS(wait)))
		}
		createGrant("orch", "", "read, search", "10", "#created")
		if got := tb.text(t, "#grants"); !strings.Contains(got, "orch") || !strings.Contains(got, "0 of 10 (10 left)") {
			t.Errorf("the grants table:\n%s", got)
		}
		// Overreach: refused beside the form, with the API's status and code.
		createGrant(hostile[1], "orch", "read\nwrite", "20", "#refused")
		if got := tb.text(t, "#refused"); !strings.Contains(got, "403 grant_overreach") || !strings.Contains(got, "allowed_tools") ||
			!strings.Contains(got, "max_tool_calls") {
			t.Errorf("the overreach refusal says %q", got)
		}
		if n := eval[int](t, tb, `document.querySelector("#create-grant-h").parentElement.querySelectorAll("#refused").length`); n != 1 {
			t.Error("the refusal is not beside the create form")
		}
		tb.checkInert(t)
		createGrant(hostile[1], "orch", "read", "5", "#created")
		if got := eval[string](t, tb, `document.querySelector("#tree > ul > li > ul > li > strong").textContent`); got != hostile[1] {
			t.Errorf("the tree's child is %q", got)
		}
		tb.screenshot(t, "gate")
		tb.axe(t)
		tb.checkInert(t)

		// Revoke, confirmed on its own page.
		list, _ := e.srv.App.ListGrants(ctx, p, new(hostile[1]))
		id := list.Grants[0].GrantID
		tb.run(t, settledClick(`#grants a[href^="/console/gate/`+id+`/revoke"]`), chromedp.WaitVisible(chromedp.CSS("form.confirm")))
		if got := tb.text(t, "#revoke-grant"); !strings.Contains(got, hostile[1]) {
			t.Errorf("the confirmation shows:\n%s", got)
		}
		if st, _ := e.srv.App.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: hostile[1]}, e.srv.App.Now()); st.Status != "authorized" {
			t.Fatalf("the confirmation page revoked: %s", st.Status)
		}
		tb.axe(t)
		tb.checkInert(t)
		tb.run(t, settledClick("form.confirm button"), chromedp.WaitVisible(chromedp.CSS("#done")))
		if st, _ := e.srv.App.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: hostile[1]}, e.srv.App.Now()); st.Status != "revoked" {
			t.Errorf("after the revoke the gate answers %s", st.Status)
		}
		if n := eval[int](t, tb, `document.querySelectorAll('#grants a[href^="/console/gate/`+id+`/revoke"]').length`); n != 0 {
			t.Error("the revoked grant is still offered for revocation")
		}

		// Governance: two proposals by this session.
		propose := func(subagent, tool string) string {
			t.Helper()
			tb.run(t, chromedp.Navigate(e.srv.URL+"/console/governance"), chromedp.WaitVisible(chromedp.CSS("#p-subagent")))
			tb.fill(t, map[string]string{"#p-kind": "deny_scope", "#p-subagent": subagent, "#p-tool": tool, "#p-blocked": "3", "#p-note": hostile[0]})
			tb.run(t, settledClick(`form[action="/console/governance"] button`),
				chromedp.WaitVisible(chromedp.CSS("#done")))
			ps, _ := e.srv.App.Proposals(ctx, p, api.ProposalQuery{Status: "proposed"})
			return ps.Proposals[0].ProposalID
		}
		first := propose(hostile[1], "write")
		second := propose("orch", "")
		for _, id := range []string{first, second} {
			sel := `#row-` + id + ` button[disabled][aria-describedby="why-` + id + `"]`
			if n := eval[int](t, tb, `document.querySelectorAll(`+jsString(sel)+`).length`); n != 1 {
				t.Errorf("the proposer's ratify of %s is not disabled", id)
			}
			if got := tb.text(t, "#why-"+id); !strings.Contains(got, "another identity must ratify it (separation of powers)") {
				t.Errorf("the reason given: %q", got)
			}
		}
		tb.checkInert(t)

		// A second browser, signed in to the account: another identity.
		other := newTab(t, e)
		other.signIn(t, e, email)
		other.run(t, chromedp.Navigate(e.srv.URL+"/console/governance"), chromedp.WaitVisible(chromedp.CSS("#proposals-proposed")),
			settledClick(`form[action="/console/governance/`+first+`/ratify"] button`),
			chromedp.WaitVisible(chromedp.CSS("#done")))
		if got := other.text(t, "#proposals-ratified"); !strings.Contains(got, first) {
			t.Errorf("the ratified proposals:\n%s", got)
		}
		// The ratified page shows #done too: wait for the enacted one.
		other.run(t, settledClick(`form[action="/console/governance/`+first+`/enact"] button`))
		other.until(t, `document.readyState === "complete" && location.search === "?done=enacted" && document.getElementById("rules") !== null`)
		if got := other.text(t, "#rules"); !strings.Contains(got, first) || !strings.Contains(got, "deny_scope") {
			t.Errorf("the rules in force:\n%s", got)
		}
		other.axe(t)
		other.checkInert(t)
		got, _ := e.srv.App.Proposal(ctx, p, first)
		if pr := got.Proposal; pr.Status != "enacted" || pr.Ratifier == nil || pr.Ratifier.Identity == pr.Proposer.Identity {
			t.Errorf("the proposal: %+v", pr)
		}

		// The proposer's view: the rule in force, the other still waiting.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/governance"), chromedp.WaitVisible(chromedp.CSS("#rules")))
		if got := tb.text(t, "#proposals-enacted"); !strings.Contains(got, first) {
			t.Errorf("the enacted proposals:\n%s", got)
		}
		tb.screenshot(t, "governance")
		tb.axe(t)
		tb.checkInert(t)
	})
}

// fill sets the values of form fields by selector, as typing them would
// leave them (a value set by script: no key events needed).
func (tb *tab) fill(t *testing.T, values map[string]string) {
	t.Helper()
	for sel, v := range values {
		if !eval[bool](t, tb, `(el => { if (!el) return false; el.value = `+jsString(v)+`; return el.value === `+jsString(v)+` })(document.querySelector(`+jsString(sel)+`))`) {
			t.Fatalf("could not set %s to %q", sel, v)
		}
	}
}
