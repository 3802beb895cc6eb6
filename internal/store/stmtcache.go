package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite via database/sql parses every statement anew on each call (the driver
// has no statement cache), and on the single writer every append waits for
// that parsing. cachingConnector wraps the driver's connections so each
// connection prepares a single-statement query once and reuses it. A cached
// statement whose rows are still open is never re-executed (that would reset
// the open rows): a second, uncached statement serves the nested call.
//
// Statements run without their context's cancellation: the driver answers a
// cancelled context with sqlite3_interrupt, which can roll back the whole
// transaction — on the group-commit writer that would fail every request
// sharing it because one client went away. database/sql still refuses to
// start a statement whose context is already done.

// stmtCacheLimit bounds each connection's statements. When it is reached the
// least recently used one gives way: the statement texts of bulk inserts vary
// with the batch size, and without eviction a connection's first few hundred
// texts would stay cached for its whole life, crowding out the hot ones.
const stmtCacheLimit = 256

type cachingConnector struct {
	dsn    string
	driver driver.Driver
	// faults counts connections given up after a storage fault (Store.IOFaults);
	// opened counts connections opened, so tests can see a replacement.
	faults, opened *atomic.Int64
	// committed, when set (the writer's connections), hears of every commit
	// with the WAL frames the connection wrote since the last one
	// (wal_checkpoint.go counts them).
	committed func(frames int64)
	// settled, when set (the writer's connections), hears of every
	// transaction's end and every savepoint rolled back; undone: writes
	// were undone (a rollback, a failed COMMIT, a ROLLBACK TO).
	settled func(undone bool)
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	if c.opened != nil {
		c.opened.Add(1)
	}
	return &cachingConn{Conn: conn, stmts: map[string]*cachedStmt{}, connector: c}, nil
}

// A connection that met a storage fault is never used again (docs/reliability.md:
// "never continues on a poisoned handle"). After a failed fsync the kernel may
// have dropped the dirty pages it could not write, and a later fsync on the same
// descriptors can report success for data that never reached the disk; SQLite's
// connection may also hold a page cache that no longer matches the file. So the
// statement's error goes to its caller (the request fails, nothing is
// acknowledged) and database/sql replaces the connection: the new one opens the
// files afresh and recovers from the WAL, which still holds every committed frame
// that was not checkpointed.
func (c *cachingConn) note(err error) error {
	if err == nil || c.poisoned.Load() {
		return err
	}
	if IsStorageFault(err) {
		c.poisoned.Store(true)
		if c.connector.faults != nil {
			c.connector.faults.Add(1)
		}
	}
	return err
}

// errPoisoned refuses every statement on a connection after its storage
// fault. It matters inside a transaction: after SQLITE_FULL or an I/O error
// SQLite may have rolled the whole transaction back, and a later statement on
// the same connection would then run, and commit, on its own.
var errPoisoned = errors.New("sqlite: connection refused after a storage fault")

// IsStorageFault reports whether err is SQLite meeting an I/O error, a full
// disk or corruption. The connection that returned it is discarded, and a
// transaction that met it must not commit anything else (app's group commit
// rolls the whole batch back): its handle can no longer be trusted.
func IsStorageFault(err error) bool {
	if errors.Is(err, errPoisoned) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

func (c cachingConnector) Driver() driver.Driver { return c.driver }

type cachingConn struct {
	driver.Conn
	mu    sync.Mutex // a driver.Conn is used by one goroutine at a time; this guards close
	stmts map[string]*cachedStmt
	uses  uint64 // statements taken from the cache, a clock for LRU eviction
	// poisoned is set by a storage fault; database/sql then discards the
	// connection (IsValid, ResetSession) instead of reusing it.
	poisoned  atomic.Bool
	connector cachingConnector
}

type cachedStmt struct {
	stmt driver.Stmt
	busy bool   // rows of this statement are open
	used uint64 // cachingConn.uses when last taken, for eviction
}

// cacheable reports whether query is a single statement worth keeping.
func cacheable(query string) bool {
	q := strings.TrimSpace(query)
	q = strings.TrimSuffix(q, ";")
	return !strings.Contains(q, ";")
}

func (c *cachingConn) stmt(ctx context.Context, query string) (*cachedStmt, bool, error) {
	if cs, ok := c.stmts[query]; ok && !cs.busy {
		c.uses++
		cs.used = c.uses
		return cs, true, nil
	}
	pc, ok := c.Conn.(driver.ConnPrepareContext)
	if !ok {
		return nil, false, driver.ErrSkip
	}
	st, err := pc.PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	cs := &cachedStmt{stmt: st}
	if _, exists := c.stmts[query]; exists || (len(c.stmts) >= stmtCacheLimit && !c.evictLeastRecentlyUsed()) {
		return cs, false, nil // serve this call only
	}
	c.uses++
	cs.used = c.uses
	c.stmts[query] = cs
	return cs, true, nil
}

// evictLeastRecentlyUsed closes the cached statement used longest ago whose
// rows are not open, and reports whether there was one.
func (c *cachingConn) evictLeastRecentlyUsed() bool {
	var oldest string
	var found *cachedStmt
	for q, cs := range c.stmts {
		if !cs.busy && (found == nil || cs.used < found.used) {
			oldest, found = q, cs
		}
	}
	if found == nil {
		return false
	}
	delete(c.stmts, oldest)
	found.stmt.Close()
	return true
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.execContext(ctx, query, args)
	if strings.HasPrefix(query, "ROLLBACK TO ") {
		c.settle(true) // even if it failed: what the savepoint held is in doubt
	}
	return res, c.note(err)
}

func (c *cachingConn) execContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.poisoned.Load() {
		return nil, errPoisoned
	}
	ctx = context.WithoutCancel(ctx)
	if !cacheable(query) {
		if ex, ok := c.Conn.(driver.ExecerContext); ok {
			return ex.ExecContext(ctx, query, args)
		}
		return nil, driver.ErrSkip
	}
	cs, cached, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if !cached {
		defer cs.stmt.Close()
	}
	ex, ok := cs.stmt.(driver.StmtExecContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	return ex.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.queryContext(ctx, query, args)
	if err != nil {
		return nil, c.note(err)
	}
	return rows, nil
}

func (c *cachingConn) queryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.poisoned.Load() {
		return nil, errPoisoned
	}
	ctx = context.WithoutCancel(ctx)
	if !cacheable(query) {
		if qc, ok := c.Conn.(driver.QueryerContext); ok {
			return qc.QueryContext(ctx, query, args)
		}
		return nil, driver.ErrSkip
	}
	cs, cached, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	qs, ok := cs.stmt.(driver.StmtQueryContext)
	if !ok {
		if !cached {
			cs.stmt.Close()
		}
		return nil, driver.ErrSkip
	}
	rows, err := qs.QueryContext(ctx, args)
	if err != nil {
		if !cached {
			cs.stmt.Close()
		}
		return nil, err
	}
	cs.busy = true
	return &cachedRows{Rows: rows, cs: cs, owned: !cached, conn: c}, nil
}

// cachedRows releases its statement for reuse (or closes an uncached one).
type cachedRows struct {
	driver.Rows
	cs    *cachedStmt
	owned bool
	conn  *cachingConn
}

func (r *cachedRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err != nil && err != io.EOF {
		return r.conn.note(err)
	}
	return err
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.cs.busy = false
	if r.owned {
		err = errors.Join(err, r.cs.stmt.Close())
	}
	return err
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if pc, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return pc.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.poisoned.Load() {
		return nil, errPoisoned
	}
	var tx driver.Tx
	var err error
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		tx, err = c.Conn.Begin() //nolint:staticcheck // fallback for drivers without BeginTx
	}
	if err != nil {
		return nil, c.note(err)
	}
	return watchedTx{Tx: tx, conn: c}, nil
}

