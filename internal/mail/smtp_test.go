package mail_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
)

func smtpURL(user, password, addr string) string {
	u := url.URL{Scheme: "smtp", Host: addr}
	if user != "" {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

func TestSMTPDelivers(t *testing.T) {
	srv := &mailtest.Server{}
	srv.Start(t, nil)
	m := newMailer(t, smtpURL("", "", srv.Addr()), testOptions())
	if err := m.Send(context.Background(), sampleMessage); err != nil {
		t.Fatal(err)
	}
	got := srv.Received()
	if len(got) != 1 {
		t.Fatalf("%d messages arrived, want 1", len(got))
	}
	if got[0].From != "auditchain@localhost" || len(got[0].To) != 1 || got[0].To[0] != "zoe@example.com" {
		t.Errorf("envelope from %q to %q", got[0].From, got[0].To)
	}
	if got[0].TLS || got[0].User != "" {
		t.Errorf("TLS %v, user %q: the server offered neither", got[0].TLS, got[0].User)
	}
	checkMessage(t, got[0].Data, sampleMessage, "auditchain@localhost")
	if s := m.Stats(); s != (mail.Stats{Sent: 1}) {
		t.Errorf("Stats = %+v", s)
	}
	if m.Provider() != "smtp" {
		t.Errorf("Provider = %q", m.Provider())
	}
}

func TestSMTPFromOption(t *testing.T) {
	srv := &mailtest.Server{}
	srv.Start(t, nil)
	o := testOptions()
	o.From = "Audit Chain <noreply@audit.example>"
	m := newMailer(t, smtpURL("", "", srv.Addr()), o)
	if err := m.Send(context.Background(), sampleMessage); err != nil {
		t.Fatal(err)
	}
	got := srv.Received()
	if len(got) != 1 || got[0].From != "noreply@audit.example" {
		t.Fatalf("arrived %+v", got)
	}
	checkMessage(t, got[0].Data, sampleMessage, "noreply@audit.example")
	if id := parseMessage(t, got[0].Data).header.Get("Message-ID"); !strings.HasSuffix(id, "@audit.example>") {
		t.Errorf("Message-ID %q is not in the sender's domain", id)
	}
}

func TestSMTPAuth(t *testing.T) {
	// Reserved characters in both, to show they are percent-decoded.
	const user, password = "ops@audit.example", "p@ss:w/rd%é"
	for _, tc := range []struct {
		name       string
		mechanisms []string
		user, pass string
		wantUser   string
		wantErr    string
	}{
		{name: "PLAIN", mechanisms: []string{"PLAIN", "LOGIN"}, user: user, pass: password, wantUser: user},
		{name: "LOGIN when PLAIN is not offered", mechanisms: []string{"LOGIN"}, user: user, pass: password, wantUser: user},
		{name: "wrong password", mechanisms: []string{"PLAIN"}, user: user, pass: "wrong password", wantErr: "535"},
		{name: "no user in the URL: no AUTH", mechanisms: []string{"PLAIN"}, wantErr: "Please authenticate first"},
		{name: "no mechanism we speak", mechanisms: []string{"XOAUTH2"}, user: user, pass: password, wantErr: "neither PLAIN nor LOGIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &mailtest.Server{Mechanisms: tc.mechanisms, Users: map[string]string{user: password}}
			srv.Start(t, nil)
			var logs logBuffer
			o := testOptions()
			o.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			m := newMailer(t, smtpURL(tc.user, tc.pass, srv.Addr()), o)
			err := m.Send(context.Background(), sampleMessage)
			sessions, _ := srv.Counts()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Send error %v, want one containing %q", err, tc.wantErr)
				}
				// A 5xx is final (RFC 5321 §4.2.1): one session, no retries,
				// and the message counts as failed.
				if s := m.Stats(); s != (mail.Stats{Failed: 1}) || sessions != 1 {
					t.Errorf("Stats = %+v after %d sessions, want Failed 1 after 1", s, sessions)
				}
				if len(srv.Received()) != 0 {
					t.Error("a message arrived")
				}
				if tc.pass != "" && (strings.Contains(err.Error(), tc.pass) || strings.Contains(logs.String(), tc.pass)) {
					t.Errorf("the password shows in the error or the log:\n%v\n%s", err, logs.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := srv.Received()
			if len(got) != 1 || got[0].User != tc.wantUser {
				t.Fatalf("arrived %+v, want one message from user %q", got, tc.wantUser)
			}
			checkMessage(t, got[0].Data, sampleMessage, "auditchain@localhost")
			if strings.Contains(logs.String(), password) {
				t.Errorf("the password shows in the log:\n%s", logs.String())
			}
		})
	}
}

func TestSMTPRetriesTemporaryFailure(t *testing.T) {
	srv := &mailtest.Server{Refuse: []error{&smtp.SMTPError{
		Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later",
	}}}
	srv.Start(t, nil)
	var waits []int
	o := testOptions()
	o.Backoff = func(n int) time.Duration { waits = append(waits, n); return 0 }
	m := newMailer(t, smtpURL("", "", srv.Addr()), o)
	if err := m.Send(context.Background(), sampleMessage); err != nil {
		t.Fatal(err)
	}
	if got := srv.Received(); len(got) != 1 {
		t.Fatalf("%d messages arrived, want exactly 1", len(got))
	}
	if sessions, _ := srv.Counts(); sessions != 2 {
		t.Errorf("%d sessions, want 2", sessions)
	}
	if s := m.Stats(); s != (mail.Stats{Sent: 1, Retries: 1}) {
		t.Errorf("Stats = %+v", s)
	}
	if len(waits) != 1 || waits[0] != 0 {
		t.Errorf("Backoff asked for %v, want [0] (after the first attempt)", waits)
	}
}

func TestSMTPGivesUpAfterAttempts(t *testing.T) {
	busy := &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 5}, Message: "busy"}
	srv := &mailtest.Server{Refuse: []error{busy, busy, busy, busy}}
	srv.Start(t, nil)
	m := newMailer(t, smtpURL("", "", srv.Addr()), testOptions())
	err := m.Send(context.Background(), sampleMessage)
	if err == nil || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("Send error %v", err)
	}
	if sessions, _ := srv.Counts(); sessions != 3 {
		t.Errorf("%d sessions, want 3", sessions)
	}
	if s := m.Stats(); s != (mail.Stats{Failed: 1, Retries: 2}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestSMTPPermanentRefusalIsNotRetried(t *testing.T) {
	srv := &mailtest.Server{RcptError: &smtp.SMTPError{
		Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user",
	}}
	srv.Start(t, nil)
	m := newMailer(t, smtpURL("", "", srv.Addr()), testOptions())
	err := m.Send(context.Background(), sampleMessage)
	if err == nil || !strings.Contains(err.Error(), "550") || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("Send error %v", err)
	}
	if sessions, _ := srv.Counts(); sessions != 1 {
		t.Errorf("%d sessions, want 1", sessions)
	}
	if s := m.Stats(); s != (mail.Stats{Failed: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestSMTPSilentServerTimesOut(t *testing.T) {
	addr, accepted := silentListener(t)
	const attempts, timeout = 2, 100 * time.Millisecond
	o := testOptions()
	o.Attempts, o.Timeout = attempts, timeout
	m := newMailer(t, smtpURL("", "", addr), o)
	start := time.Now()
	err := m.Send(context.Background(), sampleMessage)
	elapsed := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "timed out after 100ms") {
		t.Fatalf("Send error %v", err)
	}
	// Each attempt waits its whole timeout (timers never fire early); the
	// margin above is for a loaded machine, not for a third attempt.
	if elapsed < attempts*timeout || elapsed > attempts*timeout+2*time.Second {
		t.Errorf("Send took %v, want about %v", elapsed, attempts*timeout)
	}
	if s := m.Stats(); s != (mail.Stats{Failed: 1, Retries: 1}) {
		t.Errorf("Stats = %+v", s)
	}
	// The client dialled once per attempt and closed each connection it
	// gave up on.
	for i := range attempts {
		select {
		case c := <-accepted:
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
				t.Errorf("connection %d: read %d, %v; want EOF (closed by the client)", i+1, n, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d connections arrived", i)
		}
	}
}

func TestSMTPContextCancelsAttempt(t *testing.T) {
	addr, accepted := silentListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-accepted
		cancel()
	}()
	o := testOptions()
	o.Timeout = time.Minute
	m := newMailer(t, smtpURL("", "", addr), o)
	start := time.Now()
	err := m.Send(ctx, sampleMessage)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Send error %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Send took %v after its context ended", elapsed)
	}
	if s := m.Stats(); s != (mail.Stats{Failed: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestSMTPContextCancelsBackoff(t *testing.T) {
	srv := &mailtest.Server{Refuse: []error{&smtp.SMTPError{
		Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later",
	}}}
	srv.Start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	o := testOptions()
	// The operator shuts down while Send waits to retry.
	o.Backoff = func(int) time.Duration { cancel(); return time.Hour }
	m := newMailer(t, smtpURL("", "", srv.Addr()), o)
	if err := m.Send(ctx, sampleMessage); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send error %v, want context.Canceled", err)
	}
	// The retry never started.
	if s := m.Stats(); s != (mail.Stats{Failed: 1}) {
		t.Errorf("Stats = %+v", s)
	}
	if len(srv.Received()) != 0 {
		t.Error("a message arrived")
	}
}

func TestSMTPStartTLS(t *testing.T) {
	const user, password = "ops", "secret"
	serverTLS, roots := mailtest.SelfSigned(t)
	for _, tc := range []struct {
		name     string
		user     string
		roots    bool
		wantErr  string
		wantUser string
	}{
		{name: "trusted certificate", roots: true},
		{name: "trusted certificate, AUTH after STARTTLS", roots: true, user: user, wantUser: user},
		// Opportunistic means "when offered", not "whatever the certificate":
		// a certificate we cannot verify is a refusal, never a fall back to
		// clear text.
		{name: "untrusted certificate", roots: false, wantErr: "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &mailtest.Server{Mechanisms: []string{"PLAIN"}}
			if tc.user != "" {
				srv.Users = map[string]string{user: password}
			}
			srv.Start(t, serverTLS)
			o := testOptions()
			if tc.roots {
				o.RootCAs = roots
			}
			m := newMailer(t, smtpURL(tc.user, password, srv.Addr()), o)
			err := m.Send(context.Background(), sampleMessage)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Send error %v, want one containing %q", err, tc.wantErr)
				}
				if s := m.Stats(); s != (mail.Stats{Failed: 1}) || len(srv.Received()) != 0 {
					t.Errorf("Stats = %+v, %d arrived; want Failed 1, nothing arrived", s, len(srv.Received()))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := srv.Received()
			if len(got) != 1 || !got[0].TLS || got[0].User != tc.wantUser {
				t.Fatalf("arrived %+v, want one message over TLS from user %q", got, tc.wantUser)
			}
			checkMessage(t, got[0].Data, sampleMessage, "auditchain@localhost")
		})
	}
}

// A server that accepts the message and then drops the connection (before
// RSET and QUIT): the message was delivered, so Send reports it sent and
// does not deliver it again. go-smtp always answers RSET, so this server is
// scripted by hand.
func TestSMTPAcceptedThenDroppedIsSentOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var delivered atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				reply := func(s string) { _, _ = io.WriteString(c, s+"\r\n") }
				reply("220 localhost ESMTP")
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					switch verb := strings.ToUpper(strings.Fields(line + " x")[0]); verb {
					case "EHLO":
						reply("250-localhost")
						reply("250 8BITMIME")
					case "DATA":
						reply("354 go ahead")
						for {
							line, err := r.ReadString('\n')
							if err != nil {
								return
							}
							if line == ".\r\n" {
								break
							}
						}
						delivered.Add(1)
						reply("250 2.0.0 queued")
						return // gone before RSET and QUIT
					default:
						reply("250 ok")
					}
				}
			}()
		}
	}()
	m := newMailer(t, smtpURL("", "", l.Addr().String()), testOptions())
	if err := m.Send(context.Background(), sampleMessage); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := delivered.Load(); n != 1 {
		t.Errorf("delivered %d times, want 1", n)
	}
	if s := m.Stats(); s != (mail.Stats{Sent: 1}) {
		t.Errorf("Stats = %+v", s)
	}
}
