package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// The console holds what it reads to the API's rules: a form within the
// body limit (--max-body-bytes), every field and query parameter to the
// text rule, and each field to the cap its API twin has. A refused form
// mails nothing.
func TestConsoleInputRules(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnvConfig(t, dsn, func(c *config.Config) { c.MaxBodyBytes = 4096 })
		const email = "who@example.com"
		e.srv.Account(t, email)
		c := client(t)
		tok := csrfOf(t, do(t, c, "GET", e.srv.URL+"/console/signin", nil))
		for name, tt := range map[string]struct {
			form   url.Values
			status int
			says   string
		}{
			"a form over the body limit":     {url.Values{"csrf": {tok}, "email": {email}, "pad": {strings.Repeat("x", 5000)}}, http.StatusRequestEntityTooLarge, "larger than 4096 bytes"},
			"an email over the API's cap":    {url.Values{"csrf": {tok}, "email": {strings.Repeat("a", 300) + "@example.com"}}, http.StatusUnprocessableEntity, "email"},
			"a field that is not UTF-8":      {url.Values{"csrf": {tok}, "email": {"who\xff@example.com"}}, http.StatusUnprocessableEntity, "valid UTF-8"},
			"a field name that is not UTF-8": {url.Values{"csrf": {tok}, "email": {email}, "\x00": {"x"}}, http.StatusUnprocessableEntity, "valid UTF-8"},
		} {
			r := do(t, c, "POST", e.srv.URL+"/console/signin", tt.form)
			if r.status != tt.status || !strings.Contains(r.body, tt.says) {
				t.Errorf("%s: %d, want %d saying %q:\n%.2000s", name, r.status, tt.status, tt.says, r.body)
			}
		}
		if n := len(e.smtp.Received()); n != 0 {
			t.Fatalf("refused forms mailed %d codes", n)
		}
		// A code over the cap is refused as the API refuses it.
		if r := do(t, c, "POST", e.srv.URL+"/console/signin/code", url.Values{"csrf": {tok}, "email": {email},
			"code": {strings.Repeat("1", 300)}}); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "code") {
			t.Errorf("a code over the cap: %d\n%.2000s", r.status, r.body)
		}

		signIn(t, e, c, email)
		for name, tt := range map[string]struct {
			path   string
			status int
			says   string
		}{
			"a tool over the cap":           {"/console/activity?tool=" + strings.Repeat("t", 300), http.StatusUnprocessableEntity, "tool"},
			"a sub-agent over the cap":      {"/console/activity?subagent=" + strings.Repeat("s", 300), http.StatusUnprocessableEntity, "subagent"},
			"a query that is not UTF-8":     {"/console/activity?tool=%ff", http.StatusUnprocessableEntity, "valid UTF-8"},
			"an event id that is not UTF-8": {"/console/events/%ff", http.StatusNotFound, "event"},
		} {
			r := do(t, c, "GET", e.srv.URL+tt.path, nil)
			if r.status != tt.status || !strings.Contains(r.body, tt.says) {
				t.Errorf("%s: %d, want %d saying %q:\n%.2000s", name, r.status, tt.status, tt.says, r.body)
			}
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/activity?tool="+strings.Repeat("t", 256), nil); r.status != http.StatusOK {
			t.Errorf("a tool at the cap: %d", r.status)
		}
	})
}

