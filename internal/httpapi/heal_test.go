package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/cputime"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// dumpEvents renders every column of the account's events with sequence ≤
// maxSeq, so a test can compare rows byte for byte before and after.
func dumpEvents(t *testing.T, e *env, user string, maxSeq int64) []string {
	t.Helper()
	return queryStrings(t, e.store.DB(), `SELECT * FROM events WHERE account = $1 AND sequence <= $2 ORDER BY sequence`, accountOf(t, e.store, user), maxSeq)
}

// accountOf is what the rows of events and merkle_hashes hold as the
// account's key (store.AccountKey), for statements that alter them.
func accountOf(t *testing.T, st *store.Store, user string) any {
	t.Helper()
	key, err := st.AccountKey(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func execDB(t *testing.T, e *env, q string, args ...any) {
	t.Helper()
	settleTail(t, e.store)
	if _, err := e.store.WriteDB().ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// settleTail does the writer's work behind the appends until no row waits
// (SQLite: search's indexes and the single appends' Merkle rows,
// store/index_behind.go and store/merkle_behind_sqlite.go), as an idle writer
// does within milliseconds: damage written behind the service's back then
// lands on stored rows, whatever the timing of the test.
func settleTail(t *testing.T, st *store.Store) {
	t.Helper()
	for range 1000 {
		if st.EventsBehind() == 0 {
			return
		}
		if _, err := st.IndexBehind(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("%d rows still behind", st.EventsBehind())
}

// injectDamage builds a 20-event chain (buildSignedChain plus 8) and then,
// behind the service's back: a break at 14 (prev_hash rewritten), a gap at 17
// (row deleted) and a forged signature at 8 (machine m1, key in force).
func injectDamage(t *testing.T, e *env, email string) *integChain {
	t.Helper()
	c := buildSignedChain(t, e, email)
	c.addN(t, 8)
	execDB(t, e, `UPDATE events SET prev_hash = $2 WHERE account = $1 AND sequence = 14`, accountOf(t, e.store, c.user), "sha256:"+strings.Repeat("b", 64))
	execDB(t, e, `DELETE FROM events WHERE account = $1 AND sequence = 17`, accountOf(t, e.store, c.user))
	ev, err := e.store.EventByID(context.Background(), nil, c.user, c.ids[8])
	if err != nil {
		t.Fatal(err)
	}
	_, forger, _ := ed25519.GenerateKey(nil)
	canon, _ := jcs.Transform(ev.Raw)
	execDB(t, e, `UPDATE events SET signature = $2 WHERE account = $1 AND sequence = 8`, accountOf(t, e.store, c.user),
		base64.StdEncoding.EncodeToString(ed25519.Sign(forger, canon)))
	return c
}

func decodeAs[T any](t *testing.T, r response) T {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return v
}

// A stored tree that lost its rows, or whose rows were cut short, is a
// mismatch of the Merkle root, not an error of the scan.
func TestHealScanReportsABrokenStoredTree(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		for _, tc := range []struct{ name, damage, detail string }{
			{"deleted", `DELETE FROM merkle_hashes WHERE account = $1`, "incomplete"},
			{"cut short", `UPDATE merkle_hashes SET hash = substr(hash, 1, length(hash) - 8) WHERE account = $1`, "malformed"},
			// buildSignedChain stores 12 leaves: 22 hashes, indexes 0–21.
			{"grown past its leaves", `INSERT INTO merkle_hashes (account, idx, hash) SELECT account, 30, substr(hash, 1, 32) FROM merkle_hashes
				WHERE account = $1 AND idx = 0`, "up to index 30, past the 22 of its 12 leaves"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := buildSignedChain(t, e, "tree-"+strings.ReplaceAll(tc.name, " ", "-")+"@example.com")
				execDB(t, e, tc.damage, accountOf(t, e.store, c.user))
				s := decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", c.token, nil))
				if s.Clean || s.MerkleRootStatus != "mismatch" || s.MerkleRootDetail == nil || !strings.Contains(*s.MerkleRootDetail, tc.detail) {
					t.Fatalf("scan of a stored tree %s: %+v (detail %v)", tc.name, s, ptrText(s.MerkleRootDetail))
				}
			})
		}
	})
}

func TestHealScanCleanChain(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		c := buildSignedChain(t, e, "clean@example.com")
		c.addN(t, 3) // past the newest block: the stored tree alone covers the tail
		s := decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", c.token, nil))
		if !s.Clean || s.MerkleRootStatus != "ok" || s.TotalEvents != 15 || s.Verified != 15 || s.UserID != c.user || s.MachineID != nil {
			t.Fatalf("clean chain: %+v", s)
		}
		s = decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", c.token, map[string]any{"machine_id": "m1"}))
		if !s.Clean || s.TotalEvents != 6 || s.Verified != 6 || *s.MachineID != "m1" {
			t.Fatalf("machine m1: %+v", s)
		}
		wantProblem(t, e.do("POST", "/v1/heal/scan", c.token, map[string]any{"machine_id": ""}), 422, "validation_error")
		wantProblem(t, e.do("POST", "/v1/heal/scan", c.token, map[string]any{"nope": 1}), 422, "validation_error")

		empty := newIntegChain(e, "empty@example.com")
		s = decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", empty.token, nil))
		if !s.Clean || s.TotalEvents != 0 || s.MerkleRootStatus != "ok" {
			t.Fatalf("empty chain: %+v", s)
		}
		// A read-only key without the governance capability is refused.
		ro := e.key(c.user, api.CreateKeyRequest{Scopes: []string{"events:read"}})
		wantProblem(t, e.do("POST", "/v1/heal/scan", ro, nil), 403, "scope_missing")
	})
}

