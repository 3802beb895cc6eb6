package httpapi_test

// What bounds the mail the service sends (docs/decisions/throttles.md): the
// addresses it mails, and the throttles of every route that mails.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	imail "github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
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
// charged: once mail works again the email has its whole hourly budget, and
// nothing of the unmailed requests is left to verify.
func TestCodeRequestsThatWereNotMailedAreNotCharged(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		working := e.app.Mail
		e.app.Mail = e.refusingMailer()
		req := map[string]any{"email": "outage@example.com", "acceptances": e.acceptAll()}
		for range domain.OTPRequestsPerHour + 2 {
			wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", req), 503, "mail_unavailable")
			e.clock.Advance(time.Second)
		}
		if n := e.count("otp_codes"); n != 0 {
			t.Fatalf("%d codes kept that were never mailed", n)
		}
		e.app.Mail = working
		for i := range domain.OTPRequestsPerHour {
			if r := e.do("POST", "/v1/auth/otp/request", "", req); r.Status != 202 {
				t.Fatalf("request %d once mail works again: %d %s", i, r.Status, r.Body)
			}
		}
		wantProblem(t, e.do("POST", "/v1/auth/otp/request", "", req), 429, "otp_rate_limited")
	})
}
