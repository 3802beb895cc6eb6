package mail_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/mail"
)

func TestNew(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		spec         string
		opts         mail.Options
		wantProvider string
		wantErr      string
		secret       string // must not appear in the error
	}{
		{spec: "log", wantProvider: "log"},
		{spec: "outbox:" + filepath.Join(dir, "a"), wantProvider: "outbox"},
		{spec: "smtp://mail.example", wantProvider: "smtp"},
		{spec: "smtp://mail.example:2525", wantProvider: "smtp"},
		{spec: "smtp://user@mail.example", wantProvider: "smtp"},
		{spec: "smtp://user:pa%40ss@mail.example:465/", wantProvider: "smtp"},
		{spec: "smtp://[::1]:25", wantProvider: "smtp"},

		{spec: "", wantErr: `unknown transport ""`},
		{spec: "LOG", wantErr: `unknown transport "LOG"`},
		{spec: "sendgrid", wantErr: `unknown transport "sendgrid"`},
		{spec: "smtps://user:hunter2@mail.example", wantErr: `unknown transport "smtps"`, secret: "hunter2"},
		{spec: "outbox:", wantErr: "outbox needs a directory"},
		{spec: "outbox", wantErr: `unknown transport "outbox"`},
		{spec: "smtp://", wantErr: "names no host"},
		{spec: "smtp://user:hunter2@", wantErr: "names no host", secret: "hunter2"},
		{spec: "smtp://:2525", wantErr: "names no host"},
		{spec: "smtp:mail.example", wantErr: "names no host"},
		{spec: "smtp://mail.example:99999", wantErr: "not a port number"},
		{spec: "smtp://mail.example:smtp", wantErr: "does not parse"},
		{spec: "smtp://mail.example/path", wantErr: "path, query or fragment"},
		{spec: "smtp://mail.example?tls=off", wantErr: "path, query or fragment"},
		{spec: "smtp://:hunter2@mail.example", wantErr: "password but no user", secret: "hunter2"},
		{spec: "smtp://user:hunter2%zz@mail.example", wantErr: "does not parse", secret: "hunter2"},

		{spec: "log", opts: mail.Options{From: "not an address"}, wantErr: "is not one address"},
		{spec: "log", opts: mail.Options{From: "a@example.com\r\nBcc: b@example.com"}, wantErr: "line break"},
		{spec: "log", opts: mail.Options{Attempts: -1}, wantErr: "must not be negative"},
		{spec: "log", opts: mail.Options{Timeout: -time.Second}, wantErr: "must not be negative"},
	} {
		m, err := mail.New(tc.spec, tc.opts)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New(%q) error %v, want one containing %q", tc.spec, err, tc.wantErr)
			}
			if err != nil && tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
				t.Errorf("New(%q) error repeats the password: %v", tc.spec, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", tc.spec, err)
			continue
		}
		if m.Provider() != tc.wantProvider {
			t.Errorf("New(%q).Provider() = %q, want %q", tc.spec, m.Provider(), tc.wantProvider)
		}
	}
}

func TestHeaderInjectionRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		msg       mail.Message
		injection bool // refused as ErrHeaderInjection
	}{
		{name: "CRLF in To", msg: mail.Message{To: "zoe@example.com\r\nBcc: all@example.com", Subject: "s"}, injection: true},
		{name: "LF in To", msg: mail.Message{To: "zoe@example.com\nBcc: all@example.com", Subject: "s"}, injection: true},
		{name: "CR in Subject", msg: mail.Message{To: "zoe@example.com", Subject: "code\rBcc: all@example.com"}, injection: true},
		{name: "LF in Subject", msg: mail.Message{To: "zoe@example.com", Subject: "code\nBcc: all@example.com"}, injection: true},
		{name: "two recipients", msg: mail.Message{To: "zoe@example.com, all@example.com", Subject: "s"}},
		{name: "not an address", msg: mail.Message{To: "zoe", Subject: "s"}},
		{name: "empty To", msg: mail.Message{Subject: "s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through the outbox, where anything sent would be a file.
			dir := t.TempDir()
			m := newMailer(t, "outbox:"+dir, testOptions())
			err := m.Send(context.Background(), tc.msg)
			if err == nil {
				t.Fatal("Send accepted the message")
			}
			if errors.Is(err, mail.ErrHeaderInjection) != tc.injection {
				t.Errorf("Send error %v; ErrHeaderInjection %v, want %v", err, !tc.injection, tc.injection)
			}
			if eml, other := outboxFiles(t, dir); len(eml)+len(other) != 0 {
				t.Errorf("the outbox holds %v %v", eml, other)
			}
			if s := m.Stats(); s != (mail.Stats{Failed: 1}) {
				t.Errorf("Stats = %+v", s)
			}
		})
	}
}
