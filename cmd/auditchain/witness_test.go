package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/witness"
)

// startWitness runs `auditchain witness serve` in-process on a random port
// and returns its base URL, its vkey and a stop function.
func startWitness(t *testing.T, args ...string) (string, string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"witness", "serve", "--listen", "127.0.0.1:0"}, args...), func(string) string { return "" }, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	var base, vkey string
	for base == "" && lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "auditchain witness vkey "); ok {
			vkey = v
		}
		if u, ok := strings.CutPrefix(lines.Text(), "auditchain witness listening on "); ok {
			base = u
		}
	}
	if base == "" {
		cancel()
		t.Fatalf("witness serve did not report its address: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("witness serve did not stop within 30s")
		}
	}
	t.Cleanup(func() { stop() })
	return base, vkey, stop
}

// keygen writes a witness key and prints its vkey; serve cosigns a log it
// was given with that key, and after a restart on the same --db refuses the
// older checkpoint with 409 and the size it holds.
func TestWitnessKeygenAndServe(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "w.key")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"witness", "keygen", "--out", keyFile, "--name", "witness.test/cli"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	vkey := strings.TrimSpace(out.String())
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", fi, err)
	}
	if err := run(context.Background(), []string{"witness", "keygen", "--out", keyFile, "--name", "witness.test/cli"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Fatal("keygen over an existing key file succeeded")
	}

	skey, logVKey, err := note.GenerateKey(rand.Reader, "example.com/cli-log")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	checkpointOf := func(size uint64, tree string) []byte {
		root := sha256.Sum256(fmt.Appendf(nil, "%s %d", tree, size))
		msg, err := note.Sign(&note.Note{Text: string(log.Checkpoint{Origin: "example.com/cli-log", Size: size, Hash: root[:]}.Marshal())}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	checkpoint := func(size uint64) []byte { return checkpointOf(size, "root") }
	post := func(base string, old uint64, cp []byte) (int, string) {
		resp, err := http.Post(base+"/add-checkpoint", "text/plain", bytes.NewReader(append(fmt.Appendf(nil, "old %d\n\n", old), cp...)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	db := filepath.Join(dir, "w.db")
	base, servedVKey, stop := startWitness(t, "--key", keyFile, "--db", db, "--create-db", "--log", logVKey)
	if servedVKey != vkey {
		t.Fatalf("serve names vkey %q, keygen printed %q", servedVKey, vkey)
	}
	cp := checkpoint(7)
	status, cosig := post(base, 0, cp)
	if status != 200 {
		t.Fatalf("add-checkpoint: %d %s", status, cosig)
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(append(cp, cosig...), note.VerifierList(v)); err != nil {
		t.Fatalf("the cosignature does not verify under keygen's vkey: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	base, _, _ = startWitness(t, "--key", keyFile, "--db", db, "--log", logVKey)
	if status, body := post(base, 0, checkpoint(3)); status != http.StatusConflict || body != "7\n" {
		t.Fatalf("after a restart, an older checkpoint from 0: %d %q, want 409 \"7\\n\"", status, body)
	}

	// Another root at size 7, signed by the log's key: refused (422) and
	// kept; witness evidence reads it while serve holds the database.
	fork := checkpointOf(7, "fork")
	if status, body := post(base, 7, fork); status != http.StatusUnprocessableEntity {
		t.Fatalf("a fork at the cosigned size: %d %q, want 422", status, body)
	}
	out.Reset()
	if err := run(context.Background(), []string{"witness", "evidence", "--db", db}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var kept witness.Evidence
	if err := json.Unmarshal(out.Bytes(), &kept); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("witness evidence printed %q (%v), want one JSON line", out.String(), err)
	}
	if kept.Kind != witness.EvidenceSameSizeOtherRoot || kept.TreeSize != 7 || kept.Origin != "example.com/cli-log" ||
		kept.Submitted != string(fork) || !strings.HasPrefix(kept.Cosigned, string(cp)) || !strings.Contains(kept.Cosigned, "— witness.test/cli ") {
		t.Fatalf("evidence kept: %+v", kept)
	}
	if err := run(context.Background(), []string{"witness", "evidence"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--db") {
		t.Fatalf("evidence without --db: %v", err)
	}
}

// serve refuses to start without what it needs, saying which flag.
func TestWitnessServeRefusals(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "w.key")
	if err := run(context.Background(), []string{"witness", "keygen", "--out", keyFile, "--name", "w"}, func(string) string { return "" }, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	_, logVKey, _ := note.GenerateKey(rand.Reader, "example.com/l")
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"--db", filepath.Join(dir, "x.db"), "--log", logVKey}, true, "--key"},
		{[]string{"--key", keyFile, "--db", filepath.Join(dir, "x.db")}, true, "a log to witness"},
		{[]string{"--key", keyFile, "--db", filepath.Join(dir, "x.db"), "--log", "nonsense"}, true, "--log"},
		{[]string{"--key", keyFile, "--db", filepath.Join(dir, "x.db"), "--auditchain-service", "nonsense"}, true, "--auditchain-service"},
		{[]string{"--key", keyFile, "--db", filepath.Join(dir, "missing.db"), "--log", logVKey}, false, "--create-db"},
		{[]string{"--key", filepath.Join(dir, "nokey"), "--db", filepath.Join(dir, "x.db"), "--log", logVKey}, false, "--key"},
	} {
		err := run(context.Background(), append([]string{"witness", "serve"}, tc.args...), func(string) string { return "" }, io.Discard, io.Discard)
		var ue usageError
		if err == nil || errors.As(err, &ue) != tc.usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v: %v (usage error %v), want one naming %q (usage error %v)", tc.args, err, errors.As(err, &ue), tc.want, tc.usage)
		}
	}
}
