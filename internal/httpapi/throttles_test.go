package httpapi_test

// What bounds the mail the service sends (docs/decisions/throttles.md): the
// addresses it mails, and the throttles of every route that mails.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	imail "github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// isCode reports whether err is a domain error with code.
func isCode(err error, code string) bool {
	var de *domain.Error
	return errors.As(err, &de) && de.Code == code
}

// mailCount counts every message in the environment's outbox.
func (e *env) mailCount() int {
	e.t.Helper()
	entries, err := os.ReadDir(e.outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ent := range entries {
		if strings.HasSuffix(ent.Name(), ".eml") && !strings.HasPrefix(ent.Name(), ".") {
			n++
		}
	}
	return n
}

// notPlainAddresses are refused wherever an address is mailed: a domain
// literal, a name that is not a DNS host, a display name, a comment, two
// addresses.
var notPlainAddresses = []string{"a@[127.0.0.1]", "a@[IPv6:::1]", "a@127.0.0.1", "a@localhost", "Alice <a@example.com>",
	"a@example.com (Alice)", "a(x)@example.com", "a@example.com, b@example.com", `"a b"@example.com`}

// Sign-in and invitations take exactly one plain local@domain with a DNS
// name: anything else is 422 validation_error naming email, and nothing is
// written or mailed.
func TestMailedAddressesAreOnePlainAddress(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		members, mails := e.count("org_members"), e.mailCount()
		for _, addr := range notPlainAddresses {
			m := wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": addr, "acceptances": e.acceptAll()}), 422, "validation_error")
			if errs := m["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "email" {
				t.Fatalf("sign-in with %q: errors %v, want the field email", addr, m["errors"])
			}
			m = wantProblem(t, e.do("POST", "/v1/orgs/"+orgID+"/invite", c.owner.key, map[string]any{"email": addr, "role": "viewer"}), 422, "validation_error")
			if errs := m["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "email" {
				t.Fatalf("invitation of %q: errors %v, want the field email", addr, m["errors"])
			}
		}
		if n := e.count("otp_codes"); n != 0 {
			t.Fatalf("%d codes stored for refused addresses", n)
		}
		if n := e.count("org_members"); n != members {
			t.Fatalf("refused invitations wrote member rows: %d -> %d", members, n)
		}
		if n := e.mailCount(); n != mails {
			t.Fatalf("%d messages mailed to refused addresses", n-mails)
		}
		// admin create-account too: the account's email receives its notices.
		for _, addr := range notPlainAddresses {
			if _, _, err := e.app.CreateAccount(context.Background(), app.AccountRequest{Email: addr}); !isCode(err, "validation_error") {
				t.Fatalf("an account with the email %q: %v", addr, err)
			}
		}
	})
}

