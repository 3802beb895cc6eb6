// Package console is the web console of CONTRACT.md "Console": server-rendered
// pages under /console/, signed in with the OTP sign-in and the API's session
// cookie, acting through internal/app as the API does (surface dashboard).
//
// Layout (docs/console.md "Adding a panel"): console.go holds the handler, the
// security headers, the session and CSRF rules and the renderer; panels.go
// lists every panel of the navigation; each panel is one Go file (overview.go,
// activity.go, event.go…) with its template in templates/; assets/ holds the
// CSS and the small scripts that only enhance the pages. Everything is
// embedded: the console makes no request to another origin.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Surface is the X-SVC-Surface of everything the console does (CONTRACT.md
// "Agent surfaces").
const Surface = "dashboard"

// Prefix is where the console lives.
const Prefix = "/console/"

// ContentSecurityPolicy is sent with every console answer: nothing but this
// origin's own files, no inline script or style, no framing, forms posting
// only here (docs/decisions/console.md).
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// Deps are what the console needs from the server that mounts it.
type Deps struct {
	App    *app.App
	Config config.Config
	Log    *slog.Logger
	// CrossOrigin is the API's rule for unsafe requests carrying the
	// session cookie (CONTRACT.md "Credentials"): the console runs on it too.
	CrossOrigin *http.CrossOriginProtection
	// SessionCookie is the API's session cookie for token (an empty token
	// clears it).
	SessionCookie func(token string, expires time.Time) *http.Cookie
	// ClientAddress names a request's client for the sign-in throttles.
	ClientAddress func(*http.Request) string
	// Status is the HTTP status of an error code, as the API answers it.
	Status func(code string) int
	// CheckText is the API's text rule for a route's path values and
	// query parameters (nil: none).
	CheckText func(pattern string, r *http.Request) error
	// CheckInput holds a request value built from a form or a query to
	// the API's body rules for its type: the text rule, and the caps its
	// `max` and `each` tags name (nil: none).
	CheckInput func(v any) error
}

// Console is the http.Handler of GET / and /console/.
type Console struct {
	Deps
	mux   *http.ServeMux
	pages map[string]*template.Template
}

// New builds the console over d.
func New(d Deps) *Console {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	c := &Console{Deps: d, mux: http.NewServeMux(), pages: parsePages()}
	assets, _ := fs.Sub(assetFS, "assets")
	files := http.StripPrefix(Prefix+"assets/", http.FileServerFS(assets))
	c.mux.Handle("GET "+Prefix+"assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Assets change only with the binary; a day's cache is safe and
		// keeps page loads to the page itself.
		w.Header().Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	}))
	c.mux.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusSeeOther))
	for _, rt := range c.routes() {
		c.mux.Handle(rt.pattern, c.guard(rt))
	}
	c.mux.Handle(Prefix, c.guard(route{pattern: Prefix, handler: c.notFound, public: true}))
	return c
}

// route is one console page or form; the pattern is the mux's.
type route struct {
	pattern string
	handler handlerFunc
	// public pages need no session (sign-in); every other route redirects
	// a browser without one to the sign-in page.
	public bool
	// stream routes are not cut by --request-timeout.
	stream bool
	// capability is the API's capability of the route whose use case this
	// route runs, counted in the usage as the API counts it ("" counts
	// app.CapabilityNone, as the API counts its routes that need no
	// capability: keys, legal, the dashboard's usage; the overview is the
	// dashboard's page).
	capability domain.Scope
	// legalExempt routes work while required legal documents are unmet,
	// as the API's keys and legal routes do (CONTRACT.md "Legal
	// agreements"): where a person accepts them.
	legalExempt bool
}

