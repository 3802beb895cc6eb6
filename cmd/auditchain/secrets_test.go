package main

// No secret is ever printed (docs/decisions/secrets.md): every variable that
// can hold one is set to a marker, and every help text, usage error and
// error of every command, enumerated from the command table, is searched for
// it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/anchor/anchortest"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/client"
)

// secretMark starts every marker; a marker names its variable, so a leak
// says which one.
const secretMark = "S3CRETMARK"

// markedEnv sets every AUDITCHAIN_* variable that can hold a secret to a
// value carrying a marker. The addresses are closed ports: nothing
// answers, so what is printed is the refusal.
func markedEnv() map[string]string {
	return map[string]string{
		"AUDITCHAIN_API_KEY":        "ac_" + secretMark + "apikey",
		"AUDITCHAIN_URL":            "http://user:" + secretMark + "url@127.0.0.1:1",
		"AUDITCHAIN_CRON_SECRET":    secretMark + "cron",
		"AUDITCHAIN_MAIL":           "smtp://user:" + secretMark + "mail@127.0.0.1:1",
		"AUDITCHAIN_DB":             "postgres://user:" + secretMark + "db@127.0.0.1:1/auditchain?sslmode=disable",
		"AUDITCHAIN_ANCHOR_TSA_URL": "http://tsa:" + secretMark + "tsa@127.0.0.1:1/tsa",
		// A valid whsec_ secret (its base64 decodes), so it is used, not refused.
		"AUDITCHAIN_MONITOR_WEBHOOK_SECRET": "whsec_" + secretMark + "monitorwebhook",
	}
}

// commandPaths is every command and subcommand: the top-level table; each
// group's subcommands, as its answer to an unknown one names them; and the
// subcommands a command's help spells out ("auditchain mcp proxy").
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	names := slices.Sorted(maps.Keys(commands(context.Background(), noEnv, io.Discard, io.Discard)))
	if len(names) < 10 {
		t.Fatalf("the command table has %d commands: %v", len(names), names)
	}
	var paths [][]string
	for _, name := range names {
		paths = append(paths, []string{name})
		subs := map[string]bool{}
		_, _, err := runOut(t, noEnv, name, "no-such-subcommand")
		if m := regexp.MustCompile(`the ` + name + ` commands are ([a-z, -]+) \(`).FindStringSubmatch(errText(err)); m != nil {
			for _, s := range strings.Split(m[1], ", ") {
				subs[s] = true
			}
		}
		help, _, _ := runOut(t, noEnv, name, "--help")
		for _, m := range regexp.MustCompile(`auditchain `+name+` ([a-z][a-z-]*)\b`).FindAllStringSubmatch(help, -1) {
			if _, _, err := runOut(t, noEnv, name, m[1], "--help"); err == nil {
				subs[m[1]] = true
			}
		}
		for _, s := range slices.Sorted(maps.Keys(subs)) {
			paths = append(paths, []string{name, s})
		}
	}
	return paths
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Every command's and subcommand's help, and the usage each prints after a
// flag typo or a missing subcommand, with every secret variable set: none
// shows a secret.
func TestNoSecretInHelpOrUsage(t *testing.T) {
	env := markedEnv()
	getenv := func(k string) string { return env[k] }
	paths := commandPaths(t)
	var groups, subcommands int
	for _, p := range paths {
		if len(p) > 1 {
			subcommands++
		}
	}
	for _, p := range paths {
		lines := [][]string{
			append(slices.Clone(p), "--help"),
			append(slices.Clone(p), "--no-such-flag"),
			append([]string{"help"}, p...),
		}
		if len(p) == 1 {
			lines = append(lines, []string{p[0]}, []string{p[0], "no-such-subcommand"})
			groups++
		}
		for _, args := range lines {
			if p[0] == "serve" && args[len(args)-1] == p[0] {
				continue // serve with no flags serves: its errors are below
			}
			if (p[0] == "mcp" || p[0] == "hook") && len(args) <= 2 && !strings.HasPrefix(args[len(args)-1], "-") && args[0] != "help" {
				continue // they would speak to the (closed) service; their errors are below
			}
			checkNoSecret(t, getenv, args...)
		}
	}
	if subcommands < 25 {
		t.Errorf("only %d subcommands found: %v", subcommands, paths)
	}
}

