package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// `admin announce` mails the mandatory notice to every account with an
// email (through --mail), and records it as an email row of each.
func TestAdminAnnounce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		noEnv := func(string) string { return "" }
		admin := func(args ...string) (map[string]any, error) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"admin"}, args...), noEnv, &out, io.Discard)
			var m map[string]any
			if err == nil {
				if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
					t.Fatalf("%v printed %q", args, out.String())
				}
			}
			return m, err
		}
		for _, email := range []string{"a@example.com", "b@example.com"} {
			if _, err := admin("create-account", "--db", dsn, "--create-db", "--email", email); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin("create-account", "--db", dsn, "--no-email"); err != nil {
			t.Fatal(err)
		}
		bodyFile, outbox := announceFiles(t, "The v1 batch route changes on 2027-01-01.\n")
		if _, err := admin("announce", "--db", dsn, "--subject", "Batch route change", "--body-file", bodyFile, "--mail", "outbox:"+outbox,
			"--type", "grant.revoked"); err == nil {
			t.Fatal("announce of a type that is not mandatory succeeded")
		}
		res, err := admin("announce", "--db", dsn, "--subject", "Batch route change", "--body-file", bodyFile, "--mail", "outbox:"+outbox)
		if err != nil {
			t.Fatal(err)
		}
		if res["accounts_notified"] != float64(2) {
			t.Fatalf("announce: %v", res)
		}
		entries, _ := os.ReadDir(outbox)
		var announced []string
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(outbox, e.Name()))
			if strings.Contains(string(b), "Batch route change") && strings.Contains(string(b), "2027-01-01") {
				announced = append(announced, string(b))
			}
		}
		if len(announced) != 2 {
			t.Fatalf("%d announcement emails in the outbox, want 2", len(announced))
		}
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var rows, sent int
		if err := st.DB().QueryRow(`SELECT count(*), count(sent_at) FROM notification_rows WHERE type = 'breaking_change.announce' AND channel = 'email'`).Scan(&rows, &sent); err != nil {
			t.Fatal(err)
		}
		if rows != 2 || sent != 2 {
			t.Fatalf("breaking_change.announce email rows: %d, sent %d; want 2 and 2", rows, sent)
		}
	})
}

// `admin announce` exits 1 when no email went out (every send failed), after
// printing what happened; with no account that has an email there is nothing
// to send, which is not a failure, and stderr says so.
func TestAdminAnnounceExitsNonZeroWhenNoMailWentOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		body := filepath.Join(t.TempDir(), "body.txt")
		if err := os.WriteFile(body, []byte("A change."), 0o600); err != nil {
			t.Fatal(err)
		}
		announce := func(mailSpec string) (map[string]any, string, error) {
			out, errOut, err := runOut(t, noEnv, "admin", "announce", "--db", dsn, "--subject", "A change", "--body-file", body, "--mail", mailSpec)
			var m map[string]any
			if jerr := json.Unmarshal([]byte(out), &m); jerr != nil {
				t.Fatalf("announce printed %q (%v)", out, err)
			}
			return m, errOut, err
		}
		if _, _, err := runOut(t, noEnv, "admin", "create-account", "--db", dsn, "--create-db", "--no-email"); err != nil {
			t.Fatal(err)
		}
		res, errOut, err := announce("log")
		if err != nil || res["accounts_notified"] != float64(0) || !strings.Contains(errOut, "no account has an email") {
			t.Fatalf("announce to no email: %v %v, stderr %q; want success, 0 notified, and a word on stderr", res, err, errOut)
		}

		for _, email := range []string{"a@example.com", "b@example.com"} {
			if _, _, err := runOut(t, noEnv, "admin", "create-account", "--db", dsn, "--email", email); err != nil {
				t.Fatal(err)
			}
		}
		// A relay that refuses every message for good: no email goes out.
		// (The accounts' key.created notices, queued by create-account,
		// which mails nothing, go out with the announcement: at least 2.)
		smtpd := &mailtest.Server{RcptError: &smtp.SMTPError{Code: 550, Message: "no such mailbox"}}
		smtpd.Start(t, nil)
		res, errOut, err = announce("smtp://" + smtpd.Addr())
		if exitCode(err, io.Discard) != exitFailure || res["emails_sent"] != float64(0) || res["emails_failed"].(float64) < 2 {
			t.Fatalf("announce with every send failing: %v (exit %d), %v; want exit 1, 0 sent, 2 or more failed", err, exitCode(err, io.Discard), res)
		}
		if !strings.Contains(err.Error(), "no email went out") {
			t.Errorf("error %q does not say no email went out", err)
		}
		// Through a working transport it succeeds.
		if res, _, err := announce("log"); err != nil || res["emails_sent"] != float64(2) {
			t.Fatalf("announce through log: %v %v", res, err)
		}
	})
}

