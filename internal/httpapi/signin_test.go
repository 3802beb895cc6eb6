package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

var codeInSubject = regexp.MustCompile(`sign-in code: ([0-9]{8})$`)

// mailedCode reads the newest sign-in code mailed to email from the
// environment's outbox (the real outbox transport: one RFC 5322 file per
// message), and how many messages went to that email.
func (e *env) mailedCode(email string) (string, int) {
	e.t.Helper()
	entries, err := os.ReadDir(e.outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	var code string
	var newest time.Time
	n := 0
	for _, ent := range entries {
		if strings.HasPrefix(ent.Name(), ".") || !strings.HasSuffix(ent.Name(), ".eml") {
			continue
		}
		f, err := os.Open(filepath.Join(e.outbox, ent.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		m, err := mail.ReadMessage(f)
		f.Close()
		if err != nil {
			e.t.Fatalf("outbox %s: %v", ent.Name(), err)
		}
		to, _ := mail.ParseAddress(m.Header.Get("To"))
		if to == nil || to.Address != email {
			continue
		}
		n++
		subject, _ := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
		info, err := ent.Info() // the test clock may stand still: order by when the file was written
		if err != nil {
			e.t.Fatal(err)
		}
		if got := codeInSubject.FindStringSubmatch(subject); got != nil && !info.ModTime().Before(newest) {
			newest, code = info.ModTime(), got[1]
		}
	}
	return code, n
}

// acceptAll is the acceptances of every required document at its served
// version, as a sign-in page sends them.
func (e *env) acceptAll() []map[string]any {
	var out []map[string]any
	for _, d := range e.app.LegalDocuments().Documents {
		if d.Required {
			out = append(out, map[string]any{"document_id": d.DocumentID, "version": d.Version, "content_hash": d.ContentHash})
		}
	}
	return out
}

// signIn requests and verifies a code for email and returns the session
// cookie's value.
func (e *env) signIn(email string) (userID, cookie string) {
	e.t.Helper()
	body := map[string]any{"email": email, "acceptances": e.acceptAll()}
	if r := e.do("POST", "/v1/auth/otp/request", "", body); r.Status != 202 {
		e.t.Fatalf("otp request: %d %s", r.Status, r.Body)
	}
	code, _ := e.mailedCode(strings.ToLower(email))
	r := e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": email, "code": code})
	if r.Status != 200 {
		e.t.Fatalf("otp verify: %d %s", r.Status, r.Body)
	}
	for _, c := range r.Cookies {
		if c.Name == api.SessionCookie {
			return r.JSON(e.t)["user_id"].(string), c.Value
		}
	}
	e.t.Fatal("no session cookie")
	return "", ""
}

// withSession is e.do with the session cookie instead of an API key.
func (e *env) withSession(method, path, cookie string, body any, headers ...string) response {
	e.t.Helper()
	return e.do(method, path, "", body, append([]string{"Cookie", api.SessionCookie + "=" + cookie}, headers...)...)
}

func (e *env) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.store.DB().QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A new email signs in only with the acceptances of every required document,
// and its account exists only once its code is verified, with those
// acceptances recorded as signin; refusals write nothing.
func TestSignInCreatesTheAccountOnTheVerifiedCode(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		all := e.acceptAll()
		m := wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "new@example.com"}), 422, "acceptances_required")
		if ids := m["unmet_document_ids"].([]any); len(ids) != 3 {
			t.Fatalf("unmet %v", ids)
		}
		m = wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "new@example.com", "acceptances": all[:2]}), 422, "acceptances_required")
		if ids := m["unmet_document_ids"].([]any); len(ids) != 1 || ids[0] != all[2]["document_id"] {
			t.Fatalf("unmet %v", ids)
		}
		wrong := slices.Clone(all)
		wrong[0] = map[string]any{"document_id": all[0]["document_id"], "version": "2020-01-01.1", "content_hash": all[0]["content_hash"]}
		wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "new@example.com", "acceptances": wrong}), 422, "legal-attestation-invalid")
		wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "not an email", "acceptances": all}), 422, "validation_error")
		if n := e.count("otp_codes"); n != 0 {
			t.Fatalf("%d codes stored by refused requests", n)
		}
		r := e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "New@Example.com", "acceptances": all})
		if r.Status != 202 || r.JSON(t)["status"] != "sent" {
			t.Fatalf("request: %d %s", r.Status, r.Body)
		}
		if n := e.count("accounts"); n != 0 {
			t.Fatalf("an account exists before its code is verified (%d)", n)
		}
		code, _ := e.mailedCode("new@example.com")
		if len(code) != domain.OTPDigits {
			t.Fatalf("mailed code %q", code)
		}
		r = e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": "NEW@example.com", "code": code})
		if r.Status != 200 {
			t.Fatalf("verify: %d %s", r.Status, r.Body)
		}
		res := r.JSON(t)
		if res["email"] != "new@example.com" || res["user_id"] == "" {
			t.Fatalf("verify: %v", res)
		}
		var cookie *http.Cookie
		for _, c := range r.Cookies {
			if c.Name == api.SessionCookie {
				cookie = c
			}
		}
		if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/" || cookie.Secure {
			t.Fatalf("cookie %+v: want HttpOnly, SameSite=Lax, Path=/, not Secure in development", cookie)
		}
		acc := e.withSession("GET", "/v1/legal/acceptances", cookie.Value, nil).JSON(t)
		if list := acc["acceptances"].([]any); len(list) != 3 || list[0].(map[string]any)["source"] != "signin" ||
			len(acc["unmet_document_ids"].([]any)) != 0 || acc["email"] != "new@example.com" {
			t.Fatalf("acceptances after sign-in: %v", acc)
		}
		// The code is spent: a second verification fails, and sets nothing.
		r = e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": "new@example.com", "code": code})
		wantProblem(t, r, 401, "invalid_or_expired_code")
		if len(r.Cookies) != 0 {
			t.Fatal("a refused verification set a cookie")
		}
		if n := e.count("sessions"); n != 1 {
			t.Fatalf("%d sessions", n)
		}
	})
}