// refusingMailer is the production SMTP transport in front of a real SMTP
// server that refuses every recipient: a mail outage.
func (e *env) refusingMailer() app.Mailer {
	e.t.Helper()
	refusing := &mailtest.Server{RcptError: &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try later"}}
	refusing.Start(e.t, nil)
	m, err := imail.New("smtp://"+refusing.Addr(), imail.Options{Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// A code request that could not be mailed (503 mail_unavailable) is not
// charged: once mail works again the email, its client and the deployment
// have their whole hourly budgets, and nothing of the unmailed requests is
// left to verify.
func TestCodeRequestsThatWereNotMailedAreNotCharged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// The client's and the deployment's budgets are no larger than the
		// email's, so every one of them must give back what it took.
		e := newEnv(t, dsn, func(c *config.Config) {
			c.OTPLimitPerClient, c.OTPLimitGlobal = domain.OTPRequestsPerHour, domain.OTPRequestsPerHour
		})
		working := e.mail.use(e.refusingMailer())
		req := map[string]any{"email": "outage@example.com", "acceptances": e.acceptAll()}
		for range domain.OTPRequestsPerHour + 2 {
			wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", req), 503, "mail_unavailable")
			e.clock.Advance(time.Second)
		}
		if n := e.count("otp_codes"); n != 0 {
			t.Fatalf("%d codes kept that were never mailed", n)
		}
		e.mail.use(working)
		for i := range domain.OTPRequestsPerHour {
			if r := e.do("POST", "/v1/auth/otp/request", "", req); r.Status != 202 {
				t.Fatalf("request %d once mail works again: %d %s", i, r.Status, r.Body)
			}
		}
		wantThrottled(t, e.do("POST", "/v1/auth/otp/request", "", req), "otp_rate_limited", "per_email", "3600")
	})
}

// otpFrom requests a sign-in code for a new email as the client the
// X-Forwarded-For header names (the test server trusts 127.0.0.1 as its
// proxy where the test says so).
func (e *env) otpFrom(client, email string) response {
	e.t.Helper()
	return e.do("POST", "/v1/auth/otp/request", "", map[string]any{"email": email, "acceptances": e.acceptAll()},
		"X-Forwarded-For", client)
}

// wantThrottled asserts a 429 of code naming throttle, with Retry-After.
func wantThrottled(t *testing.T, r response, code, throttle string, retryAfter string) {
	t.Helper()
	m := wantProblem(t, r, 429, code)
	if m["throttle"] != throttle {
		t.Fatalf("throttle %v, want %s: %s", m["throttle"], throttle, r.Body)
	}
	if got := r.Header.Get("Retry-After"); got != retryAfter {
		t.Fatalf("Retry-After %q, want %s", got, retryAfter)
	}
}

// Sign-in codes are bounded per client address (--otp-limit-per-client,
// 10 an hour): the eleventh request of one client is 429 otp_rate_limited
// with Retry-After, whatever email it names, stores nothing and mails
// nothing, while another client is served. Behind a trusted proxy the
// client is the address X-Forwarded-For names.
func TestCodeRequestsPerClientAreLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.TrustedProxies = "127.0.0.1" })
		limit := config.DefaultOTPLimitPerClient
		for i := range limit {
			if r := e.otpFrom("203.0.113.7", fmt.Sprintf("c%d@example.com", i)); r.Status != 202 {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
			}
		}
		wantThrottled(t, e.otpFrom("203.0.113.7", "one-more@example.com"), "otp_rate_limited", "per_client", "360")
		if codes, mails := e.count("otp_codes"), e.mailCount(); codes != limit || mails != limit {
			t.Fatalf("%d codes stored and %d mailed, want %d", codes, mails, limit)
		}
		if r := e.otpFrom("203.0.113.8", "one-more@example.com"); r.Status != 202 {
			t.Fatalf("another client: %d %s", r.Status, r.Body)
		}
		// One unit leaks out every six minutes.
		e.clock.Advance(6 * time.Minute)
		if r := e.otpFrom("203.0.113.7", "later@example.com"); r.Status != 202 {
			t.Fatalf("six minutes later: %d %s", r.Status, r.Body)
		}
		wantThrottled(t, e.otpFrom("203.0.113.7", "later-still@example.com"), "otp_rate_limited", "per_client", "360")
	})
}

// Without --trusted-proxies, X-Forwarded-For is the client's own text and
// names nobody: requests that vary it are one client, the TCP peer.
func TestForwardedForIsIgnoredWithoutTrustedProxies(t *testing.T) {
	e := newEnv(t, storetest.DSN(t, storetest.SQLite), nil)
	for i := range config.DefaultOTPLimitPerClient {
		if r := e.otpFrom(fmt.Sprintf("198.51.100.%d", i), fmt.Sprintf("s%d@example.com", i)); r.Status != 202 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	wantThrottled(t, e.otpFrom("198.51.100.200", "spoofed@example.com"), "otp_rate_limited", "per_client", "360")
}

// Sign-in codes are bounded for the whole deployment too
// (--otp-limit-global): once it is spent, a new client is refused as well.
func TestCodeRequestsAreLimitedGlobally(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.TrustedProxies, c.OTPLimitGlobal = "127.0.0.1", 3 })
		for i := range 3 {
			if r := e.otpFrom(fmt.Sprintf("203.0.113.%d", i), fmt.Sprintf("g%d@example.com", i)); r.Status != 202 {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
			}
		}
		wantThrottled(t, e.otpFrom("203.0.113.99", "g-last@example.com"), "otp_rate_limited", "global", "1200")
		if n := e.count("otp_codes"); n != 3 {
			t.Fatalf("%d codes stored", n)
		}
	})
}

// invite invites email into orgID as a viewer with key.
func (e *env) invite(key, orgID, email string) response {
	e.t.Helper()
	return e.do("POST", "/v1/orgs/"+orgID+"/invite", key, map[string]any{"email": email, "role": "viewer"})
}

