package console_test

// The panels of notifications, webhooks, keys and machines, team, legal,
// usage and export: their rules over HTTP, where no browser is needed.

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// receiver is a real webhook receiver on loopback that records what it got.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []http.Header
	code int
}

func newReceiver(t *testing.T, code int) *receiver {
	rc := &receiver{code: code}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.got = append(rc.got, r.Header.Clone())
		rc.mu.Unlock()
		w.WriteHeader(rc.code)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

var tokenInPage = regexp.MustCompile(`ac_[A-Za-z0-9_-]{43}`)

// TestKeysPanelHTTP: a key created in the console is shown once (201, out of
// every cache), works on the API, never appears again, and once revoked is
// refused; a form without its CSRF token creates nothing.
func TestKeysPanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "keys@example.com"
		userID, _ := e.srv.Account(t, email)
		c := client(t)
		tok := signIn(t, e, c, email)

		if r := do(t, c, "POST", e.srv.URL+"/console/keys", url.Values{"label": {"forged"}}); r.status != http.StatusForbidden {
			t.Fatalf("create without CSRF: %d", r.status)
		}
		r := do(t, c, "POST", e.srv.URL+"/console/keys", url.Values{"csrf": {tok}, "label": {"ci <b>runner</b>"}, "machine": {"m1"},
			"scopes": {"events:read", "events:write"}})
		if r.status != http.StatusCreated || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("create: %d %q\n%s", r.status, r.header.Get("Cache-Control"), r.body)
		}
		token := tokenInPage.FindString(r.body)
		if token == "" {
			t.Fatalf("the created page shows no token:\n%s", r.body)
		}
		if strings.Contains(r.body, "<b>runner</b>") {
			t.Error("the label is not escaped")
		}
		if st := e.api("GET", "/v1/machines", token, nil, nil); st != http.StatusOK {
			t.Errorf("the new key on the API: %d", st)
		}
		if st := e.api("GET", "/v1/grants", token, nil, nil); st != http.StatusForbidden {
			t.Errorf("the new key is not limited to its scopes: GET /v1/grants %d", st)
		}
		list := do(t, c, "GET", e.srv.URL+"/console/keys", nil)
		if list.status != http.StatusOK || strings.Contains(list.body, token) || tokenInPage.MatchString(list.body) {
			t.Fatalf("the keys page shows a token again (%d)", list.status)
		}
		keys, err := e.srv.App.Keys(context.Background(), appPrincipal(userID))
		if err != nil || keys.Count != 2 || keys.Keys[0].Label != "ci <b>runner</b>" || keys.Keys[0].Machine != "m1" {
			t.Fatalf("keys: %v %+v", err, keys)
		}
		id := keys.Keys[0].ID
		// Bad fields are refused beside the form, with the API's status.
		for _, form := range []url.Values{{"scopes": {"nope"}}, {"expires_at": {"tomorrow"}}, {"label": {strings.Repeat("x", 201)}}} {
			form.Set("csrf", tok)
			if r := do(t, c, "POST", e.srv.URL+"/console/keys", form); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `id="refused"`) {
				t.Errorf("create %v: %d", form, r.status)
			}
		}
		// A form over the body limit is refused before it is read.
		if r := do(t, c, "POST", e.srv.URL+"/console/keys", url.Values{"csrf": {tok}, "label": {strings.Repeat("x", 2<<20)}}); r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("an oversized form: %d", r.status)
		}
		if keys, _ := e.srv.App.Keys(context.Background(), appPrincipal(userID)); keys.Count != 2 {
			t.Fatalf("refused forms created keys: %d", keys.Count)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/keys/"+id+"/revoke", url.Values{"csrf": {tok}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/keys?done=revoked" {
			t.Fatalf("revoke: %d %q", r.status, r.header.Get("Location"))
		}
		if st := e.api("GET", "/v1/machines", token, nil, nil); st != http.StatusUnauthorized {
			t.Errorf("a revoked key on the API: %d", st)
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/keys/"+id+"/revoke", url.Values{"csrf": {tok}}); r.status != http.StatusOK && r.status != http.StatusSeeOther {
			t.Errorf("revoking twice: %d", r.status)
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/keys/not-a-key/revoke", url.Values{"csrf": {tok}}); r.status != http.StatusNotFound {
			t.Errorf("revoking a missing key: %d", r.status)
		}
	})
}