// Five wrong tries burn a code; an expired code and a superseded one are
// refused alike; the refusals set nothing.
func TestOneTimeCodesBurnAndExpire(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		email := "brute@example.com"
		e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": email, "acceptances": e.acceptAll()})
		code, _ := e.mailedCode(email)
		wrong := fmt.Sprintf("%08d", (atoi(code)+1)%100_000_000)
		for range domain.OTPMaxAttempts {
			wantProblem(t, e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": email, "code": wrong}), 401, "invalid_or_expired_code")
		}
		wantProblem(t, e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": email, "code": code}), 401, "invalid_or_expired_code")

		e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": email, "acceptances": e.acceptAll()})
		old, _ := e.mailedCode(email)
		e.clock.Advance(time.Second)
		e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": email, "acceptances": e.acceptAll()})
		fresh, _ := e.mailedCode(email)
		if old != fresh {
			wantProblem(t, e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": email, "code": old}), 401, "invalid_or_expired_code")
		}
		e.clock.Advance(domain.OTPLifetime)
		wantProblem(t, e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": email, "code": fresh}), 401, "invalid_or_expired_code")
		if n := e.count("sessions"); n != 0 {
			t.Fatalf("%d sessions after refused codes", n)
		}
	})
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = 10*n + int(c-'0')
	}
	return n
}

// At most five codes an hour go to one email; the sixth request is 429 with
// Retry-After and stores nothing, and the window slides with the clock.
func TestCodeRequestsPerEmailAreLimited(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		email := "limit@example.com"
		req := map[string]any{"email": email, "acceptances": e.acceptAll()}
		for i := range domain.OTPRequestsPerHour {
			if r := e.do("POST", "/v1/auth/otp/request", "", req); r.Status != 202 {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
			}
			e.clock.Advance(time.Minute)
		}
		r := e.do("POST", "/v1/auth/otp/request", "", req)
		wantProblem(t, r, 429, "otp_rate_limited")
		if got := r.Header.Get("Retry-After"); got != "3300" {
			t.Fatalf("Retry-After %q, want 3300 (the first request leaves the hour in 55 minutes)", got)
		}
		if _, n := e.mailedCode(email); n != domain.OTPRequestsPerHour {
			t.Fatalf("%d codes mailed", n)
		}
		e.clock.Advance(55 * time.Minute)
		if r := e.do("POST", "/v1/auth/otp/request", "", req); r.Status != 202 {
			t.Fatalf("request once the first left the hour: %d %s", r.Status, r.Body)
		}
	})
}

