package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// sqliteWriter is a Writer over a fresh SQLite store with a table t.
func sqliteWriter(t *testing.T) *Writer {
	t.Helper()
	st := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	w := New(st, Options{})
	t.Cleanup(w.Close)
	if _, err := st.WriteDB().Exec(`CREATE TABLE t (v INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return w
}

func count(t *testing.T, w *Writer) int {
	var n int
	if err := w.store.DB().QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// job is a group-commit job for fn, as Write queues it.
func job(ctx context.Context, fn func(*Tx) error) *groupJob {
	return &groupJob{ctx: ctx, fn: fn, t: &Tx{}, done: make(chan struct{})}
}

// A job that fails rolls back alone; the others in its transaction commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	w := sqliteWriter(t)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Write(context.Background(), func(tx *Tx) error {
				if _, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, i); err != nil {
					return err
				}
				if i%3 == 0 {
					return errors.New("refused after writing")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	want := 0
	for i, err := range errs {
		if (i%3 == 0) != (err != nil) {
			t.Fatalf("job %d: err %v", i, err)
		}
		if err == nil {
			want++
		}
	}
	if got := count(t, w); got != want {
		t.Fatalf("%d rows committed, want %d (failed jobs must leave nothing)", got, want)
	}
}

// A full queue answers 503 append_queue_full at once instead of waiting.
func TestGroupCommitQueueFull(t *testing.T) {
	w := sqliteWriter(t)
	w.engine.close()
	g := newGroupCommitter(w.store, 2, w.log, w.memo)
	w.engine = g
	release := make(chan struct{})
	running := make(chan struct{})
	go w.Write(context.Background(), func(*Tx) error { close(running); <-release; return nil })
	<-running // the writer is busy with the first job
	var wg sync.WaitGroup
	for range 2 { // these fill the queue
		wg.Add(1)
		go func() { defer wg.Done(); w.Write(context.Background(), func(*Tx) error { return nil }) }()
	}
	for len(g.queue) < 2 {
		// wait until both are queued (bounded: the goroutines only enqueue)
	}
	err := w.Write(context.Background(), func(*Tx) error { return nil })
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeQueueFull || de.RetryAfter < 1 {
		t.Fatalf("err = %v, want 503 append_queue_full with Retry-After", err)
	}
	close(release)
	wg.Wait()
}

// A write is acknowledged only once committed: after write returns, a new
// connection sees it.
func TestGroupCommitAcknowledgesAfterCommit(t *testing.T) {
	w := sqliteWriter(t)
	for i := range 50 {
		if err := w.Write(context.Background(), func(tx *Tx) error {
			_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := count(t, w); got != i+1 {
			t.Fatalf("after %d acknowledged writes a reader sees %d", i+1, got)
		}
	}
}

// A storage fault in one job fails its whole shared transaction: nothing else
// commits through a handle that met an I/O error or a full disk, and no job
// of the batch is acknowledged.
func TestGroupCommitStorageFaultFailsTheWholeBatch(t *testing.T) {
	w := sqliteWriter(t)
	ctx := context.Background()
	bigTable(t, w)
	insert := func(v int) func(tx *Tx) error {
		return func(tx *Tx) error {
			_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, v)
			return err
		}
	}
	full := func(tx *Tx) error {
		return fmt.Errorf("job's own wrapping: %w", fillTheDisk(tx))
	}
	batch := []*groupJob{
		job(ctx, insert(1)),
		job(ctx, full),
		job(ctx, insert(3)),
	}
	w.engine.(*groupCommitter).commit(batch)
	for i, j := range batch {
		<-j.done
		if j.err == nil {
			t.Errorf("job %d acknowledged in a batch that met a storage fault", i)
		}
	}
	if !store.IsStorageFault(batch[1].err) {
		t.Fatalf("the faulting job's error = %v, want the storage fault", batch[1].err)
	}
	if n := count(t, w); n != 0 {
		t.Fatalf("%d rows committed from a batch that met a storage fault", n)
	}
	// The writer carries on, on a fresh connection.
	if err := w.Write(ctx, insert(4)); err != nil {
		t.Fatalf("write after the fault: %v", err)
	}
	if n := count(t, w); n != 1 {
		t.Fatalf("rows after recovery = %d, want 1", n)
	}
}

// A fault a job swallows still stops the batch: the writer checks the store's
// fault count before it commits.
func TestGroupCommitStorageFaultSwallowedByAJobStillFailsTheBatch(t *testing.T) {
	w := sqliteWriter(t)
	ctx := context.Background()
	bigTable(t, w)
	swallow := func(tx *Tx) error {
		fillTheDisk(tx) // error dropped
		_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES (2)`)
		return err
	}
	batch := []*groupJob{
		job(ctx, swallow),
	}
	w.engine.(*groupCommitter).commit(batch)
	<-batch[0].done
	if batch[0].err == nil {
		t.Fatal("a batch that met a storage fault was acknowledged")
	}
	if n := count(t, w); n != 0 {
		t.Fatalf("%d rows committed from a batch that met a storage fault", n)
	}
}

