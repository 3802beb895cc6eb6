package writer

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// watchedBatcher replaces w's batcher with one of workers workers whose
// queued appends and sent statements (with their sizes) the test hears of.
func watchedBatcher(w *Writer, workers int) (b *pgBatcher, queued chan struct{}, sending chan int) {
	w.optimistic.batch.close()
	b = newPGBatcher(w.store, time.Minute, workers, 16)
	w.optimistic.batch = b
	queued, sending = make(chan struct{}, 16), make(chan int, 16)
	b.queued, b.sending = func() { queued <- struct{}{} }, func(n int) { sending <- n }
	return b, queued, sending
}

// Appends of different accounts that arrive while a statement is in flight
// share the next statement, and each is acknowledged once it committed: one
// worker, its first statement held on a row lock, three appends queued
// behind it — two statements in all, of one and three appends, every chain
// intact.
func TestPGAppendsQueuedBehindAStatementShareTheNext(t *testing.T) {
	r := newReplicaPair(t)
	a := r.writer
	_, queued, sending := watchedBatcher(a, 1)

	chains := []*testChain{r.newChain("x@example.com"), r.newChain("b@example.com"), r.newChain("c@example.com"),
		r.newChain("d@example.com")}
	for _, c := range chains {
		r.append(c, nil) // the first event takes the locked path
		r.append(c, nil) // the second a statement of its own
		<-queued
		if n := <-sending; n != 1 {
			t.Fatalf("a lone append sent in a statement of %d", n)
		}
	}

	// Hold the first account's head: its next statement waits on the lock.
	tx := holdHead(t, r, chains[0].userID)
	type result struct {
		user string
		err  error
	}
	done := make(chan result, len(chains))
	appendIn := func(c *testChain) {
		in := c.next("evt-third")
		go func() {
			_, err := a.Append(r.ctx, clientAppend(in))
			done <- result{c.userID, err}
		}()
	}
	appendIn(chains[0])
	<-queued
	if n := <-sending; n != 1 {
		t.Fatalf("first statement with %d appends, want 1", n)
	}
	for _, c := range chains[1:] {
		appendIn(c)
		<-queued
	}
	select {
	case res := <-done:
		t.Fatalf("append of %s answered (%v) while the statement before it waits", res.user, res.err)
	default:
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := <-sending; n != 3 {
		t.Fatalf("second statement with %d appends, want the 3 queued", n)
	}
	for range chains {
		if res := <-done; res.err != nil {
			t.Fatalf("append of %s: %v", res.user, res.err)
		}
	}
	if st, n := batches(a); st != 6 || n != 8 {
		t.Fatalf("PGBatches = %d statements, %d appends; want 6 and 8", st, n)
	}
	for _, c := range chains {
		intact(t, a.store, c.userID, 3)
	}
}

// The queue is bounded: an append beyond it answers 503 append_queue_full
// at once, a caller that gives up gets its context's error, and appends
// still queued at shutdown are answered, not left waiting.
func TestPGBatcherBoundsAndShutdown(t *testing.T) {
	b := newPGBatcher(nil, time.Minute, 0, 1) // no worker: the queue only fills
	ca := store.Append{Event: &store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: "u"}}}}
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	queued := make(chan struct{}, 1)
	b.queued = func() { queued <- struct{}{} }
	go func() {
		_, err := b.submit(ctx, ca)
		waiting <- err
	}()
	<-queued
	other := store.Append{Event: &store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: "v"}}}}
	if _, err := b.submit(context.Background(), other); !errors.Is(err, errQueueFull) {
		t.Fatalf("submit beyond the queue: %v, want append_queue_full", err)
	}
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("submit whose caller gave up: %v, want context.Canceled", err)
	}

	// The abandoned append is still queued; shutdown answers it.
	j := <-b.queue
	b.queue <- j
	b.close()
	<-j.done
	if !errors.Is(j.err, errAppendsShutDown) {
		t.Fatalf("append queued at shutdown: %v, want errAppendsShutDown", j.err)
	}
	if _, err := b.submit(context.Background(), other); !errors.Is(err, errAppendsShutDown) {
		t.Fatalf("submit after shutdown: %v, want errAppendsShutDown", err)
	}
}

// An append whose caller gave up before its statement was sent is not sent:
// the caller gets its context's error and the event is not stored.
func TestPGAppendOfACallerGoneIsNotSent(t *testing.T) {
	r := newReplicaPair(t)
	a := r.writer
	c := r.newChain("gone@example.com")
	r.append(c, nil)
	r.append(c, nil) // the head is cached: the next append reads nothing first
	before, _ := batches(a)
	ctx, cancel := context.WithCancel(r.ctx)
	cancel()
	_, err := a.Append(ctx, clientAppend(c.next("evt-gone")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("append of a caller gone: %v, want context.Canceled", err)
	}
	r.append(c, nil) // sent after the abandoned one, by the same workers
	if after, _ := batches(a); after != before+1 {
		t.Fatalf("%d statements sent, want 1 (the abandoned append not among them)", after-before)
	}
	if _, err := a.store.EventByID(r.ctx, nil, c.userID, "evt-gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the abandoned event: %v, want not stored", err)
	}
}