// newTeam makes an account with an email, a key and a team it owns.
func (e *env) newTeam(owner string) (key, orgID string) {
	e.t.Helper()
	_, key = e.account(owner)
	r := e.do("POST", "/v1/orgs", key, map[string]any{"name": "Team of " + owner})
	if r.Status != 201 {
		e.t.Fatalf("team: %d %s", r.Status, r.Body)
	}
	return key, r.JSON(e.t)["org"].(map[string]any)["org_id"].(string)
}

// wantLimitHitNotice asserts the account behind key was told of its 429
// with one rate.limit_hit notice (CONTRACT.md "Notifications": at most once
// per account, type and hour).
func (e *env) wantLimitHitNotice(key string) {
	e.t.Helper()
	if rows := rowsOf(e.notices(key, "", 100), domain.NoticeRateLimitHit); len(rows[domain.ChannelInApp]) != 1 {
		e.t.Fatalf("rate.limit_hit rows %v, want one in_app", rows)
	}
}

// Invitations to one address are bounded per day, from every team together
// (--invite-limit-per-recipient, 5): invite, withdraw and invite again counts
// each invitation mailed. The sixth is 429 rate_limit_exceeded with
// Retry-After, writes no member row and mails nothing, for another team too;
// the inviter is told once with rate.limit_hit.
func TestInvitationsPerRecipientAreLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.Teams = true })
		key, orgID := e.newTeam("owner@example.com")
		victim := "victim@example.com"
		for i := range config.DefaultInviteLimitPerRecipient {
			if r := e.invite(key, orgID, victim); r.Status != 201 {
				t.Fatalf("invitation %d: %d %s", i, r.Status, r.Body)
			}
			if r := e.do("DELETE", "/v1/orgs/"+orgID+"/members/"+victim, key, nil); r.Status != 204 {
				t.Fatalf("withdrawal %d: %d %s", i, r.Status, r.Body)
			}
		}
		members := e.count("org_members")
		wantThrottled(t, e.invite(key, orgID, victim), "rate_limit_exceeded", "per_recipient", "17280")
		otherKey, otherOrg := e.newTeam("other-owner@example.com")
		wantThrottled(t, e.invite(otherKey, otherOrg, victim), "rate_limit_exceeded", "per_recipient", "17280")
		if n := e.count("org_members"); n != members+1 { // the other team's owner
			t.Fatalf("refused invitations wrote member rows: %d -> %d", members, n)
		}
		if n := len(e.outboxMessages(victim)); n != config.DefaultInviteLimitPerRecipient {
			t.Fatalf("%d invitations mailed to one address, want %d", n, config.DefaultInviteLimitPerRecipient)
		}
		if r := e.invite(key, orgID, "someone-else@example.com"); r.Status != 201 {
			t.Fatalf("another address: %d %s", r.Status, r.Body)
		}
		e.wantLimitHitNotice(key)
		// A fifth of a day later one more invitation may go to the address.
		e.clock.Advance(24 * time.Hour / time.Duration(config.DefaultInviteLimitPerRecipient))
		if r := e.invite(key, orgID, victim); r.Status != 201 {
			t.Fatalf("a fifth of a day later: %d %s", r.Status, r.Body)
		}
	})
}

// Invitations are bounded per team (--invite-limit-per-org), per inviting
// account across its teams (--invite-limit-per-account) and for the whole
// deployment (--invite-limit-global).
func TestInvitationsPerTeamAccountAndGloballyAreLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) {
			c.Teams, c.InviteLimitPerOrg, c.InviteLimitPerAccount, c.InviteLimitGlobal = true, 2, 3, 5
		})
		key, org1 := e.newTeam("owner@example.com")
		for i := range 2 {
			if r := e.invite(key, org1, fmt.Sprintf("a%d@example.com", i)); r.Status != 201 {
				t.Fatalf("invitation %d: %d %s", i, r.Status, r.Body)
			}
		}
		wantThrottled(t, e.invite(key, org1, "a2@example.com"), "rate_limit_exceeded", "per_org", "43200")
		r := e.do("POST", "/v1/orgs", key, map[string]any{"name": "Second"})
		org2 := r.JSON(t)["org"].(map[string]any)["org_id"].(string)
		if r := e.invite(key, org2, "b0@example.com"); r.Status != 201 {
			t.Fatalf("the account's third invitation: %d %s", r.Status, r.Body)
		}
		wantThrottled(t, e.invite(key, org2, "b1@example.com"), "rate_limit_exceeded", "per_account", "28800")
		other, org3 := e.newTeam("other@example.com")
		for i := range 2 {
			if r := e.invite(other, org3, fmt.Sprintf("c%d@example.com", i)); r.Status != 201 {
				t.Fatalf("another owner's invitation %d: %d %s", i, r.Status, r.Body)
			}
		}
		third, org4 := e.newTeam("third@example.com")
		wantThrottled(t, e.invite(third, org4, "d0@example.com"), "rate_limit_exceeded", "global", "720")
		if n := e.count("org_members"); n != 4+5 {
			t.Fatalf("%d member rows, want 4 owners and 5 invitations", n)
		}
	})
}