// watchedTx notes a storage fault met by COMMIT or ROLLBACK.
type watchedTx struct {
	driver.Tx
	conn *cachingConn
}

func (t watchedTx) Commit() error {
	if err := t.conn.note(t.Tx.Commit()); err != nil {
		t.conn.settle(true)
		return err
	}
	t.conn.reportFrames()
	t.conn.settle(false)
	return nil
}
func (t watchedTx) Rollback() error {
	defer t.conn.settle(true)
	return t.conn.note(t.Tx.Rollback())
}

func (c *cachingConn) settle(undone bool) {
	if c.connector.settled != nil {
		c.connector.settled(undone)
	}
}

// reportFrames passes the pages this connection wrote since it last did to
// its connector's committed. In WAL mode SQLite's count of written cache pages
// (SQLITE_DBSTATUS_CACHE_WRITE) is the frames appended to the WAL; pages
// written by statements outside an explicit transaction are counted with the
// next commit.
func (c *cachingConn) reportFrames() {
	if c.connector.committed == nil {
		return
	}
	st, ok := c.Conn.(sqlite.DBStatus)
	if !ok {
		return
	}
	if n, _, err := st.Status(sqlite.DBStatusCacheWrite, true); err == nil && n > 0 {
		c.connector.committed(int64(n))
	}
}

func (c *cachingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *cachingConn) ResetSession(ctx context.Context) error {
	if c.poisoned.Load() {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *cachingConn) IsValid() bool {
	if c.poisoned.Load() {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// CheckNamedValue passes the argument types the store binds as they are, or
// dereferenced, before database/sql's default conversion sees them: that one
// takes *string and *int64 (ten of an event row's 21 values) through
// reflection, and a 500-event batch binds 10,500 values on the single writer.
// The result is what the default would give. (The read pool's connections are
// cachingConns too.)
func (c *cachingConn) CheckNamedValue(nv *driver.NamedValue) error {
	switch v := nv.Value.(type) {
	case nil, int64, string, []byte, float64, bool, time.Time:
		return nil
	case *string:
		if v == nil {
			nv.Value = nil
		} else {
			nv.Value = *v
		}
		return nil
	case *int64:
		if v == nil {
			nv.Value = nil
		} else {
			nv.Value = *v
		}
		return nil
	case int:
		nv.Value = int64(v)
		return nil
	}
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *cachingConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, cs := range c.stmts {
		errs = append(errs, cs.stmt.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.Conn.Close())...)
}