// The errors of commands that use a secret and fail: a store, a mail relay
// or a service that cannot be used, named without its password.
func TestNoSecretInErrors(t *testing.T) {
	env := markedEnv()
	getenv := func(k string) string { return env[k] }
	body := filepath.Join(t.TempDir(), "body.txt")
	if err := os.WriteFile(body, []byte("notice"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0"},                                             // the store does not answer
		{"serve", "--addr", "127.0.0.1:0", "--mail", env["AUDITCHAIN_MAIL"] + "/path"}, // a mail URL with a path is refused
		{"serve", "--addr", "127.0.0.1:0", "--mail", "smtps://user:" + secretMark + "scheme@127.0.0.1:1"},
		{"admin", "create-account", "--no-email"},
		{"admin", "create-key", "--user-id", "00000000-0000-0000-0000-000000000000"},
		{"admin", "announce", "--subject", "s", "--body-file", body},
		{"admin", "announce", "--subject", "s", "--body-file", body, "--mail", "smtp://user:" + secretMark + "path@127.0.0.1:1/x"},
		{"events", "search", "--url", "ftp://user:" + secretMark + "scheme@127.0.0.1:1"},
		{"mcp", "--url", "ftp://user:" + secretMark + "scheme@127.0.0.1:1"},
	} {
		out, errOut, err := checkNoSecret(t, getenv, args...)
		if err == nil {
			t.Errorf("%v succeeded:\n%s%s", args, out, errOut)
		}
	}
}

// checkNoSecret runs the program and fails the test if its stdout, stderr
// or error (as main prints it) carries a marker.
func checkNoSecret(t *testing.T, getenv func(string) string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := run(context.Background(), args, getenv, &out, &errOut)
	exitCode(err, &errOut)
	for what, text := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		if i := strings.Index(text, secretMark); i >= 0 {
			t.Errorf("%v printed a secret on %s: …%s…", args, what, text[max(0, i-80):min(len(text), i+40)])
		}
	}
	return out.String(), errOut.String(), err
}