// An invitation the mailer could not take is withdrawn and not charged.
func TestInvitationsThatWereNotMailedAreNotCharged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.Teams = true })
		key, orgID := e.newTeam("owner@example.com")
		working := e.mail.use(e.refusingMailer())
		for range config.DefaultInviteLimitPerRecipient + 1 {
			wantProblem(t, e.invite(key, orgID, "later@example.com"), 503, "mail_unavailable")
		}
		e.mail.use(working)
		for i := range config.DefaultInviteLimitPerRecipient {
			if r := e.invite(key, orgID, "later@example.com"); r.Status != 201 {
				t.Fatalf("invitation %d once mail works: %d %s", i, r.Status, r.Body)
			}
			e.do("DELETE", "/v1/orgs/"+orgID+"/members/later@example.com", key, nil)
		}
		wantThrottled(t, e.invite(key, orgID, "later@example.com"), "rate_limit_exceeded", "per_recipient", "17280")
	})
}

// backendOf names the store a test DSN opens.
func backendOf(dsn string) storetest.Backend {
	if strings.HasPrefix(dsn, "postgres") {
		return storetest.Postgres
	}
	return storetest.SQLite
}

// POST /v1/notifications/test is bounded per account
// (--test-notification-limit-per-account, 10 an hour) in development as in
// production: the call over it is 429 rate_limit_exceeded, dispatches
// nothing, and the account is told once with rate.limit_hit.
func TestTestNotificationsPerAccountAreLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		for _, env := range []string{"development", "production"} {
			t.Run(env, func(t *testing.T) {
				e := newEnv(t, storetest.DSN(t, backendOf(dsn)), func(c *config.Config) { c.Env = env })
				_, key := e.adminAccount("admin@example.com")
				for i := range config.DefaultTestNotifyLimitPerAccount {
					if r := e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked"}); r.Status != 200 {
						t.Fatalf("test %d: %d %s", i, r.Status, r.Body)
					}
				}
				revoked := func() (n int) {
					if err := e.store.DB().QueryRow(`SELECT count(*) FROM notification_rows WHERE type = 'grant.revoked'`).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				rows := revoked()
				wantThrottled(t, e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked"}), "rate_limit_exceeded", "per_account", "360")
				if n := revoked(); n != rows {
					t.Fatalf("the refused test dispatched rows: %d -> %d", rows, n)
				}
				e.wantLimitHitNotice(key)
			})
		}
	})
}

// And for the whole deployment (--test-notification-limit-global).
func TestTestNotificationsAreLimitedGlobally(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.TestNotifyLimitGlobal = 3 })
		for i := range 3 {
			_, key := e.account(fmt.Sprintf("t%d@example.com", i))
			if r := e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked"}); r.Status != 200 {
				t.Fatalf("test %d: %d %s", i, r.Status, r.Body)
			}
		}
		_, key := e.account("t-last@example.com")
		wantThrottled(t, e.do("POST", "/v1/notifications/test", key, map[string]any{"type": "grant.revoked"}), "rate_limit_exceeded", "global", "1200")
	})
}

// shot is one request of a volley: to e's server, with a JSON body and
// header pairs.
type shot struct {
	e       *env
	path    string
	body    any
	headers []string
}