// A job alone in its transaction runs without a savepoint: when it fails,
// the transaction is rolled back, so its writes are gone all the same, and a
// storage fault fails it as in a shared batch; the writer goes on.
func TestGroupCommitJobAloneFailsWithNothingWritten(t *testing.T) {
	w := sqliteWriter(t)
	ctx := context.Background()
	bigTable(t, w)
	runAlone := func(fn func(tx *Tx) error) error {
		j := job(ctx, fn)
		w.engine.(*groupCommitter).commit([]*groupJob{j})
		<-j.done
		return j.err
	}
	refused := errors.New("refused after writing")
	if err := runAlone(func(tx *Tx) error {
		if _, err := tx.tx.Exec(`INSERT INTO t (v) VALUES (1)`); err != nil {
			return err
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the job's own", err)
	}
	if n := count(t, w); n != 0 {
		t.Fatalf("%d rows committed by a lone job that failed", n)
	}
	err := runAlone(func(tx *Tx) error {
		if _, err := tx.tx.Exec(`INSERT INTO t (v) VALUES (2)`); err != nil {
			return err
		}
		return fillTheDisk(tx)
	})
	if !store.IsStorageFault(err) {
		t.Fatalf("a lone job's storage fault: %v, want it", err)
	}
	if n := count(t, w); n != 0 {
		t.Fatalf("%d rows committed by a lone job that met a storage fault", n)
	}
	for v := 3; v <= 4; v++ {
		if err := runAlone(func(tx *Tx) error {
			_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, v)
			return err
		}); err != nil {
			t.Fatalf("lone write %d: %v", v, err)
		}
	}
	if n := count(t, w); n != 2 {
		t.Fatalf("rows after two lone writes = %d, want 2", n)
	}
}

// fillTheDisk caps the store at one page more than it holds and writes a
// megabyte into big (bigTable): SQLite's "database or disk is full", a
// storage fault, inside tx.
func fillTheDisk(tx *Tx) error {
	var pages int
	if err := tx.tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		return err
	}
	if _, err := tx.tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1)); err != nil {
		return err
	}
	_, err := tx.tx.Exec(`INSERT INTO big (b) VALUES (randomblob(1000000))`)
	return err
}

func bigTable(t *testing.T, w *Writer) {
	t.Helper()
	if _, err := w.store.WriteDB().Exec(`CREATE TABLE big (b BLOB)`); err != nil {
		t.Fatal(err)
	}
}

// Appended rows wait outside search's indexes while requests keep coming,
// and the writer indexes them once it has waited indexIdle for a request
// (store/index_behind.go); meanwhile search finds them all the same.
func TestGroupCommitIndexesBehindWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
		w := New(st, Options{})
		defer w.Close()
		ctx := context.Background()
		time.Sleep(2 * indexIdle) // what the store's last run left: nothing
		synctest.Wait()
		if n := st.EventsBehind(); n != 0 {
			t.Fatalf("EventsBehind on an idle new store = %d", n)
		}
		c := &testChain{userID: "u-idle"}
		for i := range 3 {
			e := c.next(fmt.Sprintf("evt-%d", i))
			out, err := w.Append(ctx, clientAppend(e))
			if err != nil {
				t.Fatal(err)
			}
			h := out.Event.PayloadHash
			c.prev, c.seq = &h, c.seq+1
		}
		// No time passed: the three rows are not indexed yet, and found.
		if n := st.EventsBehind(); n != 3 {
			t.Fatalf("EventsBehind after 3 appends = %d, want 3", n)
		}
		found := func() int {
			got, err := st.Search(ctx, store.SearchFilter{UserID: c.userID, EventTypes: []string{"tool_call"}, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			return len(got)
		}
		if n := found(); n != 3 {
			t.Fatalf("search before indexing found %d events, want 3", n)
		}
		time.Sleep(indexIdle + time.Millisecond)
		synctest.Wait()
		var tail int
		if err := st.DB().QueryRow(`SELECT count(*) FROM events_tail`).Scan(&tail); err != nil {
			t.Fatal(err)
		}
		if n := st.EventsBehind(); n != 0 || tail != 0 {
			t.Fatalf("after %v idle: EventsBehind %d, %d rows in the tail; want both 0", indexIdle, n, tail)
		}
		if n := found(); n != 3 {
			t.Fatalf("search after indexing found %d events, want 3", n)
		}
	})
}