// lockedBuffer is a log several goroutines write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A full run with every secret set to a marker: serve, mailing through an
// SMTP relay whose password is a marker, on a store whose password is one
// (PostgreSQL), anchoring with a TSA whose URL carries one; a sign-in, a
// session's key, a webhook and its secret, an event, every cron job (with
// the cron secret) and the jobs listing; the admin commands beside it. No
// log line, no banner, no admin output and no jobs answer shows a marker,
// the sign-in code, the session, the key or the webhook secret.
func TestNoSecretInAFullRun(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		env := markedEnv()
		secrets := []string{secretMark}
		if u, err := url.Parse(dsn); err == nil && u.Scheme != "sqlite" {
			if pw, ok := u.User.Password(); ok {
				secrets = append(secrets, pw) // the test server's own
			} else {
				u.User = url.UserPassword(u.User.Username(), secretMark+"db") // trust auth: any password
				dsn = u.String()
			}
		}
		env["AUDITCHAIN_DB"] = dsn
		smtpd := &mailtest.Server{Mechanisms: []string{"PLAIN"}, Users: map[string]string{"relay": secretMark + "mail"}}
		smtpd.Start(t, nil)
		env["AUDITCHAIN_MAIL"] = "smtp://relay:" + secretMark + "mail@" + smtpd.Addr()
		tsa, err := anchortest.NewTSA()
		if err != nil {
			t.Fatal(err)
		}
		tsaSrv := httptest.NewServer(tsa)
		t.Cleanup(tsaSrv.Close)
		env["AUDITCHAIN_ANCHOR_TSA_URL"] = strings.Replace(tsaSrv.URL, "://", "://stamp:"+secretMark+"tsa@", 1) + "/tsa"
		env["AUDITCHAIN_ANCHOR_PROVIDER"] = "rfc3161"
		env["AUDITCHAIN_OPERATOR_EMAIL"] = "operator@example.com"
		env["AUDITCHAIN_WEBHOOK_ALLOW_PRIVATE"] = "true"
		env["AUDITCHAIN_LOG_LEVEL"] = "debug"
		cron := map[string]string{"X-Cron-Secret": env["AUDITCHAIN_CRON_SECRET"]}

		var logs lockedBuffer
		base, stop := startServeLogging(t, env, &logs)

		// Sign in: the code arrives through the relay.
		const email = "signin@example.com"
		r := request(t, "POST", base+"/v1/auth/otp/request", nil, map[string]any{"email": email, "acceptances": requiredAcceptances(t, base)})
		if r.status != 202 || len(smtpd.Received()) != 1 {
			t.Fatalf("otp request: %d %s, %d messages\n%s", r.status, r.body, len(smtpd.Received()), logs.String())
		}
		code := regexp.MustCompile(`sign-in code: ([0-9]{8})`).FindSubmatch(smtpd.Received()[0].Data)
		if code == nil {
			t.Fatalf("no code in %s", smtpd.Received()[0].Data)
		}
		secrets = append(secrets, string(code[1]))
		r = call(t, "POST", base+"/v1/auth/otp/verify", "", map[string]any{"email": email, "code": string(code[1])})
		var cookie string
		for _, c := range r.cookies {
			if c.Name == "auditchain_session" {
				cookie = c.Value
			}
		}
		if r.status != 200 || cookie == "" {
			t.Fatalf("otp verify: %d %s", r.status, r.body)
		}
		secrets = append(secrets, cookie)

		// A key made by the session, a webhook, an event, a test notice.
		r = call(t, "POST", base+"/v1/keys", cookie, map[string]any{"label": "sweep"})
		apiKey, _ := r.json(t)["api_key"].(string)
		if r.status != 201 || apiKey == "" {
			t.Fatalf("create key: %d %s", r.status, r.body)
		}
		secrets = append(secrets, apiKey)
		withKey := map[string]string{"X-API-Key": apiKey}
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
		t.Cleanup(receiver.Close)
		r = request(t, "POST", base+"/v1/webhooks", withKey, map[string]any{"url": receiver.URL})
		hookSecret, _ := r.json(t)["secret"].(string)
		if r.status != 201 || hookSecret == "" {
			t.Fatalf("create webhook: %d %s", r.status, r.body)
		}
		secrets = append(secrets, hookSecret)
		c, err := client.New(base, apiKey)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Append(context.Background(), client.Event{EventType: "tool.call"}); err != nil {
			t.Fatal(err)
		}
		if r := request(t, "POST", base+"/v1/notifications/test", withKey, map[string]any{"type": "grant.revoked"}); r.status != 200 {
			t.Fatalf("test notice: %d %s", r.status, r.body)
		}
		// Refused credentials are not logged either.
		if r := request(t, "GET", base+"/v1/keys", map[string]string{"X-API-Key": "ac_" + secretMark + "wrongkey"}, nil); r.status != 401 {
			t.Errorf("a wrong key: %d", r.status)
		}
		if r := request(t, "POST", base+"/v1/internal/cron/digest", map[string]string{"X-Cron-Secret": secretMark + "wrongcron"}, nil); r.status != 401 {
			t.Errorf("a wrong cron secret: %d", r.status)
		}

		// Every job, then the jobs listing.
		var answers []string
		for _, job := range []string{"webhooks", "digest", "grant-expiry", "key-expiry", "admin-digest", "anchor"} {
			r := request(t, "POST", base+"/v1/internal/cron/"+job, cron, nil)
			if r.status != 200 {
				t.Fatalf("cron %s: %d %s", job, r.status, r.body)
			}
			answers = append(answers, string(r.body))
		}
		if !strings.Contains(answers[5], `"anchored":1`) {
			t.Errorf("anchor: %s, want one account anchored", answers[5])
		}
		r = request(t, "GET", base+"/v1/internal/jobs", cron, nil)
		if r.status != 200 {
			t.Fatalf("jobs: %d %s", r.status, r.body)
		}
		answers = append(answers, string(r.body))
		// The anchor receipt is on the chain: it names the TSA without
		// its credentials.
		r = request(t, "GET", base+"/v1/chain/export", withKey, nil)
		if r.status != 200 || !strings.Contains(string(r.body), `"tsa_url"`) {
			t.Fatalf("export: %d, want the anchor event in %s", r.status, r.body)
		}
		if strings.Contains(string(r.body), secretMark) {
			t.Errorf("the export carries a secret: %s", r.body)
		}

		// The admin commands beside the server, on the same marked store
		// and relay.
		getenv := func(k string) string { return env[k] }
		announce := filepath.Join(t.TempDir(), "announce.txt")
		if err := os.WriteFile(announce, []byte("A change."), 0o600); err != nil {
			t.Fatal(err)
		}
		var adminOut strings.Builder
		for _, args := range [][]string{
			{"admin", "create-account", "--email", "second@example.com"},
			{"admin", "announce", "--subject", "A change", "--body-file", announce},
		} {
			out, errOut, err := checkNoSecret(t, getenv, args...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, errOut)
			}
			adminOut.WriteString(errOut)
			if args[1] != "create-account" {
				adminOut.WriteString(out)
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		printed := map[string]string{"the log": logs.String(), "the admin commands": adminOut.String()}
		for i, a := range answers {
			printed[fmt.Sprintf("cron answer %d", i)] = a
		}
		for where, text := range printed {
			for _, s := range secrets {
				if i := strings.Index(text, s); i >= 0 {
					t.Errorf("%s shows the secret %q: …%s…", where, s, text[max(0, i-120):min(len(text), i+len(s)+20)])
				}
			}
		}
		if !strings.Contains(logs.String(), "msg=request") {
			t.Errorf("the log holds no request lines: is it the server's?\n%s", logs.String())
		}
	})
}

