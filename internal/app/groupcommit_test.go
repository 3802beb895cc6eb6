package app

import (
	"context"
	"errors"
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