// TestWebhooksPanelHTTP: an endpoint's secret is shown once; a refused URL
// writes nothing; a test is delivered to a real receiver on loopback and its
// attempt listed with status and duration; a failed delivery is redelivered.
func TestWebhooksPanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnvConfig(t, dsn, func(c *config.Config) { c.WebhookAllowPrivate = true })
		const email = "hooks@example.com"
		userID, _ := e.srv.Account(t, email)
		c := client(t)
		tok := signIn(t, e, c, email)
		rc := newReceiver(t, http.StatusServiceUnavailable)

		if r := do(t, c, "POST", e.srv.URL+"/console/webhooks", url.Values{"csrf": {tok}, "url": {"ftp://example.com/x"}}); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.body, "webhook_url_refused") {
			t.Fatalf("a refused URL: %d", r.status)
		}
		r := do(t, c, "POST", e.srv.URL+"/console/webhooks", url.Values{"csrf": {tok}, "url": {rc.URL + "/hook"}, "types": {"grant.revoked"}})
		if r.status != http.StatusCreated || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("add: %d\n%s", r.status, r.body)
		}
		// Read as the browser does: html/template escapes a "+" of the base64
		// secret in the attribute (&#43;), and one secret in 64 begins with one.
		secret := regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`).FindString(html.UnescapeString(r.body))
		if secret == "" {
			t.Fatalf("the secret is not shown:\n%s", r.body)
		}
		page := do(t, c, "GET", e.srv.URL+"/console/webhooks", nil)
		if strings.Contains(page.body, secret) || strings.Contains(page.body, "whsec_") {
			t.Fatal("the secret is shown again")
		}
		hooks, _ := e.srv.App.Webhooks(context.Background(), appPrincipal(userID))
		if len(hooks.Webhooks) != 1 {
			t.Fatalf("endpoints: %+v", hooks)
		}
		hook := hooks.Webhooks[0]

		r = do(t, c, "POST", e.srv.URL+"/console/webhooks/test", url.Values{"csrf": {tok}, "type": {"grant.revoked"}})
		if r.status != http.StatusOK || !strings.Contains(r.body, `id="tested"`) || !strings.Contains(r.body, "webhook (queued)") {
			t.Fatalf("test: %d\n%s", r.status, r.body)
		}
		if _, err := e.srv.App.DrainWebhooks(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rc.count() == 0 {
			t.Fatal("the receiver got nothing")
		}
		r = do(t, c, "GET", e.srv.URL+"/console/webhooks/"+hook.ID, nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, "HTTP 503") || !strings.Contains(r.body, " ms</td>") {
			t.Fatalf("deliveries: %d\n%s", r.status, r.body)
		}
		// Redeliver once the row has failed (its retries spent).
		ds, _ := e.srv.App.WebhookDeliveries(context.Background(), appPrincipal(userID), hook.ID)
		nid := ds.Deliveries[0].NotificationID
		for i := 0; i < 10; i++ {
			if _, err := e.srv.App.DrainWebhooks(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		rc.mu.Lock()
		rc.code = http.StatusNoContent
		rc.mu.Unlock()
		r = do(t, c, "POST", e.srv.URL+"/console/webhooks/"+hook.ID+"/redeliver", url.Values{"csrf": {tok}, "notification_id": {nid}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("redeliver: %d\n%s", r.status, r.body)
		}
		if _, err := e.srv.App.DrainWebhooks(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/webhooks/"+hook.ID, nil); !strings.Contains(r.body, "HTTP 204") {
			t.Errorf("the redelivered attempt is not listed:\n%s", r.body)
		}
		// Redelivering a row that has not failed is the API's 409.
		if r := do(t, c, "POST", e.srv.URL+"/console/webhooks/"+hook.ID+"/redeliver", url.Values{"csrf": {tok}, "notification_id": {nid}}); r.status != http.StatusConflict {
			t.Errorf("redeliver a sent row: %d", r.status)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/webhooks/"+hook.ID+"/delete", url.Values{"csrf": {tok}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("delete: %d", r.status)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/webhooks/"+hook.ID, nil); r.status != http.StatusNotFound {
			t.Errorf("a deleted endpoint's page: %d", r.status)
		}
	})
}

// TestNotificationsPanelHTTP: the grid stores exactly what its boxes say
// through the preferences' rules; a box the grid lacks is refused; tests and
// the inbox.
func TestNotificationsPanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "notes@example.com"
		userID, _ := e.srv.Account(t, email)
		c := client(t)
		tok := signIn(t, e, c, email)
		page := do(t, c, "GET", e.srv.URL+"/console/notifications", nil)
		if page.status != http.StatusOK || !strings.Contains(page.body, `id="prefs"`) {
			t.Fatalf("notifications: %d", page.status)
		}
		// Everything on but grant.revoked by email, with key.created's email in the digest.
		form := url.Values{"csrf": {tok}, "digest": {"key.created|email"}}
		for _, m := range regexp.MustCompile(`name="enabled" value="([^"]+)"`).FindAllStringSubmatch(page.body, -1) {
			if m[1] != "grant.revoked|email" {
				form.Add("enabled", m[1])
			}
		}
		r := do(t, c, "POST", e.srv.URL+"/console/notifications/preferences", form)
		if r.status != http.StatusOK || !strings.Contains(r.body, `id="saved"`) {
			t.Fatalf("save: %d\n%s", r.status, r.body)
		}
		prefs, _ := e.srv.App.Preferences(context.Background(), appPrincipal(userID))
		for _, p := range prefs.Preferences {
			wantOn := !(p.Type == "grant.revoked" && p.Channel == "email")
			wantDigest := p.Type == "key.created" && p.Channel == "email"
			if p.Enabled != wantOn || p.Digest != wantDigest {
				t.Errorf("%s/%s: enabled %v digest %v", p.Type, p.Channel, p.Enabled, p.Digest)
			}
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/notifications/preferences", url.Values{"csrf": {tok}, "digest": {"key.expiring_24h|email"}}); r.status != http.StatusUnprocessableEntity {
			t.Errorf("a digest the type lacks: %d", r.status)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/notifications/test", url.Values{"csrf": {tok}, "type": {"governance.proposed"}})
		if r.status != http.StatusOK || !strings.Contains(r.body, "in_app (sent)") {
			m := regexp.MustCompile(`(?s)<p class="notice" role="status" id="tested">.*?</p>`).FindString(r.body)
			t.Fatalf("test: %d %s", r.status, m)
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/notifications/test", url.Values{"csrf": {tok}, "type": {"no.such"}}); r.status != http.StatusNotFound && r.status != http.StatusUnprocessableEntity && r.status != http.StatusBadRequest {
			t.Errorf("an unknown type: %d", r.status)
		}
		inbox := do(t, c, "GET", e.srv.URL+"/console/notifications", nil)
		if !strings.Contains(inbox.body, "governance.proposed</td>") {
			t.Errorf("the inbox lacks the test notice")
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/notifications?severity=loud", nil); r.status != http.StatusUnprocessableEntity {
			t.Errorf("a bad severity: %d", r.status)
		}
	})
}

