package writer

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// effectsWriter is a Writer over a fresh store of dsn with a table t.
func effectsWriter(t *testing.T, dsn string) *Writer {
	t.Helper()
	st := storetest.Open(t, dsn)
	w := New(st, Options{})
	t.Cleanup(w.Close)
	if _, err := st.WriteDB().Exec(`CREATE TABLE t (v BIGINT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return w
}

func insertV(v int) func(t *Tx) error {
	return func(t *Tx) error {
		_, err := t.SQL().Exec(`INSERT INTO t (v) VALUES ($1)`, v)
		return err
	}
}

func stored(t *testing.T, st *store.Store, v int) bool {
	t.Helper()
	ok, err := isStored(st, v)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// isStored reports whether a reader sees the row v (committed).
func isStored(st *store.Store, v int) (bool, error) {
	var n int
	err := st.DB().QueryRow(`SELECT count(*) FROM t WHERE v = $1`, v).Scan(&n)
	return n == 1, err
}

// An after-commit effect runs once its write committed — a reader then sees
// the write — and before the write is acknowledged; a write that failed runs
// none of its effects, whether it shared a transaction with others or not.
func TestAfterCommitRunsOnlyOnceCommitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := effectsWriter(t, dsn)
		var mu sync.Mutex
		ran := map[int]bool{}
		var wg sync.WaitGroup
		errs := make([]error, 120)
		for i := range errs {
			wg.Go(func() {
				errs[i] = w.Write(context.Background(), func(tx *Tx) error {
					if err := insertV(i)(tx); err != nil {
						return err
					}
					tx.AfterCommit(func() {
						committed, err := isStored(w.store, i)
						mu.Lock()
						ran[i] = committed && err == nil
						mu.Unlock()
					})
					if i%3 == 0 {
						return errors.New("refused after writing")
					}
					return nil
				})
				if errs[i] == nil {
					mu.Lock()
					_, done := ran[i]
					mu.Unlock()
					if !done {
						errs[i] = errors.New("acknowledged before its after-commit effect ran")
					}
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			mu.Lock()
			committed, effect := ran[i]
			mu.Unlock()
			switch {
			case i%3 == 0 && (err == nil || effect):
				t.Fatalf("write %d refused: err %v, effect ran %v", i, err, effect)
			case i%3 != 0 && (err != nil || !committed):
				t.Fatalf("write %d: err %v; effect ran %v seeing the row committed %v", i, err, effect, committed)
			}
		}
	})
}

// A cache mark taken inside a write holds from then until the write ended,
// committed or not: readers bypass the cache meanwhile, and a read that
// raced the write is not kept.
func TestInvalidateHoldsUntilTheWriteEnded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := effectsWriter(t, dsn)
		c := newReadCache[string, int](4, 4)
		_, ticket, _ := c.Get("acct", "k") // a reader that misses before the write
		for _, fail := range []bool{false, true} {
			err := w.Write(context.Background(), func(tx *Tx) error {
				Invalidate(tx, c, "acct")
				c.Put("acct", ticket, "k", 1) // the racing reader's result
				if _, _, hit := c.Get("acct", "k"); hit {
					return errors.New("the cache answered while its scope was being written")
				}
				if fail {
					return errors.New("refused")
				}
				return insertV(7)(tx)
			})
			if fail != (err != nil) {
				t.Fatalf("write (failing %v): %v", fail, err)
			}
			if _, _, hit := c.Get("acct", "k"); hit {
				t.Fatalf("a read that raced the write (failing %v) was kept", fail)
			}
		}
		_, fresh, _ := c.Get("acct", "k")
		c.Put("acct", fresh, "k", 2)
		if v, _, hit := c.Get("acct", "k"); !hit || v != 2 {
			t.Fatalf("after the writes ended the cache does not keep a fresh read: %v, %v", v, hit)
		}
	})
}

// A savepoint's failure undoes what it wrote and registered; the
// transaction goes on and commits the rest.
func TestSavepointUndoesOnlyItsOwn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		w := effectsWriter(t, dsn)
		var effects []int
		err := w.Write(context.Background(), func(tx *Tx) error {
			if err := insertV(1)(tx); err != nil {
				return err
			}
			tx.AfterCommit(func() { effects = append(effects, 1) })
			failed := errors.New("attempt failed")
			if err := tx.Savepoint(context.Background(), func() error {
				if err := insertV(2)(tx); err != nil {
					return err
				}
				tx.AfterCommit(func() { effects = append(effects, 2) })
				return failed
			}); !errors.Is(err, failed) {
				return err
			}
			return tx.Savepoint(context.Background(), func() error {
				tx.AfterCommit(func() { effects = append(effects, 3) })
				return insertV(3)(tx)
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if !stored(t, w.store, 1) || stored(t, w.store, 2) || !stored(t, w.store, 3) {
			t.Fatal("the failed savepoint's row was kept, or another row lost")
		}
		if len(effects) != 2 || effects[0] != 1 || effects[1] != 3 {
			t.Fatalf("effects %v, want [1 3]", effects)
		}
	})
}