// handlerFunc answers a console request; a non-nil error is rendered as an
// error page by c.fail.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routes is the whole console on one screen (the navigation is panels.go).
func (c *Console) routes() []route {
	rts := []route{
		{pattern: "GET " + Prefix + "signin", handler: c.signInPage, public: true},
		{pattern: "POST " + Prefix + "signin", handler: c.requestCode, public: true},
		{pattern: "GET " + Prefix + "signin/code", handler: c.codePage, public: true},
		{pattern: "POST " + Prefix + "signin/code", handler: c.verifyCode, public: true},
		{pattern: "POST " + Prefix + "signout", handler: c.signOut},
		{pattern: "POST " + Prefix + "signout/everywhere", handler: c.signOutEverywhere},

		{pattern: "GET " + Prefix + "{$}", handler: c.overview},
		{pattern: "GET " + Prefix + "activity", handler: c.activity, capability: domain.ScopeEventsRead},
		{pattern: "GET " + Prefix + "activity/rows", handler: c.activityRows, capability: domain.ScopeEventsRead},
		{pattern: "GET " + Prefix + "events/{event_id}", handler: c.event, capability: domain.ScopeEventsRead},

		{pattern: "GET " + Prefix + "gate", handler: c.gate, capability: domain.ScopeGrants},
		{pattern: "POST " + Prefix + "gate", handler: c.createGrant, capability: domain.ScopeGrants},
		{pattern: "GET " + Prefix + "gate/{grant_id}/revoke", handler: c.confirmRevoke, capability: domain.ScopeGrants},
		{pattern: "POST " + Prefix + "gate/{grant_id}/revoke", handler: c.revokeGrant, capability: domain.ScopeGrants},
		{pattern: "GET " + Prefix + "governance", handler: c.governance, capability: domain.ScopeGovernance},
		{pattern: "POST " + Prefix + "governance", handler: c.createProposal, capability: domain.ScopeGovernance},
		{pattern: "POST " + Prefix + "governance/{proposal_id}/ratify", handler: c.transition(domain.ActionRatify, "ratified"), capability: domain.ScopeGovernance},
		{pattern: "POST " + Prefix + "governance/{proposal_id}/enact", handler: c.transition(domain.ActionEnact, "enacted"), capability: domain.ScopeGovernance},
		{pattern: "POST " + Prefix + "governance/{proposal_id}/reject", handler: c.transition(domain.ActionReject, "rejected"), capability: domain.ScopeGovernance},

		{pattern: "GET " + Prefix + "approvals", handler: c.approvals, capability: domain.ScopeApprovals},
		{pattern: "GET " + Prefix + "approvals/rows", handler: c.approvalRowsFragment, capability: domain.ScopeApprovals},
		{pattern: "POST " + Prefix + "approvals/{approval_id}/approve", handler: c.decideApproval(true), capability: domain.ScopeApprovals},
		{pattern: "POST " + Prefix + "approvals/{approval_id}/deny", handler: c.decideApproval(false), capability: domain.ScopeApprovals},

		{pattern: "GET " + Prefix + "notifications", handler: c.notifications, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "notifications/preferences", handler: c.savePreferences, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "notifications/test", handler: c.testNotification, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "notifications/{notification_id}/redeliver", handler: c.redeliverNotification, capability: domain.ScopeNotifications},
		{pattern: "GET " + Prefix + "webhooks", handler: c.webhooks, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "webhooks", handler: c.createWebhook, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "webhooks/test", handler: c.testWebhook, capability: domain.ScopeNotifications},
		{pattern: "GET " + Prefix + "webhooks/{webhook_id}", handler: c.webhookEndpoint, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "webhooks/{webhook_id}/delete", handler: c.deleteWebhook, capability: domain.ScopeNotifications},
		{pattern: "POST " + Prefix + "webhooks/{webhook_id}/redeliver", handler: c.redeliverWebhook, capability: domain.ScopeNotifications},
		{pattern: "GET " + Prefix + "keys", handler: c.keys, legalExempt: true},
		{pattern: "POST " + Prefix + "keys", handler: c.createKey, legalExempt: true},
		{pattern: "POST " + Prefix + "keys/{key_id}/revoke", handler: c.revokeKey, legalExempt: true},
		{pattern: "GET " + Prefix + "legal", handler: c.legal, legalExempt: true},
		{pattern: "POST " + Prefix + "legal/accept", handler: c.acceptLegal, legalExempt: true},
		{pattern: "GET " + Prefix + "usage", handler: c.usage},
		{pattern: "GET " + Prefix + "export", handler: c.export, capability: domain.ScopeEventsRead},
		{pattern: "GET " + Prefix + "export/download", handler: c.exportDownload, stream: true, capability: domain.ScopeEventsRead},
		{pattern: "GET " + Prefix + "export/public-key", handler: c.exportPublicKey},
		{pattern: "GET " + Prefix + "team", handler: c.team, capability: domain.ScopeOrgs},
		{pattern: "POST " + Prefix + "team", handler: c.createTeam, capability: domain.ScopeOrgs},
		{pattern: "POST " + Prefix + "team/join", handler: c.joinTeam, capability: domain.ScopeOrgs},
		{pattern: "GET " + Prefix + "team/{org_id}", handler: c.org, capability: domain.ScopeOrgs},
		{pattern: "POST " + Prefix + "team/{org_id}/invite", handler: c.inviteMember, capability: domain.ScopeOrgs},
		{pattern: "POST " + Prefix + "team/{org_id}/remove", handler: c.removeMember, capability: domain.ScopeOrgs},
	}
	return rts
}

