// Package writer is the write seam of auditchain's use cases
// (docs/decisions/record.md "One write seam"). Every write goes through it:
//
//   - Writer.Write runs a function in one write transaction (a *Tx) and
//     returns once that transaction committed, or failed with nothing
//     written;
//   - Writer.Append stores one client event, as the engine sees fit: locked
//     in a transaction like any other write, or on PostgreSQL optimistically,
//     batched with other accounts' appends.
//
// A Tx offers what a use case needs besides its own statements: the
// account's head (Lock), the one way to append an event (Append, AppendRun)
// and to write a notice's rows (Notice, NoticeEach), and effects — after
// the commit (AfterCommit: stream frames, waking a sender) and whatever
// happened (cache marks: Invalidate). A refused write leaves nothing; a
// trace of the refusal that must outlive the rollback (the rate.limit_hit
// notice of a 429) is a write of its own, made by the use case after the
// refusal.
//
// Behind it sit the engines, which the use cases never see: SQLite's group
// commit (groupcommit.go), PostgreSQL's transactions, optimistic appends,
// head cache and batch statements (optimistic.go, headcache.go, pgbatch.go),
// each engine's memory of what decides a notice's rows (notice.go), the
// stream's fan-out across replicas (bus.go, listenmarks.go) and the read
// caches that only a sole writer may keep (readcache.go). Modelled on
// tessera's Add: batching is storage's business.
package writer

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/stream"
)

// Options configure a Writer.
type Options struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
	// Hub is this process's stream hub: every appended event is published
	// to it, directly (one process) or through PostgreSQL's NOTIFY.
	Hub *stream.Hub
	// StatementTimeout bounds a batched statement, which no single caller's
	// context may cut (15 s when zero).
	StatementTimeout time.Duration
}

// Writer runs writes against one store. It is safe for concurrent use.
type Writer struct {
	store *store.Store
	now   func() time.Time
	log   *slog.Logger
	hub   *stream.Hub

	// engine runs write transactions: SQLite's group commit, or one
	// PostgreSQL transaction per write.
	engine engine
	// memo holds the heads SQLite's writer remembers (headmemo.go; nil on
	// PostgreSQL).
	memo *headMemo
	// optimistic stores client events without the head's lock (PostgreSQL;
	// nil on SQLite).
	optimistic *optimistic
	// bus carries frames to every replica (PostgreSQL, once StartBus ran).
	bus *stream.PGBus
	// marks are the accounts this replica streams (PostgreSQL; listenmarks.go).
	marks listenMarks
	// claims serialise claims of queued work per key (SQLite; claim.go).
	claims claimLocks
	// guesses remember what notices' rows were last decided from
	// (PostgreSQL; nil on SQLite, where the store's notice cache serves the
	// reads: notice.go).
	guesses *noticeGuesses

	closeOnce sync.Once
}

// engine runs one write transaction.
type engine interface {
	// run calls fn with a Tx and returns once the transaction holding its
	// writes committed (nil) or failed. It runs t's after-commit effects
	// when, and only when, it committed.
	run(ctx context.Context, t *Tx, fn func(*Tx) error) error
	close()
}

