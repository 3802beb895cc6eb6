package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

func getenvOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// adminAccount creates an account with that email on dsn and returns its
// user_id and key.
func adminAccount(t *testing.T, dsn, email string) (userID, apiKey string) {
	t.Helper()
	out, errOut, err := runOut(t, noEnv, "admin", "create-account", "--db", dsn, "--email", email)
	if err != nil {
		t.Fatalf("create-account: %v\n%s", err, errOut)
	}
	var acct struct {
		UserID string `json:"user_id"`
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(out), &acct); err != nil {
		t.Fatal(err)
	}
	return acct.UserID, acct.APIKey
}

// appendEvents appends n events through the client command.
func appendEvents(t *testing.T, env map[string]string, n int) {
	t.Helper()
	for range n {
		if _, errOut, err := runOut(t, getenvOf(env), "events", "append", "--type", "tool.call", "--tool", "Read", "--raw", `{"path":"a"}`); err != nil {
			t.Fatalf("events append: %v\n%s", err, errOut)
		}
	}
}

// adminCheck runs admin check --json with args and returns its report and error.
func adminCheck(t *testing.T, dsn string, args ...string) (checkReport, error) {
	t.Helper()
	out, errOut, err := runOut(t, noEnv, append([]string{"admin", "check", "--json", "--db", dsn}, args...)...)
	var rep checkReport
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("admin check printed no report (%v): %s\n%s", err, out, errOut)
	}
	return rep, err
}

// execSQL runs statements on the store behind the service's back.
func execSQL(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	st := storetest.Open(t, dsn)
	for _, q := range stmts {
		if _, err := st.WriteDB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st.Close()
}

// admin check recomputes each account's chain, tree and newest block, and
// holds the store to a pin: a store ahead of the pin matches; an altered
// event, a block replaced at the pinned size and blocks rolled back each fail
// it (exit 1), and serve --pin-state refuses to start on the rolled-back one.
func TestAdminCheckHoldsTheStoreToItsPin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		env := map[string]string{"AUDITCHAIN_DB": dsn}
		base, stop := startServe(t, env)
		userID, key := adminAccount(t, dsn, "pin@example.com")
		env["AUDITCHAIN_URL"], env["AUDITCHAIN_API_KEY"] = base, key
		appendEvents(t, env, 2)
		pin := filepath.Join(t.TempDir(), "pin")
		if _, errOut, err := runOut(t, noEnv, "admin", "pin", "--db", dsn, "--to", pin); err != nil {
			t.Fatalf("admin pin: %v\n%s", err, errOut)
		}
		if _, _, err := runOut(t, noEnv, "admin", "pin", "--db", dsn, "--to", pin); err == nil || !strings.Contains(err.Error(), "--force") {
			t.Fatalf("admin pin over an existing file: %v, want a refusal naming --force", err)
		}
		appendEvents(t, env, 1)
		rep, err := adminCheck(t, dsn, "--pin-state", pin)
		if err != nil || !rep.OK || len(rep.Accounts) != 1 {
			t.Fatalf("check of a store ahead of its pin: %v %+v", err, rep)
		}
		c := rep.Accounts[0]
		if c.UserID != userID || c.Events != 3 || c.NewestBlock == nil || c.NewestBlock.TreeSize != 2 || c.UnsealedEvents != 1 ||
			*c.Pin != "ok" || c.Witnesses != witnessesNotConfigured {
			t.Fatalf("account report: %+v", c)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		execSQL(t, dsn, `UPDATE events SET tool = 'Write' WHERE sequence = 0`)
		rep, err = adminCheck(t, dsn)
		if err == nil || rep.OK || rep.Accounts[0].MerkleRoot != "mismatch" || !strings.Contains(*rep.Accounts[0].MerkleRootDetail, "sequence 0") {
			t.Fatalf("check of an altered event: %v %+v", err, rep.Accounts)
		}
		execSQL(t, dsn, `UPDATE events SET tool = 'Read' WHERE sequence = 0`)
		if rep, err := adminCheck(t, dsn); err != nil || !rep.OK {
			t.Fatalf("check once the event is as it was: %v %+v", err, rep.Accounts)
		}

		execSQL(t, dsn, `UPDATE chain_blocks SET root_hash = block_hash WHERE tree_size = 2`)
		rep, err = adminCheck(t, dsn, "--pin-state", pin)
		if err == nil || rep.OK || *rep.Accounts[0].Pin != "diverged" {
			t.Fatalf("check of a store with another block at the pinned size: %v %+v", err, rep.Accounts)
		}

		execSQL(t, dsn, `DELETE FROM chain_blocks`)
		rep, err = adminCheck(t, dsn, "--pin-state", pin)
		if err == nil || rep.OK || *rep.Accounts[0].Pin != "rolled_back" {
			t.Fatalf("check of a rolled-back store: %v %+v", err, rep.Accounts)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", dsn, "--pin-state", pin}, noEnv, os.Stdout, os.Stderr)
		if err == nil || !strings.Contains(err.Error(), "rolled_back") || !strings.Contains(err.Error(), userID) {
			t.Fatalf("serve --pin-state on a rolled-back store: %v, want a refusal naming the account", err)
		}
	})
}