func TestHealFindsAndRepairsInjectedDamage(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		c := injectDamage(t, e, "heal@example.com")
		before := dumpEvents(t, e, c.user, 19)
		tipBefore := e.tip(c.token)

		// Scan: exactly the three injected findings.
		s := decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", c.token, nil))
		after16 := int64(16)
		wantBreaks := []api.HealBreak{{Sequence: 14, EventID: c.ids[14], ExpectedPrevHash: &c.hashes[13], FoundPrevHash: ptr("sha256:" + strings.Repeat("b", 64))}}
		wantGaps := []api.HealGap{{AfterSequence: &after16, MissingFrom: 17, MissingTo: 17}}
		wantSigs := []api.HealSignatureFailure{{Sequence: 8, EventID: c.ids[8], MachineID: "m1", Reason: "invalid"}}
		if d := cmp.Diff(wantBreaks, s.Breaks); d != "" {
			t.Errorf("breaks (-want +got):\n%s", d)
		}
		if d := cmp.Diff(wantGaps, s.Gaps); d != "" {
			t.Errorf("gaps (-want +got):\n%s", d)
		}
		if d := cmp.Diff(wantSigs, s.SignatureFailures); d != "" {
			t.Errorf("signature failures (-want +got):\n%s", d)
		}
		if s.Clean || s.MerkleRootStatus != "mismatch" || s.MerkleRootDetail == nil || s.TotalEvents != 19 || s.Verified != 16 {
			t.Fatalf("scan: %+v", s)
		}
		// The machine filter keeps m1's findings only.
		m := decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", c.token, map[string]any{"machine_id": "m1"}))
		if len(m.Breaks) != 0 || len(m.Gaps) != 0 || len(m.SignatureFailures) != 1 || m.TotalEvents != 6 || m.Verified != 5 {
			t.Fatalf("scan of m1: %+v", m)
		}

		// Dry run (the default): counts, writes nothing.
		dry := decodeAs[api.HealRun](t, e.do("POST", "/v1/heal/run", c.token, nil))
		if !dry.DryRun || dry.WouldWrite != 3 || dry.Written != 0 || dry.Skipped != 0 || dry.Breaks != 1 || dry.Gaps != 1 || dry.SignatureFailures != 1 {
			t.Fatalf("dry run: %+v", dry)
		}
		if d := cmp.Diff(tipBefore, e.tip(c.token)); d != "" {
			t.Fatalf("dry run moved the tip:\n%s", d)
		}

		// A real run appends one chain_repair per finding at the tip.
		run := decodeAs[api.HealRun](t, e.do("POST", "/v1/heal/run", c.token, map[string]any{"dry_run": false}))
		if run.DryRun || run.Written != 3 || run.Skipped != 0 || run.WouldWrite != 0 || len(run.Actions) != 3 {
			t.Fatalf("run: %+v", run)
		}
		tip := e.tip(c.token)
		if num(tip["sequence"]) != 22 || num(tip["event_count"]) != num(tipBefore["event_count"])+3 {
			t.Fatalf("tip after run: %v (before %v)", tip, tipBefore)
		}
		keys := map[string]bool{}
		for i, seq := range []int64{20, 21, 22} {
			ev, err := e.store.EventByID(context.Background(), nil, c.user, *run.Actions[i].RepairEventID)
			if err != nil {
				t.Fatal(err)
			}
			var raw struct {
				FindingKey string `json:"finding_key"`
				Kind       string `json:"kind"`
			}
			json.Unmarshal(ev.Raw, &raw)
			if ev.EventType != "chain_repair" || ev.Sequence != seq || raw.FindingKey != run.Actions[i].FindingKey || raw.Kind != run.Actions[i].Kind {
				t.Fatalf("repair event %d: %+v raw %s", i, ev, ev.Raw)
			}
			keys[raw.FindingKey] = true
		}
		if len(keys) != 3 {
			t.Fatalf("finding keys not distinct: %v", keys)
		}
		if d := cmp.Diff(before, dumpEvents(t, e, c.user, 19)); d != "" {
			t.Fatalf("original rows changed (-before +after):\n%s", d)
		}

		// A second run writes nothing new; scan still reports what is in the chain.
		again := decodeAs[api.HealRun](t, e.do("POST", "/v1/heal/run", c.token, map[string]any{"dry_run": false}))
		if again.Written != 0 || again.Skipped != 3 || again.WouldWrite != 0 {
			t.Fatalf("second run: %+v", again)
		}
		for _, a := range again.Actions {
			if a.Status != "skipped" || a.RepairEventID == nil {
				t.Fatalf("second run action: %+v", a)
			}
		}
		if d := cmp.Diff(tip, e.tip(c.token)); d != "" {
			t.Fatalf("second run moved the tip:\n%s", d)
		}
		// The run that wrote repairs wrote one chain.repair_run notice; the
		// dry run and the run that wrote none wrote none.
		if got := rowsOf(e.notices(c.token, "", 50), domain.NoticeChainRepairRun); len(got["in_app"]) != 1 {
			t.Fatalf("chain.repair_run rows: %v, want one in_app row", got)
		}
		s2 := decodeAs[api.HealScan](t, e.do("POST", "/v1/heal/scan", c.token, nil))
		if len(s2.Breaks) != 1 || len(s2.Gaps) != 1 || len(s2.SignatureFailures) != 1 || s2.TotalEvents != 22 {
			t.Fatalf("scan after repair: %+v", s2)
		}

		st := decodeAs[api.HealStatus](t, e.do("GET", "/v1/heal/status", c.token, nil))
		if st.AutoRunning || st.LastScan == nil || st.LastRepair == nil || st.LastRepair.Skipped != 3 {
			t.Fatalf("status: %+v", st)
		}
		// The cache is per account.
		other := newIntegChain(e, "other@example.com")
		if st := decodeAs[api.HealStatus](t, e.do("GET", "/v1/heal/status", other.token, nil)); st.LastScan != nil || st.LastRepair != nil {
			t.Fatalf("another account's status: %+v", st)
		}
	})
}

