package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// TestConsoleByKeyboard: everything works by keyboard (issue #37
// "Accessible"). With key events only — Tab, Shift+Tab, Enter, Space and
// typed characters; no click, no script activating an element — a person
// skips to the content, signs in, moves between panels, creates a grant from
// the gate's form, revokes it through its confirmation page and ratifies a
// proposal another identity (the account's API key) made. Every element the
// Tab key reaches shows a visible focus indicator.
func TestConsoleByKeyboard(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		browser(t)
		e := newEnv(t, dsn)
		const email = "keys@example.com"
		userID, key := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		tb := newTab(t, e)

		// Sign in: the email field has focus on arrival; the email typed,
		// the form sent with Space on its button, the mailed code typed,
		// sent with Enter.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#email")))
		tb.tabTo(t, "#email", false)
		tb.typeText(t, email)
		tb.tabTo(t, `form[action="/console/signin"] button[type="submit"]`, false)
		tb.key(t, " ", false)
		tb.until(t, `document.readyState === "complete" && document.getElementById("code") !== null`)
		tb.tabTo(t, "#code", false)
		tb.typeText(t, e.lastCode(email))
		tb.key(t, kb.Enter, false)
		tb.until(t, `document.readyState === "complete" && document.querySelector('nav[aria-label="Panels"]') !== null`)
		if got := tb.text(t, "h1"); got != "Overview" {
			t.Fatalf("after signing in by keyboard the page is %q", got)
		}

		// Between panels: forward to Governance, back with Shift+Tab to
		// Gate, Enter.
		tb.tabTo(t, `nav a[href="/console/governance"]`, false)
		tb.tabTo(t, `nav a[href="/console/gate"]`, true)
		tb.key(t, kb.Enter, false)
		tb.page(t, "/console/gate", "Gate")

		// The first Tab on a page reaches the skip link, shown while
		// focused; Enter moves focus to the content, past the header and
		// the navigation: the next Tab is in the gate's form.
		tb.key(t, kb.Tab, false)
		if got := eval[string](t, tb, `document.activeElement.matches("a.skip[href='#main']") ? document.activeElement.textContent : ""`); got != "Skip to content" {
			t.Fatalf("the first Tab focuses %q, not the skip link", eval[string](t, tb, `document.activeElement.outerHTML`))
		}
		if !eval[bool](t, tb, `(r => r.left >= 0 && r.top >= 0 && r.width > 0 && r.right <= innerWidth)(document.activeElement.getBoundingClientRect())`) {
			t.Error("the focused skip link is not on screen")
		}
		tb.key(t, kb.Enter, false)
		tb.until(t, `location.hash === "#main" && document.activeElement === document.getElementById("main")`)
		tb.key(t, kb.Tab, false)
		if id := eval[string](t, tb, `document.activeElement.id`); id != "g-subagent" {
			t.Errorf("after skipping to the content, Tab focuses %s, not the form's first field", eval[string](t, tb, `document.activeElement.outerHTML`))
		}

		// A grant created from the form: each field reached by Tab and
		// typed into (the expiry keeps its default), sent with Enter on the
		// button.
		tb.tabTo(t, "#g-subagent", false)
		tb.typeText(t, "orch")
		tb.tabTo(t, "#g-tools", false)
		tb.typeText(t, "read, search")
		tb.tabTo(t, "#g-budget", false)
		tb.typeText(t, "10")
		tb.tabTo(t, `form[action="/console/gate"] button[type="submit"]`, false)
		tb.key(t, kb.Enter, false)
		tb.until(t, `document.readyState === "complete" && document.getElementById("created") !== null`)
		list, err := e.srv.App.ListGrants(ctx, p, new("orch"))
		if err != nil || len(list.Grants) != 1 || list.Grants[0].MaxToolCalls != 10 || strings.Join(list.Grants[0].AllowedTools, ",") != "read,search" {
			t.Fatalf("the grant made by keyboard: %+v, %v", list.Grants, err)
		}
		id := list.Grants[0].GrantID

		// Revoke: the row's link, then the confirmation page's button.
		tb.tabTo(t, `#grants a[href^="/console/gate/`+id+`/revoke"]`, false)
		tb.key(t, kb.Enter, false)
		tb.until(t, `document.readyState === "complete" && document.querySelector("form.confirm") !== null`)
		tb.tabTo(t, "form.confirm button", false)
		tb.key(t, kb.Enter, false)
		tb.until(t, `document.readyState === "complete" && document.getElementById("done") !== null`)
		if st, _ := e.srv.App.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: "orch"}, e.srv.App.Now()); st.Status != "revoked" {
			t.Errorf("after the revoke by keyboard the gate answers %s", st.Status)
		}

		// Ratify a proposal the API key made (another identity).
		var created api.ProposalResponse
		if st := e.api("POST", "/v1/governance/proposals", key, map[string]any{"kind": "deny_scope",
			"subject": map[string]any{"subagent": "worker", "tool": "write"}, "evidence": map[string]any{"blocked_attempts": 3}}, &created); st != http.StatusCreated {
			t.Fatalf("propose: %d", st)
		}
		pid := created.Proposal.ProposalID
		tb.tabTo(t, `nav a[href="/console/governance"]`, true)
		tb.key(t, kb.Enter, false)
		tb.page(t, "/console/governance", "Governance")
		tb.tabTo(t, `form[action="/console/governance/`+pid+`/ratify"] button`, false)
		tb.key(t, " ", false)
		tb.until(t, `document.readyState === "complete" && document.getElementById("done") !== null`)
		if got, _ := e.srv.App.Proposal(ctx, p, pid); got.Proposal.Status != "ratified" {
			t.Errorf("after ratifying by keyboard the proposal is %s", got.Proposal.Status)
		}
		tb.checkInert(t)
	})
}