// Under --legal-enforce a person signed in before accepting the required
// documents is asked to accept them, with the status the API answers the
// same session (403 legal_acceptance_required); accepting in the console
// records it, and both let the session through.
func TestConsoleLegalEnforce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnvConfig(t, dsn, func(c *config.Config) { c.LegalEnforce = true })
		const email = "late@example.com"
		e.srv.Account(t, email)
		c := client(t)
		page := do(t, c, "GET", e.srv.URL+"/console/signin", nil)
		tok := csrfOf(t, page)
		r := do(t, c, "POST", e.srv.URL+"/console/signin", url.Values{"csrf": {tok}, "email": {email}, "next": {"/console/activity"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("request code: %d %s", r.status, r.body)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/signin/code", url.Values{"csrf": {tok}, "email": {email}, "code": {e.lastCode(email)},
			"next": {"/console/activity"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("verify code: %d %s", r.status, r.body)
		}
		api := do(t, c, "GET", e.srv.URL+"/v1/chain/tip", nil)
		if api.status != http.StatusForbidden || !strings.Contains(api.body, "legal_acceptance_required") {
			t.Fatalf("the API before accepting: %d %s", api.status, api.body)
		}
		ask := do(t, c, "GET", e.srv.URL+"/console/activity", nil)
		if ask.status != api.status || !strings.Contains(ask.body, `action="/console/legal/accept"`) || !strings.Contains(ask.body, `name="accepted"`) {
			t.Fatalf("the console before accepting: %d, want %d and the accept form:\n%.3000s", ask.status, api.status, ask.body)
		}
		csrf := csrfOf(t, ask)
		// Without ticking anything: asked again, nothing recorded.
		form := url.Values{"csrf": {csrf}, "next": {"/console/activity"}}
		for _, m := range hiddenField.FindAllStringSubmatch(ask.body, -1) {
			if m[1] == "document_id" || m[1] == "version" || m[1] == "content_hash" {
				form.Add(m[1], html.UnescapeString(m[2]))
			}
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/legal/accept", form); r.status != http.StatusForbidden ||
			!strings.Contains(r.body, "Accept every document") {
			t.Fatalf("accept nothing: %d %.2000s", r.status, r.body)
		}
		for _, m := range acceptBox.FindAllStringSubmatch(ask.body, -1) {
			form.Add("accepted", m[1])
		}
		if len(form["accepted"]) == 0 || len(form["accepted"]) != len(form["document_id"]) {
			t.Fatalf("the accept form lists %d boxes for %d documents", len(form["accepted"]), len(form["document_id"]))
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/legal/accept", form); r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/activity" {
			t.Fatalf("accept: %d %q %.2000s", r.status, r.header.Get("Location"), r.body)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/activity", nil); r.status != http.StatusOK {
			t.Errorf("the console after accepting: %d", r.status)
		}
		if r := do(t, c, "GET", e.srv.URL+"/v1/chain/tip", nil); r.status != http.StatusOK {
			t.Errorf("the API after accepting: %d %s", r.status, r.body)
		}
		acc := do(t, c, "GET", e.srv.URL+"/v1/legal/acceptances", nil)
		if !strings.Contains(acc.body, `"unmet_document_ids":[]`) {
			t.Errorf("acceptances after the console's: %s", acc.body)
		}
	})
}

var (
	acceptBox   = regexp.MustCompile(`name="accepted" value="([^"]+)"`)
	hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)
)

// The activity rows show each event's sub-agent (raw's subagent member),
// and the sub-agent filter finds it on the page and in the live rows.
func TestConsoleActivitySubagent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "who@example.com"
		_, key := e.srv.Account(t, email)
		e.appendEvent(key, map[string]any{"event_id": "evt-a", "event_type": "tool_call", "tool": "bash", "raw": map[string]any{"subagent": "worker-7"}})
		e.appendEvent(key, map[string]any{"event_id": "evt-b", "event_type": "tool_call", "tool": "bash", "raw": map[string]any{"subagent": "other"}})
		c := client(t)
		signIn(t, e, c, email)
		for _, path := range []string{"/console/activity?subagent=worker-7", "/console/activity/rows?subagent=worker-7"} {
			r := do(t, c, "GET", e.srv.URL+path, nil)
			if r.status != http.StatusOK || !strings.Contains(r.body, "<td>worker-7</td>") || strings.Contains(r.body, "evt-b") ||
				!strings.Contains(r.body, "evt-a") {
				t.Errorf("%s: %d\n%.3000s", path, r.status, r.body)
			}
			if strings.Contains(r.body, "Search older events") {
				t.Errorf("%s: a window that reached the chain's start offers to search older", path)
			}
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/activity", nil); !strings.Contains(r.body, "<td>other</td>") {
			t.Errorf("the unfiltered page lacks the other sub-agent:\n%.3000s", r.body)
		}
	})
}