// A session is a credential on every credentialed route, with every
// capability of its account: its actor is kind session; it manages keys; it
// expires with --session-ttl; logout ends it.
func TestSessionIsACredential(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, cookie := e.signIn("me@example.com")
		info := e.withSession("GET", "/v1/auth/session", cookie, nil).JSON(t)
		if info["user_id"] != user || info["email"] != "me@example.com" || info["admin"] != false {
			t.Fatalf("session info %v", info)
		}
		if r := e.withSession("GET", "/v1/chain/tip", cookie, nil); r.Status != 200 {
			t.Fatalf("a credentialed route with the session: %d %s", r.Status, r.Body)
		}
		prop := e.withSession("POST", "/v1/governance/proposals", cookie, map[string]any{"kind": "deny_scope",
			"evidence": map[string]any{"blocked_attempts": 3}, "subject": map[string]any{"subagent": "w"}}).JSON(t)
		if p := prop["proposal"].(map[string]any)["proposer"].(map[string]any); p["kind"] != "session" || p["identity"] == "" || p["machine"] != "" {
			t.Fatalf("a session's actor: %v", p)
		}
		created := e.withSession("POST", "/v1/keys", cookie, map[string]any{"label": "from the session"})
		if created.Status != 201 {
			t.Fatalf("key from a session: %d %s", created.Status, created.Body)
		}
		key := created.JSON(t)
		if r := e.do("GET", "/v1/chain/tip", key["api_key"].(string), nil); r.Status != 200 {
			t.Fatalf("the new key: %d", r.Status)
		}
		if list := e.withSession("GET", "/v1/keys", cookie, nil).JSON(t); list["count"] != float64(1) {
			t.Fatalf("keys %v", list)
		}
		if r := e.withSession("POST", "/v1/keys/"+key["id"].(string)+"/revoke", cookie, nil); r.Status != 200 {
			t.Fatalf("revoke from a session: %d %s", r.Status, r.Body)
		}
		// A key cannot describe or end a session.
		wantProblem(t, e.do("GET", "/v1/auth/session", e.key(user, api.CreateKeyRequest{}), nil), 403, "session_required")
		r := e.withSession("POST", "/v1/auth/logout", cookie, nil)
		if r.Status != 200 || len(r.Cookies) != 1 || r.Cookies[0].MaxAge >= 0 {
			t.Fatalf("logout: %d %v", r.Status, r.Cookies)
		}
		wantProblem(t, e.withSession("GET", "/v1/chain/tip", cookie, nil), 401, "invalid_or_expired_api_key")

		_, cookie = e.signIn("me@example.com")
		e.clock.Advance(domain.DefaultSessionTTL - time.Second)
		if r := e.withSession("GET", "/v1/chain/tip", cookie, nil); r.Status != 200 {
			t.Fatalf("a session a second before it expires: %d", r.Status)
		}
		e.clock.Advance(time.Second)
		wantProblem(t, e.withSession("GET", "/v1/chain/tip", cookie, nil), 401, "invalid_or_expired_api_key")
	})
}

// The cookie is Secure in production.
func TestSessionCookieIsSecureInProduction(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), func(c *config.Config) { c.Env = "production" })
	e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": "p@example.com", "acceptances": e.acceptAll()})
	code, _ := e.mailedCode("p@example.com")
	r := e.do("POST", "/v1/auth/otp/verify", "", map[string]any{"email": "p@example.com", "code": code})
	if r.Status != 200 || len(r.Cookies) != 1 || !r.Cookies[0].Secure || !r.Cookies[0].HttpOnly {
		t.Fatalf("production cookie: %d %+v", r.Status, r.Cookies)
	}
}

// An unsafe request a browser marks cross-site is refused with the session
// cookie, and accepted with an API key.
func TestCrossSiteRequestsCannotUseTheCookie(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, cookie := e.signIn("csrf@example.com")
		body := map[string]any{"label": "cross"}
		wantProblem(t, e.withSession("POST", "/v1/keys", cookie, body, "Sec-Fetch-Site", "cross-site"), 403, "cross_origin_request")
		wantProblem(t, e.withSession("POST", "/v1/keys", cookie, body, "Origin", "https://evil.example"), 403, "cross_origin_request")
		if r := e.withSession("GET", "/v1/keys", cookie, nil, "Sec-Fetch-Site", "cross-site"); r.Status != 200 {
			t.Fatalf("a safe cross-site read: %d", r.Status)
		}
		if r := e.withSession("POST", "/v1/keys", cookie, body, "Sec-Fetch-Site", "same-origin"); r.Status != 201 {
			t.Fatalf("a same-origin POST with the cookie: %d %s", r.Status, r.Body)
		}
		key := e.key(user, api.CreateKeyRequest{})
		if r := e.do("POST", "/v1/keys", key, body, "Sec-Fetch-Site", "cross-site"); r.Status != 201 {
			t.Fatalf("a cross-site POST with an API key: %d %s", r.Status, r.Body)
		}
	})
}

