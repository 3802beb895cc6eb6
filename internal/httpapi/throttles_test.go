package httpapi_test

// What bounds the mail the service sends (docs/decisions/throttles.md): the
// addresses it mails, and the throttles of every route that mails.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
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
