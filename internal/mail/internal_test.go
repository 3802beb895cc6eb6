package mail

import (
	"errors"
	"testing"
	"time"

	gosmtp "github.com/wneessen/go-mail/smtp"
)

func TestSMTPSpecParts(t *testing.T) {
	for _, tc := range []struct {
		spec           string
		host           string
		port           int
		user, password string
	}{
		{spec: "smtp://mail.example", host: "mail.example", port: 587},
		{spec: "smtp://mail.example:25", host: "mail.example", port: 25},
		{spec: "smtp://ops@mail.example", host: "mail.example", port: 587, user: "ops"},
		{spec: "smtp://ops%40audit.example:p%40ss%3Aw%2Frd%25@mail.example:2525", host: "mail.example", port: 2525,
			user: "ops@audit.example", password: "p@ss:w/rd%"},
		{spec: "smtp://[::1]:25", host: "::1", port: 25},
	} {
		m, err := New(tc.spec, Options{})
		if err != nil {
			t.Errorf("New(%q): %v", tc.spec, err)
			continue
		}
		s := m.transport.(*smtpTransport)
		if s.host != tc.host || s.port != tc.port || s.user != tc.user || s.password != tc.password {
			t.Errorf("New(%q) = host %q port %d user %q password %q", tc.spec, s.host, s.port, s.user, s.password)
		}
		if s.tls.ServerName != tc.host {
			t.Errorf("New(%q) verifies the certificate for %q", tc.spec, s.tls.ServerName)
		}
	}
}

func TestDefaults(t *testing.T) {
	m, err := New("log", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.from.String() != `"auditchain" <auditchain@localhost>` || m.idDomain != "localhost" {
		t.Errorf("From %s, Message-ID domain %q", m.from, m.idDomain)
	}
	if m.timeout != 10*time.Second || m.attempts != 3 {
		t.Errorf("timeout %s, attempts %d", m.timeout, m.attempts)
	}
	for n, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond} {
		if got := m.backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// PLAIN and LOGIN carry the password as it is: without TLS they go only to
// this machine (the SMTP tests' server is on 127.0.0.1, so they cannot show
// the refusal).
func TestCredentialsNeverInClearToAnotherHost(t *testing.T) {
	for _, tc := range []struct {
		server  gosmtp.ServerInfo
		wantErr error
	}{
		{server: gosmtp.ServerInfo{Name: "mail.example", Auth: []string{"PLAIN"}}, wantErr: errCleartextAuth},
		{server: gosmtp.ServerInfo{Name: "mail.example", Auth: []string{"LOGIN"}}, wantErr: errCleartextAuth},
		{server: gosmtp.ServerInfo{Name: "mail.example", TLS: true, Auth: []string{"PLAIN"}}},
		{server: gosmtp.ServerInfo{Name: "127.0.0.1", Auth: []string{"LOGIN"}}},
	} {
		a := &plainOrLogin{host: tc.server.Name, user: "ops", password: "secret"}
		_, _, err := a.Start(&tc.server)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("Start(%+v) error %v, want %v", tc.server, err, tc.wantErr)
		}
		if err != nil && !permanent(err) {
			t.Errorf("Start(%+v) error %v would be retried", tc.server, err)
		}
	}
}
