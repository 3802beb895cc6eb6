package witnessinterop_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	wconfig "github.com/transparency-dev/witness/config"
	"github.com/transparency-dev/witness/persistence/inmemory"
	"github.com/transparency-dev/witness/witness"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/schedule"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/internal/witnessclient"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// tdWitness is the transparency-dev witness on a loopback listener, with its
// in-memory persistence, witnessing the logs added with follow.
type tdWitness struct {
	URL, VKey, Name string
	persistence     *inmemory.Persistence
	requests        atomic.Int64
	// delay holds every answer that long (a slow witness).
	delay time.Duration
	// down makes the witness unreachable: a request hangs until release is
	// closed (or the client gives up), then its connection is cut.
	down    atomic.Bool
	release chan struct{}
}

func startWitness(t testing.TB, name string) *tdWitness {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		t.Fatal(err)
	}
	cosigVKey, err := fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		t.Fatal(err)
	}
	tw := &tdWitness{VKey: cosigVKey, Name: name, persistence: inmemory.New(), release: make(chan struct{})}
	// As the witness's own omniwitness wires it: a log is known by the
	// origin and verifier key in its persistence.
	w, err := witness.New(context.Background(), witness.Opts{
		Persistence: tw.persistence,
		Signers:     []note.Signer{signer},
		VerifierForLog: func(ctx context.Context, origin string) (note.Verifier, bool, error) {
			l, ok, err := tw.persistence.Log(ctx, origin)
			if err != nil || !ok {
				return nil, ok, err
			}
			return l.Verifier, true, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := witness.NewHTTPHandler(w)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		tw.requests.Add(1)
		if tw.delay > 0 {
			time.Sleep(tw.delay)
		}
		if tw.down.Load() {
			select {
			case <-tw.release:
			case <-r.Context().Done():
			}
			conn, _, err := http.NewResponseController(rw).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		h.AddCheckpoint(rw, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		tw.unblock()
		srv.Close()
	})
	tw.URL = srv.URL
	return tw
}

func (tw *tdWitness) unblock() {
	select {
	case <-tw.release:
	default:
		close(tw.release)
	}
}

// follow makes the witness witness the account's log under the service key.
func (tw *tdWitness) follow(t *testing.T, userID string, servicePub ed25519.PublicKey) {
	t.Helper()
	origin := verify.Origin(userID)
	vkey, err := verify.CheckpointVerifierKey(origin, servicePub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.CheckpointVerifier(origin, servicePub)
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.persistence.AddLogs(context.Background(), []wconfig.Log{{Origin: origin, VKey: vkey, Verifier: v}}); err != nil {
		t.Fatal(err)
	}
}

func (tw *tdWitness) config() config.Witness {
	return config.Witness{URL: tw.URL, VKey: tw.VKey, Name: tw.Name}
}

// clock is a settable clock for the App (the witness job's backoff).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// service is an App with witnesses over a store, its account, and its key.
type service struct {
	*app.App
	st   *store.Store
	p    app.Principal
	pub  ed25519.PublicKey
	seq  int64
	logs *bytes.Buffer
}

// newService builds an App over dsn with the given service key and
// witnesses, and creates its account; userID, when not empty, is the
// account's id (a second database of the same account, for the fork and
// rollback tests), stored directly.
func newService(t *testing.T, dsn string, key ed25519.PrivateKey, userID string, clk *clock, ws ...config.Witness) *service {
	t.Helper()
	st := storetest.Open(t, dsn)
	cfg := apptest.Config(t)
	cfg.Witnesses, cfg.WitnessQuorum = ws, len(ws)
	logs := &bytes.Buffer{}
	var mu sync.Mutex
	a := app.New(app.Deps{Store: st, Config: cfg, Now: clk.now, ServiceKey: key,
		Log: slog.New(slog.NewTextHandler(&lockedWriter{w: logs, mu: &mu}, nil))})
	t.Cleanup(a.Close)
	ctx := context.Background()
	if userID == "" {
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
		if err != nil {
			t.Fatal(err)
		}
		userID = acct.UserID
	} else {
		tx, err := st.WriteDB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := clk.now()
		err = st.CreateAccountWithKey(ctx, tx, store.Account{UserID: userID, CreatedAt: now},
			store.APIKey{ID: "key-" + userID, UserID: userID, Hash: []byte(userID), Prefix: "ak_test", CreatedAt: now})
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &service{App: a, st: st, p: app.Principal{UserID: userID, KeyID: "k", Kind: "api_key"},
		pub: key.Public().(ed25519.PublicKey), logs: logs}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// append appends n events whose content depends on tag, then seals the
// tip (GET /v1/chain/blocks does) and returns the newest block.
func (s *service) append(t *testing.T, n int, tag string) api.Block {
	t.Helper()
	ctx := context.Background()
	for range n {
		id, typ := fmt.Sprintf("evt-%s-%d", tag, s.seq), "note"
		raw := []byte(fmt.Sprintf(`{"tag":%q,"n":%d}`, tag, s.seq))
		if _, err := s.AppendNext(ctx, s.p, api.EventInput{EventID: &id, EventType: &typ, Raw: raw}, "rest"); err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
		s.seq++
	}
	return s.newestBlock(t)
}

func (s *service) newestBlock(t *testing.T) api.Block {
	t.Helper()
	page, err := s.Blocks(context.Background(), s.p, 0, app.MaxBlockPage)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Blocks) == 0 {
		t.Fatal("no block")
	}
	return page.Blocks[len(page.Blocks)-1]
}

func (s *service) sweep(t *testing.T) app.WitnessRun {
	t.Helper()
	r, err := s.WitnessSweep(context.Background())
	if err != nil {
		t.Fatalf("witness sweep: %v", err)
	}
	return r
}

func (s *service) state(t *testing.T, witness string) store.WitnessState {
	t.Helper()
	states, err := s.st.WitnessStates(context.Background(), nil, s.p.UserID)
	if err != nil {
		t.Fatal(err)
	}
	return states[witness]
}

func (s *service) export(t *testing.T) verify.Report {
	t.Helper()
	ctx := context.Background()
	x, err := s.PrepareExport(ctx, s.p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := x.WriteTo(ctx, &b); err != nil {
		t.Fatal(err)
	}
	rep, err := verify.VerifyExport(&b, s.pub)
	if err != nil {
		t.Fatalf("export does not verify: %v", err)
	}
	return rep
}

func serviceKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func mustWitness(t *testing.T, vkey string) verify.Witness {
	t.Helper()
	w, err := verify.NewWitness(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The service's witness job submits each account's newest block to the
// transparency-dev witness, first with old size 0, then with the
// consistency proof from the size it cosigned; the cosignature it answers
// verifies under the witness's key, is served with the block and carried
// by the export, whose last checkpoint then meets a quorum of 1. A second
// run with no new block sends nothing.
func TestTransparencyDevWitnessCosignsTheServicesCheckpoints(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		tw := startWitness(t, "witness.example/td")
		clk := &clock{t: time.Now()}
		s := newService(t, dsn, serviceKey(t), "", clk, tw.config())
		tw.follow(t, s.p.UserID, s.pub)
		w := mustWitness(t, tw.VKey)
		if !slices.ContainsFunc(s.Jobs(), func(j schedule.Job) bool { return j.Name == app.JobWitness }) {
			t.Fatal("no witness job on the scheduler with --witness")
		}

		for round, n := range []int{3, 5} {
			b := s.append(t, n, "a")
			if r := s.sweep(t); r.Cosigned != 1 || r.Failed != 0 {
				t.Fatalf("round %d: run %+v, want one cosigned", round, r)
			}
			got := s.newestBlock(t)
			if got.Index != b.Index || len(got.Cosignatures) != 1 {
				t.Fatalf("round %d: newest block %d carries %d cosignatures, want block %d with 1", round, got.Index, len(got.Cosignatures), b.Index)
			}
			if err := w.VerifyCosignature([]byte(got.Note), got.Cosignatures[0]); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			st := s.state(t, tw.Name)
			if st.CosignedSize != got.TreeSize || st.WitnessSize != got.TreeSize || st.LastError != nil {
				t.Fatalf("round %d: state %+v, want cosigned %d", round, st, got.TreeSize)
			}
		}
		before := tw.requests.Load()
		if r := s.sweep(t); r.Submitted != 0 || tw.requests.Load() != before {
			t.Fatalf("a run with nothing new submitted %d (%d requests)", r.Submitted, tw.requests.Load()-before)
		}

		rep := s.export(t)
		if rep.LastCheckpoint == nil || len(rep.LastCheckpoint.Cosignatures) != 1 {
			t.Fatalf("export's last checkpoint: %+v", rep.LastCheckpoint)
		}
		q := verify.CheckQuorum([]byte(rep.LastCheckpoint.Note), rep.LastCheckpoint.Cosignatures, []verify.Witness{w}, 1)
		if !q.Met() || q.Cosigned[0] != tw.Name {
			t.Fatalf("quorum: %+v", q)
		}
		// The proofs' checkpoints carry them too.
		cp, err := s.ConsistencyProof(context.Background(), s.p, 3, nil)
		if err != nil || cp.SecondCheckpoint == nil || len(cp.SecondCheckpoint.Cosignatures) != 1 {
			t.Fatalf("consistency proof's checkpoint: %+v, %v", cp.SecondCheckpoint, err)
		}
		lags, err := s.WitnessLags(context.Background())
		if err != nil || lags[tw.Name] != (app.WitnessLag{}) {
			t.Fatalf("lag %+v, %v; want none", lags, err)
		}
	})
}

// A witness that does not answer delays no append: while the job's
// submission hangs on it, appends and seals go on; the run records the
// failure and the lag shows it; the next run within the backoff does not
// submit; once the backoff passed and the witness is back, the next run
// cosigns the newest block, from the size it last cosigned.
func TestWitnessDownDelaysNoAppendAndTheJobRetries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		tw := startWitness(t, "witness.example/down")
		clk := &clock{t: time.Now()}
		s := newService(t, dsn, serviceKey(t), "", clk, tw.config())
		tw.follow(t, s.p.UserID, s.pub)
		s.append(t, 2, "a")
		s.sweep(t) // cosigned at 2

		tw.down.Store(true)
		b := s.append(t, 3, "b")
		done := make(chan app.WitnessRun)
		go func() {
			r, _ := s.WitnessSweep(context.Background())
			done <- r
		}()
		for tw.requests.Load() < 2 { // the run's request is waiting on the witness
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		b = s.append(t, 20, "c")
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("20 appends and a seal took %v while the witness hung", d)
		}
		tw.unblock()
		if r := <-done; r.Failed != 1 || r.Cosigned != 0 {
			t.Fatalf("run with the witness down: %+v", r)
		}
		st := s.state(t, tw.Name)
		if st.Failures != 1 || st.LastError == nil || st.CosignedSize != 2 {
			t.Fatalf("state after the failure: %+v", st)
		}
		s.sweep(t)                // within the backoff: brings only the lag figure to the newest block
		clk.add(11 * time.Second) // past the lag figures' cache
		lags, _ := s.WitnessLags(context.Background())
		if want := (app.WitnessLag{Leaves: b.TreeSize - 2, Accounts: 1}); lags[tw.Name] != want {
			t.Fatalf("lag %+v, want %+v", lags[tw.Name], want)
		}

		tw.down.Store(false)
		before := tw.requests.Load()
		if r := s.sweep(t); r.Submitted != 0 || tw.requests.Load() != before {
			t.Fatalf("a run within the backoff submitted: %+v", r)
		}
		clk.add(app.WitnessCadence)
		if r := s.sweep(t); r.Cosigned != 1 {
			t.Fatalf("run after the backoff: %+v (%v)", r, s.state(t, tw.Name).LastError)
		}
		st = s.state(t, tw.Name)
		if st.CosignedSize != b.TreeSize || st.Failures != 0 || st.LastError != nil {
			t.Fatalf("state after the retry: %+v", st)
		}
		clk.add(11 * time.Second)
		if lags, _ = s.WitnessLags(context.Background()); lags[tw.Name] != (app.WitnessLag{}) {
			t.Fatalf("lag after the retry: %+v", lags[tw.Name])
		}
	})
}

// A fork of an account's log — a second database with the same service key
// and the same account, holding other events — is refused by the witness
// that cosigned the first: its checkpoint is not consistent with the one
// cosigned before (the 409 tells the fork the witness's size, and the
// consistency proof from it fails: 422). Nothing is cosigned for the fork,
// the job logs it as an error, and the original goes on being cosigned.
func TestWitnessRefusesAForkOfAnAccountsLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		tw := startWitness(t, "witness.example/fork")
		key := serviceKey(t)
		clk := &clock{t: time.Now()}
		orig := newService(t, dsn, key, "", clk, tw.config())
		var forkDSN string
		if strings.HasPrefix(dsn, "sqlite:") {
			forkDSN = storetest.DSN(t, storetest.SQLite)
		} else {
			forkDSN = storetest.DSN(t, storetest.Postgres)
		}
		fork := newService(t, forkDSN, key, orig.p.UserID, clk, tw.config())
		if fork.p.UserID != orig.p.UserID {
			t.Fatalf("the fork's account %s is not the original's %s", fork.p.UserID, orig.p.UserID)
		}
		tw.follow(t, orig.p.UserID, orig.pub)

		orig.append(t, 3, "original")
		if r := orig.sweep(t); r.Cosigned != 1 {
			t.Fatalf("original: %+v", r)
		}
		fb := fork.append(t, 5, "forged")
		r := fork.sweep(t)
		if r.Cosigned != 0 || r.Failed != 1 {
			t.Fatalf("fork: %+v, want refused", r)
		}
		if got := fork.newestBlock(t); len(got.Cosignatures) != 0 {
			t.Fatalf("the fork's block %d got cosigned: %v", fb.Index, got.Cosignatures)
		}
		st := fork.state(t, tw.Name)
		if st.LastError == nil || !strings.Contains(*st.LastError, "422") || st.WitnessSize != 3 || st.CosignedSize != 0 {
			t.Fatalf("fork state: %+v (%v)", st, st.LastError)
		}
		if !strings.Contains(fork.logs.String(), "level=ERROR") {
			t.Fatalf("the refusal is not logged as an error:\n%s", fork.logs)
		}
		orig.append(t, 4, "original")
		if r := orig.sweep(t); r.Cosigned != 1 {
			t.Fatalf("original after the fork: %+v", r)
		}
	})
}

