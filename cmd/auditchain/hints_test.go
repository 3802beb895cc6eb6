package main

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// runMessage runs the program and returns its exit code and what the
// process prints on stderr, its error included as main prints it.
func runMessage(t *testing.T, getenv func(string) string, args ...string) (int, string) {
	t.Helper()
	_, errOut, err := runOut(t, getenv, args...)
	var printed bytes.Buffer
	code := exitCode(err, &printed)
	return code, errOut + printed.String()
}

// Every command-line mistake is answered with one line on stderr that says
// what to do (the flag or command meant, the forms accepted, where help is),
// exit 2, and not the flag package's text with the usage after it
// (docs/cli.md "Errors").
func TestCommandLineMistakesSayWhatToDo(t *testing.T) {
	env := cliEnv("http://127.0.0.1:1", "ac_x")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"chain", "export", "--frm", "3"}, []string{"chain export: unknown flag --frm; did you mean --from?", "auditchain chain export --help"}},
		{[]string{"chain", "tip", "--nope"}, []string{"unknown flag --nope; the flags are --api-key, --json, --quiet, --url", "auditchain chain tip --help"}},
		{[]string{"serve", "--adr", ":1"}, []string{"serve: unknown flag --adr; did you mean --addr?", "auditchain serve --help"}},
		{[]string{"serve", "--nope"}, []string{"serve: unknown flag --nope (auditchain serve --help lists the flags)"}},
		{[]string{"admin", "create-account", "--emial", "a@example.com"}, []string{"unknown flag --emial; did you mean --email?"}},
		{[]string{"grants", "create", "--subagent", "a", "--tools", "x", "--max-calls", "1", "--expires-in", "1w"},
			[]string{`--expires-in "1w" is not a duration`, "90s, 15m, 2h", "7d", "a day is 24h"}},
		{[]string{"grants", "create", "--max-calls", "many"}, []string{`grants create: --max-calls "many": want a whole number`}},
		{[]string{"chain", "tip", "--json=maybe"}, []string{`--json "maybe": want true or false`}},
		{[]string{"chain", "tip", "--url"}, []string{"--url needs a value: --url VALUE"}},
		{[]string{"chian", "tip"}, []string{`unknown command "chian"; did you mean chain?`, "auditchain --help"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"; the commands are admin, approval-rules, approvals, bench,`}},
		{[]string{"chain", "tpi"}, []string{`unknown chain command "tpi"; did you mean tip?`, "auditchain chain --help"}},
		{[]string{"events", "list"}, []string{`unknown events command "list"; the events commands are append, get, search, tail`}},
		{[]string{"admin", "create-acount"}, []string{`unknown admin command "create-acount"; did you mean create-account?`}},
		{[]string{"--url", "http://x", "chain", "tip"}, []string{"--url before a command: flags go after it"}},
		{[]string{"hook", "install", "--host", "claude"}, []string{`unknown host "claude"; did you mean claude-code?`, "claude-code, codex, gemini, cursor"}},
		{[]string{"hook", "install"}, []string{"no host: give --host, one of claude-code, codex, gemini, cursor"}},
		{[]string{"monitor", "--account", "u", "--state", "s.json", "--webhook-secret", "whsec_c2VjcmV0c2VjcmV0c2VjcmV0"},
			[]string{"monitor: --webhook-secret signs the posts of --webhook URL, which is not given"}},
		{[]string{"monitor", "--account", "u", "--state", "s.json", "--webhook", "http://127.0.0.1:1/", "--webhook-secret", "sekrit-not-whsec"},
			[]string{"monitor: --webhook-secret (or AUDITCHAIN_MONITOR_WEBHOOK_SECRET): webhook secret must start with whsec_"}},
	} {
		code, stderr := runMessage(t, env, tc.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, exitUsage, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, stderr, w)
			}
		}
		if strings.Contains(stderr, "sekrit") || strings.Contains(stderr, "c2VjcmV0") {
			t.Errorf("%v: stderr repeats the secret: %q", tc.args, stderr)
		}
		if n := strings.Count(stderr, "\n"); n != 1 || strings.Contains(stderr, "flag provided") || strings.Contains(stderr, "usage:") {
			t.Errorf("%v: stderr is %d lines, want one line and no usage dump: %q", tc.args, n, stderr)
		}
	}
}

