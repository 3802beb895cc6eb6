package main

// First contact (issue 23): which store a command used, what a missing
// directory does, help everywhere, the version, and one name for a key's id.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/buildinfo"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

func noEnv(string) string { return "" }

// runOut runs the program and returns its stdout, stderr and error.
func runOut(t *testing.T, getenv func(string) string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, getenv, &out, &errOut)
	return out.String(), errOut.String(), err
}

// The admin commands name the store they used on stderr (stdout stays JSON),
// whether it came from --db or AUDITCHAIN_DB.
func TestAdminNamesItsStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "named.db")
	out, errOut, err := runOut(t, noEnv, "admin", "create-account", "--db", "sqlite:"+path, "--create-db", "--email", "a@example.com")
	if err != nil || !strings.Contains(errOut, "store sqlite:"+path) {
		t.Fatalf("create-account --db: %v, stderr %q; want it to name sqlite:%s", err, errOut, path)
	}
	var acct map[string]any
	if json.Unmarshal([]byte(out), &acct) != nil {
		t.Fatalf("stdout is not the JSON alone: %q", out)
	}
	env := map[string]string{"AUDITCHAIN_DB": "sqlite:" + path}
	_, errOut, err = runOut(t, func(k string) string { return env[k] }, "admin", "create-key", "--user-id", acct["user_id"].(string))
	if err != nil || !strings.Contains(errOut, "store sqlite:"+path) {
		t.Fatalf("create-key from AUDITCHAIN_DB: %v, stderr %q", err, errOut)
	}
}

// sqlite: in a directory that does not exist is refused by serve and admin,
// and nothing is created: a typo must not start an empty store.
func TestSQLiteInAMissingDirectoryIsRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo", "dir")
	dsn := "sqlite:" + filepath.Join(missing, "ac.db")
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--db", dsn},
		{"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--create-db"},
		{"admin", "create-account", "--db", dsn, "--no-email"},
		{"admin", "create-account", "--db", dsn, "--no-email", "--create-db"},
	} {
		_, _, err := runOut(t, noEnv, args...)
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%v: %v, want a refusal saying the directory does not exist", args, err)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Fatalf("%v created %s", args, missing)
		}
	}
}

// A sqlite: file that does not exist, in a directory that does, is refused
// by every command that opens a store, naming it, unless --create-db: a
// typo (auditchain.bd) must not start an empty store, nor hand out a key
// the server running on the real one refuses.
func TestSQLiteFileThatDoesNotExistIsRefused(t *testing.T) {
	dir := t.TempDir()
	real := "sqlite:" + filepath.Join(dir, "auditchain.db")
	base, _ := startServe(t, nil, "--db", real) // startServe passes --create-db
	typo := filepath.Join(dir, "auditchain.bd")
	body := filepath.Join(t.TempDir(), "body.txt")
	if err := os.WriteFile(body, []byte("notice"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--db", "sqlite:" + typo},
		{"admin", "create-account", "--db", "sqlite:" + typo, "--email", "typo@example.com"},
		{"admin", "create-key", "--db", "sqlite:" + typo, "--user-id", "00000000-0000-0000-0000-000000000000"},
		{"admin", "announce", "--db", "sqlite:" + typo, "--subject", "s", "--body-file", body},
	} {
		// serve gets a context already ended: one that took the typo stops
		// at once (failing the test) instead of serving.
		ctx, cancel := context.WithCancel(context.Background())
		if args[0] == "serve" {
			cancel()
		}
		defer cancel()
		var stdout strings.Builder
		err := run(ctx, args, noEnv, &stdout, io.Discard)
		out := stdout.String()
		if err == nil || !strings.Contains(err.Error(), "no store at sqlite:"+typo) || !strings.Contains(err.Error(), "--create-db") {
			t.Errorf("%v: %v, want a refusal naming sqlite:%s and --create-db", args, err, typo)
		}
		if got := exitCode(err, io.Discard); got != exitFailure {
			t.Errorf("%v: exit %d, want %d", args, got, exitFailure)
		}
		if out != "" {
			t.Errorf("%v printed %q", args, out)
		}
		if _, err := os.Stat(typo); !os.IsNotExist(err) {
			t.Fatalf("%v created %s", args, typo)
		}
	}
	// On the real store, the key admin hands out is one the server takes.
	out, _, err := runOut(t, noEnv, "admin", "create-account", "--db", real, "--email", "real@example.com")
	if err != nil {
		t.Fatal(err)
	}
	var acct map[string]any
	json.Unmarshal([]byte(out), &acct)
	req, _ := http.NewRequest("GET", base+"/v1/keys", nil)
	req.Header.Set("X-API-Key", acct["api_key"].(string))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the admin's key on the server: %v %v", resp, err)
	}
	resp.Body.Close()
	// --create-db is the way to a new store, for serve and admin alike.
	for i, args := range [][]string{
		{"admin", "create-account", "--no-email", "--create-db"},
		{"serve", "--addr", "127.0.0.1:0", "--create-db"},
	} {
		path := filepath.Join(dir, fmt.Sprintf("new-%d.db", i))
		if i == 1 {
			startServe(t, nil, "--db", "sqlite:"+path)
		} else if _, _, err := runOut(t, noEnv, append(args, "--db", "sqlite:"+path)...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%v did not create %s: %v", args, path, err)
		}
	}
}

