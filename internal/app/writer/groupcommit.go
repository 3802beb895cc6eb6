package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// Group commit (SQLite). SQLite has one writer, and every commit costs an fsync
// (1–2 ms on real disks), so one transaction per request caps writes at a few
// hundred per second. Instead, write requests queue here and one goroutine runs
// them in shared transactions: each request's work runs inside its own
// SAVEPOINT (unless it is alone in the transaction, which it then rolls back),
// so a request that fails rolls back alone while the others commit,
// and every request is answered only after the transaction holding its writes
// has committed. Requests see the writes of those before them in the same
// transaction, so per-account continuity stays exact.

const (
	// groupQueueSize bounds the requests waiting for the writer; beyond it
	// writes answer 503 append_queue_full with Retry-After.
	groupQueueSize = 4096
	// groupMaxBatch bounds how many requests share one transaction.
	groupMaxBatch = 256
	// indexIdle is how long the writer waits for a request, with appended
	// rows not yet in search's indexes, before it indexes them all
	// (store/index_behind.go). Under load the writer is never idle that
	// long, and indexes a chunk between two commits once
	// store.IndexBehindRows rows wait.
	indexIdle = 10 * time.Millisecond
)

type groupJob struct {
	ctx  context.Context
	fn   func(t *Tx) error
	t    *Tx
	err  error
	done chan struct{}
}

type groupCommitter struct {
	store *store.Store
	queue chan *groupJob
	stop  chan struct{}
	ended chan struct{}
	log   *slog.Logger
	// memo is the heads the jobs' appends left (headmemo.go): remembered
	// as each job's writes are kept, forgotten when their transaction fails.
	memo *headMemo
	// indexFailure is the text of the last IndexBehind error logged, so a
	// failure that repeats (every idle tick) is logged once, and again
	// after a success.
	indexFailure string
}

func newGroupCommitter(st *store.Store, queueSize int, log *slog.Logger, memo *headMemo) *groupCommitter {
	g := &groupCommitter{store: st, queue: make(chan *groupJob, queueSize), stop: make(chan struct{}), ended: make(chan struct{}),
		log: log, memo: memo}
	go g.loop()
	return g
}

var errQueueFull = &domain.Error{Code: domain.CodeQueueFull,
	Detail: "the write queue is full; retry shortly", RetryAfter: 1}

// run queues fn and waits until its transaction committed or failed (the
// engine of SQLite).
func (g *groupCommitter) run(ctx context.Context, t *Tx, fn func(t *Tx) error) error {
	j := &groupJob{ctx: ctx, fn: fn, t: t, done: make(chan struct{})}
	select {
	case g.queue <- j:
	case <-g.stop:
		return errShutDown
	default:
		return errQueueFull
	}
	// Once queued, the job's outcome must be awaited even if the client goes
	// away: it may already be committed.
	<-j.done
	return j.err
}

func (g *groupCommitter) close() {
	close(g.stop)
	<-g.ended
}

func (g *groupCommitter) loop() {
	defer close(g.ended)
	batch := make([]*groupJob, 0, groupMaxBatch)
	ctx := context.Background()
	for {
		var idle <-chan time.Time
		var timer *time.Timer
		if g.store.EventsBehind() > 0 {
			timer = time.NewTimer(indexIdle)
			idle = timer.C
		}
		select {
		case <-g.stop:
			// Answer whatever is still queued.
			for {
				select {
				case j := <-g.queue:
					j.err = errShutDown
					close(j.done)
				default:
					return
				}
			}
		case j := <-g.queue:
			batch = append(batch[:0], j)
		case <-idle:
			// The whole tail, a chunk at a time, while no request waits.
			// Errors leave the rows marked: search reads them all the same,
			// and a later call indexes them.
			for g.store.EventsBehind() > 0 && len(g.queue) == 0 {
				if !g.indexBehind(ctx) {
					break
				}
			}
			continue
		}
		if timer != nil {
			timer.Stop()
		}
	fill:
		for len(batch) < groupMaxBatch {
			select {
			case j := <-g.queue:
				batch = append(batch, j)
			default:
				break fill
			}
		}
		// Between two transactions: finish a background checkpoint's work
		// (store/wal_checkpoint.go) so that the WAL can start over.
		g.store.CatchUpWALCheckpoint(ctx)
		g.commit(batch)
		// Under load, one chunk between two commits once enough rows wait:
		// a pause of a few milliseconds (store.IndexBehindChunk).
		if g.store.EventsBehind() >= store.IndexBehindRows {
			g.indexBehind(ctx)
		}
	}
}