// A 409 from a witness that already holds a larger size than the service
// thinks — cosigned through another path (here a submission made directly
// with the witness client, as another deployment sharing the key or a lost
// witness_state row would) — is recovered: the job learns the size from the
// 409, proves consistency from it and is cosigned. A witness that holds
// more than the account's newest block (a database restored from an old
// backup: a quiet rollback) cannot be given it: the run reports the witness
// ahead, stores nothing, and logs an error.
func TestWitnessConflictIsRecoveredAndARollbackIsCaught(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		tw := startWitness(t, "witness.example/conflict")
		key := serviceKey(t)
		clk := &clock{t: time.Now()}
		s := newService(t, dsn, key, "", clk, tw.config())
		tw.follow(t, s.p.UserID, s.pub)
		s.append(t, 3, "a")
		s.sweep(t) // the witness holds 3

		// Another path moves the witness to 6.
		b6 := s.append(t, 3, "a")
		row, err := s.st.BlockBySize(context.Background(), s.p.UserID, b6.TreeSize)
		if err != nil {
			t.Fatal(err)
		}
		proof, err := s.ConsistencyProof(context.Background(), s.p, 3, &b6.TreeSize)
		if err != nil {
			t.Fatal(err)
		}
		hashes := make([]verify.Hash, len(proof.Proof))
		for i, h := range proof.Proof {
			if err := hashes[i].UnmarshalText([]byte(h)); err != nil {
				t.Fatal(err)
			}
		}
		c := &witnessclient.Client{URL: tw.URL, Witness: mustWitness(t, tw.VKey)}
		if _, err := c.AddCheckpoint(context.Background(), 3, hashes, row.Note); err != nil {
			t.Fatalf("direct submission: %v", err)
		}

		b8 := s.append(t, 2, "a")
		requests := tw.requests.Load()
		if r := s.sweep(t); r.Cosigned != 1 {
			t.Fatalf("after the 409: %+v (%v)", r, s.state(t, tw.Name).LastError)
		}
		if n := tw.requests.Load() - requests; n != 2 {
			t.Fatalf("%d requests, want 2 (409, then the proof from 6)", n)
		}
		if st := s.state(t, tw.Name); st.CosignedSize != b8.TreeSize || st.WitnessSize != b8.TreeSize {
			t.Fatalf("state: %+v", st)
		}

		// A restore of an old backup: the same key and account, the first
		// three events only (the same events, so the same tree).
		var oldDSN string
		if strings.HasPrefix(dsn, "sqlite:") {
			oldDSN = storetest.DSN(t, storetest.SQLite)
		} else {
			oldDSN = storetest.DSN(t, storetest.Postgres)
		}
		old := newService(t, oldDSN, key, s.p.UserID, clk, tw.config())
		old.append(t, 3, "a")
		if r := old.sweep(t); r.Failed != 1 || r.Cosigned != 0 {
			t.Fatalf("rolled-back log: %+v", r)
		}
		st := old.state(t, tw.Name)
		if st.WitnessSize != b8.TreeSize || st.LastError == nil || !strings.Contains(*st.LastError, "rolled back") {
			t.Fatalf("rolled-back state: %+v (%v)", st, st.LastError)
		}
		if !strings.Contains(old.logs.String(), "level=ERROR") {
			t.Fatalf("the rollback is not logged as an error:\n%s", old.logs)
		}
		if got := old.newestBlock(t); len(got.Cosignatures) != 0 {
			t.Fatalf("the rolled-back block got cosigned")
		}
	})
}

