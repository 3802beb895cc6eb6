package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// startServe runs `auditchain serve` in-process on a random port and returns its
// base URL and a stop function that waits for run to return. It passes
// --create-db: tests serve fresh stores.
func startServe(t *testing.T, env map[string]string, args ...string) (string, func() error) {
	t.Helper()
	return startServeLogging(t, env, io.Discard, args...)
}

// startServeLogging is startServe with serve's stderr (its log) going to
// stderr, and its stdout copied there too.
func startServeLogging(t *testing.T, env map[string]string, stderr io.Writer, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	go func() {
		err := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--create-db"}, args...), getenv, pw, stderr)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	var base string
	for lines.Scan() {
		fmt.Fprintln(stderr, lines.Text())
		if addr, ok := strings.CutPrefix(lines.Text(), "auditchain listening on "); ok {
			base = addr
			break
		}
	}
	if base == "" {
		cancel()
		t.Fatalf("serve did not report its address: %v", <-done)
	}
	go io.Copy(stderr, pr)
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				t.Error("serve did not stop within 30s")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { stop() })
	return base, stop
}

func TestServeAdminAndShutdown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		env := map[string]string{"AUDITCHAIN_DB": dsn}
		base, stop := startServe(t, env)

		resp, err := http.Get(base + "/v1/health")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health: %v %v", resp, err)
		}
		resp.Body.Close()

		// The admin commands work while the server runs, on the same store.
		var out strings.Builder
		if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--email", "ops@example.com", "--admin"}, func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var acct struct{ UserID, Email, KeyID, APIKey string }
		if err := json.Unmarshal([]byte(out.String()), &map[string]any{}); err != nil {
			t.Fatalf("create-account printed non-JSON: %s", out.String())
		}
		var raw map[string]any
		json.Unmarshal([]byte(out.String()), &raw)
		acct.UserID, acct.APIKey = raw["user_id"].(string), raw["api_key"].(string)
		for _, k := range []string{"user_id", "email", "id", "api_key", "prefix", "scopes"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("create-account output lacks %s: %s", k, out.String())
			}
		}

		out.Reset()
		if err := run(context.Background(), []string{"admin", "create-key", "--user-id", acct.UserID, "--scopes", "grants,events:read", "--machine", "m1", "--label", "ci", "--expires-at", "2099-01-01T00:00:00Z"},
			func(k string) string { return env[k] }, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var key map[string]any
		if err := json.Unmarshal([]byte(out.String()), &key); err != nil {
			t.Fatalf("create-key printed non-JSON: %s", out.String())
		}
		for _, k := range []string{"id", "api_key", "prefix", "scopes", "machine", "label", "expires_at", "created_at", "revoked_at"} {
			if _, ok := key[k]; !ok {
				t.Fatalf("create-key output lacks %s: %s", k, out.String())
			}
		}

		req, _ := http.NewRequest("GET", base+"/v1/keys", nil)
		req.Header.Set("X-API-Key", acct.APIKey)
		resp, err = http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /v1/keys with the bootstrap key: %v %v", resp, err)
		}
		var list struct{ Count int }
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if list.Count != 2 {
			t.Fatalf("keys count = %d, want 2", list.Count)
		}

		if err := stop(); err != nil {
			t.Fatalf("graceful shutdown returned %v", err)
		}
		if _, err := http.Get(base + "/v1/health"); err == nil {
			t.Fatal("server still answers after shutdown")
		}
	})
}

func TestAdminUsageErrors(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"admin"},
		{"admin", "create-account", "--db", dsn},
		{"admin", "create-account", "--db", dsn, "--email", "x@example.com", "--no-email"},
		{"admin", "create-account", "--db", dsn, "--email", "not an email"},
		{"admin", "create-key", "--db", dsn},
		{"admin", "create-key", "--db", dsn, "--user-id", "00000000-0000-0000-0000-000000000000"},
		{"admin", "create-key", "--db", dsn, "--user-id", "u", "--expires-at", "tomorrow"},
		{"serve", "--env", "staging"},
		{"serve", "--db-max-conns", "0"},
	} {
		if err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
			t.Errorf("run %v succeeded", args)
		}
	}
}

