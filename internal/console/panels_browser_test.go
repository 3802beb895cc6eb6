package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// TestPanelsInBrowser walks the notifications, webhooks, keys, legal,
// usage, export and team panels in Chromium as a person does: the legal gate
// sends the person to the legal panel, where the documents are accepted; a
// key is created (its token shown once, then never) and revoked; a webhook
// endpoint is added (its secret shown once), a test is sent and its delivery
// to a real receiver on loopback listed; a preference is set in the grid;
// the export is downloaded and verifies offline; a team is created and a
// member invited. Client-written text (a key's label and machine, a webhook
// URL, a team's name) carries hostile payloads that must stay inert.
func TestPanelsInBrowser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		browser(t)
		e := newEnvConfig(t, dsn, func(c *config.Config) { c.WebhookAllowPrivate, c.LegalEnforce, c.Teams = true, true, true })
		const email = "panels@example.com"
		userID, key := e.srv.Account(t, email)
		tb := newTab(t, e)
		tb.signIn(t, e, email)

		// Legal: the other panels wait for the required documents, and
		// ask for them (accept.go); the Legal panel is one way there.
		if got := tb.text(t, "h1"); !strings.Contains(got, "Accept the required documents") {
			t.Fatalf("with unmet documents the first page is %q", got)
		}
		tb.run(t, settledClick(`main a[href="/console/legal"]`), chromedp.WaitVisible(chromedp.CSS("#unmet")))
		for left := len(e.srv.App.LegalDocuments().Documents) - 1; left >= 0; left-- {
			tb.run(t,
				settledClick(`form.accept input[name="accepted"]`),
				settledClick(`form.accept button`))
			tb.until(t, `document.readyState === "complete" && document.getElementById("recorded") !== null && document.querySelectorAll("form.accept").length === `+strconv.Itoa(left))
		}
		if n := eval[int](t, tb, `document.querySelectorAll("form.accept").length`); n != 0 {
			t.Errorf("%d documents still offered for acceptance", n)
		}
		if rows := tb.text(t, "#acceptances"); !strings.Contains(rows, "beta_terms") || !strings.Contains(rows, "portal") {
			t.Errorf("acceptances:\n%s", rows)
		}
		tb.screenshot(t, "legal")
		tb.axe(t)
		tb.checkInert(t)
		// Accepted: the account's key appends again.
		e.appendEvent(key, map[string]any{"event_id": "evt-p1", "event_type": "tool_call", "tool": "t", "decision": "allow",
			"machine_id": hostile[1], "ts": "2026-11-28T08:00:00+00:00"})

		// Keys: created, its token shown once, then never; revoked.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#k-label")),
			chromedp.SendKeys(chromedp.CSS("#k-label"), hostile[0]),
			chromedp.SendKeys(chromedp.CSS("#k-machine"), hostile[4]),
			settledClick(`#scope-events\:read`),
			settledClick(`form[action="/console/keys"] button`),
			chromedp.WaitVisible(chromedp.CSS("#new-token")))
		token := eval[string](t, tb, `document.getElementById("new-token").value`)

		if !strings.HasPrefix(token, "ac_") {
			t.Fatalf("the token shown is %q", token)
		}
		if st := e.api("GET", "/v1/machines", token, nil, nil); st != http.StatusOK {
			t.Errorf("the created key on the API: %d", st)
		}
		tb.checkInert(t)
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")))
		if eval[bool](t, tb, `document.documentElement.outerHTML.includes(`+jsString(token)+`)`) {
			t.Fatal("the token is shown again")
		}
		if rows := tb.text(t, "#keys"); !strings.Contains(rows, hostile[0]) || !strings.Contains(rows, "events:read") {
			t.Errorf("the keys table:\n%s", rows)
		}
		if rows := tb.text(t, "#machines"); !strings.Contains(rows, hostile[1]) {
			t.Errorf("the machines table:\n%s", rows)
		}
		keys, _ := e.srv.App.Keys(context.Background(), appPrincipal(userID))
		id := keys.Keys[0].ID
		tb.screenshot(t, "keys")
		tb.axe(t)
		tb.run(t, settledClick(`form[action="/console/keys/`+id+`/revoke"] button`), chromedp.WaitVisible(chromedp.CSS("#done")))
		if st := e.api("GET", "/v1/machines", token, nil, nil); st != http.StatusUnauthorized {
			t.Errorf("the revoked key on the API: %d", st)
		}
		if n := eval[int](t, tb, `document.querySelectorAll('form[action="/console/keys/`+id+`/revoke"]').length`); n != 0 {
			t.Error("the revoked key is still offered for revocation")
		}
		tb.checkInert(t)

		// Webhooks: an endpoint on a real receiver, its secret shown once;
		// a test delivered and its attempt listed.
		rc := newReceiver(t, http.StatusNoContent)
		target := rc.URL + "/hook"
		// An endpoint whose URL carries markup, subscribed to another type.
		if _, err := e.srv.App.CreateWebhook(context.Background(), appPrincipal(userID), api.CreateWebhookRequest{
			URL: new(rc.URL + `/x?q="><img src=x onerror="window.__pwned=1">`), Types: []string{"chain.repair_run"}}); err != nil {
			t.Fatal(err)
		}
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/webhooks"), chromedp.WaitVisible(chromedp.CSS("#h-url")),
			chromedp.SendKeys(chromedp.CSS("#h-url"), target),
			settledClick(`#type-grant\.revoked`),
			settledClick(`form[action="/console/webhooks"] button`),
			chromedp.WaitVisible(chromedp.CSS("#new-secret")))
		secret := eval[string](t, tb, `document.getElementById("new-secret").value`)
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("the secret shown is %q", secret)
		}
		tb.checkInert(t)
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/webhooks"), chromedp.WaitVisible(chromedp.CSS("#endpoints")))
		if eval[bool](t, tb, `document.documentElement.outerHTML.includes(`+jsString(secret)+`)`) {
			t.Fatal("the secret is shown again")
		}
		tb.run(t, chromedp.SetValue(chromedp.CSS("#t-type"), "grant.revoked"),
			settledClick(`form[action="/console/webhooks/test"] button`),
			chromedp.WaitVisible(chromedp.CSS("#tested")))
		if got := tb.text(t, "#tested"); !strings.Contains(got, "webhook (queued)") {
			t.Errorf("the test says %q", got)
		}
		if _, err := e.srv.App.DrainWebhooks(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rc.count() != 1 {
			t.Fatalf("the receiver got %d deliveries", rc.count())
		}
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/webhooks"), chromedp.WaitVisible(chromedp.CSS("#endpoints")))
		if got := tb.text(t, "#endpoints"); !strings.Contains(got, "1 of 1 delivered") || !strings.Contains(got, `onerror="window.__pwned=1"`) {
			t.Errorf("the endpoints table:\n%s", got)
		}
		tb.screenshot(t, "webhooks")
		tb.axe(t)
		hooks, _ := e.srv.App.Webhooks(context.Background(), appPrincipal(userID))
		hookID := hooks.Webhooks[1].ID
		tb.run(t, settledClick(`#endpoints a[href$="`+hookID+`"]`), chromedp.WaitVisible(chromedp.CSS("#deliveries")))
		if got := tb.text(t, "#deliveries"); !strings.Contains(got, "HTTP 204") || !strings.Contains(got, " ms") {
			t.Errorf("the attempts:\n%s", got)
		}
		tb.checkInert(t)

		// Notifications: the inbox lists the notices; one cell of the grid
		// is turned off and stays off.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/notifications"), chromedp.WaitVisible(chromedp.CSS("#inbox")))
		if got := tb.text(t, "#inbox"); !strings.Contains(got, "grant.revoked") || !strings.Contains(got, "key.created") {
			t.Errorf("the inbox:\n%s", got)
		}
		tb.run(t, settledClick(`#on-grant\.revoked-email`),
			settledClick(`form[action="/console/notifications/preferences"] button`),
			chromedp.WaitVisible(chromedp.CSS("#saved")))
		prefs, _ := e.srv.App.Preferences(context.Background(), appPrincipal(userID))
		for _, p := range prefs.Preferences {
			if want := !(p.Type == "grant.revoked" && p.Channel == "email"); p.Enabled != want {
				t.Errorf("%s on %s: enabled %v", p.Type, p.Channel, p.Enabled)
			}
		}
		if eval[bool](t, tb, `document.getElementById("on-grant.revoked-email").checked`) {
			t.Error("the grid shows the cell still on")
		}
		tb.screenshot(t, "notifications")
		tb.axe(t)
		tb.checkInert(t)

		// Usage: the chart is drawn.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/usage"), chromedp.WaitVisible(chromedp.CSS("#usage-chart")))
		if n := eval[int](t, tb, `document.querySelectorAll("#usage-chart rect").length`); n == 0 {
			t.Error("the chart has no bar")
		}
		tb.screenshot(t, "usage")
		tb.axe(t)
		tb.checkInert(t)

		// Export: both downloads, checked offline.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/export"), chromedp.WaitVisible(chromedp.CSS("#verify-command")))
		if got := tb.text(t, "#verify-command"); got != "auditchain verify export auditchain-export.ndjson --service-key auditchain-public-key.json" {
			t.Errorf("the command is %q", got)
		}
		fetch := func(sel string) string {
			ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
			defer cancel()
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector(`+jsString(sel)+`).href).then(r => r.text())`, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		rep := verifyExport(t, fetch("#download-export"), fetch("#download-key"))
		if rep.Events < 1 || !rep.Whole {
			t.Errorf("the export's report: %+v", rep)
		}
		tb.screenshot(t, "export")
		tb.axe(t)
		tb.checkInert(t)

		// Team: one created (its name hostile), a member invited.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/team"), chromedp.WaitVisible(chromedp.CSS("#team-name")),
			chromedp.SendKeys(chromedp.CSS("#team-name"), hostile[3]),
			settledClick(`form[action="/console/team"] button`),
			chromedp.WaitVisible(chromedp.CSS("#created")))
		if got := tb.text(t, "#orgs"); !strings.Contains(got, hostile[3]) {
			t.Errorf("the teams table:\n%s", got)
		}
		tb.run(t, settledClick(`#created a`), chromedp.WaitVisible(chromedp.CSS("#inv-email")),
			chromedp.SendKeys(chromedp.CSS("#inv-email"), "teammate@example.com"),
			settledClick(`form[action$="/invite"] button`),
			chromedp.WaitVisible(chromedp.CSS("#invited")))
		if got := tb.text(t, "#members"); !strings.Contains(got, "teammate@example.com") || !strings.Contains(got, "invited") {
			t.Errorf("the members:\n%s", got)
		}
		tb.screenshot(t, "team")
		tb.axe(t)
		tb.checkInert(t)
	})
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// until waits for expr to hold in the page, across the navigation a form's
// submission starts (an evaluation cut by it is tried again).
func (tb *tab) until(t *testing.T, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(5*time.Second)))
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
}
