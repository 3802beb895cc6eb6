package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/monitor"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
)

// monitorService is a real API over dsn with one account, its env for the
// client verbs, and the store's DSN for backups.
type monitorService struct {
	srv    *httpapitest.Server
	dsn    string
	userID string
	token  string
	// url, when set, is where the monitor goes instead of srv (a proxy).
	url string
}

func startMonitorService(t *testing.T, dsn string) *monitorService {
	t.Helper()
	s := httpapitest.Start(t, dsn, apptest.Options{})
	userID, token := s.Account(t, "monitor@example.com")
	return &monitorService{srv: s, dsn: dsn, userID: userID, token: token}
}

// serveCopy serves another store (a restored backup, a fork) under the same
// account and key: the copy holds both, and the service key.
func serveCopy(t *testing.T, orig *monitorService, dsn string) *monitorService {
	t.Helper()
	return &monitorService{srv: httpapitest.Start(t, dsn, apptest.Options{}), dsn: dsn, userID: orig.userID, token: orig.token}
}

func (m *monitorService) env() map[string]string {
	url := m.srv.URL
	if m.url != "" {
		url = m.url
	}
	return map[string]string{"AUDITCHAIN_URL": url, "AUDITCHAIN_API_KEY": m.token}
}

// cosignNewest stores w's cosignature on the account's newest block, as the
// service's witness job does, and returns the block.
func cosignNewest(t *testing.T, m *monitorService, st *store.Store, w testWitness) store.BlockRow {
	t.Helper()
	ctx := context.Background()
	b, _, err := m.srv.App.Seal(ctx, m.userID)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.WriteDB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.InsertCosignature(ctx, tx, m.userID, b.Index, store.Cosignature{Witness: w.name, Signature: w.cosign(t, string(b.Note))}, time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return b
}

// backupStore copies the store as an operator restores one: admin backup on
// SQLite, pg_dump and pg_restore into a second database on PostgreSQL.
func backupStore(t *testing.T, dsn string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "sqlite:") {
		path := filepath.Join(t.TempDir(), "backup.db")
		if _, errOut, err := runOut(t, noEnv, "admin", "backup", "--quiet", "--db", dsn, "--to", path); err != nil {
			t.Fatalf("admin backup: %v\n%s", err, errOut)
		}
		return "sqlite:" + path
	}
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the PostgreSQL backup is pg_dump and pg_restore", tool)
		}
	}
	dump := filepath.Join(t.TempDir(), "backup.dump")
	if out, err := exec.Command("pg_dump", "--format=custom", "--file="+dump, "--dbname="+dsn).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	restored := storetest.EmptyDSN(t, storetest.Postgres)
	if out, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+restored, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	return restored
}

// monitorOnce runs auditchain monitor --once against m and returns its
// exit code, stdout and stderr.
func monitorOnce(t *testing.T, m *monitorService, state string, args ...string) (int, string, string) {
	t.Helper()
	out, errOut, err := runOut(t, getenvOf(m.env()), append([]string{"monitor", "--once", "--account", m.userID, "--state", state}, args...)...)
	var msg strings.Builder
	code := exitCode(err, &msg) // what the process prints last on stderr
	return code, out, errOut + msg.String()
}

