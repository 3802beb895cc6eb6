package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

func sqliteApp(t *testing.T) *App {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := New(st, config.Config{DailyEventQuota: 1000}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(a.Close)
	if _, err := st.WriteDB().Exec(`CREATE TABLE t (v INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return a
}

func count(t *testing.T, a *App) int {
	var n int
	if err := a.Store.DB().QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A job that fails rolls back alone; the others in its transaction commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	a := sqliteApp(t)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.write(context.Background(), func(tx *txn) error {
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
	if got := count(t, a); got != want {
		t.Fatalf("%d rows committed, want %d (failed jobs must leave nothing)", got, want)
	}
}

// A full queue answers 503 append_queue_full at once instead of waiting.
func TestGroupCommitQueueFull(t *testing.T) {
	a := sqliteApp(t)
	a.group.close()
	a.group = newGroupCommitter(a, 2)
	release := make(chan struct{})
	running := make(chan struct{})
	go a.write(context.Background(), func(*txn) error { close(running); <-release; return nil })
	<-running // the writer is busy with the first job
	var wg sync.WaitGroup
	for range 2 { // these fill the queue
		wg.Add(1)
		go func() { defer wg.Done(); a.write(context.Background(), func(*txn) error { return nil }) }()
	}
	for len(a.group.queue) < 2 {
		// wait until both are queued (bounded: the goroutines only enqueue)
	}
	err := a.write(context.Background(), func(*txn) error { return nil })
	var de *domain.Error
	if !errors.As(err, &de) || de.Status != 503 || de.Code != domain.CodeQueueFull || de.RetryAfter < 1 {
		t.Fatalf("err = %v, want 503 append_queue_full with Retry-After", err)
	}
	close(release)
	wg.Wait()
}

// A write is acknowledged only once committed: after write returns, a new
// connection sees it.
func TestGroupCommitAcknowledgesAfterCommit(t *testing.T) {
	a := sqliteApp(t)
	for i := range 50 {
		if err := a.write(context.Background(), func(tx *txn) error {
			_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := count(t, a); got != i+1 {
			t.Fatalf("after %d acknowledged writes a reader sees %d", i+1, got)
		}
	}
}

// A storage fault in one job fails its whole shared transaction: nothing else
// commits through a handle that met an I/O error or a full disk, and no job
// of the batch is acknowledged.
func TestGroupCommitStorageFaultFailsTheWholeBatch(t *testing.T) {
	a := sqliteApp(t)
	ctx := context.Background()
	bigTable(t, a)
	insert := func(v int) func(tx *txn) error {
		return func(tx *txn) error {
			_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, v)
			return err
		}
	}
	full := func(tx *txn) error {
		var pages int
		if err := tx.tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		if _, err := tx.tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1)); err != nil {
			return err
		}
		_, err := tx.tx.Exec(`INSERT INTO big (b) VALUES (randomblob(1000000))`)
		return fmt.Errorf("job's own wrapping: %w", err)
	}
	batch := []*groupJob{
		{ctx: ctx, fn: insert(1), done: make(chan struct{})},
		{ctx: ctx, fn: full, done: make(chan struct{})},
		{ctx: ctx, fn: insert(3), done: make(chan struct{})},
	}
	a.group.run(batch)
	for i, j := range batch {
		<-j.done
		if j.err == nil {
			t.Errorf("job %d acknowledged in a batch that met a storage fault", i)
		}
	}
	if !store.IsStorageFault(batch[1].err) {
		t.Fatalf("the faulting job's error = %v, want the storage fault", batch[1].err)
	}
	if n := count(t, a); n != 0 {
		t.Fatalf("%d rows committed from a batch that met a storage fault", n)
	}
	// The writer carries on, on a fresh connection.
	if err := a.write(ctx, insert(4)); err != nil {
		t.Fatalf("write after the fault: %v", err)
	}
	if n := count(t, a); n != 1 {
		t.Fatalf("rows after recovery = %d, want 1", n)
	}
}

// A fault a job swallows still stops the batch: the writer checks the store's
// fault count before it commits.
func TestGroupCommitStorageFaultSwallowedByAJobStillFailsTheBatch(t *testing.T) {
	a := sqliteApp(t)
	ctx := context.Background()
	bigTable(t, a)
	swallow := func(tx *txn) error {
		var pages int
		if err := tx.tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		tx.tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1))
		tx.tx.Exec(`INSERT INTO big (b) VALUES (randomblob(1000000))`) // error dropped
		_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES (2)`)
		return err
	}
	batch := []*groupJob{
		{ctx: ctx, fn: swallow, done: make(chan struct{})},
	}
	a.group.run(batch)
	<-batch[0].done
	if batch[0].err == nil {
		t.Fatal("a batch that met a storage fault was acknowledged")
	}
	if n := count(t, a); n != 0 {
		t.Fatalf("%d rows committed from a batch that met a storage fault", n)
	}
}

