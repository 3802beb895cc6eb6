package writer

// Claims of queued work (the notification outboxes): rows a sender takes,
// acts on outside the database (a send over the network), and settles.

import (
	"context"
	"errors"
	"sync"

	"github.com/auditchain/auditchain/internal/store"
)

// ErrClaimLost is a claim whose lock went with its PostgreSQL session
// before it settled: it settles nothing, and its rows go again.
var ErrClaimLost = errors.New("the outbox claim's lock was lost with its database session; its rows stay queued")

// Claim runs one claim of queued work: claim picks rows in a write
// transaction (reporting whether it took any), work acts on them, and settle
// records the outcome in another. No two claims of one key (an outbox and
// an account) run at once — in this process, and on PostgreSQL across
// replicas — and work runs between the two short writes, holding no
// transaction, so a slow send never holds what other writes need:
//
//   - in a process, claims with the same key run one at a time;
//   - on PostgreSQL the key is also held by a session advisory lock on the
//     replica's claims session (store.TryClaimLock): a claim another
//     replica holds is skipped at once, reporting nothing taken, and a
//     replica that dies releases its keys with its connection, leaving
//     their rows queued for the next claim.
//
// Claims of different keys run side by side. Effects registered with
// AfterCommit run after settle's commit.
func (w *Writer) Claim(ctx context.Context, key string, claim func(*Tx) (bool, error), work func(), settle func(*Tx) error) error {
	unlock := w.claims.lock(key)
	defer unlock()
	var held store.ClaimLock
	if w.store.Dialect == store.Postgres {
		l, ok, err := w.store.TryClaimLock(ctx, key)
		if err != nil || !ok {
			return err
		}
		defer l.Release()
		held = l
	}
	took := false
	if err := w.Write(ctx, func(t *Tx) (err error) {
		took, err = claim(t)
		return err
	}); err != nil || !took {
		return err
	}
	work()
	if w.store.Dialect == store.Postgres && !held.Held() {
		return ErrClaimLost
	}
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