// announceFiles writes an announcement's body file and makes an outbox
// directory for its mail.
func announceFiles(t *testing.T, body string) (bodyFile, outbox string) {
	t.Helper()
	dir := t.TempDir()
	bodyFile, outbox = filepath.Join(dir, "body.txt"), filepath.Join(dir, "outbox")
	if err := os.WriteFile(bodyFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(outbox, 0o700); err != nil {
		t.Fatal(err)
	}
	return bodyFile, outbox
}

// `admin announce` is an operator's command (no route reaches it), and it
// is bounded anyway: each announcement mails every account, so at most
// --limit-per-day (default 3; AUDITCHAIN_ANNOUNCE_LIMIT_PER_DAY) go out a
// day, counted in the store. One more fails with rate_limit_exceeded and
// writes and mails nothing.
func TestAdminAnnounceIsBounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		bodyFile, outbox := announceFiles(t, "A change.\n")
		// announce runs admin announce on db with env as its environment.
		announce := func(db string, env map[string]string, extra ...string) error {
			args := append([]string{"admin", "announce", "--db", db, "--subject", "Change", "--body-file", bodyFile, "--mail", "outbox:" + outbox}, extra...)
			return run(context.Background(), args, func(k string) string { return env[k] }, io.Discard, io.Discard)
		}
		backend := storetest.SQLite
		if strings.HasPrefix(dsn, "postgres") {
			backend = storetest.Postgres
		}
		second := storetest.DSN(t, backend)
		for _, db := range []string{dsn, second} {
			if err := run(context.Background(), []string{"admin", "create-account", "--db", db, "--create-db", "--email", "a@example.com"},
				func(string) string { return "" }, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		if err := announce(dsn, nil, "--limit-per-day", "0"); err == nil {
			t.Fatal("--limit-per-day 0 accepted")
		}
		for i := range 3 {
			if err := announce(dsn, nil); err != nil {
				t.Fatalf("announcement %d: %v", i, err)
			}
		}
		if err := announce(dsn, nil); err == nil || !strings.Contains(err.Error(), "rate_limit_exceeded") {
			t.Fatalf("a fourth announcement in a day: %v", err)
		}
		entries, _ := os.ReadDir(outbox)
		announced := 0
		for _, e := range entries {
			if b, _ := os.ReadFile(filepath.Join(outbox, e.Name())); strings.Contains(string(b), "A change.") {
				announced++
			}
		}
		if announced != 3 {
			t.Fatalf("%d announcements in the outbox, want 3", announced)
		}
		// The environment sets the limit too.
		one := map[string]string{"AUDITCHAIN_ANNOUNCE_LIMIT_PER_DAY": "1"}
		if err := announce(second, one); err != nil {
			t.Fatal(err)
		}
		if err := announce(second, one); err == nil || !strings.Contains(err.Error(), "rate_limit_exceeded") {
			t.Fatalf("a second announcement with a limit of one: %v", err)
		}
	})
}
