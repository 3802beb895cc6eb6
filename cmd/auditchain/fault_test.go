package main

// Fault injection (the reliability targets "Faults" and "Disk full"),
// the way Tessera's fault tests do it: the server runs under strace, which
// makes chosen fsync or write calls of the SQLite files fail with EIO or
// ENOSPC. Whatever fails, the service must never acknowledge a write it did
// not commit, must keep (or resume) serving once the fault has passed, and
// must leave a chain the offline verifier accepts.

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStorageFaultsAreNeverAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection runs the server under strace; skipped with -short")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("fault injection needs strace (Debian package strace); not installed here")
	}
	if out, err := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace not permitted?): %v %s", err, out)
	}
	cases := []struct {
		name string
		// inject is strace's fault expression. when= counts the traced calls
		// of each thread (strace counts per tracee), and a Go server spreads
		// its calls over threads, so a window injects a few faults or dozens:
		// the test asserts that faults reached the service, not how many.
		trace, inject string
	}{
		{"EIO on an fsync", "fsync,fdatasync", "fsync,fdatasync:error=EIO:when=40"},
		{"EIO on fsyncs for a while", "fsync,fdatasync", "fsync,fdatasync:error=EIO:when=40..60"},
		{"ENOSPC on writes for a while (disk full)", "pwrite64", "pwrite64:error=ENOSPC:when=150..250"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dsn := "sqlite:" + filepath.Join(dir, "fault.db")
			keys := createAccounts(t, dsn, 2, "fault")

			wrap := []string{strace, "-f", "-qq", "--seccomp-bpf", "-o", "/dev/null", "-e", "trace=" + tc.trace, "-e", "inject=" + tc.inject}
			server := startWrappedChild(t, wrap, "--db", dsn)
			client := &crashClient{http: &http.Client{Timeout: 30 * time.Second}}
			client.base.Store(&server.base)

			type outcome struct {
				id, hash string
				ok       bool
			}
			history := make([][]outcome, len(keys))
			sent := map[string]bool{}
			failures, acksAfterFailure := 0, 0
			for step := 0; step < 3000 && acksAfterFailure < 40; step++ {
				a := step % len(keys)
				status, seq, prevHash, err := client.nextLink(keys[a])
				if err != nil {
					t.Fatalf("the server died on a storage fault: %v", err)
				}
				if status != 200 {
					failures++
					continue
				}
				id := fmt.Sprintf("evt-%d-%d", a, step)
				sent[id] = true
				status, body, err := client.do("POST", "/v1/events", keys[a], map[string]any{
					"event_id": id, "event_type": "tool_call", "sequence": seq, "prev_hash": prevHash, "raw": map[string]any{"step": step}})
				switch {
				case err != nil:
					t.Fatalf("the server died on a storage fault: %v", err)
				case status == 200:
					var r struct {
						Event struct {
							PayloadHash string `json:"payload_hash"`
						}
					}
					json.Unmarshal(body, &r)
					history[a] = append(history[a], outcome{id: id, hash: r.Event.PayloadHash, ok: true})
					if failures > 0 {
						acksAfterFailure++
					}
				case status >= 500:
					if status != 503 || !strings.Contains(string(body), `"code":"service_unavailable"`) {
						t.Fatalf("a storage fault answered %d %s, want 503 service_unavailable", status, body)
					}
					failures++
					history[a] = append(history[a], outcome{id: id})
					if strings.Contains(string(body), "goroutine") || strings.Contains(string(body), "SQL") {
						t.Fatalf("a storage fault leaked internals: %s", body)
					}
				case status == 409:
					// A commit that failed may still have landed (the outcome was
					// unknown): the tip moved; read it again.
				default:
					t.Fatalf("append: %d %s", status, body)
				}
			}
			if failures == 0 {
				t.Fatal("no request failed: the injected fault never reached the service")
			}
			if acksAfterFailure < 40 {
				t.Fatalf("the service did not resume after the fault: %d acknowledgements since the first failure", acksAfterFailure)
			}
			// The connection that met the fault was replaced, not reused.
			if faults := metricValue(t, client, "auditchain_store_io_faults_total"); faults < 1 {
				t.Fatalf("auditchain_store_io_faults_total = %v after a storage fault, want ≥ 1", faults)
			}
			server.kill(t)

			// Read back on a fresh process without faults.
			server = startChild(t, "--db", dsn)
			client.base.Store(&server.base)
			pub := servicePublicKey(t, client)
			for a := range keys {
				stored := verifiedChain(t, client, keys[a], pub)
				for id := range stored {
					if !sent[id] {
						t.Errorf("stored event %s that no client sent", id)
					}
				}
				failed, unknownStored := 0, 0
				for _, o := range history[a] {
					if !o.ok {
						failed++
					}
					h, ok := stored[o.id]
					switch {
					case o.ok && !ok:
						t.Errorf("acknowledged event %s is not stored", o.id)
					case o.ok && h != o.hash:
						t.Errorf("event %s: acknowledged hash %s, stored %s", o.id, o.hash, h)
					case !o.ok && ok:
						unknownStored++
					}
				}
				t.Logf("account %d: %d stored; %d appends answered 5xx, of which %d landed anyway", a, len(stored), failed, unknownStored)
			}
			server.kill(t)
			sqliteIntegrityOK(t, dsn)
		})
	}
}

func servicePublicKey(t *testing.T, client *crashClient) ed25519.PublicKey {
	t.Helper()
	status, body, err := client.do("GET", "/v1/delegation/public-key", "", nil)
	if err != nil || status != 200 {
		t.Fatalf("public key: %d %v", status, err)
	}
	var doc struct {
		PublicKey string `json:"public_key"`
	}
	json.Unmarshal(body, &doc)
	pub, err := base64.StdEncoding.DecodeString(doc.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("service public key %q: %v", doc.PublicKey, err)
	}
	return pub
}

// metricValue reads one unlabelled metric from GET /metrics.
func metricValue(t *testing.T, client *crashClient, name string) float64 {
	t.Helper()
	status, body, err := client.do("GET", "/metrics", "", nil)
	if err != nil || status != 200 {
		t.Fatalf("metrics: %d %v", status, err)
	}
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return v
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}