// Replicas over one PostgreSQL database running the witness job at once
// submit each account once: an account is claimed by one replica at a time
// (a second replica skips it), so a slow witness gets one request per
// account, not one per replica, and each block one cosignature.
func TestWitnessReplicasSubmitEachAccountOnce(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	tw := startWitness(t, "witness.example/replicas")
	tw.delay = 100 * time.Millisecond
	key := serviceKey(t)
	clk := &clock{t: time.Now()}
	first := newService(t, dsn, key, "", clk, tw.config())
	accounts := []*service{first}
	for range 4 {
		accounts = append(accounts, newService(t, dsn, key, "", clk, tw.config()))
	}
	for _, s := range accounts {
		tw.follow(t, s.p.UserID, s.pub)
		s.append(t, 3, "r")
	}
	second := newService(t, dsn, key, "", clk, tw.config()) // another replica (and an account without events)
	var wg sync.WaitGroup
	runs := make([]app.WitnessRun, 2)
	for i, s := range []*service{first, second} {
		wg.Go(func() { runs[i] = s.sweep(t) })
	}
	wg.Wait()
	if n := tw.requests.Load(); n != int64(len(accounts)) {
		t.Fatalf("%d requests for %d accounts (runs %+v)", n, len(accounts), runs)
	}
	if got := runs[0].Cosigned + runs[1].Cosigned; got != len(accounts) {
		t.Fatalf("cosigned %d, want %d (runs %+v)", got, len(accounts), runs)
	}
	for _, s := range accounts {
		if b := s.newestBlock(t); len(b.Cosignatures) != 1 {
			t.Fatalf("account %s: %d cosignatures", s.p.UserID, len(b.Cosignatures))
		}
	}
}