// TestLegalPanelHTTP: under --legal-enforce the other panels are refused
// until the documents are accepted here; the keys and legal panels are not;
// an acceptance of a version not served records nothing.
func TestLegalPanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnvConfig(t, dsn, func(c *config.Config) { c.LegalEnforce = true })
		const email = "legal@example.com"
		userID, _ := e.srv.Account(t, email)
		c := client(t)
		page := do(t, c, "GET", e.srv.URL+"/console/signin", nil)
		tok := csrfOf(t, page)
		do(t, c, "POST", e.srv.URL+"/console/signin", url.Values{"csrf": {tok}, "email": {email}})
		do(t, c, "POST", e.srv.URL+"/console/signin/code", url.Values{"csrf": {tok}, "email": {email}, "code": {e.lastCode(email)}})
		if r := do(t, c, "GET", e.srv.URL+"/console/", nil); r.status != http.StatusForbidden || !strings.Contains(r.body, "/console/legal") {
			t.Fatalf("overview with unmet documents: %d", r.status)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/keys", nil); r.status != http.StatusOK {
			t.Errorf("keys with unmet documents: %d", r.status)
		}
		legal := do(t, c, "GET", e.srv.URL+"/console/legal", nil)
		if legal.status != http.StatusOK {
			t.Fatalf("legal: %d", legal.status)
		}
		tok = csrfOf(t, legal)
		docs := e.srv.App.LegalDocuments()
		for i, d := range docs.Documents {
			form := url.Values{"csrf": {tok}, "document_id": {d.DocumentID}, "version": {d.Version}, "content_hash": {d.ContentHash}, "accepted": {d.DocumentID}}
			if i == 0 {
				bad := url.Values{"csrf": {tok}, "document_id": {d.DocumentID}, "version": {"1999"}, "content_hash": {d.ContentHash}, "accepted": {d.DocumentID}}
				if r := do(t, c, "POST", e.srv.URL+"/console/legal/accept", bad); r.status != http.StatusUnprocessableEntity {
					t.Errorf("an old version: %d", r.status)
				}
				unchecked := url.Values{"csrf": {tok}, "document_id": {d.DocumentID}, "version": {d.Version}, "content_hash": {d.ContentHash}}
				if r := do(t, c, "POST", e.srv.URL+"/console/legal/accept", unchecked); r.status != http.StatusUnprocessableEntity {
					t.Errorf("without the box: %d", r.status)
				}
				acc, _ := e.srv.App.LegalAcceptances(context.Background(), appPrincipal(userID))
				if len(acc.Acceptances) != 0 {
					t.Fatalf("a refused acceptance was recorded: %+v", acc.Acceptances)
				}
			}
			if r := do(t, c, "POST", e.srv.URL+"/console/legal/accept", form); r.status != http.StatusOK || !strings.Contains(r.body, `id="recorded"`) {
				t.Fatalf("accept %s: %d\n%s", d.DocumentID, r.status, r.body)
			}
		}
		acc, _ := e.srv.App.LegalAcceptances(context.Background(), appPrincipal(userID))
		if len(acc.UnmetDocumentIDs) != 0 || acc.Acceptances[0].Source != "portal" {
			t.Fatalf("acceptances: %+v", acc)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/", nil); r.status != http.StatusOK {
			t.Errorf("overview once accepted: %d", r.status)
		}
	})
}

