package mail_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/mail"
)

func TestLogTransport(t *testing.T) {
	const code = "428913"
	msg := mail.Message{To: "zoe@example.com", Subject: "Your sign-in code", Body: "Your code is " + code + "."}
	for _, tc := range []struct {
		name       string
		production bool
		want       []string
		wantAbsent []string
	}{
		{name: "development shows the body", want: []string{"zoe@example.com", "Your sign-in code", code}},
		{name: "production withholds it", production: true,
			want: []string{"zoe@example.com", "Your sign-in code", "body withheld in production"}, wantAbsent: []string{code}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			o := testOptions()
			o.Log = slog.New(slog.NewTextHandler(&logs, nil))
			o.Production = tc.production
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
			for _, s := range tc.want {
				if !strings.Contains(out, s) {
					t.Errorf("log lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.wantAbsent {
				if strings.Contains(out, s) {
					t.Errorf("log shows %q:\n%s", s, out)
				}
			}
			if s := m.Stats(); s != (mail.Stats{Sent: 1}) {
				t.Errorf("Stats = %+v", s)
			}
		})
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