// A client command says which of the service's URL and API key it lacks,
// each with its flag and variable, and a URL without its scheme is named
// with the one meant.
func TestMissingCredentialNamed(t *testing.T) {
	for _, tc := range []struct {
		url, key string
		want     []string
		not      []string
	}{
		{"", "", []string{"no service URL and no API key", "--url and --api-key", "AUDITCHAIN_URL and AUDITCHAIN_API_KEY"}, nil},
		{"http://127.0.0.1:1", "", []string{"no API key", "--api-key", "AUDITCHAIN_API_KEY"}, []string{"no service URL", "AUDITCHAIN_URL"}},
		{"", "ac_x", []string{"no service URL", "--url", "AUDITCHAIN_URL", "http://127.0.0.1:8080"}, []string{"API key", "AUDITCHAIN_API_KEY"}},
		{"127.0.0.1:8080", "ac_x", []string{`"127.0.0.1:8080"`, "did you mean http://127.0.0.1:8080?"}, nil},
		// A URL that may hold a password is not echoed.
		{"ops:hunter2@db.example:8080", "ac_x", []string{"is not an http:// or https:// URL"}, []string{"hunter2"}},
	} {
		for _, args := range [][]string{{"chain", "tip"}, {"mcp"}} {
			code, stderr := runMessage(t, cliEnv(tc.url, tc.key), args...)
			if code != exitUsage {
				t.Errorf("%v with url %q key %q: exit %d, want %d", args, tc.url, tc.key, code, exitUsage)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%v with url %q key %q: stderr %q lacks %q", args, tc.url, tc.key, stderr, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(stderr, w) {
					t.Errorf("%v with url %q key %q: stderr %q says %q", args, tc.url, tc.key, stderr, w)
				}
			}
		}
	}
}

// A stopped server, or a host that does not resolve, is named with the URL
// tried and what to do, not the dialer's words alone.
func TestServiceOutOfReachSaysWhatToDo(t *testing.T) {
	// A loopback port nothing listens on: taken, then given back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopped := "http://" + l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{stopped, []string{"chain tip: cannot reach the service at " + stopped + ": connection refused", "auditchain serve", "--url or AUDITCHAIN_URL"}},
		{"http://ops:hunter2@" + l.Addr().String(), []string{"cannot reach the service at http://ops:xxxxx@" + l.Addr().String()}},
		{"http://no-such-host.invalid:8080", []string{`no such host "no-such-host.invalid"`, "check --url or AUDITCHAIN_URL"}},
	} {
		code, stderr := runMessage(t, cliEnv(tc.url, "ac_x"), "chain", "tip")
		if code != exitFailure {
			t.Errorf("%s: exit %d, want %d", tc.url, code, exitFailure)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", tc.url, stderr, w)
			}
		}
		if strings.Contains(stderr, "hunter2") {
			t.Errorf("%s: stderr %q shows the password", tc.url, stderr)
		}
	}
}

// A dial that runs out of time is named as a service that did not answer.
func TestServiceOutOfReachTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var d net.Dialer
	d.Deadline = time.Now().Add(-time.Second) // already past: the dial times out at once
	_, derr := d.Dial("tcp", l.Addr().String())
	if derr == nil {
		t.Fatal("a dial past its deadline succeeded")
	}
	got := serviceOutOfReach(derr, "http://"+l.Addr().String())
	if got == nil || !strings.Contains(got.Error(), "did not answer in time") || !strings.Contains(got.Error(), "/v1/health") {
		t.Fatalf("serviceOutOfReach(%v) = %v, want a timeout explained", derr, got)
	}
	if serviceOutOfReach(errors.New("auditchain: 404 not_found"), "http://x") != nil {
		t.Fatal("a service's own answer was taken for the service out of reach")
	}
}

// --expires-in reads whole days: 7d is seven 24-hour days from now.
func TestGrantsCreateExpiresInDays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		_, token := s.Account(t, "days@example.com")
		before := time.Now()
		out := runJSON(t, cliEnv(s.URL, token), 0, "grants", "create", "--subagent", "w", "--tools", "Read", "--max-calls", "1", "--expires-in", "7d")
		exp, err := time.Parse(time.RFC3339, out["grant"].(map[string]any)["expires_at"].(string))
		if err != nil {
			t.Fatalf("expires_at of %v: %v", out, err)
		}
		if d := exp.Sub(before); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
			t.Fatalf("--expires-in 7d gave expires_at %s, %v from now", exp, d)
		}
	})
}

// --version is version.
func TestVersionFlag(t *testing.T) {
	want, _, _ := runOut(t, noEnv, "version")
	got, _, err := runOut(t, noEnv, "--version")
	if err != nil || got != want || !strings.HasPrefix(got, "auditchain ") {
		t.Fatalf("--version: %q %v, want %q", got, err, want)
	}
}
