package mail_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/mail"
)

// The log transport's line names the recipient and the kind of message,
// never its subject or body: both can carry a sign-in code, and a code read
// from a log signs in.
func TestLogTransport(t *testing.T) {
	const code = "42891377"
	msg := mail.Message{To: "zoe@example.com", Kind: "sign_in_code",
		Subject: "Your sign-in code: " + code, Body: "Your code is " + code + ", until noon."}
	var logs logBuffer
	o := testOptions()
	o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	m := newMailer(t, "log", o)
	if m.Provider() != "log" {
		t.Errorf("Provider = %q", m.Provider())
	}
	if err := m.Send(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, out)
	}
	for _, s := range []string{"msg=mail", "provider=log", "to=zoe@example.com", "kind=sign_in_code", "message_id="} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
	for _, s := range []string{code, "subject", "body", "sign-in code", "noon"} {
		if strings.Contains(out, s) {
			t.Errorf("log shows %q:\n%s", s, out)
		}
	}
	if s := m.Stats(); s != (mail.Stats{Sent: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestLogTransportWithoutLogger(t *testing.T) {
	// A nil Log discards; the message still counts as sent.
	m := newMailer(t, "log", mail.Options{})
	if err := m.Send(context.Background(), sampleMessage); err != nil {
		t.Fatal(err)
	}
	if s := m.Stats(); s != (mail.Stats{Sent: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}