// TestUsageAndExportPanelsHTTP: the usage chart counts the calls per
// surface; the export downloads and verifies offline against the public
// key the panel offers.
func TestUsageAndExportPanelsHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "usage@example.com"
		_, key := e.srv.Account(t, email)
		c := client(t)
		signIn(t, e, c, email)
		if r := do(t, c, "GET", e.srv.URL+"/console/export", nil); r.status != http.StatusOK || !strings.Contains(r.body, "Nothing recorded yet") {
			t.Errorf("an empty export panel: %d", r.status)
		}
		for i := range 3 {
			e.appendEvent(key, map[string]any{"event_id": "evt-u" + string(rune('a'+i)), "event_type": "tool_call", "tool": "t", "decision": "allow",
				"ts": "2026-11-28T08:00:00+00:00"})
		}
		r := do(t, c, "GET", e.srv.URL+"/console/usage", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, `<rect class="s-hook"`) || !strings.Contains(r.body, `<rect class="s-dashboard"`) {
			t.Fatalf("usage: %d\n%s", r.status, r.body)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/usage?days=1000", nil); r.status != http.StatusUnprocessableEntity {
			t.Errorf("usage?days=1000: %d", r.status)
		}
		r = do(t, c, "GET", e.srv.URL+"/console/export", nil)
		if !strings.Contains(r.body, "auditchain verify export auditchain-export.ndjson --service-key auditchain-public-key.json") {
			t.Errorf("the verify command is not shown:\n%s", r.body)
		}
		exp := do(t, c, "GET", e.srv.URL+"/console/export/download", nil)
		pub := do(t, c, "GET", e.srv.URL+"/console/export/public-key", nil)
		if exp.status != http.StatusOK || pub.status != http.StatusOK {
			t.Fatalf("downloads: %d %d", exp.status, pub.status)
		}
		rep := verifyExport(t, exp.body, pub.body)
		if rep.Events != 3 || !rep.Whole {
			t.Errorf("report: %+v", rep)
		}
	})
}

// appPrincipal is userID's principal, to read what a panel wrote.
func appPrincipal(userID string) app.Principal {
	return app.Principal{UserID: userID, Kind: app.KindAPIKey}
}