func readMonitorState(t *testing.T, path string) monitor.State {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s monitor.State
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// alarmOf parses the evidence a check printed.
func alarmOf(t *testing.T, out string) monitor.Result {
	t.Helper()
	var r monitor.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Alarm == nil {
		t.Fatalf("no alarm printed (%v): %s", err, out)
	}
	return r
}

// checkEvidence holds an alarm's evidence to what a third party verifies:
// both notes in full, each signed by the service key for the account.
func checkEvidence(t *testing.T, a *monitor.Alarm, kind string, pinnedSize, observedSize uint64, m *monitorService) {
	t.Helper()
	if a.Kind != kind || a.Pinned == nil || a.Observed == nil {
		t.Fatalf("alarm %+v, want %s with both checkpoints", a, kind)
	}
	if a.Pinned.TreeSize != pinnedSize || a.Observed.TreeSize != observedSize {
		t.Fatalf("%s: pinned size %d, observed %d; want %d and %d", kind, a.Pinned.TreeSize, a.Observed.TreeSize, pinnedSize, observedSize)
	}
	pub, err := readServiceKey(a.ServiceKey)
	if err != nil {
		t.Fatal(err)
	}
	origin := verify.Origin(m.userID)
	if _, err := verify.OpenCheckpoint([]byte(a.Pinned.Note), pub, origin); err != nil {
		t.Fatalf("%s: the pinned note in the evidence does not verify: %v", kind, err)
	}
	if kind == monitor.KindBadSignature {
		return
	}
	if _, err := verify.OpenCheckpoint([]byte(a.Observed.Note), pub, origin); err != nil {
		t.Fatalf("%s: the observed note in the evidence does not verify: %v", kind, err)
	}
}

// webhookSink is a loopback server that keeps what the monitor posts. With
// a secret it checks each post's signature by the Standard Webhooks
// reference library, as a receiver does, and keeps the posts it refused.
type webhookSink struct {
	mu      sync.Mutex
	bodies  []monitor.WebhookBody
	ids     []string
	refused []string
	url     string
}

func newWebhookSink(t *testing.T, secret string) *webhookSink {
	w := &webhookSink{}
	var receiver *standardwebhooks.Webhook
	if secret != "" {
		var err error
		if receiver, err = standardwebhooks.NewWebhook(secret); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		var b monitor.WebhookBody
		if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(raw, &b) != nil {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if receiver != nil {
			if err := receiver.Verify(raw, r.Header); err != nil {
				w.refused = append(w.refused, err.Error())
				rw.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		w.bodies = append(w.bodies, b)
		w.ids = append(w.ids, r.Header.Get("webhook-id"))
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *webhookSink) received() []monitor.WebhookBody {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]monitor.WebhookBody(nil), w.bodies...)
}

// The monitor against a real service on both stores: it pins on first use
// (trusting the service's key) and follows consistent growth; a restore
// from an older backup is a rollback, and a fork of the account's log from
// that backup (same service key, same account, other events) is a split
// view, at the same size and past it; a tampered signature is caught. Each
// alarm exits 4, prints both checkpoints with their notes in full, posts
// the same evidence to the webhook, signed (Standard Webhooks' reference
// library verifies each post), and leaves the pin where it was.
func TestMonitorCatchesRollbackForkAndBadSignature(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		orig := startMonitorService(t, dsn)
		state := filepath.Join(t.TempDir(), "monitor.json")
		secret := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
		hook := newWebhookSink(t, secret)
		signed := func(args ...string) []string {
			return append(args, "--webhook", hook.url, "--webhook-secret", secret)
		}

		appendEvents(t, orig.env(), 3)
		if code, out, errOut := monitorOnce(t, orig, state); code != 0 || !strings.HasPrefix(out, monitor.StatusPinned+" ") {
			t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
		}
		s := readMonitorState(t, state)
		if s.KeySource != monitor.KeyTrustedOnFirstUse || s.Checkpoint == nil || s.Checkpoint.TreeSize != 3 || s.UserID != orig.userID {
			t.Fatalf("state after first use: %+v", s)
		}
		if code, out, _ := monitorOnce(t, orig, state); code != 0 || !strings.HasPrefix(out, monitor.StatusUnchanged+" ") {
			t.Fatalf("nothing new: exit %d %s", code, out)
		}

		backup := backupStore(t, dsn) // the account at 3 events
		appendEvents(t, orig.env(), 2)
		if code, out, errOut := monitorOnce(t, orig, state, signed()...); code != 0 || !strings.HasPrefix(out, monitor.StatusAdvanced+" ") {
			t.Fatalf("consistent growth: exit %d\n%s%s", code, out, errOut)
		}
		pinned := readMonitorState(t, state)
		if pinned.Checkpoint.TreeSize != 5 {
			t.Fatalf("the pin did not follow to 5: %+v", pinned.Checkpoint)
		}

		// Restore from the old backup: the log is back at 3.
		restored := serveCopy(t, orig, backup)
		code, out, errOut := monitorOnce(t, restored, state, signed()...)
		if code != exitAlarm || !strings.Contains(errOut, "rollback") {
			t.Fatalf("rollback: exit %d\n%s%s", code, out, errOut)
		}
		checkEvidence(t, alarmOf(t, out).Alarm, monitor.KindRollback, 5, 3, orig)
		if got := readMonitorState(t, state); got.Checkpoint.Note != pinned.Checkpoint.Note {
			t.Fatal("an alarm moved the pin")
		}

		// The restored store takes other events: a fork of the log, signed
		// by the same key. At the pinned size it is another root...
		appendEvents(t, restored.env(), 2)
		code, out, errOut = monitorOnce(t, restored, state, signed()...)
		if code != exitAlarm || !strings.Contains(errOut, "split_view") {
			t.Fatalf("fork at the pinned size: exit %d\n%s%s", code, out, errOut)
		}
		fork := alarmOf(t, out).Alarm
		checkEvidence(t, fork, monitor.KindSplitView, 5, 5, orig)
		if fork.Pinned.RootHash == fork.Observed.RootHash {
			t.Fatalf("the split view's two checkpoints have one root: %+v", fork)
		}
		// ... and past it, a tree the pinned one is no prefix of.
		appendEvents(t, restored.env(), 1)
		code, out, errOut = monitorOnce(t, restored, state)
		if code != exitAlarm || !strings.Contains(errOut, "the checkpoint of size 6 does not extend the one of size 5") {
			t.Fatalf("fork past the pinned size: exit %d\n%s%s", code, out, errOut)
		}
		past := alarmOf(t, out).Alarm
		checkEvidence(t, past, monitor.KindSplitView, 5, 6, orig)
		// The fork's own block of the pinned size comes with the proof: two
		// signed notes of size 5.
		if past.AtPinnedSize == nil || past.AtPinnedSize.Note != fork.Observed.Note {
			t.Fatalf("the fork's block at the pinned size is not in the evidence: %+v", past.AtPinnedSize)
		}

		// The original goes on and its newest block's signature is tampered with.
		appendEvents(t, orig.env(), 1)
		c, err := client.New(orig.srv.URL, orig.token)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.ConsistencyProof(context.Background(), 0, nil)
		if err != nil || p.SecondCheckpoint == nil || p.SecondCheckpoint.TreeSize != 6 {
			t.Fatalf("newest block: %v %+v", err, p)
		}
		note := p.SecondCheckpoint.Note
		i, flip := len(note)-10, byte('A') // a character of the Ed25519 signature
		if note[i] == flip {
			flip = 'B'
		}
		tampered := note[:i] + string(flip) + note[i+1:]
		st := storetest.Open(t, dsn)
		if _, err := st.WriteDB().Exec(`UPDATE chain_blocks SET note = $1 WHERE user_id = $2 AND block_index = $3`,
			[]byte(tampered), orig.userID, p.SecondCheckpoint.Index); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = monitorOnce(t, orig, state, signed()...)
		if code != exitAlarm || !strings.Contains(errOut, "bad_signature") {
			t.Fatalf("tampered signature: exit %d\n%s%s", code, out, errOut)
		}
		bad := alarmOf(t, out).Alarm
		checkEvidence(t, bad, monitor.KindBadSignature, 5, 6, orig)
		if bad.Observed.Note != tampered {
			t.Fatalf("the evidence is not the tampered note: %q", bad.Observed.Note)
		}

		// The webhook got each alarm posted to it, the evidence in full.
		got := hook.received()
		kinds := []string{}
		for _, b := range got {
			if b.Type != "auditchain.monitor.alarm" || b.Alarm == nil || b.Alarm.Pinned == nil || b.Alarm.Observed == nil || b.Alarm.Observed.Note == "" {
				t.Fatalf("webhook body: %+v", b)
			}
			kinds = append(kinds, b.Alarm.Kind)
		}
		if strings.Join(kinds, ",") != "rollback,split_view,bad_signature" || len(hook.refused) != 0 {
			t.Fatalf("webhook received %v, refused %q", kinds, hook.refused)
		}
		if hook.ids[0] == hook.ids[1] || hook.ids[1] == hook.ids[2] || !strings.HasPrefix(hook.ids[0], "alarm_") {
			t.Fatalf("webhook-ids %q: one per alarm", hook.ids)
		}
		if got[1].Alarm.Observed.Note != fork.Observed.Note || got[1].Alarm.Pinned.Note != fork.Pinned.Note {
			t.Fatal("the webhook's split view is not the printed evidence")
		}
		if got := readMonitorState(t, state); got.Checkpoint.Note != pinned.Checkpoint.Note {
			t.Fatal("an alarm moved the pin")
		}
	})
}

// A service that shows the witnesses one log and the monitor another: its
// block list (where the cosigned blocks are) comes from the original store,
// everything else from a fork of it (a restored backup that took other
// events), both under one account and service key. The newest block the
// monitor reads extends its pin but carries no cosignature; the witnessed
// block behind it is of the other branch: a split view, then, once the
// witnessed branch outgrows the fork, a rollback, each with the witnessed
// block in the evidence, and the pin unmoved.
func TestMonitorCatchesAWitnessedFork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newTestWitness(t, "witness.example/fork")
		orig := startMonitorService(t, dsn)
		st := storetest.Open(t, dsn)
		state := filepath.Join(t.TempDir(), "monitor.json")
		appendEvents(t, orig.env(), 3)
		monitorOnce(t, orig, state, "--witness", w.vkey) // seals the block of 3
		cosignNewest(t, orig, st, w)
		if code, out, errOut := monitorOnce(t, orig, state, "--witness", w.vkey); code != 0 || !strings.HasPrefix(out, monitor.StatusPinned+" ") {
			t.Fatalf("pin: exit %d\n%s%s", code, out, errOut)
		}
		backup := backupStore(t, dsn)

		// The witnessed branch: 5 events, cosigned.
		appendEvents(t, orig.env(), 2)
		witnessed := cosignNewest(t, orig, st, w)
		// The fork: 6 events, sealed block by block so that its newest
		// block's index is past the witnessed one's.
		fork := serveCopy(t, orig, backup)
		for range 3 {
			appendEvents(t, fork.env(), 1)
			if _, _, err := fork.srv.App.Seal(context.Background(), fork.userID); err != nil {
				t.Fatal(err)
			}
		}
		split := proxyBlocks(t, fork, orig)
		code, out, errOut := monitorOnce(t, split, state, "--witness", w.vkey)
		if code != exitAlarm || !strings.Contains(errOut, "split_view") {
			t.Fatalf("a witnessed block of another branch: exit %d\n%s%s", code, out, errOut)
		}
		a := alarmOf(t, out).Alarm
		if a.Witnessed == nil || a.Witnessed.BlockIndex != witnessed.Index || a.Witnessed.TreeSize != 5 || a.Observed.TreeSize != 6 ||
			len(a.Witnessed.Cosignatures) != 1 || a.Pinned.TreeSize != 3 {
			t.Fatalf("the evidence: %+v (witnessed %+v)", a, a.Witnessed)
		}

		// The witnessed branch grows past the fork: what the monitor is
		// shown as newest is smaller than what the witnesses cosigned.
		appendEvents(t, orig.env(), 2)
		cosignNewest(t, orig, st, w)
		code, out, errOut = monitorOnce(t, split, state, "--witness", w.vkey)
		if code != exitAlarm || !strings.Contains(errOut, "rollback") {
			t.Fatalf("a witnessed block larger than the newest: exit %d\n%s%s", code, out, errOut)
		}
		if a := alarmOf(t, out).Alarm; a.Witnessed == nil || a.Witnessed.TreeSize != 7 || a.Observed.TreeSize != 6 {
			t.Fatalf("the rollback's evidence: %+v", a)
		}
		if s := readMonitorState(t, state); s.Checkpoint.TreeSize != 3 {
			t.Fatalf("an alarm moved the pin to %d", s.Checkpoint.TreeSize)
		}
	})
}