// BenchmarkWitnessSweep measures the witness job over many accounts with
// three transparency-dev witnesses in this process (their verification and
// signing share the CPU): each iteration appends an event to every account
// and seals it (not timed), then runs one sweep, which submits every
// account's new block to every witness with a consistency proof. Accounts
// per second of sweep is the figure: a checkpoint per account per minute
// for N accounts needs N/60. SQLite, 1,000 accounts:
// go test -run '^$' -bench WitnessSweep -benchtime 3x.
func BenchmarkWitnessSweep(b *testing.B) {
	const accounts = 1000
	dsn := storetest.DSN(b, storetest.SQLite)
	var ws []config.Witness
	var tws []*tdWitness
	for i := range 3 {
		tw := startWitness(b, fmt.Sprintf("witness.example/bench%d", i))
		tws = append(tws, tw)
		ws = append(ws, tw.config())
	}
	key := serviceKey(b)
	clk := &clock{t: time.Now()}
	st := storetest.Open(b, dsn)
	cfg := apptest.Config(b)
	cfg.Witnesses, cfg.WitnessQuorum = ws, len(ws)
	a := app.New(app.Deps{Store: st, Config: cfg, Now: clk.now, ServiceKey: key})
	b.Cleanup(a.Close)
	ctx := context.Background()
	ps := make([]app.Principal, accounts)
	for i := range ps {
		acct, _, err := a.CreateAccount(ctx, app.AccountRequest{NoEmail: true})
		if err != nil {
			b.Fatal(err)
		}
		ps[i] = app.Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
		for _, tw := range tws {
			origin := verify.Origin(acct.UserID)
			vkey, _ := verify.CheckpointVerifierKey(origin, key.Public().(ed25519.PublicKey))
			v, _ := verify.CheckpointVerifier(origin, key.Public().(ed25519.PublicKey))
			if err := tw.persistence.AddLogs(ctx, []wconfig.Log{{Origin: origin, VKey: vkey, Verifier: v}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	seq := 0
	round := func() {
		for _, p := range ps {
			id, typ := fmt.Sprintf("evt-bench-%d", seq), "note"
			seq++
			if _, err := a.AppendNext(ctx, p, api.EventInput{EventID: &id, EventType: &typ}, "rest"); err != nil {
				b.Fatal(err)
			}
			if _, _, err := a.Seal(ctx, p.UserID); err != nil {
				b.Fatal(err)
			}
		}
	}
	round()
	if r, err := a.WitnessSweep(ctx); err != nil || r.Cosigned != accounts*3 {
		b.Fatalf("first sweep: %+v %v", r, err)
	}
	var swept time.Duration
	for b.Loop() {
		b.StopTimer()
		round()
		b.StartTimer()
		start := time.Now()
		r, err := a.WitnessSweep(ctx)
		swept += time.Since(start)
		if err != nil || r.Cosigned != accounts*3 {
			b.Fatalf("sweep: %+v %v", r, err)
		}
	}
	b.ReportMetric(float64(accounts*b.N)/swept.Seconds(), "accounts/s")
	b.ReportMetric(float64(3*accounts*b.N)/swept.Seconds(), "cosignatures/s")
}

// C2SP tlog-witness answers a checkpoint whose root differs from the one the
// witness cosigned at the same size with 409 and that size (the
// transparency-dev witness answers 422): the job, having sent that size as
// old, takes it for the fork it is — refused, logged as an error, not
// retried in the same run.
func TestWitnessConflictAtTheSizeSentIsAFork(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		var requests atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			w.Header().Set("Content-Type", "text/x.tlog.size")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintln(w, 3)
		}))
		defer srv.Close()
		_, vkey, err := note.GenerateKey(rand.Reader, "witness.example/spec")
		if err != nil {
			t.Fatal(err)
		}
		s := newService(t, dsn, serviceKey(t), "", &clock{t: time.Now()}, config.Witness{URL: srv.URL, VKey: vkey, Name: "witness.example/spec"})
		s.append(t, 3, "a")
		if r := s.sweep(t); r.Failed != 1 || requests.Load() != 2 {
			t.Fatalf("run %+v after %d requests, want one failure after 2 (old 0, then old 3)", r, requests.Load())
		}
		st := s.state(t, "witness.example/spec")
		if st.LastError == nil || !strings.Contains(*st.LastError, "forked") || st.WitnessSize != 3 {
			t.Fatalf("state: %+v (%v)", st, st.LastError)
		}
		if !strings.Contains(s.logs.String(), "level=ERROR") {
			t.Fatalf("the fork is not logged as an error:\n%s", s.logs)
		}
	})
}