// The default store, ./data/auditchain.db, is the one serve creates without
// --create-db (its directory too), so a fresh clone starts with no step
// before; the admin commands refuse it until then, or with --create-db
// create it.
func TestTheDefaultStoreIsCreatedOnFirstRun(t *testing.T) {
	t.Chdir(t.TempDir())
	_, _, err := runOut(t, noEnv, "admin", "create-account", "--no-email")
	if err == nil || !strings.Contains(err.Error(), "no store at sqlite:./data/auditchain.db") || !strings.Contains(err.Error(), "auditchain serve") {
		t.Fatalf("admin on a missing default store: %v, want a refusal naming it and serve", err)
	}
	if _, err := os.Stat("data"); !os.IsNotExist(err) {
		t.Fatalf("admin created ./data: %v", err)
	}
	// serve, without --create-db, until it listens.
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, noEnv, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "auditchain listening on ") {
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatalf("serve on the default store: %v", err)
	}
	_, errOut, err := runOut(t, noEnv, "admin", "create-account", "--no-email")
	abs, _ := filepath.Abs(filepath.Join("data", "auditchain.db"))
	if err != nil || !strings.Contains(errOut, "store sqlite:"+abs) {
		t.Fatalf("default store after serve: %v, stderr %q", err, errOut)
	}

	t.Chdir(t.TempDir())
	if _, _, err := runOut(t, noEnv, "admin", "create-account", "--no-email", "--create-db"); err != nil {
		t.Fatalf("admin --create-db on the default store: %v", err)
	}
	if _, err := os.Stat(filepath.Join("data", "auditchain.db")); err != nil {
		t.Fatal(err)
	}
}

// -h and --help on every group and command, `help`, and `help COMMAND…`
// print usage on stdout and succeed; `help X` shows X's help, not the
// top-level one.
func TestHelpEverywhere(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"--help"}, "commands:"},
		{[]string{"-h"}, "commands:"},
		{[]string{"help"}, "commands:"},
		{[]string{"serve", "--help"}, "-addr"},
		{[]string{"help", "serve"}, "-addr"},
		{[]string{"admin", "--help"}, "create-account"},
		{[]string{"admin", "-h"}, "create-account"},
		{[]string{"admin", "help"}, "create-account"},
		{[]string{"help", "admin"}, "create-account"},
		{[]string{"admin", "create-account", "--help"}, "-no-email"},
		{[]string{"admin", "create-account", "--email", "x@example.com", "-h"}, "-no-email"},
		{[]string{"help", "admin", "create-key"}, "-user-id"},
		{[]string{"admin", "help", "create-key"}, "-user-id"},
		{[]string{"admin", "announce", "--help"}, "-body-file"},
		{[]string{"verify", "--help"}, "export"},
		{[]string{"verify", "token", "--help"}, "verify token FILE"},
		{[]string{"help", "verify", "export"}, "verify export FILE"},
		{[]string{"bench", "--help"}, "WORKLOAD"},
		{[]string{"version", "--help"}, "auditchain version"},
		{[]string{"mcp", "--help"}, "auditchain mcp proxy"},
		{[]string{"mcp", "proxy", "-h"}, "auditchain mcp proxy"},
		{[]string{"help", "mcp"}, "auditchain mcp proxy"},
		{[]string{"hook", "--help"}, "-host"},
		{[]string{"events", "--help"}, "tail"},
		{[]string{"events", "append", "--help"}, "-sign-key"},
		{[]string{"help", "grants", "status"}, "3 when the gate says no"},
		{[]string{"grants", "-h"}, "revoke"},
		{[]string{"proposals", "help", "ratify"}, "PROPOSAL_ID"},
		{[]string{"chain", "--help"}, "public-key"},
		{[]string{"chain", "export", "-h"}, "-from"},
		{[]string{"keys", "--help"}, "revoke"},
		{[]string{"machines", "keygen", "--help"}, "FILE"},
		{[]string{"machines", "--help"}, "register"},
		{[]string{"hook", "flush", "--help"}, "flush"},
		{[]string{"hook", "install", "--help"}, "install"},
	} {
		out, errOut, err := runOut(t, noEnv, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) || errOut != "" {
			t.Errorf("%v: err %v, stdout %q, stderr %q; want nil, %q in stdout, nothing on stderr", tc.args, err, out, errOut, tc.want)
		}
		if len(tc.args) > 1 && strings.Contains(out, "bench [flags] WORKLOAD…                load generator") {
			t.Errorf("%v printed the top-level help", tc.args)
		}
	}
}