// A pin is signed with the service key: a pin edited by hand, or held to a
// store with another key, is refused, not trusted.
func TestAdminCheckRefusesAPinItCannotVerify(t *testing.T) {
	dsn := storetest.DSN(t, storetest.SQLite)
	base, _ := startServe(t, map[string]string{"AUDITCHAIN_DB": dsn})
	_, key := adminAccount(t, dsn, "sig@example.com")
	appendEvents(t, map[string]string{"AUDITCHAIN_URL": base, "AUDITCHAIN_API_KEY": key}, 1)
	pin := filepath.Join(t.TempDir(), "pin")
	if _, errOut, err := runOut(t, noEnv, "admin", "pin", "--db", dsn, "--to", pin); err != nil {
		t.Fatalf("admin pin: %v\n%s", err, errOut)
	}
	b, err := os.ReadFile(pin)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), " 0 1 ", " 0 7 ", 1) // the tree size of block 0
	if edited == string(b) {
		t.Fatalf("pin has no line for block 0 at size 1:\n%s", b)
	}
	if err := os.WriteFile(pin, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runOut(t, noEnv, "admin", "check", "--db", dsn, "--pin-state", pin)
	if err == nil || !strings.Contains(err.Error(), "not signed by this service key") {
		t.Fatalf("check with an edited pin: %v", err)
	}
}

// admin backup copies a SQLite store while serve appends to it: every copy
// is a store that admin check finds intact. An existing file is refused
// unless --force.
func TestAdminBackupWhileServing(t *testing.T) {
	dsn := storetest.DSN(t, storetest.SQLite)
	env := map[string]string{"AUDITCHAIN_DB": dsn}
	base, _ := startServe(t, env)
	_, key := adminAccount(t, dsn, "backup@example.com")
	env["AUDITCHAIN_URL"], env["AUDITCHAIN_API_KEY"] = base, key

	appended := make(chan int, 1000)
	stopAppends := make(chan struct{})
	appendErr := make(chan error, 1)
	go func() {
		defer close(appended)
		for n := 1; ; n++ {
			select {
			case <-stopAppends:
				appendErr <- nil
				return
			default:
			}
			if _, errOut, err := runOut(t, getenvOf(env), "events", "append", "--type", "tool.call", "--tool", "Read", "--raw", `{"n":1}`); err != nil {
				appendErr <- errors.New(err.Error() + ": " + errOut)
				return
			}
			appended <- n
		}
	}()
	dir := t.TempDir()
	var copies []string
	for i, after := range []int{3, 10, 20} {
		for n := range appended { // wait until the appends got that far
			if n >= after {
				break
			}
		}
		to := filepath.Join(dir, "copy-"+string(rune('a'+i))+".db")
		if _, errOut, err := runOut(t, noEnv, "admin", "backup", "--db", dsn, "--to", to); err != nil {
			t.Fatalf("admin backup while serving: %v\n%s", err, errOut)
		}
		copies = append(copies, to)
	}
	close(stopAppends)
	for range appended {
	}
	if err := <-appendErr; err != nil {
		t.Fatal(err)
	}
	for _, c := range copies {
		rep, err := adminCheck(t, "sqlite:"+c)
		if err != nil || !rep.OK || rep.Accounts[0].Events < 3 {
			t.Fatalf("check of the copy %s: %v %+v", c, err, rep)
		}
	}
	if _, _, err := runOut(t, noEnv, "admin", "backup", "--db", dsn, "--to", copies[0]); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("backup over an existing file: %v, want a refusal naming --force", err)
	}
	if _, errOut, err := runOut(t, noEnv, "admin", "backup", "--db", dsn, "--to", copies[0], "--force"); err != nil {
		t.Fatalf("backup --force: %v\n%s", err, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(copies) {
		t.Fatalf("the backup directory holds %d files, want the %d copies and no partial one", len(entries), len(copies))
	}
}

// On PostgreSQL admin backup says how to back up with pg_dump, without the
// URL's credentials, and exits 1.
func TestAdminBackupOnPostgresNamesPgDump(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	_, _, err := runOut(t, noEnv, "admin", "backup", "--db", dsn, "--to", filepath.Join(t.TempDir(), "x.dump"))
	if err == nil || !strings.Contains(err.Error(), "pg_dump --format=custom") || !strings.Contains(err.Error(), "pg_restore") ||
		strings.Contains(err.Error(), "postgres@") {
		t.Fatalf("admin backup on PostgreSQL: %v", err)
	}
}

// The way back to an account whose keys are lost: list-accounts finds it,
// create-key --email issues it a key, and create-account on its email says so.
func TestAdminRecoveryByEmail(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		userID, _ := adminAccount(t, dsn, "lost@example.com")
		out, _, err := runOut(t, noEnv, "admin", "list-accounts", "--db", dsn, "--json")
		var listed []listedAccount
		if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].UserID != userID ||
			*listed[0].Email != "lost@example.com" || listed[0].Events != 0 {
			t.Fatalf("list-accounts: %v %s", err, out)
		}
		if out, _, err := runOut(t, noEnv, "admin", "list-accounts", "--db", dsn); err != nil || !strings.Contains(out, userID+"  lost@example.com") {
			t.Fatalf("list-accounts as text: %v\n%s", err, out)
		}

		_, _, err = runOut(t, noEnv, "admin", "create-account", "--db", dsn, "--email", "lost@example.com")
		if err == nil || !strings.Contains(err.Error(), "account_exists") || !strings.Contains(err.Error(), "admin create-key --db") ||
			!strings.Contains(err.Error(), "--email lost@example.com") {
			t.Fatalf("create-account on an existing email: %v", err)
		}

		out, errOut, err := runOut(t, noEnv, "admin", "create-key", "--db", dsn, "--email", "Lost@Example.com", "--label", "recovered")
		if err != nil {
			t.Fatalf("create-key --email: %v\n%s", err, errOut)
		}
		var created struct {
			ID     string `json:"id"`
			APIKey string `json:"api_key"`
		}
		if err := json.Unmarshal([]byte(out), &created); err != nil || created.APIKey == "" {
			t.Fatalf("create-key --email printed %s", out)
		}
		st := storetest.Open(t, dsn)
		keys, err := st.Keys(context.Background(), userID)
		if err != nil || len(keys) != 2 || !hasKey(keys, created.ID) {
			t.Fatalf("the account's keys: %v %+v, want its first and %s", err, keys, created.ID)
		}
		st.Close()

		if _, _, err := runOut(t, noEnv, "admin", "create-key", "--db", dsn, "--email", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "list-accounts") {
			t.Fatalf("create-key --email for no account: %v", err)
		}
		for _, args := range [][]string{{"--email", "lost@example.com", "--user-id", userID}, {}} {
			_, _, err := runOut(t, noEnv, append([]string{"admin", "create-key", "--db", dsn}, args...)...)
			if exitCode(err, &strings.Builder{}) != exitUsage {
				t.Errorf("create-key %v: %v, want a usage error", args, err)
			}
		}
	})
}

