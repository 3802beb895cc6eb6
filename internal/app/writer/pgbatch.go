package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/internal/store"
)

// Group commit on PostgreSQL (docs/decisions/postgres-append.md "Batches").
// Every statement costs PostgreSQL an executor start-up, a commit with its WAL
// flush, a protocol exchange and a process wake-up, whatever it writes; on a
// small machine those are most of an append's cost. The optimistic appends
// of a replica therefore queue here, and a few workers send them in
// statements of up to pgBatchMax appends of distinct accounts
// (store.AppendAcross). Each append is acknowledged only after the
// statement holding it committed; an append whose head moved writes nothing
// and does not stop the others. An append of an account that already has one
// pending is not queued but sent alone at once (submit): batching serves many
// accounts, and a hot account's appends gain nothing from it.
const (
	// pgBatchWorkers is how many batch statements a replica has in flight:
	// enough to keep PostgreSQL's cores busy while a batch's answer travels;
	// one connection of the store's batch pool each.
	pgBatchWorkers = store.AppendBatchConns
	// pgBatchMax bounds the appends of one statement.
	pgBatchMax = 64
	// pgBatchQueue bounds the appends waiting for a worker; beyond it an
	// append answers 503 append_queue_full with Retry-After, like SQLite's.
	pgBatchQueue = 4096
)

type pgAppendJob struct {
	// ctx is the caller's: an append whose caller gave up before its
	// statement was sent is not sent.
	ctx  context.Context
	ca   store.Append
	out  store.Appended
	err  error
	done chan struct{}
}

type pgBatcher struct {
	store   *store.Store
	timeout time.Duration
	queue   chan *pgAppendJob
	stop    chan struct{}
	workers sync.WaitGroup
	// mu orders submit's enqueue before close (no append is queued after
	// the final drain) and guards pending: per account, the appends
	// submitted and not yet answered.
	mu      sync.Mutex
	closed  bool
	pending map[string]int
	// statements and appends count the batch statements sent and the
	// appends they carried (PGBatches).
	statements, appends atomic.Int64
	// queued and sending, when set (tests), hear of every append queued and
	// of every statement about to be sent, with its number of appends.
	queued  func()
	sending func(n int)
}

func newPGBatcher(st *store.Store, timeout time.Duration, workers, queue int) *pgBatcher {
	b := &pgBatcher{store: st, timeout: timeout, queue: make(chan *pgAppendJob, queue), stop: make(chan struct{}),
		pending: make(map[string]int)}
	for range workers {
		b.workers.Go(b.work)
	}
	return b
}

var errAppendsShutDown = errors.New("the append workers are shut down")

// submit queues ca and waits until the statement holding it committed or
// failed, or until ctx ends (the append's outcome is then unknown to the
// caller, as when a statement is cut by its context: a retry of the same
// event_id is answered as a replay if it was stored).
func (b *pgBatcher) submit(ctx context.Context, ca store.Append) (store.Appended, error) {
	user := ca.Event.UserID
	j := &pgAppendJob{ctx: ctx, ca: ca, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return store.Appended{}, errAppendsShutDown
	}
	busy := b.pending[user] > 0
	if !busy {
		select {
		case b.queue <- j:
		default:
			b.mu.Unlock()
			return store.Appended{}, errQueueFull
		}
	}
	b.pending[user]++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if b.pending[user]--; b.pending[user] == 0 {
			delete(b.pending, user)
		}
		b.mu.Unlock()
	}()
	if busy {
		// The account already has an append on its way: this one could not
		// share its statement, and queued behind it, it would reach the head
		// later than its client read it (a hot account: many clients, one
		// tip; half the rate through the queue). It goes alone, at once, as
		// appends did before batches; the head's row lock orders it.
		b.statements.Add(1)
		b.appends.Add(1)
		return b.store.AppendEvent(ctx, nil, ca)
	}
	if b.queued != nil {
		b.queued()
	}
	select {
	case <-j.done:
		return j.out, j.err
	case <-ctx.Done():
		return store.Appended{}, fmt.Errorf("append: %w", ctx.Err())
	}
}

func (b *pgBatcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.workers.Wait()
	b.drain()
}

func (b *pgBatcher) work() {
	batch := make([]*pgAppendJob, 0, pgBatchMax)
	for {
		var first *pgAppendJob
		select {
		case <-b.stop:
			return
		case first = <-b.queue:
		}
		if !first.alive() {
			continue
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < pgBatchMax {
			select {
			case j := <-b.queue:
				switch held := holding(batch, j.ca.Event.UserID); {
				case !j.alive():
				case held != nil && held.ca.Expect.EventCount == j.ca.Expect.EventCount:
					// Both extend the same head: only one can. Answer this
					// one now as if its head moved (nothing written; its
					// caller reads the head again) rather than send it to
					// lose (a hot account: many clients, one tip).
					j.out.HeadMoved = true
					close(j.done)
				case held != nil:
					// A second append of an account cannot share the
					// statement: it goes alone, now, as before batches —
					// queued behind this worker's statements it would
					// serialise a hot account's appends on one worker.
					b.workers.Go(func() { b.run([]*pgAppendJob{j}) })
				default:
					batch = append(batch, j)
				}
			default:
				break fill
			}
		}
		b.run(batch)
	}
}

// alive reports whether the append's caller still waits; if not, the append
// is answered with its context's error and not sent.
func (j *pgAppendJob) alive() bool {
	if err := j.ctx.Err(); err != nil {
		j.err = fmt.Errorf("append: %w", err)
		close(j.done)
		return false
	}
	return true
}

func holding(batch []*pgAppendJob, userID string) *pgAppendJob {
	for _, j := range batch {
		if j.ca.Event.UserID == userID {
			return j
		}
	}
	return nil
}

// drain answers the appends still queued at shutdown: none was sent.
func (b *pgBatcher) drain() {
	for {
		select {
		case j := <-b.queue:
			j.err = errAppendsShutDown
			close(j.done)
		default:
			return
		}
	}
}

func (b *pgBatcher) run(batch []*pgAppendJob) {
	if b.sending != nil {
		b.sending(len(batch))
	}
	b.statements.Add(1)
	b.appends.Add(int64(len(batch)))
	if len(batch) == 1 {
		b.alone(batch[0])
		return
	}
	// The statement is not cut when one caller gives up: the others wait on
	// it. It is bounded like a request.
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	cas := make([]store.Append, len(batch))
	for i, j := range batch {
		cas[i] = j.ca
	}
	outs, err := b.store.AppendAcross(ctx, cas)
	if errors.Is(err, store.ErrBatchRolledBack) {
		// Nothing was written. Each append goes alone, at once, and is
		// answered when its own statement is: one append's refusal, error or
		// held head neither fails nor delays the others, nor this worker.
		for _, j := range batch {
			b.workers.Go(func() { b.alone(j) })
		}
		return
	}
	for i, j := range batch {
		if err != nil {
			j.err = err
		} else {
			j.out = outs[i]
		}
		close(j.done)
	}
}

// alone sends one append by itself and answers it.
func (b *pgBatcher) alone(j *pgAppendJob) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	j.out, j.err = b.store.AppendEvent(ctx, nil, j.ca)
	close(j.done)
}
