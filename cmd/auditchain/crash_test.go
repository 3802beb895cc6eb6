package main

// The crash test the reliability targets ask for: `auditchain serve` is
// killed with SIGKILL at random moments under mixed load (appends racing on
// shared chains, metered grant uses), restarted on the same SQLite file, and a
// Jepsen-style checker then reads every chain back through the offline
// verifier. The server runs as a child process (this test binary re-executed),
// so the kill is a real kill -9: no deferred function, no shutdown hook runs.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/verify"
)

// childServeEnv, when set, makes the test binary run `auditchain serve` with
// the JSON array of arguments it holds instead of the tests.
const childServeEnv = "AUDITCHAIN_TEST_CHILD_SERVE"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "hook" {
		// The hook as an agent host (or the bench's hook workload) runs it:
		// `auditchain hook …` with the host's JSON on stdin.
		os.Exit(exitCode(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr))
	}
	if os.Getenv(childUpstreamEnv) != "" {
		runTestUpstream() // mcp_test.go
		os.Exit(0)
	}
	if os.Getenv(asCLIEnv) != "" { // quickstart_test.go: be the command
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr)
		stop()
		os.Exit(code)
	}
	if argv := os.Getenv(childServeEnv); argv != "" {
		var args []string
		if err := json.Unmarshal([]byte(argv), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(exitCode(run(context.Background(), args, os.Getenv, os.Stdout, os.Stderr), os.Stderr))
	}
	// Under the race detector a process sleeps a second before it exits
	// (GORACE atexit_sleep_ms, 1000 by default), so that reports from
	// goroutines still running are printed. The tests start this binary
	// again — as the hook, the CLI, servers, and the programs agent hosts
	// run — hundreds of times, and those seconds were most of the package's
	// time. The processes they start still detect and report races, and
	// exit 66 on one; only the wait after their last work is dropped. A
	// GORACE that sets atexit_sleep_ms itself is left as it is.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	os.Exit(m.Run())
}

// childServer is one `auditchain serve` process.
type childServer struct {
	cmd     *exec.Cmd
	base    string
	stopped sync.Once
	err     error
}

// stop kills the process group once and reaps it.
func (c *childServer) stop() error {
	c.stopped.Do(func() {
		c.err = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		_ = c.cmd.Wait()
	})
	return c.err
}

func startChild(t *testing.T, args ...string) *childServer {
	t.Helper()
	return startWrappedChild(t, nil, args...)
}

// startWrappedChild runs the server under a command prefix (strace, say).
func startWrappedChild(t *testing.T, wrap []string, args ...string) *childServer {
	t.Helper()
	argv, _ := json.Marshal(append([]string{"serve", "--addr", "127.0.0.1:0", "--create-db"}, args...))
	cmdline := append(append([]string{}, wrap...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	// Its own process group, so a kill reaches the server under a wrapper too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), childServeEnv+"="+string(argv))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childServer{cmd: cmd}
	t.Cleanup(func() { c.stop() })
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "auditchain listening on "); ok {
			go io.Copy(io.Discard, stdout)
			c.base = addr
			return c
		}
	}
	c.stop()
	t.Fatalf("serve did not report its address; stderr:\n%s", stderr.String())
	return nil
}

// kill is kill -9 of the server and any wrapper: no process gets a chance to
// finish anything.
func (c *childServer) kill(t *testing.T) {
	t.Helper()
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
}

// crashOp is one client operation and how it ended: ok (acknowledged), or
// unknown (a transport error or a 5xx: it may or may not have been stored).
type crashOp struct {
	account int
	eventID string
	ok      bool
	hash    string
}

type crashClient struct {
	http *http.Client
	base atomic.Pointer[string]
}

// nextLink reads the account's tip and returns the sequence and prev_hash
// of the event that extends it (status is the tip read's).
func (c *crashClient) nextLink(key string) (status int, seq int64, prevHash *string, err error) {
	status, body, err := c.do("GET", "/v1/chain/tip", key, nil)
	if err != nil || status != 200 {
		return status, 0, nil, err
	}
	var tip struct {
		Sequence    *int64  `json:"sequence"`
		PayloadHash *string `json:"payload_hash"`
	}
	if err := json.Unmarshal(body, &tip); err != nil {
		return status, 0, nil, err
	}
	if tip.Sequence != nil {
		seq = *tip.Sequence + 1
	}
	return status, seq, tip.PayloadHash, nil
}