// A job alone in its transaction runs without a savepoint: when it fails,
// the transaction is rolled back, so its writes are gone all the same, and a
// storage fault fails it as in a shared batch; the writer goes on.
func TestGroupCommitJobAloneFailsWithNothingWritten(t *testing.T) {
	a := sqliteApp(t)
	ctx := context.Background()
	bigTable(t, a)
	runAlone := func(fn func(tx *txn) error) error {
		j := &groupJob{ctx: ctx, fn: fn, done: make(chan struct{})}
		a.group.run([]*groupJob{j})
		<-j.done
		return j.err
	}
	refused := errors.New("refused after writing")
	if err := runAlone(func(tx *txn) error {
		if _, err := tx.tx.Exec(`INSERT INTO t (v) VALUES (1)`); err != nil {
			return err
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the job's own", err)
	}
	if n := count(t, a); n != 0 {
		t.Fatalf("%d rows committed by a lone job that failed", n)
	}
	err := runAlone(func(tx *txn) error {
		var pages int
		if err := tx.tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		if _, err := tx.tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1)); err != nil {
			return err
		}
		if _, err := tx.tx.Exec(`INSERT INTO t (v) VALUES (2)`); err != nil {
			return err
		}
		_, err := tx.tx.Exec(`INSERT INTO big (b) VALUES (randomblob(1000000))`)
		return err
	})
	if !store.IsStorageFault(err) {
		t.Fatalf("a lone job's storage fault: %v, want it", err)
	}
	if n := count(t, a); n != 0 {
		t.Fatalf("%d rows committed by a lone job that met a storage fault", n)
	}
	for v := 3; v <= 4; v++ {
		if err := runAlone(func(tx *txn) error {
			_, err := tx.tx.Exec(`INSERT INTO t (v) VALUES ($1)`, v)
			return err
		}); err != nil {
			t.Fatalf("lone write %d: %v", v, err)
		}
	}
	if n := count(t, a); n != 2 {
		t.Fatalf("rows after two lone writes = %d, want 2", n)
	}
}

func bigTable(t *testing.T, a *App) {
	t.Helper()
	if _, err := a.Store.WriteDB().Exec(`CREATE TABLE big (b BLOB)`); err != nil {
		t.Fatal(err)
	}
}

// Only calls of cacheable tools carry a dedup key: the gate looks no other
// tool up by it, and a key would only cost an index entry.
func TestOnlyCacheableToolCallsCarryADedupKey(t *testing.T) {
	a := sqliteApp(t)
	str := func(s string) *string { return &s }
	seq := int64(0)
	for _, c := range []struct {
		eventType, tool string
		wantKey         bool
	}{
		{"tool_call", "read_file", true},
		{"tool_call", "grep", true},
		{"tool_call", "bash", false},
		{"tool_call", "write_file", false},
		{"note", "read_file", false},
	} {
		in := domain.EventInput{EventID: str("e-" + c.tool), EventType: str(c.eventType), Sequence: &seq,
			Tool: str(c.tool), Raw: json.RawMessage(`{"tool_input":{"path":"/etc/hosts"}}`)}
		e, err := a.prepareEvent(Principal{UserID: "u"}, &in, "rest", a.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := e.SemanticKey != nil; got != c.wantKey {
			t.Errorf("%s of %s: semantic key set %v, want %v", c.eventType, c.tool, got, c.wantKey)
		}
	}
}