// key presses one key (shift: with Shift held), then checks that whatever
// has focus shows it.
func (tb *tab) key(t *testing.T, k string, shift bool) {
	t.Helper()
	var opts []chromedp.KeyOption
	if shift {
		opts = append(opts, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	tb.run(t, chromedp.KeyEvent(k, opts...))
	if k == kb.Tab {
		if why := eval[string](t, tb, focusShown); why != "" {
			t.Errorf("no visible focus indicator: %s", why)
		}
	}
}

// focusShown is "" when the focused element draws a visible focus
// indicator (an outline of at least 2px, of a colour that is not
// transparent), else why not.
const focusShown = `(() => {
	const el = document.activeElement;
	if (!el || el === document.body) { return "nothing has focus"; }
	const s = getComputedStyle(el);
	if (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2 && s.outlineColor !== "rgba(0, 0, 0, 0)") { return ""; }
	return el.outerHTML.slice(0, 160) + " (outline " + s.outlineStyle + " " + s.outlineWidth + " " + s.outlineColor + ")";
})()`

// tabTo presses Tab (back: Shift+Tab) until the element sel matches has
// focus.
func (tb *tab) tabTo(t *testing.T, sel string, back bool) {
	t.Helper()
	expr := `document.activeElement !== null && document.activeElement.matches(` + jsString(sel) + `)`
	for range 100 {
		if eval[bool](t, tb, expr) {
			return
		}
		tb.key(t, kb.Tab, back)
	}
	t.Fatalf("Tab never reached %s", sel)
}

// typeText types s into the focused element, a key event per character.
func (tb *tab) typeText(t *testing.T, s string) {
	t.Helper()
	tb.run(t, chromedp.KeyEvent(s))
}

// page waits for the page at path, titled h1, after a navigation.
func (tb *tab) page(t *testing.T, path, h1 string) {
	t.Helper()
	tb.until(t, `document.readyState === "complete" && location.pathname === `+jsString(path))
	if got := tb.text(t, "h1"); got != h1 {
		t.Fatalf("at %s the page is %q, want %q", path, got, h1)
	}
}