func (c *crashClient) do(method, path, key string, body any) (int, []byte, error) {
	var rdr io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rdr = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, *c.base.Load()+path, rdr)
	req.Header.Set("X-API-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func TestKillNineUnderLoadLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test restarts the server many times; skipped with -short")
	}
	const (
		accounts          = 3
		clientsPerAccount = 2
		crashes           = 12
		budget            = 1_000_000
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "crash.db")
	serveArgs := []string{"--db", dsn, "--daily-event-quota", "100000000", "--batch-rate-limit", "100000000"}

	keys := createAccounts(t, dsn, accounts+1, "crash") // the last account holds the grant
	grantKey := keys[accounts]

	client := &crashClient{http: &http.Client{Timeout: 30 * time.Second}}
	server := startChild(t, serveArgs...)
	client.base.Store(&server.base)

	status, body, err := client.do("POST", "/v1/grants", grantKey, map[string]any{"subagent": "worker", "max_tool_calls": budget,
		"expires_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339), "allowed_tools": []string{"search"}})
	if err != nil || status != 201 {
		t.Fatalf("create grant: %d %s %v", status, body, err)
	}
	var created struct {
		Grant struct {
			GrantID string `json:"grant_id"`
		}
	}
	json.Unmarshal(body, &created)
	grantID := created.Grant.GrantID

	var mu sync.Mutex
	var history []crashOp
	var usesAcked, usesUnknown int64
	sent := map[string]bool{}
	var nextID atomic.Int64 // event ids are unique across rounds

	// load runs the clients and, once killAfter operations of this round were
	// acknowledged, calls killed; each client stops at its first transport error.
	load := func(killAfter int64, killed func()) {
		var acked atomic.Int64
		var once sync.Once
		stop := make(chan struct{})
		onAck := func() {
			if acked.Add(1) == killAfter {
				once.Do(func() { killed(); close(stop) })
			}
		}
		var wg sync.WaitGroup
		for a := range accounts {
			for c := range clientsPerAccount {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						status, seq, prevHash, err := client.nextLink(keys[a])
						if err != nil || status >= 500 {
							return // the server is gone
						}
						id := fmt.Sprintf("evt-a%d-c%d-%d", a, c, nextID.Add(1))
						mu.Lock()
						sent[id] = true
						mu.Unlock()
						status, body, err := client.do("POST", "/v1/events", keys[a], map[string]any{
							"event_id": id, "event_type": "tool_call", "sequence": seq, "prev_hash": prevHash,
							"raw": map[string]any{"account": a, "client": c, "n": n}})
						switch {
						case err != nil || status >= 500:
							mu.Lock()
							history = append(history, crashOp{account: a, eventID: id})
							mu.Unlock()
							return
						case status == 200:
							var r struct {
								Event struct {
									PayloadHash string `json:"payload_hash"`
								}
							}
							json.Unmarshal(body, &r)
							mu.Lock()
							history = append(history, crashOp{account: a, eventID: id, ok: true, hash: r.Event.PayloadHash})
							mu.Unlock()
							onAck()
						case status == 409:
							// Lost the race for this sequence to the other client: a
							// definite refusal, nothing stored; retry from the new tip.
						default:
							t.Errorf("append: %d %s", status, body)
							return
						}
					}
				}()
			}
		}
		wg.Add(1)
		go func() { // metered uses race the appends
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				status, body, err := client.do("POST", "/v1/grants/"+grantID+"/use", grantKey, map[string]any{"subagent": "worker", "n": 1})
				switch {
				case err != nil || status >= 500:
					mu.Lock()
					usesUnknown++
					mu.Unlock()
					return
				case status == 200:
					mu.Lock()
					usesAcked++
					mu.Unlock()
					onAck()
				default:
					t.Errorf("use: %d %s", status, body)
					return
				}
			}
		}()
		wg.Wait()
	}

	for round := range crashes {
		killAfter := 10 + rng.Int64N(150)
		load(killAfter, func() { server.stop() })
		// Killed at the chosen moment, or now if every client stopped first
		// (a 5xx): never start a second server beside a live one.
		server.kill(t)
		if t.Failed() {
			t.FailNow()
		}
		start := time.Now()
		server = startChild(t, serveArgs...)
		client.base.Store(&server.base)
		if status, _, err := client.do("GET", "/v1/health", "", nil); err != nil || status != 200 {
			t.Fatalf("round %d: not healthy after restart: %d %v", round, status, err)
		}
		t.Logf("round %d: killed after %d acknowledgements; ready again in %v", round, killAfter, time.Since(start).Round(time.Millisecond))
	}

	// The checker: every chain is read back through the offline verifier.
	servicePub := servicePublicKey(t, client)
	acked := map[string]string{}
	var ackedCount int
	for _, o := range history {
		if o.ok {
			acked[o.eventID] = o.hash
			ackedCount++
		}
	}
	if ackedCount < crashes*10 {
		t.Fatalf("only %d appends acknowledged over %d rounds: the load did not run", ackedCount, crashes)
	}
	stored := 0
	for a := range accounts {
		events := verifiedChain(t, client, keys[a], servicePub)
		for id, hash := range events {
			if !sent[id] {
				t.Errorf("account %d: stored event %s that no client sent", a, id)
			}
			if h, ok := acked[id]; ok {
				if h != hash {
					t.Errorf("event %s: acknowledged hash %s, stored %s", id, h, hash)
				}
				delete(acked, id)
			}
		}
		stored += len(events)
	}
	for id := range acked {
		t.Errorf("acknowledged event %s is gone after the crashes", id)
	}

	status, body, err = client.do("GET", "/v1/grants/status?subagent=worker", grantKey, nil)
	if err != nil || status != 200 {
		t.Fatalf("grant status: %d %v", status, err)
	}
	var gs struct{ Uses int64 }
	json.Unmarshal(body, &gs)
	if gs.Uses < usesAcked || gs.Uses > usesAcked+usesUnknown {
		t.Fatalf("stored uses %d, acknowledged %d, unknown %d: a use was lost or invented", gs.Uses, usesAcked, usesUnknown)
	}
	t.Logf("%d events stored (%d acknowledged), %d uses stored (%d acknowledged, %d unknown)", stored, ackedCount, gs.Uses, usesAcked, usesUnknown)

	server.kill(t)
	sqliteIntegrityOK(t, dsn)
}