// Logout on one PostgreSQL replica is refused on the other at once.
func TestLogoutEndsTheSessionOnEveryReplica(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	a, b := newEnv(t, dsn, nil), newEnv(t, dsn, nil)
	_, cookie := a.signIn("replicas@example.com")
	if r := b.withSession("GET", "/v1/chain/tip", cookie, nil); r.Status != 200 {
		t.Fatalf("the session on the other replica: %d", r.Status)
	}
	if r := a.withSession("POST", "/v1/auth/logout", cookie, nil); r.Status != 200 {
		t.Fatalf("logout: %d", r.Status)
	}
	wantProblem(t, b.withSession("GET", "/v1/chain/tip", cookie, nil), 401, "invalid_or_expired_api_key")
}

// The legal documents: the listing's members, each text's SHA-256 equal to
// its header and its listing, 404 for another id.
func TestLegalDocumentsAreServedWithTheirHashes(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		list := e.do("GET", "/v1/legal/documents", "", nil).JSON(t)
		if list["accept_route"] != "/v1/legal/accept" || list["acceptance_mode"] != "clickwrap" || list["gate_enforced"] != false ||
			list["notice"] != legal.Notice || len(list["required_document_ids"].([]any)) != 3 {
			t.Fatalf("listing %v", list)
		}
		for _, dv := range list["documents"].([]any) {
			d := dv.(map[string]any)
			r := e.do("GET", d["text_url"].(string), "", nil)
			sum := sha256.Sum256(r.Body)
			if r.Status != 200 || hex.EncodeToString(sum[:]) != d["content_hash"] || r.Header.Get("X-Document-Content-Hash") != d["content_hash"] ||
				r.Header.Get("X-Document-Version") != d["version"] || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/markdown") {
				t.Fatalf("%s: %d, hash %x, headers %v", d["document_id"], r.Status, sum, r.Header)
			}
		}
		wantProblem(t, e.do("GET", "/v1/legal/documents/nope/text", "", nil), 404, "unknown_legal_document")
	})
}

// Accepting through the portal: the served version and hash, recorded once
// with source portal; a wrong version or hash records nothing; an account
// without an email is refused.
func TestLegalAcceptance(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		e.account("accept@example.com")
		_, cookie := e.signIn("accept@example.com")
		docs := e.app.LegalDocuments().Documents
		d := docs[0]
		body := func(version, hash string) map[string]any {
			return map[string]any{"accepted": true, "document_id": d.DocumentID, "version": version, "content_hash": hash}
		}
		wantProblem(t, e.withSession("POST", "/v1/legal/accept", cookie, body("2020-01-01.1", d.ContentHash)), 422, "legal-attestation-invalid")
		wantProblem(t, e.withSession("POST", "/v1/legal/accept", cookie, body(d.Version, strings.Repeat("0", 64))), 422, "legal-attestation-invalid")
		wantProblem(t, e.withSession("POST", "/v1/legal/accept", cookie, map[string]any{"accepted": false, "document_id": d.DocumentID, "version": d.Version,
			"content_hash": d.ContentHash}), 422, "validation_error")
		if n := e.count("legal_acceptances"); n != 0 {
			t.Fatalf("%d acceptances recorded by refusals", n)
		}
		r := e.withSession("POST", "/v1/legal/accept", cookie, body(d.Version, d.ContentHash)).JSON(t)
		acc := r["acceptance"].(map[string]any)
		if r["status"] != "recorded" || acc["source"] != "portal" || acc["email"] != "accept@example.com" || len(r["unmet_document_ids"].([]any)) != 2 {
			t.Fatalf("accept: %v", r)
		}
		again := e.withSession("POST", "/v1/legal/accept", cookie, body(d.Version, d.ContentHash)).JSON(t)
		if again["acceptance"].(map[string]any)["recorded_at"] != acc["recorded_at"] || e.count("legal_acceptances") != 1 {
			t.Fatalf("a second acceptance of one version: %v", again)
		}
		_, noEmail := e.newAccount(app.AccountRequest{NoEmail: true})
		wantProblem(t, e.do("POST", "/v1/legal/accept", noEmail, body(d.Version, d.ContentHash)), 400, "account_has_no_email")
	})
}