func hasKey(keys []store.APIKey, id string) bool {
	for _, k := range keys {
		if k.ID == id {
			return true
		}
	}
	return false
}

// With --service-key-file the key is not in the store: check and pin take
// the same file (or AUDITCHAIN_SERVICE_KEY_FILE); without it check refuses,
// and with another key the newest block does not verify.
func TestAdminCheckWithAServiceKeyFile(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name, seed string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString([]byte(strings.Repeat(seed, 32)))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k1, k2 := keyFile("k1", "a"), keyFile("k2", "b")
	dsn := storetest.DSN(t, storetest.SQLite)
	base, _ := startServe(t, map[string]string{"AUDITCHAIN_DB": dsn}, "--service-key-file", k1)
	_, key := adminAccount(t, dsn, "keyfile@example.com")
	appendEvents(t, map[string]string{"AUDITCHAIN_URL": base, "AUDITCHAIN_API_KEY": key}, 2)
	pin := filepath.Join(dir, "pin")
	if _, errOut, err := runOut(t, getenvOf(map[string]string{"AUDITCHAIN_SERVICE_KEY_FILE": k1}), "admin", "pin", "--db", dsn, "--to", pin); err != nil {
		t.Fatalf("admin pin with the key file from the environment: %v\n%s", err, errOut)
	}
	if rep, err := adminCheck(t, dsn, "--service-key-file", k1, "--pin-state", pin); err != nil || !rep.OK {
		t.Fatalf("check with the serving key: %v %+v", err, rep)
	}
	if _, _, err := runOut(t, noEnv, "admin", "check", "--db", dsn); err == nil || !strings.Contains(err.Error(), "no service key") {
		t.Fatalf("check without the key file: %v", err)
	}
	rep, err := adminCheck(t, dsn, "--service-key-file", k2)
	if err == nil || rep.OK || !strings.Contains(*rep.Accounts[0].MerkleRootDetail, "does not verify") {
		t.Fatalf("check with another key: %v %+v", err, rep.Accounts)
	}
	if _, _, err := runOut(t, noEnv, "admin", "check", "--db", dsn, "--service-key-file", k2, "--pin-state", pin); err == nil || !strings.Contains(err.Error(), "not signed by this service key") {
		t.Fatalf("check of the pin with another key: %v", err)
	}
}