// volley sends the shots at once (each on its own goroutine, released
// together) and returns their statuses in order; t may not fail from those
// goroutines, so it checks nothing itself but transport errors.
func volley(t *testing.T, shots []shot) []int {
	t.Helper()
	statuses := make([]int, len(shots))
	errs := make([]error, len(shots))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range shots {
		b, err := json.Marshal(s.body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest("POST", s.e.srv.URL+s.path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for j := 0; j+1 < len(s.headers); j += 2 {
			req.Header.Set(s.headers[j], s.headers[j+1])
		}
		wg.Go(func() {
			<-start
			resp, err := s.e.srv.Client().Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return statuses
}

// wantAdmitted asserts that exactly want of the statuses are ok and the
// rest 429.
func wantAdmitted(t *testing.T, what string, statuses []int, ok, want int) {
	t.Helper()
	n := 0
	for _, s := range statuses {
		switch s {
		case ok:
			n++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("%s: status %d among %v", what, s, statuses)
		}
	}
	if n != want {
		t.Fatalf("%s: %d admitted, want %d (%v)", what, n, want, statuses)
	}
}

// replicas are the servers a throttle test spreads its requests over: one
// on SQLite (the only writer), two over one PostgreSQL database.
func replicas(t *testing.T, dsn string, mutate func(*config.Config)) []*env {
	if backendOf(dsn) == storetest.SQLite {
		return []*env{newEnv(t, dsn, mutate)}
	}
	return []*env{newEnv(t, dsn, mutate), newEnv(t, dsn, mutate)}
}

// Each throttle is one budget for the whole deployment: requests sent at
// once, spread over two PostgreSQL replicas of one database (and at once to
// SQLite's one server), admit exactly the limit between them, never the
// limit on each replica.
func TestThrottlesHoldAcrossReplicas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		es := replicas(t, dsn, func(c *config.Config) { c.Teams, c.TrustedProxies = true, "127.0.0.1" })
		a := es[0]
		on := func(i int) *env { return es[i%len(es)] }

		// Sign-in codes of one client address, each for another email.
		var shots []shot
		for i := range 3 * config.DefaultOTPLimitPerClient {
			shots = append(shots, shot{on(i), "/v1/auth/otp/request", map[string]any{"email": fmt.Sprintf("r%d@example.com", i),
				"acceptances": a.acceptAll()}, []string{"X-Forwarded-For", "203.0.113.50"}})
		}
		wantAdmitted(t, "sign-in codes of one client", volley(t, shots), 202, config.DefaultOTPLimitPerClient)
		if n := a.count("otp_codes"); n != config.DefaultOTPLimitPerClient {
			t.Fatalf("%d codes stored", n)
		}

		// Invitations of one address, each from another team.
		shots = nil
		for i := range 3 * config.DefaultInviteLimitPerRecipient {
			key, orgID := a.newTeam(fmt.Sprintf("owner%d@example.com", i))
			shots = append(shots, shot{on(i), "/v1/orgs/" + orgID + "/invite", map[string]any{"email": "popular@example.com", "role": "viewer"},
				[]string{"X-API-Key", key}})
		}
		wantAdmitted(t, "invitations of one address", volley(t, shots), 201, config.DefaultInviteLimitPerRecipient)

		// Test notifications of one account.
		_, key := a.account("tester@example.com")
		shots = nil
		for i := range 3 * config.DefaultTestNotifyLimitPerAccount {
			shots = append(shots, shot{on(i), "/v1/notifications/test", map[string]any{"type": "governance.proposed"}, []string{"X-API-Key", key}})
		}
		wantAdmitted(t, "test notifications of one account", volley(t, shots), 200, config.DefaultTestNotifyLimitPerAccount)
	})
}

// Budgets keyed by client address or recipient do not pile up: once an hour
// a request's write deletes the budgets that went idle.
func TestIdleBudgetsArePruned(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *config.Config) { c.TrustedProxies = "127.0.0.1" })
		for i := range 3 {
			e.otpFrom(fmt.Sprintf("203.0.113.%d", i), fmt.Sprintf("p%d@example.com", i))
		}
		if n := e.count("rate_state"); n != 4 {
			t.Fatalf("%d budgets, want three clients' and the global one", n)
		}
		e.clock.Advance(2 * time.Hour)
		if r := e.otpFrom("203.0.113.9", "p9@example.com"); r.Status != 202 {
			t.Fatalf("request: %d %s", r.Status, r.Body)
		}
		if n := e.count("rate_state"); n != 2 {
			t.Fatalf("%d budgets after two idle hours, want the new client's and the global one", n)
		}
	})
}