// proxyBlocks is a service that answers GET /v1/chain/blocks from blocks
// and everything else from rest.
func proxyBlocks(t *testing.T, rest, blocks *monitorService) *monitorService {
	t.Helper()
	target := func(m *monitorService) *url.URL {
		u, err := url.Parse(m.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	toRest, toBlocks := httputil.NewSingleHostReverseProxy(target(rest)), httputil.NewSingleHostReverseProxy(target(blocks))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chain/blocks" {
			toBlocks.ServeHTTP(w, r)
			return
		}
		toRest.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &monitorService{srv: rest.srv, dsn: rest.dsn, userID: rest.userID, token: rest.token, url: srv.URL}
}

// chain verify --pin is the monitor's check once: it creates the pin, passes
// and moves it on consistent growth, and catches a rollback (exit 4, the
// evidence printed) without moving it.
func TestChainVerifyPinCatchesARollback(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		orig := startMonitorService(t, dsn)
		pin := filepath.Join(t.TempDir(), "pin.json")
		verifyPin := func(m *monitorService, args ...string) (int, string, string) {
			t.Helper()
			out, errOut, err := runOut(t, getenvOf(m.env()), append([]string{"chain", "verify", "--pin", pin}, args...)...)
			var msg strings.Builder
			code := exitCode(err, &msg)
			return code, out, errOut + msg.String()
		}
		appendEvents(t, orig.env(), 2)
		key := orig.srv.App.ServicePublicKey()
		keyArg := base64.StdEncoding.EncodeToString(key)
		if code, out, errOut := verifyPin(orig, "--service-key", keyArg); code != 0 || !strings.HasPrefix(out, monitor.StatusPinned) {
			t.Fatalf("first pin: exit %d\n%s%s", code, out, errOut)
		}
		if s := readMonitorState(t, pin); s.KeySource != monitor.KeyGiven || s.Checkpoint.TreeSize != 2 {
			t.Fatalf("pin: %+v", s)
		}
		backup := backupStore(t, dsn)
		appendEvents(t, orig.env(), 3)
		if code, out, errOut := verifyPin(orig, "--json"); code != 0 || !strings.Contains(out, `"status": "advanced"`) {
			t.Fatalf("consistent growth: exit %d\n%s%s", code, out, errOut)
		}
		if s := readMonitorState(t, pin); s.Checkpoint.TreeSize != 5 {
			t.Fatalf("the pin did not move to 5: %+v", s.Checkpoint)
		}
		code, out, errOut := verifyPin(serveCopy(t, orig, backup))
		if code != exitAlarm || !strings.Contains(errOut, "rollback") {
			t.Fatalf("rollback: exit %d\n%s%s", code, out, errOut)
		}
		checkEvidence(t, alarmOf(t, out).Alarm, monitor.KindRollback, 5, 2, orig)
		if s := readMonitorState(t, pin); s.Checkpoint.TreeSize != 5 {
			t.Fatalf("the alarm moved the pin: %+v", s.Checkpoint)
		}
		if code, _, errOut := monitorOnce(t, &monitorService{srv: orig.srv, userID: "01a2218f-0000-7000-8000-000000000000", token: orig.token},
			filepath.Join(t.TempDir(), "other.json")); code != exitFailure || !strings.Contains(errOut, "another account's API key") {
			t.Fatalf("--account not the key's: exit %d %s", code, errOut)
		}
		if code, _, errOut := verifyPin(orig, "--service-key", base64.StdEncoding.EncodeToString(make([]byte, 32))); code != exitFailure || !strings.Contains(errOut, "trusts the service key") {
			t.Fatalf("another --service-key than the pinned one: exit %d %s", code, errOut)
		}
	})
}

