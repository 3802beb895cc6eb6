package store

// The notice context, remembered on SQLite (docs/decisions/notifications.md
// "Rows"). A notice is written inside the transaction of the change that
// causes it (a revoke's), on the one SQLite writer, and reading what decides
// its rows — the account's newest row, its email, its endpoints, its
// preferences of the type — is a statement of several index probes there,
// for every notice. They change rarely, and on SQLite every change made by this
// process goes through the writer's one connection and the store functions
// that write them, which keep this cache exact: a notice's insert raises
// the account's newest stamp; a preference, an endpoint registered or
// deleted drops the account's entry. What the cache cannot see:
//
//   - another process's commit (the admin commands write while the server
//     runs): SQLite's PRAGMA data_version on the writer's connection changes
//     when another connection committed, and is read once per write
//     transaction that uses the cache; a change drops everything;
//   - writes undone (a transaction or any savepoint rolled back on the
//     writer's connection: a group commit's job, a batch's attempt): what
//     was read or raised inside them may never have been committed;
//     everything is dropped;
//   - a new writer connection (after a storage fault): everything is dropped.
//
// PostgreSQL has no such cache: several replicas write one database. Its
// write engine remembers its last reads instead, and InsertNoticeRowsIf
// checks them in the statement (internal/app/writer/notice.go).

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// maxCachedNoticeAccounts bounds the accounts remembered; past it the cache
// starts again.
const maxCachedNoticeAccounts = 100_000

type noticeCache struct {
	// ends counts the writer connection's transactions ended (and its
	// savepoints rolled back): the cache checks data_version once per
	// transaction.
	ends atomic.Int64

	mu sync.Mutex
	// checkedAt is ends when data_version was last read, version what it
	// was, conns the writer's connections opened by then.
	checkedAt, version, conns int64
	checked                   bool
	accounts                  map[string]*cachedNoticeAccount
}

// cachedNoticeAccount is what the cache knows of one account.
type cachedNoticeAccount struct {
	newest int64 // the created_at of its newest row
	email  *string
	types  map[string]cachedNoticeType
}

// cachedNoticeType is an account's endpoints and preferences of one type.
type cachedNoticeType struct {
	subscribed bool
	prefs      map[string]Preference
}

// writerSettled is the writer connection's hook: a transaction ended, or a
// savepoint was rolled back; writes undone drop everything.
func (c *noticeCache) writerSettled(undone bool) {
	c.ends.Add(1)
	if undone {
		c.drop()
	}
}

// drop forgets every account.
func (c *noticeCache) drop() {
	c.mu.Lock()
	c.accounts, c.checked = nil, false
	c.mu.Unlock()
}

// forget drops userID's entry.
func (c *noticeCache) forget(userID string) {
	c.mu.Lock()
	delete(c.accounts, userID)
	c.mu.Unlock()
}

// valid checks, once per writer transaction, that no other connection
// committed since the cache was filled, and drops everything if one did.
// tx is the writer's transaction.
func (s *Store) noticeCacheValid(ctx context.Context, tx *sql.Tx) error {
	c := s.noticeCache
	ends := c.ends.Load()
	c.mu.Lock()
	fresh := c.checked && c.checkedAt == ends
	c.mu.Unlock()
	if fresh {
		return nil
	}
	var version int64
	if err := tx.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&version); err != nil {
		return err
	}
	conns := s.writeConns.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checked || c.version != version || c.conns != conns {
		c.accounts = nil
	}
	c.checked, c.checkedAt, c.version, c.conns = true, ends, version, conns
	return nil
}

// cachedNoticeContext is NoticeContext from the cache, when it holds all of it.
func (c *noticeCache) context(userID, typ string) (NoticeContext, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.accounts[userID]
	if a == nil {
		return NoticeContext{}, false
	}
	t, ok := a.types[typ]
	if !ok {
		return NoticeContext{}, false
	}
	return NoticeContext{LastCreatedAt: a.newest, Email: a.email, Subscribed: t.subscribed, Prefs: t.prefs}, true
}

// remember keeps what NoticeContext read for userID and typ.
func (c *noticeCache) remember(userID, typ string, nc NoticeContext) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checked {
		return
	}
	if c.accounts == nil || len(c.accounts) >= maxCachedNoticeAccounts {
		c.accounts = make(map[string]*cachedNoticeAccount)
	}
	a := c.accounts[userID]
	if a == nil {
		a = &cachedNoticeAccount{types: make(map[string]cachedNoticeType, 1)}
		c.accounts[userID] = a
	}
	a.newest, a.email = max(a.newest, nc.LastCreatedAt), nc.Email
	a.types[typ] = cachedNoticeType{subscribed: nc.Subscribed, prefs: nc.Prefs}
}

// stamped raises userID's newest stamp to at, rows having been written up to it.
func (c *noticeCache) stamped(userID string, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.accounts[userID]; a != nil {
		a.newest = max(a.newest, at)
	}
}

// noticesStamped raises the notice cache's newest stamps to rows'.
func (s *Store) noticesStamped(rows []Notification) {
	if s.noticeCache == nil {
		return
	}
	for i, r := range rows {
		if i+1 == len(rows) || rows[i+1].UserID != r.UserID {
			s.noticeCache.stamped(r.UserID, r.CreatedAt)
		}
	}
}

// forgetNotices drops userID's entry of the notice cache: a write changes
// what decides its notices' rows.
func (s *Store) forgetNotices(userID string) {
	if s.noticeCache != nil {
		s.noticeCache.forget(userID)
	}
}