// verifyExport checks an export offline against the public key document
// the export panel offers, as `auditchain verify export` does.
func verifyExport(t *testing.T, export, keyDoc string) verify.Report {
	t.Helper()
	var k api.DelegationPublicKey
	if err := json.Unmarshal([]byte(keyDoc), &k); err != nil {
		t.Fatalf("public key document: %v\n%s", err, keyDoc)
	}
	pub, err := base64.StdEncoding.DecodeString(k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.VerifyExport(strings.NewReader(export), ed25519.PublicKey(pub))
	if err != nil {
		t.Fatalf("the export does not verify: %v", err)
	}
	return rep
}

// TestTeamPanelHTTP: without --teams the panel says so and its forms
// answer 404 feature_disabled, writing nothing; with it, a team is created,
// a second person invited, who joins by the team's id and leaves again.
func TestTeamPanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		off := newEnv(t, dsn)
		off.srv.Account(t, "solo@example.com")
		c := client(t)
		tok := signIn(t, off, c, "solo@example.com")
		if r := do(t, c, "GET", off.srv.URL+"/console/team", nil); r.status != http.StatusOK || !strings.Contains(r.body, `id="teams-off"`) {
			t.Fatalf("team panel with teams off: %d", r.status)
		}
		if r := do(t, c, "POST", off.srv.URL+"/console/team", url.Values{"csrf": {tok}, "name": {"x"}}); r.status != http.StatusNotFound || !strings.Contains(r.body, "feature_disabled") {
			t.Errorf("create with teams off: %d", r.status)
		}

		e := newEnvConfig(t, dsn, func(c *config.Config) { c.Teams = true })
		ownerID, _ := e.srv.Account(t, "owner@example.com")
		e.srv.Account(t, "second@example.com")
		owner, second := client(t), client(t)
		otok := signIn(t, e, owner, "owner@example.com")
		stok := signIn(t, e, second, "second@example.com")
		if r := do(t, owner, "POST", e.srv.URL+"/console/team", url.Values{"csrf": {otok}, "name": {""}}); r.status != http.StatusUnprocessableEntity {
			t.Errorf("an empty name: %d", r.status)
		}
		r := do(t, owner, "POST", e.srv.URL+"/console/team", url.Values{"csrf": {otok}, "name": {hostile[0]}})
		if r.status != http.StatusCreated || strings.Contains(r.body, "<script>window") {
			t.Fatalf("create: %d", r.status)
		}
		orgs, _ := e.srv.App.Orgs(context.Background(), appPrincipal(ownerID))
		if len(orgs.Orgs) != 1 {
			t.Fatalf("orgs: %+v", orgs)
		}
		id := orgs.Orgs[0].OrgID
		// Only an owner invites.
		r = do(t, owner, "POST", e.srv.URL+"/console/team/"+id+"/invite", url.Values{"csrf": {otok}, "email": {"second@example.com"}, "role": {"member"}})
		if r.status != http.StatusCreated || !strings.Contains(r.body, `id="invited"`) {
			t.Fatalf("invite: %d\n%s", r.status, r.body)
		}
		if r := do(t, second, "GET", e.srv.URL+"/console/team/"+id, nil); r.status != http.StatusNotFound {
			t.Errorf("an invitee sees the team before joining: %d", r.status)
		}
		r = do(t, second, "POST", e.srv.URL+"/console/team/join", url.Values{"csrf": {stok}, "org_id": {id}})
		if r.status != http.StatusOK || !strings.Contains(r.body, `id="joined"`) {
			t.Fatalf("join: %d\n%s", r.status, r.body)
		}
		r = do(t, owner, "GET", e.srv.URL+"/console/team/"+id, nil)
		if !strings.Contains(r.body, "second@example.com</td><td>member</td><td>active") {
			t.Errorf("the owner's member list:\n%s", r.body)
		}
		if r := do(t, second, "POST", e.srv.URL+"/console/team/"+id+"/invite", url.Values{"csrf": {stok}, "email": {"third@example.com"}}); r.status != http.StatusForbidden {
			t.Errorf("a member invites: %d", r.status)
		}
		r = do(t, second, "POST", e.srv.URL+"/console/team/"+id+"/remove", url.Values{"csrf": {stok}, "email": {"second@example.com"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/team" {
			t.Fatalf("leave: %d %q", r.status, r.header.Get("Location"))
		}
		if r := do(t, owner, "GET", e.srv.URL+"/console/team/"+id, nil); strings.Contains(r.body, "second@example.com") {
			t.Error("the member who left is still listed")
		}
	})
}

// The console counts each page in the usage under the capability of the
// API route whose use case it runs, as the API counts that route: the
// activity under events:read, notifications and webhooks under
// notifications, keys and legal under none (their API routes need none).
func TestConsoleCountsCallsAsTheAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "meter@example.com"
		userID, _ := e.srv.Account(t, email)
		c := client(t)
		signIn(t, e, c, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		before, err := e.srv.App.DashboardUsage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		pages := map[string]string{
			"/console/activity": string(domain.ScopeEventsRead), "/console/notifications": string(domain.ScopeNotifications),
			"/console/webhooks": string(domain.ScopeNotifications), "/console/keys": app.CapabilityNone, "/console/legal": app.CapabilityNone,
		}
		want := map[string]int64{}
		for path, capability := range pages {
			if r := do(t, c, "GET", e.srv.URL+path, nil); r.status != http.StatusOK {
				t.Fatalf("%s: %d", path, r.status)
			}
			want[capability]++
		}
		after, err := e.srv.App.DashboardUsage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for capability, n := range want {
			if got := after.CallsToday.ByCapability[capability] - before.CallsToday.ByCapability[capability]; got != n {
				t.Errorf("%s: counted %d, want %d", capability, got, n)
			}
		}
	})
}