// Accepting a legal document is a signed-in person's act (SPEC.md: POST
// /v1/legal/accept is for a signed-in caller): an API key of any scope gets
// 403 session_required, before its body is read, and nothing is recorded.
func TestLegalAcceptanceNeedsASession(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, unscoped := e.account("keys@example.com")
		d := e.app.LegalDocuments().Documents[0]
		body := map[string]any{"accepted": true, "document_id": d.DocumentID, "version": d.Version, "content_hash": d.ContentHash}
		for _, key := range []string{unscoped, e.key(user, api.CreateKeyRequest{Scopes: []string{"events:read"}}),
			e.key(user, api.CreateKeyRequest{Scopes: []string{"governance", "notifications"}})} {
			wantProblem(t, e.do("POST", "/v1/legal/accept", key, body), 403, "session_required")
			wantProblem(t, e.do("POST", "/v1/legal/accept", key, map[string]any{"accepted": "yes"}), 403, "session_required")
		}
		if n := e.count("legal_acceptances"); n != 0 {
			t.Fatalf("%d acceptances recorded for API keys", n)
		}
		_, cookie := e.signIn("keys@example.com")
		if r := e.withSession("POST", "/v1/legal/accept", cookie, body); r.Status != 200 {
			t.Fatalf("the account's session: %d %s", r.Status, r.Body)
		}
		// The listing of what was accepted stays open to keys.
		if st := e.do("GET", "/v1/legal/acceptances", unscoped, nil).JSON(t); len(st["acceptances"].([]any)) != 1 {
			t.Fatalf("acceptances read with a key: %v", st)
		}
	})
}

// A new version of a document (--legal-dir) makes earlier acceptances not
// current and the document unmet again; with --legal-enforce every
// credentialed route but auth, keys and legal waits for it.
func TestLegalVersionBumpAndEnforcement(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, nil)
		_, key := e.account("bump@example.com")
		_, cookie := e.signIn("bump@example.com")
		for _, d := range e.app.LegalDocuments().Documents {
			e.withSession("POST", "/v1/legal/accept", cookie, map[string]any{"accepted": true, "document_id": d.DocumentID, "version": d.Version, "content_hash": d.ContentHash})
		}
		// The operator publishes a new privacy notice and enforces acceptance.
		dir := t.TempDir()
		writeLegalDir(t, dir, "privacy_notice", "2026-12-01.1", "# Privacy Notice\n\nA new version.\n")
		docs, err := legal.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		e.restart(dsn, envOptions{config: func(c *config.Config) { c.LegalEnforce = true }}, docs)
		st := e.do("GET", "/v1/legal/acceptances", key, nil).JSON(t)
		if unmet := st["unmet_document_ids"].([]any); len(unmet) != 1 || unmet[0] != "privacy_notice" {
			t.Fatalf("unmet after the bump: %v", st)
		}
		for _, av := range st["acceptances"].([]any) {
			a := av.(map[string]any)
			if a["current"] != (a["document_id"] != "privacy_notice") {
				t.Fatalf("acceptance %v: current %v", a["document_id"], a["current"])
			}
		}
		m := wantProblem(t, e.do("GET", "/v1/chain/tip", key, nil), 403, "legal_acceptance_required")
		if ids := m["unmet_document_ids"].([]any); len(ids) != 1 || ids[0] != "privacy_notice" {
			t.Fatalf("gate: %v", m)
		}
		for _, path := range []string{"/v1/keys", "/v1/legal/acceptances"} {
			if r := e.do("GET", path, key, nil); r.Status != 200 {
				t.Fatalf("%s under the gate: %d", path, r.Status)
			}
		}
		d, _ := docs.Get("privacy_notice")
		e.withSession("POST", "/v1/legal/accept", cookie, map[string]any{"accepted": true, "document_id": d.ID, "version": d.Version, "content_hash": d.ContentHash})
		if r := e.do("GET", "/v1/chain/tip", key, nil); r.Status != 200 {
			t.Fatalf("after accepting the new version: %d %s", r.Status, r.Body)
		}
	})
}

// writeLegalDir writes a --legal-dir holding one document.
func writeLegalDir(t *testing.T, dir, id, version, text string) {
	t.Helper()
	manifest := fmt.Sprintf(`{"documents":[{"document_id":%q,"title":"Privacy Notice","summary":"What is stored.","version":%q,"required":true}]}`, id, version)
	if err := os.WriteFile(filepath.Join(dir, legal.ManifestName), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