// ServeHTTP answers every console request with the security headers of
// docs/decisions/console.md.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	c.mux.ServeHTTP(&timedWriter{ResponseWriter: w, start: time.Now()}, r)
}

// timedWriter adds Server-Timing (W3C Server Timing: `app;dur=` in
// milliseconds) to an answer: the server's time until its status was
// written. Pages are rendered into a buffer before that, so it is the whole
// work of a page but the last write (`auditchain bench console` reads it).
type timedWriter struct {
	http.ResponseWriter
	start   time.Time
	written bool
}

func (t *timedWriter) WriteHeader(status int) {
	if !t.written {
		t.written = true
		ms := float64(time.Since(t.start).Microseconds()) / 1000
		t.Header().Set("Server-Timing", "app;dur="+strconv.FormatFloat(ms, 'f', 2, 64))
	}
	t.ResponseWriter.WriteHeader(status)
}

func (t *timedWriter) Write(b []byte) (int, error) {
	if !t.written {
		t.WriteHeader(http.StatusOK)
	}
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

type ctxKey struct{}

// viewer is the signed-in person of a request.
type viewer struct {
	app.Principal
	// token is the session's token, from which the CSRF token of its forms
	// is derived.
	token string
}

func viewerOf(r *http.Request) viewer {
	v, _ := r.Context().Value(ctxKey{}).(viewer)
	return v
}

// guard resolves the session, applies the CSRF rule to unsafe methods, bounds
// the request's time, and renders the handler's error.
func (c *Console) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rt.stream && c.Config.RequestTimeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), c.Config.RequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		unsafe := r.Method != http.MethodGet && r.Method != http.MethodHead
		if c.CheckText != nil {
			if err := c.CheckText(rt.pattern, r); err != nil {
				c.fail(w, r, err)
				return
			}
		}
		if unsafe {
			// The API's rule first (Sec-Fetch-Site/Origin), then the form's
			// token: either refusal writes nothing.
			if err := c.CrossOrigin.Check(r); err != nil {
				c.fail(w, r, &domain.Error{Code: domain.CodeCrossOrigin, Detail: "a cross-site form may not act on this console"})
				return
			}
			if err := c.readForm(w, r); err != nil {
				c.fail(w, r, err)
				return
			}
		}
		v, err := c.authenticate(r)
		switch {
		case err == nil:
			r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, v))
		case rt.public:
		case !unsafe:
			http.Redirect(w, r, Prefix+"signin?next="+safeNext(r.URL.RequestURI()), http.StatusSeeOther)
			return
		default:
			c.fail(w, r, err)
			return
		}
		if unsafe {
			if err := c.checkCSRF(r, v); err != nil {
				c.fail(w, r, err)
				return
			}
		}
		if v.UserID != "" && !rt.public && !rt.legalExempt {
			if err := c.App.RequireAcceptances(r.Context(), v.Principal); err != nil {
				c.mustAccept(w, r, err)
				return
			}
		}
		if v.UserID != "" && !rt.public {
			capability := app.CapabilityNone
			if rt.capability != "" {
				capability = string(rt.capability)
			}
			c.App.CountCall(v.UserID, capability, Surface)
		}
		if err := rt.handler(w, r); err != nil {
			c.fail(w, r, err)
		}
	})
}