// With --witness the monitor pins only a checkpoint the quorum cosigned: an
// uncosigned newest block is consistent but awaits cosignatures (exit 0,
// the pin stays), and once the witness's cosignature is stored with the
// block the pin moves to it.
func TestMonitorPinsOnlyWitnessedCheckpoints(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := newTestWitness(t, "witness.example/monitor")
		orig := startMonitorService(t, dsn)
		state := filepath.Join(t.TempDir(), "monitor.json")
		appendEvents(t, orig.env(), 2)
		code, out, errOut := monitorOnce(t, orig, state, "--witness", w.vkey, "--json")
		var r monitor.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || r.Status != monitor.StatusAwaitingCosignatures ||
			r.Quorum == nil || len(r.Quorum.Missing) != 1 || r.Quorum.Missing[0] != w.name {
			t.Fatalf("uncosigned: exit %d %+v\n%s%s", code, r, out, errOut)
		}
		if _, err := os.Stat(state); err == nil {
			t.Fatal("an uncosigned checkpoint was pinned")
		}

		// The witness cosigns the newest block, as the service's witness job
		// does: the block the last check's read sealed.
		st := storetest.Open(t, dsn)
		cosign := func() store.BlockRow { return cosignNewest(t, orig, st, w) }
		cosign()
		code, out, errOut = monitorOnce(t, orig, state, "--witness", w.vkey)
		if code != 0 || !strings.HasPrefix(out, monitor.StatusPinned+" ") || !strings.Contains(out, "cosigned: "+w.name) {
			t.Fatalf("cosigned: exit %d\n%s%s", code, out, errOut)
		}
		if s := readMonitorState(t, state); s.Checkpoint == nil || len(s.Checkpoint.Cosignatures) != 1 {
			t.Fatalf("the pin does not keep the cosignature: %+v", s.Checkpoint)
		}

		// An account that keeps appending: each check's read seals a new
		// block, which the witnesses have not cosigned yet. With no
		// witnessed block past the pin the check waits; once the block an
		// earlier check sealed is cosigned, the pin moves to it although
		// the newest is still uncosigned.
		appendEvents(t, orig.env(), 2)
		if code, out, errOut := monitorOnce(t, orig, state, "--witness", w.vkey); code != 0 || !strings.HasPrefix(out, monitor.StatusAwaitingCosignatures+" ") {
			t.Fatalf("growth not yet witnessed: exit %d\n%s%s", code, out, errOut)
		}
		witnessed := cosign()
		appendEvents(t, orig.env(), 3)
		code, out, errOut = monitorOnce(t, orig, state, "--witness", w.vkey, "--json")
		var moved monitor.Result
		if err := json.Unmarshal([]byte(out), &moved); err != nil || code != 0 || moved.Status != monitor.StatusAdvancedToWitnessed {
			t.Fatalf("a witnessed block behind the newest: exit %d %+v\n%s%s", code, moved, out, errOut)
		}
		s := readMonitorState(t, state)
		if s.Checkpoint.BlockIndex != witnessed.Index || s.Checkpoint.TreeSize != 4 || len(s.Checkpoint.Cosignatures) != 1 ||
			moved.Observed.TreeSize != 7 || moved.Observed.BlockIndex <= witnessed.Index {
			t.Fatalf("pinned %+v after observing %+v; want block %d of size 4", s.Checkpoint, moved.Observed, witnessed.Index)
		}
		// The newest stays unwitnessed: nothing past the pin is.
		if code, out, errOut := monitorOnce(t, orig, state, "--witness", w.vkey); code != 0 || !strings.HasPrefix(out, monitor.StatusAwaitingCosignatures+" ") {
			t.Fatalf("nothing witnessed past the pin: exit %d\n%s%s", code, out, errOut)
		}
	})
}