// indexBehind indexes a chunk of the tail and reports whether it did. A
// failure leaves the rows marked (search and every read by sequence read
// them all the same; a later call indexes them) and is logged once until a
// call succeeds: a failure that persists stops the tail from shrinking.
func (g *groupCommitter) indexBehind(ctx context.Context) bool {
	_, err := g.store.IndexBehind(ctx)
	if err == nil {
		g.indexFailure = ""
		return true
	}
	if msg := err.Error(); msg != g.indexFailure {
		g.indexFailure = msg
		g.log.Error("the writer could not index the rows appended behind it; they stay in the tail, which search reads",
			"err", err, "rows_behind", g.store.EventsBehind())
	}
	return false
}

// commit executes one shared transaction. A failure of BEGIN or COMMIT fails every
// job in it (their writes are not acknowledged); a job's own error rolls back
// only its savepoint, or the transaction when the job is alone in it.
func (g *groupCommitter) commit(batch []*groupJob) {
	ctx := context.Background()
	finish := func(err error) {
		if err != nil {
			// The heads remembered as its jobs' writes were kept did not
			// commit.
			g.memo.forgetAll()
		}
		for _, j := range batch {
			if j.err == nil && err != nil {
				j.err = err
			}
			close(j.done)
		}
	}
	faultsBefore := g.store.IOFaults()
	tx, err := g.store.WriteDB().BeginTx(ctx, nil)
	if err != nil {
		finish(fmt.Errorf("begin: %w", err))
		return
	}
	// A job alone in its transaction needs no savepoint: its failure rolls
	// the whole transaction back. That is two statements fewer, and no page
	// copied to the savepoint journal, for every write that arrives alone
	// (a sequential client's every append).
	alone := len(batch) == 1
	for _, j := range batch {
		if j.ctx.Err() != nil {
			j.err = j.ctx.Err() // abandoned before it ran: nothing written
			continue
		}
		if !alone {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT job"); err != nil {
				j.err = err
				continue
			}
		}
		j.t.begin(tx)
		if err := j.fn(j.t); err != nil {
			j.err = err
			j.t.abandon()
			if alone {
				tx.Rollback()
				finish(nil)
				return
			}
			if store.IsStorageFault(err) {
				// SQLite may keep the transaction open after an I/O error or a
				// full disk, but its handle can no longer be trusted: commit
				// nothing more through it. The whole batch fails unacknowledged
				// and the store replaces the connection (stmtcache.go).
				tx.Rollback()
				for _, other := range batch {
					other.t.abandon()
				}
				finish(fmt.Errorf("storage fault in a shared transaction: %w", err))
				return
			}
			if _, rbErr := tx.ExecContext(ctx, "ROLLBACK TO job"); rbErr != nil {
				// The transaction can no longer be trusted: fail everyone.
				tx.Rollback()
				finish(fmt.Errorf("rollback to savepoint: %w", rbErr))
				return
			}
		}
		if alone {
			j.t.kept()
			continue
		}
		if _, err := tx.ExecContext(ctx, "RELEASE job"); err != nil {
			tx.Rollback()
			finish(fmt.Errorf("release savepoint: %w", err))
			return
		}
		if j.err == nil {
			// The jobs after this one see its writes: so does the memo.
			j.t.kept()
		}
	}
	if g.store.IOFaults() != faultsBefore {
		// A storage fault met while this batch ran, even one a job handled
		// itself: the same rule as above, nothing commits through that handle.
		tx.Rollback()
		for _, j := range batch {
			j.t.abandon()
		}
		finish(errors.New("storage fault while the shared transaction ran"))
		return
	}
	if err := tx.Commit(); err != nil {
		// The outcome is unknown to the client (5xx); a retry of the same
		// event_id is answered idempotently if the commit did land.
		for _, j := range batch {
			j.t.abandon()
		}
		finish(fmt.Errorf("commit: %w", err))
		return
	}
	// After-commit effects (stream frames first of all) run in commit
	// order, before anyone is answered.
	for _, j := range batch {
		if j.err == nil {
			j.t.committed()
		}
	}
	finish(nil)
}
