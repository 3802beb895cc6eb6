package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/console"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// client is a cookie-keeping HTTP client that does not follow redirects.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, u string, form url.Values) answer {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// serverTiming is the console's Server-Timing header: the server's time in ms.
var serverTiming = regexp.MustCompile(`^app;dur=[0-9]+\.[0-9]{2}$`)

// navLink is a panel's link in the navigation.
var navLink = regexp.MustCompile(`<li><a href="(/console/[a-z]*)"`)

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, a answer) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("the page has no CSRF field:\n%s", a.body)
	}
	return m[1]
}

// signIn signs email in through the sign-in forms and returns the page's
// CSRF token for the session.
func signIn(t *testing.T, e *env, c *http.Client, email string) string {
	t.Helper()
	page := do(t, c, "GET", e.srv.URL+"/console/signin", nil)
	tok := csrfOf(t, page)
	r := do(t, c, "POST", e.srv.URL+"/console/signin", url.Values{"csrf": {tok}, "email": {email}, "next": {"/console/activity"}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/console/signin/code?") {
		t.Fatalf("request code: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	r = do(t, c, "POST", e.srv.URL+"/console/signin/code", url.Values{"csrf": {tok}, "email": {email}, "code": {e.lastCode(email)},
		"next": {"/console/activity"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/activity" {
		t.Fatalf("verify code: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	return csrfOf(t, do(t, c, "GET", e.srv.URL+"/console/", nil))
}

// The console's HTTP rules without a browser: the redirect of /, the
// headers, the answers without a session, the CSRF refusals, and sign out
// (everywhere).
func TestConsoleHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "who@example.com"
		e.srv.Account(t, email)
		c := client(t)

		r := do(t, c, "GET", e.srv.URL+"/", nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/" {
			t.Fatalf("GET /: %d %q", r.status, r.header.Get("Location"))
		}
		for _, path := range []string{"/console/", "/console/signin", "/console/activity", "/console/nope"} {
			r := do(t, c, "GET", e.srv.URL+path, nil)
			h := r.header
			if h.Get("Content-Security-Policy") != console.ContentSecurityPolicy {
				t.Errorf("%s: CSP %q", path, h.Get("Content-Security-Policy"))
			}
			for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
				if !strings.Contains(h.Get("Content-Security-Policy"), want) {
					t.Errorf("%s: CSP lacks %s", path, want)
				}
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("%s: headers %v", path, h)
			}
			if !serverTiming.MatchString(h.Get("Server-Timing")) {
				t.Errorf("%s: Server-Timing %q", path, h.Get("Server-Timing"))
			}
		}
		// Without a session: pages redirect to sign-in, keeping where to
		// go back; forms are refused.
		r = do(t, c, "GET", e.srv.URL+"/console/activity?tool=x", nil)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/signin?next=/console/activity?tool=x" {
			t.Fatalf("activity without a session: %d %q", r.status, r.header.Get("Location"))
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/signout", url.Values{"csrf": {"x"}}); r.status != http.StatusUnauthorized {
			t.Errorf("sign out without a session: %d", r.status)
		}
		// The sign-in form without its token, or with another, is refused
		// and mails nothing.
		do(t, c, "GET", e.srv.URL+"/console/signin", nil) // sets the sign-in cookie
		for _, form := range []url.Values{{"email": {email}}, {"email": {email}, "csrf": {"forged"}}} {
			if r := do(t, c, "POST", e.srv.URL+"/console/signin", form); r.status != http.StatusForbidden {
				t.Errorf("sign-in form %v: %d", form, r.status)
			}
		}
		if n := len(e.smtp.Received()); n != 0 {
			t.Fatalf("a refused form mailed %d codes", n)
		}

		tok := signIn(t, e, c, email)
		if r := do(t, c, "GET", e.srv.URL+"/console/activity", nil); r.status != http.StatusOK || !strings.Contains(r.body, "Nothing recorded yet") {
			t.Errorf("an empty activity panel: %d, without the connect help", r.status)
		}
		// Every panel of the navigation is built: none answers the
		// not-built page, and the navigation marks none.
		home := do(t, c, "GET", e.srv.URL+"/console/", nil)
		links := navLink.FindAllStringSubmatch(home.body, -1)
		if len(links) != 12 {
			t.Errorf("the navigation has %d panels, want 12:\n%s", len(links), home.body)
		}
		for _, m := range links {
			if r := do(t, c, "GET", e.srv.URL+m[1], nil); r.status != http.StatusOK {
				t.Errorf("panel %s: %d", m[1], r.status)
			}
		}
		// A form post of the session without its token is refused, and
		// the session lives on.
		if r := do(t, c, "POST", e.srv.URL+"/console/signout", url.Values{}); r.status != http.StatusForbidden {
			t.Errorf("sign out without the token: %d", r.status)
		}
		// A cross-site post with the right token is refused too (the API's
		// Sec-Fetch-Site rule).
		req, _ := http.NewRequest("POST", e.srv.URL+"/console/signout", strings.NewReader(url.Values{"csrf": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site sign out: %d", resp.StatusCode)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/", nil); r.status != http.StatusOK {
			t.Fatalf("the session ended on a refused form: %d", r.status)
		}

		// Sign out everywhere ends the other sessions too.
		other := client(t)
		signIn(t, e, other, email)
		r = do(t, c, "POST", e.srv.URL+"/console/signout/everywhere", url.Values{"csrf": {tok}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/signin" {
			t.Fatalf("sign out everywhere: %d %q", r.status, r.header.Get("Location"))
		}
		for name, cl := range map[string]*http.Client{"this": c, "other": other} {
			if r := do(t, cl, "GET", e.srv.URL+"/console/", nil); r.status != http.StatusSeeOther {
				t.Errorf("%s session after sign out everywhere: %d", name, r.status)
			}
		}
		// And the API agrees: the other session's cookie is refused there.
		if r := do(t, other, "GET", e.srv.URL+"/v1/auth/session", nil); r.status != http.StatusUnauthorized {
			t.Errorf("GET /v1/auth/session with an ended session: %d", r.status)
		}
	})
}

// The overview shows the newest signed checkpoint as stored: viewing it
// signs none (a page view writes nothing), and it says when the tip is past
// the checkpoint.
func TestOverviewSealsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "seal@example.com"
		userID, key := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		c := client(t)
		signIn(t, e, c, email)
		e.appendEvent(key, map[string]any{"event_id": "evt-1", "event_type": "note"})
		r := do(t, c, "GET", e.srv.URL+"/console/", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, "<dt>Last signed checkpoint</dt><dd>none yet") {
			t.Fatalf("overview before any checkpoint: %d\n%s", r.status, r.body)
		}
		if cp, err := e.srv.App.LatestCheckpoint(ctx, p); err != nil || cp != nil {
			t.Fatalf("viewing the overview signed a checkpoint: %+v, %v", cp, err)
		}
		if _, _, err := e.srv.App.Seal(ctx, userID); err != nil {
			t.Fatal(err)
		}
		e.appendEvent(key, map[string]any{"event_id": "evt-2", "event_type": "note"})
		r = do(t, c, "GET", e.srv.URL+"/console/", nil)
		if !strings.Contains(r.body, "covering 1 events") || !strings.Contains(r.body, "the newer events are signed into the next checkpoint") {
			t.Errorf("overview with the tip past the checkpoint:\n%s", r.body)
		}
		if cp, _ := e.srv.App.LatestCheckpoint(ctx, p); cp == nil || cp.TreeSize != 1 {
			t.Errorf("the checkpoint after a view: %+v", cp)
		}
	})
}
