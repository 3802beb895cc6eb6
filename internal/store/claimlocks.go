package store

// Claim locks across PostgreSQL replicas (docs/decisions/notifications.md
// "Claims"): an outbox claim holds its key — an outbox and an account — in
// a session advisory lock while it sends, so no other replica sends for that
// account meanwhile. Every claim lock of a replica lives on one session of
// the pool, so a replica serving a thousand accounts at once holds one
// connection for them (a transaction per claim held one each), and a
// replica that dies releases them all with its connection.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"sync"
	"time"
)

// claimSession is the one session holding this replica's claim locks,
// taken from the pool while it holds any and given back when it holds none
// (with no lock left on it).
type claimSession struct {
	mu     sync.Mutex
	conn   *sql.Conn
	held   int
	gen    uint64 // bumped when a session is dropped: locks taken on it are gone
	closed bool
}

// ClaimLock is a held claim lock; Release gives it back.
type ClaimLock struct {
	s    *claimSession
	gen  uint64
	a, b int32
}

// releaseTimeout bounds taking and giving back a lock, which run to the
// end even when the claim's context has ended.
const releaseTimeout = 5 * time.Second

// TryClaimLock takes key's claim lock for this replica, or reports false
// at once when another replica holds it. It is for PostgreSQL, whose
// replicas share the outboxes; in one process the caller serialises claims
// of one key itself (a session's advisory locks stack, so this replica's
// own second claim of a key would be granted).
func (s *Store) TryClaimLock(ctx context.Context, key string) (ClaimLock, bool, error) {
	if s.Dialect != Postgres {
		return ClaimLock{}, false, errors.New("store: claim locks are for PostgreSQL")
	}
	a, b := claimKey(key)
	c := &s.claims
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ClaimLock{}, false, errors.New("store: closed")
	}
	// A session the server or the network dropped is found by the first
	// statement: a new one is opened, once. (Locks the dropped one held are
	// gone; their claims find out by their generation.)
	for try := 0; ; try++ {
		if c.conn == nil {
			conn, err := s.write.Conn(ctx)
			if err != nil {
				return ClaimLock{}, false, err
			}
			c.conn = conn
		}
		// The two-int4 form: its keys never meet the bigint keys of
		// migrationLockID. Not cut short by ctx: a statement cancelled
		// midway would leave the session in doubt, and dropping it would
		// drop every other claim's lock with it.
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		var ok bool
		err := c.conn.QueryRowContext(qctx, `SELECT pg_try_advisory_lock($1, $2)`, a, b).Scan(&ok)
		cancel()
		if err != nil {
			c.drop()
			if try == 0 && ctx.Err() == nil {
				continue
			}
			return ClaimLock{}, false, err
		}
		if !ok {
			c.giveBack()
			return ClaimLock{}, false, nil
		}
		c.held++
		return ClaimLock{s: c, gen: c.gen, a: a, b: b}, true, nil
	}
}

// Held reports whether the lock's session is still the one this replica
// keeps: false once a statement found it dropped (its locks went with it).
// It asks the server nothing.
func (l ClaimLock) Held() bool {
	c := l.s
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen == l.gen && c.conn != nil
}

// Release gives the lock back. A lock whose session was dropped meanwhile
// is gone already.
func (l ClaimLock) Release() {
	c := l.s
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != l.gen || c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var ok bool
	if err := c.conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, l.a, l.b).Scan(&ok); err != nil || !ok {
		// Not knowing what the session still holds, drop it: its locks go
		// with it.
		c.drop()
		return
	}
	c.held--
	c.giveBack()
}

// drop closes the session without giving it back to the pool: whatever
// locks it held end with it.
func (c *claimSession) drop() {
	if c.conn != nil {
		_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = c.conn.Close()
	}
	c.conn, c.held = nil, 0
	c.gen++
}

// giveBack returns the session to the pool once it holds no lock.
func (c *claimSession) giveBack() {
	if c.held == 0 && c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// closeClaims drops the session at Store.Close.
func (c *claimSession) closeClaims() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.drop()
}

// claimKey maps key to the two int4 keys of an advisory lock: 64 bits of
// FNV-1a, so two keys share a lock with negligible odds (and then one only
// waits for the other's claim).
func claimKey(key string) (int32, int32) {
	h := fnv.New64a()
	h.Write([]byte(key))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h.Sum64())
	return int32(binary.BigEndian.Uint32(b[:4])), int32(binary.BigEndian.Uint32(b[4:]))
}
