package writer

// Claims of queued work (the notification outboxes): rows a sender takes,
// acts on outside the database (a send over the network), and settles.

import (
	"context"
	"database/sql"
	"sync"

	"github.com/auditchain/auditchain/internal/store"
)

// Claim runs one claim of queued work: claim picks rows in a write
// transaction (reporting whether it took any), work acts on them, and settle
// records the outcome. No two claims hold one row at once — in this process,
// or on PostgreSQL across replicas — and a claimer that dies mid-work
// leaves its rows as they were, free at once for the next claim:
//
//   - on PostgreSQL, claim, work and settle share one transaction, whose
//     row locks (the store's FOR UPDATE SKIP LOCKED) keep other replicas'
//     claims off the rows until it commits, or until its connection dies;
//   - on SQLite, which one process owns, claims with the same key run one at
//     a time, and work runs between two short writes, so that a slow send
//     never holds the one write transaction every other write needs.
//
// key names what claim takes (an outbox and an account): claims of
// different keys run side by side. Effects registered with AfterCommit run
// after settle's commit.
func (w *Writer) Claim(ctx context.Context, key string, claim func(*Tx) (bool, error), work func(), settle func(*Tx) error) error {
	if w.store.Dialect == store.Postgres {
		t := &Tx{w: w}
		err := w.store.InTx(ctx, func(tx *sql.Tx) error {
			t.begin(tx)
			took, err := claim(t)
			if err != nil || !took {
				return err
			}
			work()
			return settle(t)
		})
		if err != nil {
			t.abandon()
		} else {
			t.committed()
		}
		t.finish()
		return err
	}
	unlock := w.claims.lock(key)
	defer unlock()
	took := false
	if err := w.Write(ctx, func(t *Tx) (err error) {
		took, err = claim(t)
		return err
	}); err != nil || !took {
		return err
	}
	work()
	return w.Write(ctx, settle)
}

// claimLocks serialises claims of one key within a process.
type claimLocks struct {
	mu    sync.Mutex
	locks map[string]*claimLock
}

type claimLock struct {
	sync.Mutex
	users int
}

func (c *claimLocks) lock(key string) (unlock func()) {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = make(map[string]*claimLock)
	}
	l := c.locks[key]
	if l == nil {
		l = &claimLock{}
		c.locks[key] = l
	}
	l.users++
	c.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if l.users--; l.users == 0 {
			delete(c.locks, key)
		}
		c.mu.Unlock()
	}
}