// SIGTERM (context cancellation) with a stream open: the stream is closed and
// serve returns promptly instead of waiting for the client.
func TestShutdownClosesStreams(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
	base, stop := startServe(t, nil, "--db", dsn)
	var out strings.Builder
	if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--email", "s@example.com"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var acct map[string]any
	json.Unmarshal([]byte(out.String()), &acct)
	req, _ := http.NewRequest("GET", base+"/v1/events/stream", nil)
	req.Header.Set("X-API-Key", acct["api_key"].(string))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Scan() // retry: 3000
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown waited for an open stream")
	}
	for lines.Scan() {
	}
}

// SIGTERM under load: every request answered 200 carries its stored event, and
// no request gets an empty or false success (docs/reliability.md "Shutdown").
func TestShutdownUnderLoadAcknowledgesOnlyCommits(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "load.db")
	base, stop := startServe(t, nil, "--db", dsn)
	var out strings.Builder
	if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--email", "load@example.com"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var acct map[string]any
	json.Unmarshal([]byte(out.String()), &acct)
	key := acct["api_key"].(string)

	type result struct {
		id     string
		status int
		body   map[string]any
		err    error
	}
	results := make(chan result, 64)
	var wg sync.WaitGroup
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 4; n++ {
				// Genesis-only chains: one account per event would need many
				// accounts, so send batch rows (each stored or not, atomically).
				id := fmt.Sprintf("evt-c%d-n%d", c, n)
				body := fmt.Sprintf(`{"events":[{"event_id":%q,"event_type":"t","sequence":%d}]}`, id, 1000*c+n)
				req, _ := http.NewRequest("POST", base+"/v1/events/batch", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", key)
				resp, err := http.DefaultClient.Do(req)
				r := result{id: id, err: err}
				if err == nil {
					r.status = resp.StatusCode
					json.NewDecoder(resp.Body).Decode(&r.body)
					resp.Body.Close()
				}
				results <- r
			}
		}()
	}
	time.AfterFunc(20*time.Millisecond, func() { stop() })
	wg.Wait()
	close(results)

	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for r := range results {
		if r.err != nil || r.status != 200 {
			continue // refused or cut off: the client knows it was not acknowledged
		}
		if r.body == nil {
			t.Fatalf("%s: 200 with an empty body (a false acknowledgement)", r.id)
		}
		ingested, _ := r.body["ingested"].(float64)
		skipped, _ := r.body["skipped"].(float64)
		rowErrors, _ := r.body["errors"].([]any)
		if ingested+skipped+float64(len(rowErrors)) != 1 {
			t.Fatalf("%s: the answer does not account for its row: %v", r.id, r.body)
		}
		if ingested+skipped == 0 {
			continue // refused per row (for example a sequence below the tip)
		}
		if _, err := st.EventByID(context.Background(), nil, acct["user_id"].(string), r.id); err != nil {
			t.Fatalf("%s acknowledged but not stored: %v", r.id, err)
		}
	}
}

// The embedded store is served by one process: a second serve on the same
// SQLite file refuses to start (its caches could not see the first one's
// writes), while admin commands still work beside the running server.
func TestSecondServeOnOneSQLiteFileRefusesToStart(t *testing.T) {
	dsn := storetest.DSN(t, storetest.SQLite)
	env := map[string]string{"AUDITCHAIN_DB": dsn}
	base, stop := startServe(t, env)
	var errOut strings.Builder
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, io.Discard, &errOut)
	if err == nil || !strings.Contains(err.Error(), "another auditchain serve") {
		t.Fatalf("second serve on %s: %v, want a refusal naming the running one", dsn, err)
	}
	if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--email", "beside@example.com"}, func(string) string { return "" }, io.Discard, io.Discard); err != nil {
		t.Fatalf("admin beside the running server: %v", err)
	}
	if resp, err := http.Get(base + "/v1/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first server after the refused second: %v %v", resp, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Once the first has stopped, the file can be served again.
	_, stop2 := startServe(t, env)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}