// An append of an account that already has one pending is sent alone and at
// once, not queued behind it (a hot account would otherwise be served one
// statement at a time, each reaching a head its client read long before):
// with no worker at all, the first append waits in the queue and the second
// is stored.
func TestPGAppendOfABusyAccountGoesAlone(t *testing.T) {
	r := newReplicaPair(t)
	a := r.writer
	c := r.newChain("busy@example.com")
	r.append(c, nil)
	r.append(c, nil) // cached
	_, queued, _ := watchedBatcher(a, 0)

	ctx, cancel := context.WithCancel(r.ctx)
	first := make(chan error, 1)
	in := c.next("evt-first")
	go func() {
		_, err := a.Append(ctx, clientAppend(in))
		first <- err
	}()
	<-queued
	r.append(c, nil) // the second: stored while the first waits in the queue
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued append: %v, want context.Canceled", err)
	}
	if st, n := batches(a); st != 1 || n != 1 {
		t.Fatalf("PGBatches = %d, %d; want the one direct statement", st, n)
	}
	intact(t, a.store, c.userID, 3)
}

// queueThenRun queues the appends of chains (through a batcher with no
// worker) and then starts one worker, which takes them all in one batch.
// It returns each append's answer, in chains' order.
func queueThenRun(t *testing.T, r *replicaPair, chains []*testChain) []chan error {
	t.Helper()
	a := r.writer
	b, queued, sending := watchedBatcher(a, 0)
	var answers []chan error
	for _, c := range chains {
		in := c.next("evt-batched")
		done := make(chan error, 1)
		answers = append(answers, done)
		go func() {
			_, err := a.Append(r.ctx, clientAppend(in))
			done <- err
		}()
		<-queued
	}
	b.workers.Go(b.work)
	if n := <-sending; n != len(chains) {
		t.Fatalf("one statement of %d appends, want %d", n, len(chains))
	}
	return answers
}

// When the batch statement fails for one append's sake, the others are each
// sent alone and answered as stored; only that one fails.
func TestPGBatchFailureIsEachAppendsOwn(t *testing.T) {
	r := newReplicaPair(t)
	a := r.writer
	chains := []*testChain{r.newChain("a@example.com"), r.newChain("b@example.com"), r.newChain("c@example.com")}
	for _, c := range chains {
		r.append(c, nil)
		r.append(c, nil) // cached
	}
	// A stray Merkle row where c's next leaf (2) writes its own.
	if _, err := a.store.WriteDB().ExecContext(r.ctx, `INSERT INTO merkle_hashes (account, idx, hash) VALUES ($1, $2, $3)`,
		chains[2].userID, tlog.StoredHashIndex(0, 2), make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	answers := queueThenRun(t, r, chains)
	for i, done := range answers {
		err := <-done
		if i == 2 {
			if err == nil {
				t.Fatal("the append whose Merkle row was taken was acknowledged")
			}
			continue
		}
		if err != nil {
			t.Fatalf("append of %s failed with its neighbour's: %v", chains[i].userID, err)
		}
	}
	if _, _, _, other := a.store.BatchFallbacks(); other != 1 {
		t.Fatalf("batch fallbacks = %d, want the one", other)
	}
	for _, c := range chains[:2] {
		intact(t, a.store, c.userID, 3)
	}
}

// One account's held head neither fails nor delays the answers of the other
// appends of its batch: they are answered while it is still held, and it is
// stored once released.
func TestPGBatchWithAHeldHeadAnswersTheOthers(t *testing.T) {
	r := newReplicaPair(t)
	a := r.writer
	chains := []*testChain{r.newChain("x@example.com"), r.newChain("y@example.com")}
	for _, c := range chains {
		r.append(c, nil)
		r.append(c, nil) // cached
	}
	tx := holdHead(t, r, chains[0].userID)
	answers := queueThenRun(t, r, chains)
	if err := <-answers[1]; err != nil {
		t.Fatalf("y's append: %v", err)
	}
	select {
	case err := <-answers[0]:
		t.Fatalf("x's append answered (%v) while its head is held", err)
	default:
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-answers[0]; err != nil {
		t.Fatalf("x's append once released: %v", err)
	}
	if _, _, lockTimeouts, _ := a.store.BatchFallbacks(); lockTimeouts != 1 {
		t.Fatalf("lock timeouts = %d, want 1", lockTimeouts)
	}
}

// holdHead locks the account's head row in a transaction of its own, so that
// the next statement that needs it waits; rolling tx back lets it go.
func holdHead(t *testing.T, r *replicaPair, userID string) *sql.Tx {
	t.Helper()
	tx, err := r.writer.store.WriteDB().BeginTx(r.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(r.ctx, `SELECT 1 FROM chain_heads WHERE user_id = $1 FOR UPDATE`, userID); err != nil {
		t.Fatal(err)
	}
	return tx
}

// batches is the statements w sent for optimistic appends and the appends
// they carried.
func batches(w *Writer) (statements, appends int64) {
	s := w.Stats()
	return s.BatchStatements, s.BatchedAppends
}