// A command line the program cannot run exits 2, an error that is not the
// command line's fault 1 (docs/cli.md).
func TestExitCodes(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"bogus"}, exitUsage},
		{[]string{"admin"}, exitUsage},
		{[]string{"admin", "bogus"}, exitUsage},
		{[]string{"admin", "create-account", "--bogus"}, exitUsage},
		{[]string{"admin", "create-account", "--db", dsn}, exitUsage},
		{[]string{"admin", "create-account", "--db", dsn, "stray"}, exitUsage},
		{[]string{"verify", "export", "x.ndjson"}, exitUsage},
		{[]string{"serve", "--env", "staging"}, exitUsage},
		{[]string{"admin", "create-account", "--db", dsn, "--create-db", "--email", "not an email"}, exitFailure},
		{[]string{"admin", "create-key", "--db", dsn, "--user-id", "00000000-0000-0000-0000-000000000000"}, exitFailure},
		{[]string{"version"}, 0},
	} {
		_, _, err := runOut(t, noEnv, tc.args...)
		if got := exitCode(err, io.Discard); got != tc.want {
			t.Errorf("%v: exit %d (%v), want %d", tc.args, got, err, tc.want)
		}
	}
}

// `auditchain version` prints the module version and, when the build
// recorded one, the commit.
func TestVersion(t *testing.T) {
	out, _, err := runOut(t, noEnv, "version")
	in := buildinfo.Read()
	if err != nil || !strings.HasPrefix(out, "auditchain "+in.Version) || (in.Revision != "" && !strings.Contains(out, in.Revision)) {
		t.Fatalf("version: %q %v, want auditchain %s (revision %q)", out, err, in.Version, in.Revision)
	}
}

// The admin commands print a key with the field names the API uses for it
// (the key's id is "id", as in POST and GET /v1/keys), and that id is the
// one GET /v1/keys lists.
func TestAdminKeysUseTheAPIsNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		base, _ := startServe(t, map[string]string{"AUDITCHAIN_DB": dsn})
		out, _, err := runOut(t, noEnv, "admin", "create-account", "--db", dsn, "--email", "names@example.com")
		if err != nil {
			t.Fatal(err)
		}
		var acct map[string]any
		json.Unmarshal([]byte(out), &acct)
		out, _, err = runOut(t, noEnv, "admin", "create-key", "--db", dsn, "--user-id", acct["user_id"].(string), "--label", "ci")
		if err != nil {
			t.Fatal(err)
		}
		var created map[string]any
		json.Unmarshal([]byte(out), &created)

		req, _ := http.NewRequest("GET", base+"/v1/keys", nil)
		req.Header.Set("X-API-Key", acct["api_key"].(string))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var list struct{ Keys []map[string]any }
		json.Unmarshal(body, &list)
		if len(list.Keys) != 2 {
			t.Fatalf("GET /v1/keys: %s", body)
		}
		apiNames := slices.Sorted(func(yield func(string) bool) {
			for k := range list.Keys[0] {
				if !yield(k) {
					return
				}
			}
		})
		for name, printed := range map[string]map[string]any{"create-key": created, "create-account": acct} {
			var names []string
			for k := range printed {
				if k != "api_key" && k != "user_id" && k != "email" {
					names = append(names, k)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, apiNames) {
				t.Errorf("%s prints %v beside the token, GET /v1/keys lists %v", name, names, apiNames)
			}
			listed := false
			for _, k := range list.Keys {
				listed = listed || k["id"] == printed["id"]
			}
			if !listed {
				t.Errorf("%s's id %v is not listed by GET /v1/keys", name, printed["id"])
			}
		}
	})
}