// Two replicas over one PostgreSQL run heal at once: each finding gets one repair.
func TestHealRunTwoReplicasNeverDoubleWrite(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	e1, e2 := newEnv(t, dsn, nil), newEnv(t, dsn, nil)
	c := injectDamage(t, e1, "replicas-heal@example.com")
	var wg sync.WaitGroup
	var written atomic.Int64
	for i := range 6 {
		e := []*env{e1, e2}[i%2]
		wg.Go(func() {
			r := e.do("POST", "/v1/heal/run", c.token, map[string]any{"dry_run": false})
			if r.Status != 200 {
				t.Errorf("run: %d %s", r.Status, r.Body)
				return
			}
			var res api.HealRun
			json.Unmarshal(r.Body, &res)
			written.Add(int64(res.Written))
		})
	}
	wg.Wait()
	var repairs, rows int64
	db := e1.store.DB()
	if err := db.QueryRow(`SELECT count(*) FROM events WHERE account = $1 AND event_type = 'chain_repair'`, accountOf(t, e1.store, c.user)).Scan(&repairs); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM heal_repairs WHERE user_id = $1`, c.user).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if written.Load() != 3 || repairs != 3 || rows != 3 {
		t.Fatalf("written %d, chain_repair events %d, heal_repairs rows %d; want 3 each", written.Load(), repairs, rows)
	}
}

// The routes of the periodic task; its cadence in time is
// TestHealTaskScansOncePerPeriodOnTheSchedulersLoop (internal/app, in a
// synctest bubble).
func TestHealAutoStartStop(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		var firstTask string
		c := buildSignedChain(t, e, "auto@example.com")
		status := func() api.HealStatus {
			return decodeAs[api.HealStatus](t, e.do("GET", "/v1/heal/status", c.token, nil))
		}

		for _, tc := range []struct {
			name   string
			method string
			path   string
			body   any
			check  func(t *testing.T, r response)
		}{
			{"stop when not running", "POST", "/v1/heal/auto/stop", nil, func(t *testing.T, r response) {
				s := decodeAs[api.HealAutoStop](t, r)
				if s.Stopped || s.Running || s.TaskID != nil || s.StoppedAt != nil || s.UserID != c.user {
					t.Fatalf("%+v", s)
				}
			}},
			{"period below the bound", "POST", "/v1/heal/auto/start", map[string]any{"period_seconds": 59}, func(t *testing.T, r response) {
				wantProblem(t, r, 422, "validation_error")
			}},
			{"period above the bound", "POST", "/v1/heal/auto/start", map[string]any{"period_seconds": 86401}, func(t *testing.T, r response) {
				wantProblem(t, r, 422, "validation_error")
			}},
			{"start with the default period", "POST", "/v1/heal/auto/start", nil, func(t *testing.T, r response) {
				s := decodeAs[api.HealAutoTask](t, r)
				if !s.Running || s.PeriodSeconds != 300 || s.TaskID == nil || s.StartedAt == nil {
					t.Fatalf("%+v", s)
				}
				firstTask = *s.TaskID
				if !status().AutoRunning {
					t.Fatal("status says not running")
				}
			}},
			{"start again, same period: the same task", "POST", "/v1/heal/auto/start", map[string]any{"period_seconds": 300}, func(t *testing.T, r response) {
				s := decodeAs[api.HealAutoTask](t, r)
				if !s.Running || s.TaskID == nil || *s.TaskID != firstTask {
					t.Fatalf("%+v, want task %s", s, firstTask)
				}
			}},
			{"start with another period replaces the task", "POST", "/v1/heal/auto/start", map[string]any{"period_seconds": 60}, func(t *testing.T, r response) {
				s := decodeAs[api.HealAutoTask](t, r)
				if !s.Running || s.PeriodSeconds != 60 || s.TaskID == nil || *s.TaskID == firstTask {
					t.Fatalf("%+v, want a new task", s)
				}
			}},
			{"stop", "POST", "/v1/heal/auto/stop", nil, func(t *testing.T, r response) {
				s := decodeAs[api.HealAutoStop](t, r)
				if !s.Stopped || s.Running || s.TaskID == nil || s.StoppedAt == nil || s.StartedAt == nil {
					t.Fatalf("%+v", s)
				}
				if status().AutoRunning {
					t.Fatal("status says running")
				}
			}},
			{"stop again", "POST", "/v1/heal/auto/stop", nil, func(t *testing.T, r response) {
				if s := decodeAs[api.HealAutoStop](t, r); s.Stopped {
					t.Fatalf("%+v", s)
				}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) { tc.check(t, e.do(tc.method, tc.path, c.token, tc.body)) })
		}

		// Shutdown stops running tasks; a new process knows none.
		e.do("POST", "/v1/heal/auto/start", c.token, nil)
		e.app.Close()
		if status().AutoRunning {
			t.Fatal("shutdown left the task running")
		}
		if s := decodeAs[api.HealAutoTask](t, e.do("POST", "/v1/heal/auto/start", c.token, nil)); s.Running {
			t.Fatalf("a task started after shutdown: %+v", s)
		}
	})
}

// fillChain appends n events to user's chain directly through the store (the
// batch path's AppendRun: head locked, Merkle tree maintained), in runs of 500,
// continuing from the chain's head. With key set, every event is from machine
// m1 and signed. Each raw carries pad bytes so holding the chain in memory
// would show. Hashes come from verify.EventHash, the encoder the append path
// uses (held equal to verify.PayloadHash by a differential test and a fuzz
// target): under the race detector re-parsing every event for RFC 8785 made
// the hashing most of a long fill's time.
func fillChain(tb testing.TB, st *store.Store, user string, n int, key ed25519.PrivateKey, pad int) {
	tb.Helper()
	ctx := context.Background()
	var head store.Head
	if err := st.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		if head, err = st.LockHead(ctx, tx, user); err != nil || key == nil {
			return err
		}
		pub := key.Public().(ed25519.PublicKey)
		return st.InsertSigningKey(ctx, tx, store.SigningKey{UserID: user, MachineID: "m1", FromLeaf: head.EventCount,
			PublicKey: base64.StdEncoding.EncodeToString(pub), Fingerprint: verify.Fingerprint(pub)}, "")
	}); err != nil {
		tb.Fatal(err)
	}
	filler := strings.Repeat("x", pad)
	first, prev := int(head.EventCount), head.LastHash
	var scratch []byte
	for start := first; start < first+n; start += 500 {
		var run []store.Event
		for i := start; i < min(first+n, start+500); i++ {
			ts := "2026-11-21T12:00:00.000000+00:00"
			e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: int64(i), EventID: fmt.Sprintf("evt-%08d", i),
				EventType: "tool_call", PrevHash: prev, Tool: ptr("Bash"), TS: ts, Surface: "rest"}, Raw: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, filler))}}
			if key != nil {
				sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, e.Raw))
				e.MachineID, e.Signature = ptr("m1"), &sig
			}
			var sum verify.Hash
			var err error
			scratch, sum, err = verify.EventHash(&verify.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence,
				PrevHash: e.PrevHash, Raw: e.Raw, Tool: e.Tool, MachineID: e.MachineID, TS: &ts, Signature: e.Signature}, scratch)
			if err != nil {
				tb.Fatal(err)
			}
			e.PayloadHash = verify.HashPrefix + hex.EncodeToString(sum[:])
			run = append(run, e)
			prev = &e.PayloadHash
		}
		err := st.InTx(ctx, func(tx *sql.Tx) error {
			head, err := st.LockHead(ctx, tx, user)
			if err != nil {
				return err
			}
			out, err := st.AppendRun(ctx, tx, store.Run{UserID: user, Head: head, Events: run, Quota: store.Quota{Day: "2026-11-21", Limit: 1 << 40}})
			if err == nil && !out.QuotaOK {
				err = fmt.Errorf("run refused by the quota: %+v", out)
			}
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func newBareApp(tb testing.TB, dsn string) (*app.App, *store.Store) {
	tb.Helper()
	st := storetest.Open(tb, dsn)
	return apptest.New(tb, st, apptest.Options{}), st
}

// TestHealScanMemoryFlat scans one chain at 14,000 and again at 42,000
// events, each raw padded to 1 KB, and samples the heap meanwhile: the scan
// holds one page, not the chain.
func TestHealScanMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a chain of 42,000 events")
	}
	// Memory flat in chain length: the scan's peak heap growth on a chain three
	// times as long stays within half of the extra raw it read. Both lengths are
	// longer than the scan's pipeline (readers + 2 pages of 2,000 rows), so a
	// streaming scan holds the same number of pages in flight for both, and a
	// scan that kept what it read would grow by the whole difference (28 MB).
	// The longer chain is the shorter one extended: the same first 14,000
	// events, so only the length differs between the two scans.
	const pad = 1000
	short, long := 14_000, 42_000
	a, st := newBareApp(t, storetest.DSN(t, storetest.SQLite))
	fillChain(t, st, "u-scan", short, nil, pad)
	growthShort := scanHeapGrowth(t, a, "u-scan", short)
	fillChain(t, st, "u-scan", long-short, nil, pad)
	growthLong := scanHeapGrowth(t, a, "u-scan", long)
	extra := int64((long - short) * pad)
	t.Logf("heap growth during the scan: %.1f MB for %d events, %.1f MB for %d (extra raw %.1f MB)",
		float64(growthShort)/1e6, short, float64(growthLong)/1e6, long, float64(extra)/1e6)
	if growthLong-growthShort > extra/2 {
		t.Fatalf("scanning %d more events (%d bytes of raw) grew the heap by %d more bytes: the scan is not streaming",
			long-short, extra, growthLong-growthShort)
	}
}

// scanHeapGrowth scans user's chain of n events and returns the peak heap
// growth during the scan, sampled every 2 ms, with the collector kept eager
// (GOGC 20) so garbage does not pass for held memory.
func scanHeapGrowth(t *testing.T, a *app.App, user string, n int) int64 {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	res, err := a.HealScan(context.Background(), app.Principal{UserID: user}, nil)
	close(done)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean || res.TotalEvents != int64(n) {
		t.Fatalf("scan of %s: %+v", user, res)
	}
	return int64(peak.Load()) - int64(base)
}

// Signatures are verified by workers in chunks and may fail out of order;
// the scan still reports every failure, each once, in sequence order, and
// counts the events without a finding.
func TestHealScanSignatureFailuresInStreamOrder(t *testing.T) {
	a, st := newBareApp(t, storetest.DSN(t, storetest.SQLite))
	_, key, _ := ed25519.GenerateKey(nil)
	const n = 1200
	fillChain(t, st, "u-sigs", n, key, 10)
	_, forger, _ := ed25519.GenerateKey(nil)
	forged := []int64{1100, 5, 600, 37, 38, 1199}
	for _, seq := range forged {
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(forger, []byte("x")))
		if _, err := st.WriteDB().ExecContext(context.Background(),
			`UPDATE events SET signature = $2 WHERE account = $1 AND sequence = $3`, accountOf(t, st, "u-sigs"), sig, seq); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(forged)
	for _, machine := range []*string{nil, ptr("m1")} {
		res, err := a.HealScan(context.Background(), app.Principal{UserID: "u-sigs"}, machine)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, f := range res.SignatureFailures {
			if f.Reason != "invalid" || f.MachineID != "m1" || f.EventID != fmt.Sprintf("evt-%08d", f.Sequence) {
				t.Fatalf("failure %+v", f)
			}
			got = append(got, f.Sequence)
		}
		if !slices.Equal(got, forged) || res.TotalEvents != n || res.Verified != n-int64(len(forged)) || res.Clean {
			t.Fatalf("machine %v: failures at %v, want %v; total %d verified %d clean %v",
				machine, got, forged, res.TotalEvents, res.Verified, res.Clean)
		}
	}
	res, err := a.HealScan(context.Background(), app.Principal{UserID: "u-sigs"}, ptr("m-other"))
	if err != nil || len(res.SignatureFailures) != 0 || res.TotalEvents != 0 {
		t.Fatalf("another machine: %v %+v", err, res)
	}
}

// BenchmarkHealScan reports the scan rate of unsigned and signed chains.
func BenchmarkHealScan(b *testing.B) {
	for _, bc := range []struct {
		name   string
		n      int
		signed bool
	}{{"unsigned", 50000, false}, {"signed", 20000, true}} {
		b.Run(bc.name, func(b *testing.B) {
			a, st := newBareApp(b, storetest.DSN(b, storetest.SQLite))
			var key ed25519.PrivateKey
			if bc.signed {
				_, key, _ = ed25519.GenerateKey(nil)
			}
			fillChain(b, st, "u-bench", bc.n, key, 40)
			b.ResetTimer()
			cpu0, cpuOK := cputime.Process()
			for b.Loop() {
				res, err := a.HealScan(context.Background(), app.Principal{UserID: "u-bench"}, nil)
				if err != nil || !res.Clean || res.TotalEvents != int64(bc.n) {
					b.Fatalf("scan: %v %+v", err, res)
				}
			}
			events := float64(bc.n) * float64(b.N)
			b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
			if cpu1, ok := cputime.Process(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Microseconds())/events, "cpu-µs/event")
			}
		})
	}
}

func ptrText(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
