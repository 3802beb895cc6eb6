package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// inbox keeps the mail the service sends.
type inbox struct {
	mu   sync.Mutex
	msgs []mail.Message
}

func (b *inbox) Send(_ context.Context, m mail.Message) error {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	return nil
}

func (b *inbox) lastCode(t *testing.T) string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.msgs) - 1; i >= 0; i-- {
		if _, code, ok := strings.Cut(b.msgs[i].Subject, "sign-in code: "); ok {
			return code
		}
	}
	t.Fatal("no sign-in code mailed")
	return ""
}

// Sign-in through the client: a code mailed, verified for a session that
// the session routes accept; the cron routes with the operator's secret;
// the API document.
func TestSignInSessionsCronAndTheDocument(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		box := &inbox{}
		s := httpapitest.Start(t, dsn, apptest.Options{Mail: box, Config: func(c *config.Config) { c.CronSecret = "cron-secret-for-tests" }})
		rec := &recorder{bodies: map[string][]byte{}}
		hc := client.WithHTTPClient(&http.Client{Transport: rec})
		ctx := context.Background()
		anon := newClient(t, s, "", hc)

		docs, err := anon.LegalDocuments(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var accepts []api.AcceptanceInput
		for _, d := range docs.Documents {
			if d.Required {
				accepts = append(accepts, api.AcceptanceInput{DocumentID: d.DocumentID, Version: d.Version, ContentHash: d.ContentHash})
			}
		}
		if _, err := anon.RequestOTP(ctx, api.OTPRequest{Email: new("new@example.com"), Acceptances: accepts}); err != nil {
			t.Fatal(err)
		}
		exact[api.OTPSent](t, rec, "POST /v1/auth/otp/request")
		in, token, err := anon.VerifyOTP(ctx, api.OTPVerify{Email: new("new@example.com"), Code: new(box.lastCode(t))})
		if err != nil || token == "" || in.Email != "new@example.com" {
			t.Fatalf("verify: %+v, token %q, %v", in, token, err)
		}
		exact[api.SignedIn](t, rec, "POST /v1/auth/otp/verify")
		signed := newClient(t, s, "", hc, client.WithSession(token))
		if sess, err := signed.Session(ctx); err != nil || sess.UserID != in.UserID {
			t.Fatalf("session: %+v, %v", sess, err)
		}
		exact[api.Session](t, rec, "GET /v1/auth/session")
		first := docs.Documents[0]
		if _, err := signed.AcceptLegal(ctx, api.AcceptRequest{Accepted: new(true), DocumentID: new(first.DocumentID),
			Version: new(first.Version), ContentHash: new(first.ContentHash)}); err != nil {
			t.Fatal(err)
		}
		exact[api.AcceptResult](t, rec, "POST /v1/legal/accept")
		if err := signed.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := signed.Session(ctx); err == nil {
			t.Fatal("the session still works after logout")
		}

		operator := newClient(t, s, "", hc, client.WithCronSecret("cron-secret-for-tests"))
		out, err := operator.RunCron(ctx, "grant-expiry")
		var swept struct {
			Swept map[string]int `json:"swept"`
		}
		if err != nil || json.Unmarshal(out, &swept) != nil || swept.Swept == nil {
			t.Fatalf("cron: %s, %v", out, err)
		}
		if _, err := operator.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := anon.RunCron(ctx, "grant-expiry"); !client.IsCode(err, "unauthorized") {
			t.Fatalf("cron without the secret: %v", err)
		}
		doc, err := anon.OpenAPI(ctx)
		if err != nil || !strings.Contains(string(doc), `"openapi"`) {
			t.Fatalf("openapi: %.80s, %v", doc, err)
		}
	})
}
