package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditchain/auditchain/internal/store/storetest"
)

// Payloads in every field a client controls: none may run or fetch.
var hostile = []string{
	`<script>window.__pwned=1</script>`,
	`"><img src=x onerror="window.__pwned=1;alert(1)">`,
	`javascript:window.__pwned=1`,
	`'><svg onload=alert(1)>`,
	`<a href="https://evil.example/x">link</a><img src="https://evil.example/p.png">`,
}

// TestConsoleInBrowser walks the console as a person does in Chromium: sign
// in by the mailed code, read the overview and the activity, watch an append
// arrive live, open an event and see its proof verified in the page. The
// account's events carry hostile data in every client-written field, and
// nothing of it runs or reaches another origin.
func TestConsoleInBrowser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		browser(t)
		e := newEnv(t, dsn)
		const email = "person@example.com"
		_, key := e.srv.Account(t, email)
		for i, h := range hostile {
			e.appendEvent(key, map[string]any{"event_id": "evt-h" + string(rune('a'+i)), "event_type": h, "tool": h, "decision": "deny",
				"machine_id": "m-" + string(rune('a'+i)),
				"ts":         "2026-11-28T08:00:0" + string(rune('0'+i)) + "+00:00",
				"raw":        map[string]any{"subagent": h, "url": h, h: h}})
		}
		tb := newTab(t, e)
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/signin"), chromedp.WaitVisible(chromedp.CSS("#email")))
		tb.screenshot(t, "signin")
		tb.axe(t)
		tb.signIn(t, e, email)

		// Overview.
		if got := tb.text(t, "h1"); got != "Overview" {
			t.Fatalf("after sign-in the page is %q", got)
		}
		if got := tb.text(t, "#tree-size"); got != "5" {
			t.Errorf("tree size shown %q, want 5", got)
		}
		for _, want := range []string{"does not mean the record is true or complete", "Last signed checkpoint"} {
			if body := tb.text(t, "main"); !strings.Contains(body, want) {
				t.Errorf("the overview lacks %q", want)
			}
		}
		tb.screenshot(t, "overview")
		tb.axe(t)
		tb.checkInert(t)

		// Activity: the hostile values are shown as text.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/activity"), chromedp.WaitVisible(chromedp.CSS("#rows")))
		rows := tb.text(t, "#rows")
		for _, h := range hostile {
			if !strings.Contains(rows, h) {
				t.Errorf("the activity rows do not show %q as text:\n%s", h, rows)
			}
		}
		tb.checkInert(t)

		// Live: an append through the API appears without a reload.
		tb.run(t, chromedp.WaitVisible(chromedp.CSS("#live.on")))
		e.appendEvent(key, map[string]any{"event_id": "evt-live", "event_type": "tool_call", "tool": "live-tool", "decision": "allow",
			"ts": "2026-11-28T09:00:00+00:00", "raw": map[string]any{"subagent": "worker"}})
		tb.run(t, chromedp.Poll[chromedp.Void](`document.getElementById("rows").textContent.includes("live-tool")`,
			chromedp.WithPollingTimeout(15*time.Second)))
		tb.screenshot(t, "activity")
		tb.axe(t)

		// A filter is a deep link, applied by the server.
		tb.run(t, chromedp.Navigate(e.srv.URL+"/console/activity?subagent=worker"), chromedp.WaitVisible(chromedp.CSS("#rows")))
		if rows := tb.text(t, "#rows"); !strings.Contains(rows, "live-tool") || strings.Contains(rows, "deny") {
			t.Errorf("?subagent=worker shows:\n%s", rows)
		}

		// An event's page checks its proof in the browser.
		for _, id := range []string{"evt-hb", "evt-live"} {
			tb.run(t, chromedp.Navigate(e.srv.URL+"/console/events/"+id),
				chromedp.WaitVisible(chromedp.CSS(`#proof-result[data-verified]`)))
			if got := eval[string](t, tb, `document.getElementById("proof-result").dataset.verified`); got != "true" {
				t.Errorf("%s: the proof did not verify in the browser: %s", id, tb.text(t, "#proof-result"))
			}
			// The test's client escaped <, > and & in JSON (\u003c…): the
			// stored raw is those bytes, shown as text.
			if raw := tb.text(t, "pre.raw"); id == "evt-hb" && !strings.Contains(raw, `onerror=\"window.__pwned=1;alert(1)\"`) {
				t.Errorf("%s: raw not shown as text:\n%s", id, raw)
			}
			tb.checkInert(t)
		}
		tb.screenshot(t, "event")
		tb.axe(t)

	})
}

// screenshot writes docs/console/NAME.png when AUDITCHAIN_UPDATE_SCREENSHOTS=1
// (from the SQLite run only: one picture per panel).
func (tb *tab) screenshot(t *testing.T, name string) {
	t.Helper()
	if os.Getenv("AUDITCHAIN_UPDATE_SCREENSHOTS") != "1" || !strings.HasSuffix(t.Name(), "/sqlite") {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