// New returns the Writer of st.
func New(st *store.Store, o Options) *Writer {
	w := &Writer{store: st, now: o.Now, log: o.Log, hub: o.Hub}
	if w.now == nil {
		w.now = time.Now
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.hub == nil {
		w.hub = stream.NewHub(stream.Options{})
	}
	if st.Dialect == store.SQLite {
		w.memo = newHeadMemo()
		w.engine = newGroupCommitter(st, groupQueueSize, w.log, w.memo)
	} else {
		w.engine = pgEngine{store: st}
		w.optimistic = newOptimistic(w, cmp.Or(o.StatementTimeout, 15*time.Second))
		w.guesses = &noticeGuesses{}
	}
	return w
}

// SoleWriter reports whether this process is the store's only writer (the
// embedded SQLite store, which serve holds exclusively): only then can a
// cache of what the store holds be kept exact (readcache.go).
func (w *Writer) SoleWriter() bool { return w.store.Dialect == store.SQLite }

// Write runs fn in one write transaction and returns once it committed:
// nothing is acknowledged before. If fn returns an error, nothing fn wrote
// is kept.
func (w *Writer) Write(ctx context.Context, fn func(*Tx) error) error {
	t := &Tx{w: w}
	err := w.engine.run(ctx, t, fn)
	t.finish()
	return err
}

// Close stops the engines; queued writes are answered. Closing again does
// nothing.
func (w *Writer) Close() {
	w.closeOnce.Do(func() {
		w.engine.close()
		if w.optimistic != nil {
			w.optimistic.close()
		}
	})
}

// Tx is one write transaction, as a use case sees it.
type Tx struct {
	w  *Writer
	tx *sql.Tx
	// heads are the accounts' heads this transaction holds, as its appends
	// left them.
	heads map[string]store.Head
	// rulesGen are the approval rules generations of the accounts whose
	// heads this transaction locked, read with the head (LockHeadRules) or
	// remembered with it (headmemo.go).
	rulesGen map[string]int64
	// remember are the heads this transaction's appends left, for the
	// writer to remember once its writes are kept (headmemo.go);
	// lockedToWrite the accounts it locked for writes of its own (Lock),
	// whose heads the writer forgets instead.
	remember      map[string]rememberedHead
	lockedToWrite map[string]bool
	// after runs once the transaction committed, in order; finally once it
	// ended, whatever happened.
	after   []func()
	finally []func()
}

// begin makes t the handle of tx.
func (t *Tx) begin(tx *sql.Tx) {
	t.tx, t.heads, t.rulesGen, t.after = tx, nil, nil, nil
	t.remember, t.lockedToWrite = nil, nil
}

// abandon drops what was to happen after a commit that will not come.
func (t *Tx) abandon() { t.after = nil }

func (t *Tx) committed() {
	for _, f := range t.after {
		f()
	}
	t.after = nil
}

func (t *Tx) finish() {
	for _, f := range t.finally {
		f()
	}
	t.finally = nil
}

// SQL is the transaction, for the store's statements that take part in it.
func (t *Tx) SQL() *sql.Tx { return t.tx }

// Lock holds the account's head until the transaction ends and returns it
// as this transaction left it: appends to one account, and every write that
// must be ordered against them, are serialised on it. A write that locks
// the head may change the head row in ways an append does not (its
// generations, its quota), so the writer forgets the head it remembered
// (headmemo.go): the head is read, unless t already holds it.
func (t *Tx) Lock(ctx context.Context, userID string) (store.Head, error) {
	if t.w.memo != nil {
		t.w.memo.forget(userID)
		delete(t.remember, userID)
		if t.lockedToWrite == nil {
			t.lockedToWrite = make(map[string]bool, 1)
		}
		t.lockedToWrite[userID] = true
	}
	return t.lock(ctx, userID)
}

// lock is Lock without forgetting: the head this transaction holds, or the
// row read under the lock with its approval rules generation.
func (t *Tx) lock(ctx context.Context, userID string) (store.Head, error) {
	if h, ok := t.heads[userID]; ok {
		return h, nil
	}
	h, gen, err := t.w.store.LockHeadRules(ctx, t.tx, userID)
	if err != nil {
		return h, err
	}
	t.setHead(userID, h)
	if t.rulesGen == nil {
		t.rulesGen = make(map[string]int64, 1)
	}
	t.rulesGen[userID] = gen
	return h, nil
}

// ApprovalRulesGen is the approval rules generation of an account whose
// head t holds (store.LockHeadRules), as it was when t locked it; ok is
// false when t has not locked it. t's own changes of the account's rules
// after it locked are not counted: it must not read rules by it after them.
func (t *Tx) ApprovalRulesGen(userID string) (gen int64, ok bool) {
	gen, ok = t.rulesGen[userID]
	return gen, ok
}

// SigningKeysChanged tells t that it changed the account's signing keys
// after locking its head: the head it holds no longer knows their generation
// (store.Head.SigningKeysGen), so a later check in t reads the key.
func (t *Tx) SigningKeysChanged(userID string) {
	if h, ok := t.heads[userID]; ok {
		h.SigningKeysGen = 0
		t.heads[userID] = h
	}
}

func (t *Tx) setHead(userID string, h store.Head) {
	if t.heads == nil {
		t.heads = make(map[string]store.Head, 1)
	}
	t.heads[userID] = h
}

// Savepoint runs fn inside a savepoint of the transaction: if fn fails,
// what it wrote (and registered) is undone and the transaction goes on.
func (t *Tx) Savepoint(ctx context.Context, fn func() error) error {
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT attempt"); err != nil {
		return err
	}
	heads, after, remember := maps.Clone(t.heads), len(t.after), maps.Clone(t.remember)
	ferr := fn()
	if ferr == nil {
		_, err := t.tx.ExecContext(ctx, "RELEASE attempt")
		return err
	}
	if _, err := t.tx.ExecContext(ctx, "ROLLBACK TO attempt"); err != nil {
		return errors.Join(ferr, err)
	}
	if _, err := t.tx.ExecContext(ctx, "RELEASE attempt"); err != nil {
		return errors.Join(ferr, err)
	}
	t.heads, t.after, t.remember = heads, t.after[:after], remember
	return ferr
}

// AfterCommit runs fn once the transaction committed (never if it did not),
// before the write is acknowledged. Effects run in commit order on the
// writer's goroutine: fn must be quick and must not block.
func (t *Tx) AfterCommit(fn func()) { t.after = append(t.after, fn) }

// Invalidate tells c that scope is being written: readers bypass it from
// now until the transaction ended, committed or not (readcache.go).
func Invalidate[K comparable, V any](t *Tx, c *ReadCache[K, V], scope string) {
	if c == nil {
		return
	}
	t.finally = append(t.finally, c.begin(scope))
}

// pgEngine runs each write in a PostgreSQL transaction of its own.
type pgEngine struct{ store *store.Store }

func (e pgEngine) run(ctx context.Context, t *Tx, fn func(*Tx) error) error {
	err := e.store.InTx(ctx, func(tx *sql.Tx) error {
		t.begin(tx)
		return fn(t)
	})
	if err != nil {
		t.abandon()
		return err
	}
	t.committed()
	return nil
}

func (pgEngine) close() {}

// errShutDown answers writes that arrive or wait after Close.
var errShutDown = errors.New("the writer is shut down")