// readForm reads an unsafe request's form within the API's body limit
// (--max-body-bytes) and holds every name and value to the text rule, before
// anything reads a field.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request) error {
	limit := c.Config.MaxBodyBytes
	if limit > 0 {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
	}
	if err := r.ParseForm(); err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return (&domain.Error{Code: domain.CodeBodyTooLarge,
				Detail: "the form is larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}).With("limit_bytes", mbe.Limit)
		}
		return domain.Validation(domain.FieldError{Field: "form", Message: "the form could not be read: " + err.Error()})
	}
	for name, values := range r.PostForm {
		bad := !domain.ValidText(name)
		for _, v := range values {
			bad = bad || !domain.ValidText(v)
		}
		if bad {
			return domain.Validation(domain.FieldError{Field: name, Message: domain.TextRuleMessage})
		}
	}
	return nil
}

// checkInput holds v to the API's rules for its type (Deps.CheckInput).
func (c *Console) checkInput(v any) error {
	if c.CheckInput == nil {
		return nil
	}
	return c.CheckInput(v)
}

// authenticate resolves the session cookie, as the API does.
func (c *Console) authenticate(r *http.Request) (viewer, error) {
	ck, err := r.Cookie(api.SessionCookie)
	if err != nil || ck.Value == "" {
		return viewer{}, &domain.Error{Code: domain.CodeMissingToken, Detail: "sign in first"}
	}
	p, err := c.App.AuthenticateSession(r.Context(), ck.Value)
	if err != nil {
		return viewer{}, err
	}
	return viewer{Principal: p, token: ck.Value}, nil
}

// csrfCookie carries the sign-in forms' CSRF token before there is a session
// (a double-submit cookie; SameSite=Strict).
const csrfCookie = "auditchain_console_csrf"

// csrfToken is the token every form of r's page carries: for a signed-in
// viewer an HMAC of the session's token (so it needs no state, holds on every
// replica, and ends with the session), else the sign-in cookie's value, set
// when missing.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if v := viewerOf(r); v.token != "" {
		return sessionCSRF(v.token)
	}
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 43 {
		return ck.Value
	}
	b := make([]byte, 32)
	rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.Config.Production()})
	return tok
}

func sessionCSRF(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("auditchain console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errCSRF = &domain.Error{Code: domain.CodeCrossOrigin,
	Detail: "the form's CSRF token is missing or wrong: reload the page and send it again"}

// checkCSRF requires the form's csrf field to match the viewer's token (or,
// before sign-in, the sign-in cookie).
func (c *Console) checkCSRF(r *http.Request, v viewer) error {
	got := r.PostFormValue("csrf")
	var want string
	if v.token != "" {
		want = sessionCSRF(v.token)
	} else if ck, err := r.Cookie(csrfCookie); err == nil {
		want = ck.Value
	}
	if got == "" || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errCSRF
	}
	return nil
}

// safeNext keeps a post-sign-in destination only when it is a console path.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}

// fail renders err as an error page with the API's status for its code;
// anything but a domain error is logged and shown as a bare failure.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return
		}
		c.Log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "route", r.Pattern, "err", err.Error())
		de = &domain.Error{Code: domain.CodeInternal, Detail: "the server could not complete the request; it has been logged"}
		if errors.Is(err, context.DeadlineExceeded) {
			de = &domain.Error{Code: domain.CodeUnavailable, Detail: "the store did not answer in time; reload the page"}
		}
	}
	status := http.StatusInternalServerError
	if c.Status != nil {
		status = c.Status(de.Code)
	}
	c.render(w, r, status, "error", "Something went wrong", errorPage{Code: de.Code, Detail: de.Detail, Status: status})
}

type errorPage struct {
	Code, Detail string
	Status       int
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) error {
	return domain.NotFound(domain.CodeNotFound, "page "+r.URL.Path)
}