// The log transport, in either environment, logs a message's recipient and
// kind: a sign-in code mailed through it leaves no subject or body in the
// log.
func TestLogTransportLogsNoCode(t *testing.T) {
	for _, envName := range []string{"development", "production"} {
		t.Run(envName, func(t *testing.T) {
			dsn := storetest.DSN(t, storetest.SQLite)
			var logs lockedBuffer
			base, stop := startServeLogging(t, map[string]string{"AUDITCHAIN_MAIL": markedEnv()["AUDITCHAIN_MAIL"]}, &logs,
				"--db", dsn, "--mail", "log", "--env", envName)
			const email = "logged@example.com"
			if r := request(t, "POST", base+"/v1/auth/otp/request", nil, map[string]any{"email": email, "acceptances": requiredAcceptances(t, base)}); r.status != 202 {
				t.Fatalf("otp request: %d %s", r.status, r.body)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			var mailLines []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "msg=mail") || strings.Contains(line, `"msg":"mail"`) {
					mailLines = append(mailLines, line)
				}
			}
			if len(mailLines) != 1 {
				t.Fatalf("%d mail lines, want 1:\n%s", len(mailLines), logs.String())
			}
			for _, want := range []string{email, "sign_in_code"} {
				if !strings.Contains(mailLines[0], want) {
					t.Errorf("the mail line lacks %q: %s", want, mailLines[0])
				}
			}
			for _, banned := range []string{"subject", "body", "code:", secretMark} {
				if strings.Contains(mailLines[0], banned) {
					t.Errorf("the mail line shows %q: %s", banned, mailLines[0])
				}
			}
			untimed := regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z`).ReplaceAllString(mailLines[0], "")
			if regexp.MustCompile(`(^|[^0-9a-f])[0-9]{8}([^0-9a-f]|$)`).MatchString(untimed) {
				t.Errorf("the mail line holds an 8-digit number: %s", mailLines[0])
			}
		})
	}
}