// verifiedChain exports the key's account, checks the export with the offline
// verifier (hashes, links, signatures, Merkle tree, checkpoints) and that its
// sequences run from 0 without a gap, and returns the stored events' payload
// hashes by event id.
func verifiedChain(t *testing.T, client *crashClient, key string, servicePub ed25519.PublicKey) map[string]string {
	t.Helper()
	status, body, err := client.do("GET", "/v1/chain/export", key, nil)
	if err != nil || status != 200 {
		t.Fatalf("export: %d %v", status, err)
	}
	report, err := verify.VerifyExport(bytes.NewReader(body), servicePub)
	if err != nil {
		t.Fatalf("the offline verifier refuses the chain: %v", err)
	}
	if report.Events > 0 && (report.FirstSequence != 0 || report.LastSequence != report.Events-1) {
		t.Fatalf("sequences not contiguous from 0: %+v", report)
	}
	events := map[string]string{}
	lines := bufio.NewScanner(bytes.NewReader(body))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var l struct{ Event *verify.ExportEvent }
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Event != nil {
			events[l.Event.EventID] = l.Event.PayloadHash
		}
	}
	return events
}

// sqliteIntegrityOK runs SQLite's integrity_check on a database no server
// holds any more.
func sqliteIntegrityOK(t *testing.T, dsn string) {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var check string
	if err := st.WriteDB().QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q %v", check, err)
	}
}

// createAccounts makes n accounts with `admin create-account` on dsn (before
// any server runs on it, so with --create-db) and returns their API keys.
func createAccounts(t *testing.T, dsn string, n int, name string) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		var out strings.Builder
		if err := run(context.Background(), []string{"admin", "create-account", "--db", dsn, "--create-db", "--email", fmt.Sprintf("%s%d@example.com", name, i)},
			func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var acct struct {
			APIKey string `json:"api_key"`
		}
		if err := json.Unmarshal([]byte(out.String()), &acct); err != nil || acct.APIKey == "" {
			t.Fatalf("create-account: %q %v", out.String(), err)
		}
		keys[i] = acct.APIKey
	}
	return keys
}
