// Package store is auditchain's only persistence: database/sql over embedded
// SQLite (modernc.org/sqlite, pure Go) or PostgreSQL (pgx). The SQL is shared
// where the databases agree ($N placeholders, BIGINT unix-microsecond times,
// TEXT ids) and native where they differ; each dialect has its own migrations.
package store

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	"modernc.org/sqlite"
)

// Dialect names the database behind a Store.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Store is safe for concurrent use.
type Store struct {
	Dialect Dialect
	// read serves queries; on SQLite it is a pool of read-only WAL readers.
	read *sql.DB
	// write serves transactions. On SQLite it is a single connection whose
	// transactions begin IMMEDIATE, so writers queue in-process instead of
	// failing with SQLITE_BUSY; on PostgreSQL it is the same pool as read.
	write *sql.DB
	// Location describes where the data lives, for the startup banner (no secrets).
	Location string
	// ioFaults counts SQLite connections discarded after a storage fault;
	// writeConns counts connections the SQLite writer opened.
	ioFaults, writeConns atomic.Int64
	// walCkpt checkpoints the WAL off the writer (SQLite; wal_checkpoint.go).
	walCkpt *walCheckpointer
	// noticeCache remembers what decides notices' rows (SQLite; noticecache.go).
	noticeCache *noticeCache
	// behind counts appended rows not yet in search's indexes (SQLite;
	// index_behind.go).
	behind atomic.Int64
	// indexing serialises IndexBehind whole, its counter updates included:
	// a second caller that began after the first committed but before it
	// counted its rows off would count them off again, and a count at or
	// below zero hides the tail from the reads that skip it when empty.
	indexing sync.Mutex
	// sweep is the account the next IndexBehind starts from (held by indexing).
	sweep int64
	// numbers are the accounts' numbers (SQLite; account_numbers.go).
	numbers *accountNumbers
	// inserts caches the texts of batch inserts (events_insert.go).
	inserts insertTexts
	// batch serves AppendAcross (PostgreSQL; append_pg_batch.go): a
	// pool whose sessions plan with index lookups only.
	batch          *sql.DB
	batchFallbacks struct{ refusals, deadlocks, lockTimeouts, other atomic.Int64 }
	// claims holds this replica's outbox claim locks (PostgreSQL; claimlocks.go).
	claims claimSession
	// sqliteDSN opens a connection that may write, beside the pools
	// (SQLite; backup.go).
	sqliteDSN string
}

// IOFaults is how many SQLite connections were given up after a storage fault
// (an I/O error, a full disk, corruption); each was replaced by a fresh one.
// Always 0 on PostgreSQL, whose server handles its own storage.
func (s *Store) IOFaults() int64 { return s.ioFaults.Load() }

// ConnsInUse is how many connections of the pools requests draw on (the
// reader and writer pools, PostgreSQL's batch pool, SQLite's account-number
// pool) are in use now (database/sql's DBStats.InUse): what a request holds
// while it waits shows here (a pending long-poll holds none: issue #38).
func (s *Store) ConnsInUse() int {
	n := 0
	seen := map[*sql.DB]bool{}
	pools := []*sql.DB{s.read, s.write, s.batch}
	if s.numbers != nil {
		pools = append(pools, s.numbers.db)
	}
	for _, db := range pools {
		if db != nil && !seen[db] { // on PostgreSQL reads and writes share one pool
			seen[db] = true
			n += db.Stats().InUse
		}
	}
	return n
}

//go:embed migrations
var migrations embed.FS

// Options tune a Store.
type Options struct {
	// MaxConns bounds the connections of the PostgreSQL pool and of the SQLite
	// reader pool (0: 32 and 8).
	MaxConns int
	// migrateUpTo stops migrations after this version (0: all); only tests
	// set it (OpenAtVersion), to upgrade a database holding data.
	migrateUpTo int64
}

// Open connects to dsn ("sqlite:PATH" or a postgres:// URL), applies pending
// migrations and returns a ready Store.
func Open(ctx context.Context, dsn string) (*Store, error) { return OpenWith(ctx, dsn, Options{}) }

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, o Options) (*Store, error) {
	var s *Store
	var err error
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		s, err = openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"), cmp.Or(o.MaxConns, 8))
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s, err = openPostgres(dsn, cmp.Or(o.MaxConns, 32))
	default:
		return nil, fmt.Errorf("--db must be sqlite:PATH or a postgres:// URL")
	}
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx, o.migrateUpTo); err != nil {
		s.Close()
		return nil, err
	}
	if s.Dialect == SQLite {
		if err := s.countBehind(ctx); err != nil && o.migrateUpTo == 0 {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func openSQLite(ctx context.Context, path string, readers int) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty path")
	}
	// A missing directory is an error, never created here: a typo in --db
	// must not start an empty store (the command creates the default ./data).
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("sqlite: the directory of %s does not exist (create it first; only the default store's ./data is created on first start)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	uri := fileURI(path)
	drv := sqlite.Driver{}
	if err := prepareFile(ctx, &drv, path, uri); err != nil {
		return nil, err
	}
	// WAL with synchronous=FULL survives power loss (docs/performance.md). The busy
	// timeout comes first so that switching to WAL waits for other processes.
	pragmas := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)" +
		// Group commit isolates each request sharing a transaction in a savepoint: keep its sub-journal
		// (and other temporary structures) in memory. Each pool sets its own cache_size below: the
		// driver runs the pragmas sorted by name, so a second cache_size here would not override.
		"&_pragma=temp_store(memory)" +
		// SQLite's own checkpoint runs inside the writer's COMMIT: here it is
		// only the backstop of the background WAL checkpointer (wal_checkpoint.go).
		fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", walAutocheckpointPages) +
		// A WAL that grew past this (a run that outpaced the checkpoints) is
		// cut back to it when it starts over, instead of keeping its size.
		"&_pragma=journal_size_limit(134217728)"
	// The readers cache 64 MiB of pages each. The writer caches 8,192 pages
	// (16 MiB of the 2 KiB pages a new database has): SQLite's page cache
	// scans its whole hash table at the end of most of the writer's
	// transactions while the database is under 1 GiB, at a cost that grows
	// with the pages it holds, and the pages an append writes or reads
	// again (the tips of the B-trees, their upper levels) fit in far fewer
	// (docs/performance.md "2 KiB pages and a smaller writer's cache").
	// The account numbers' readers read a few rows of account_numbers, once
	// per account: a small page cache.
	const readerCache, writerCache, numbersCache = "&_pragma=cache_size(-65536)", "&_pragma=cache_size(8192)", "&_pragma=cache_size(-256)"
	dsn := func(pool string) string { return "file:" + uri + "?" + pragmas + pool }
	st := &Store{Dialect: SQLite, walCkpt: newWALCheckpointer(), noticeCache: &noticeCache{}}
	write := sql.OpenDB(cachingConnector{dsn: dsn(writerCache + "&_txlock=immediate"), driver: &drv, faults: &st.ioFaults, opened: &st.writeConns,
		committed: st.walCkpt.committed, settled: st.noticeCache.writerSettled})
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	read := sql.OpenDB(cachingConnector{dsn: dsn(readerCache + "&_pragma=query_only(1)"), driver: &drv, faults: &st.ioFaults})
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)
	read.SetConnMaxLifetime(0)
	st.read, st.write, st.Location = read, write, "sqlite:"+abs
	st.sqliteDSN = dsn(readerCache)
	ckpt := sql.OpenDB(cachingConnector{dsn: dsn(readerCache), driver: &drv, faults: &st.walCkpt.faults})
	ckpt.SetMaxOpenConns(1)
	ckpt.SetMaxIdleConns(1)
	ckpt.SetConnMaxLifetime(0)
	st.walCkpt.start(ckpt)
	numbers := sql.OpenDB(cachingConnector{dsn: dsn(numbersCache + "&_pragma=query_only(1)"), driver: &drv, faults: &st.ioFaults})
	numbers.SetMaxOpenConns(numberConns)
	numbers.SetMaxIdleConns(numberConns)
	numbers.SetConnMaxLifetime(0)
	st.numbers = &accountNumbers{db: numbers}
	return st, nil
}

func openPostgres(url string, conns int) (*Store, error) {
	// A database that does not answer a connection attempt must not hold a
	// request for the kernel's TCP timeout (minutes): unless the URL sets its
	// own, connecting gives up after connectTimeout.
	if !strings.Contains(url, "connect_timeout=") {
		url = withParam(url, "connect_timeout="+strconv.Itoa(connectTimeoutSeconds))
	}
	// Generic plans for every prepared statement (docs/decisions/postgres-append.md,
	// "Plans"): the append's statements take arrays whose length PostgreSQL's
	// planner only knows for a custom plan, so it never settled on the
	// generic one and planned them again on every execution — for the head
	// read, ten times its execution time. Search, whose best plan depends on
	// its values, is sent with the values inlined (Search) and planned each time.
	// A replica that vanishes without closing its sockets (a host crash, a
	// partition) holds its transaction's row locks — an outbox claim's among
	// them — until the server notices the dead peer: ask the server to probe
	// after a minute idle, so that takes about 90 s, not the system's two hours.
	if !strings.Contains(url, "tcp_keepalives_idle=") {
		url = withParam(url, "tcp_keepalives_idle=60&tcp_keepalives_interval=10&tcp_keepalives_count=3")
	}
	if !strings.Contains(url, "plan_cache_mode=") {
		url = withParam(url, "plan_cache_mode=force_generic_plan")
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	batch, err := sql.Open("pgx", withParam(url, batchSessionParams))
	if err != nil {
		db.Close()
		return nil, err
	}
	batch.SetMaxOpenConns(AppendBatchConns)
	batch.SetMaxIdleConns(AppendBatchConns)
	batch.SetConnMaxIdleTime(5 * time.Minute)
	return &Store{Dialect: Postgres, read: db, write: db, batch: batch, Location: "postgres://" + redactURL(url)}, nil
}

// withParam adds a query parameter to a postgres URL.
func withParam(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// connectTimeoutSeconds bounds a PostgreSQL connection attempt.
const connectTimeoutSeconds = 5

// Redacted is dsn as it may be printed or logged: a sqlite: path as it is,
// a URL as its host and database, never its user or password, and anything
// else as what precedes its first colon.
func Redacted(dsn string) string {
	switch scheme, _, _ := strings.Cut(dsn, ":"); {
	case strings.HasPrefix(dsn, "sqlite:"):
		return dsn
	case strings.Contains(dsn, "://"):
		return scheme + "://" + redactURL(dsn)
	default:
		return scheme + ":…"
	}
}

// DBFlag is the --db value to print for opening this store again (serve's
// first-account hint): the SQLite file as Location names it; for PostgreSQL
// "$AUDITCHAIN_DB", which a shell where it is set expands to the URL, since
// the URL may hold a password and is never printed.
func (s *Store) DBFlag() string {
	if s.Dialect == Postgres {
		return `"$AUDITCHAIN_DB"`
	}
	return s.Location
}

// redactURL keeps host and database of a postgres URL and drops credentials.
func redactURL(url string) string {
	rest := strings.SplitN(url, "://", 2)[1]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if q := strings.Index(rest, "?"); q >= 0 {
		rest = rest[:q]
	}
	return rest
}

// Close releases every connection.
func (s *Store) Close() error {
	var err error
	if s.Dialect == Postgres {
		s.claims.closeClaims()
	}
	if s.walCkpt != nil {
		err = s.walCkpt.close()
	}
	if s.batch != nil {
		err = s.batch.Close()
	}
	if s.numbers != nil {
		err = errors.Join(err, s.numbers.db.Close())
	}
	err = errors.Join(err, s.read.Close())
	if s.write != s.read {
		err = errors.Join(err, s.write.Close())
	}
	return err
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.read.PingContext(ctx) }

// DB returns the read pool, for packages (tests, bench) that inspect rows directly.
func (s *Store) DB() *sql.DB { return s.read }

// WriteDB returns the write handle (the only one that may modify rows on SQLite).
func (s *Store) WriteDB() *sql.DB { return s.write }

// InTx runs fn in a write transaction and commits when fn returns nil. Callers
// acknowledge nothing until InTx has returned nil: that is the commit.
func (s *Store) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// migrationLockID is the PostgreSQL advisory lock that serialises migrations of
// replicas starting together ("auditchn" in ASCII).
const migrationLockID = 0x6175646974636e

// migrate applies the pending migrations numbered up to upTo (0: all of them).
func (s *Store) migrate(ctx context.Context, upTo int64) error {
	dir := "migrations/" + string(s.Dialect)
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })

	conn, err := s.firstConn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	if s.Dialect == SQLite {
		// A migration's statements run in one transaction, so each keeps a
		// statement journal of the pages it changes, in memory under the
		// pool's temp_store: a rewrite of events (migration 039's DROP
		// COLUMN) held the whole table, 1.1 GB of memory for a million
		// events. On disk (SQLite's temporary directory) it is bounded by the
		// file system, as the WAL is (docs/operations.md "Migration 039").
		if _, err := conn.ExecContext(ctx, `PRAGMA temp_store = FILE`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA temp_store = MEMORY`)
	}
	if s.Dialect == Postgres {
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLockID); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLockID)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	// A database migrated by a newer binary is refused: its data may have
	// moved where this binary does not look (migration 011 moved SQLite's
	// quota and machine-less counter into the head row; an older binary
	// would restart both at 0).
	var newest sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if known := lastMigration(entries); newest.Valid && newest.Int64 > known {
		return fmt.Errorf("%w: the database is at schema version %d, this binary knows versions up to %d: run a binary at least as new as the one that migrated it",
			ErrNewerSchema, newest.Int64, known)
	}
	for _, e := range entries {
		version, err := strconv.ParseInt(strings.SplitN(e.Name(), "_", 2)[0], 10, 64)
		if err != nil {
			return fmt.Errorf("migration %s: name must start with a number", e.Name())
		}
		if upTo > 0 && version > upTo {
			break
		}
		body, err := migrations.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return err
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate: begin: %w", err)
		}
		var applied int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, version).Scan(&applied); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate: %w", err)
		}
		if applied > 0 {
			tx.Rollback()
			continue
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, version, time.Now().UnixMicro()); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", e.Name(), err)
		}
	}
	return nil
}

// ErrNewerSchema: the database was migrated by a newer binary.
var ErrNewerSchema = errors.New("database schema is newer than this binary")

// lastMigration is the highest version among the (sorted) migration files.
func lastMigration(entries []fs.DirEntry) int64 {
	if len(entries) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(strings.SplitN(entries[len(entries)-1].Name(), "_", 2)[0], 10, 64)
	return v
}

// firstConn opens the first write connection, retrying as retryBusy does:
// its journal_mode pragma switches a database still in rollback mode (a
// restored backup: VACUUM INTO writes one) to WAL, and another process may be
// doing the same. A new file was switched by prepareFile.
func (s *Store) firstConn(ctx context.Context) (*sql.Conn, error) {
	var conn *sql.Conn
	err := retryBusy(ctx, func() (err error) {
		conn, err = s.write.Conn(ctx)
		return err
	})
	return conn, err
}

// retryBusy runs do until it does not fail with SQLITE_BUSY, 20 more times
// at most, backing off from 5 ms to 500 ms. Switching a SQLite file to WAL
// takes an exclusive lock that does not wait on busy_timeout, so processes
// starting together on one new file retry briefly instead of failing.
func retryBusy(ctx context.Context, do func() error) error {
	delay := 5 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := do()
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || attempt == 20 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// queryAll runs query on q (nil: the read pool) and scans every row with scan.
func queryAll[T any](ctx context.Context, s *Store, q Querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	if q == nil {
		q = s.read
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// IsUniqueViolation reports whether err is a unique-constraint failure on either database.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}

// Querier is what both *sql.DB and *sql.Tx offer.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqlitePageSize is the page size of a database this version creates. An
// append writes whole pages of the B-trees it touches, most of them a
// different page for each append in a commit: 2 KiB pages write 29 % fewer
// bytes per append than 4 KiB, and 1 KiB pages 46 % fewer at 15 % more CPU
// (docs/performance.md "2 KiB pages and a smaller writer's cache").
const sqlitePageSize = 2048

// fileURI is path as the name in a file: URI, where '?' and '#' would end it
// (a test's temp dir "…sqlite#01" opened the shared file "…sqlite"): SQLite
// decodes %HH escapes in URI filenames.
func fileURI(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
}

// prepareFile gives a database that does not exist yet (or is an empty file)
// sqlitePageSize pages and WAL mode before the pools open it. The page size
// is fixed once page 1 is written, which the pools' journal_mode pragma
// would do before their page_size (the driver runs its pragmas sorted by
// name); a database that exists keeps the page size it has. file is the path
// as the OS names it, uri the same path escaped for a file: URI.
func prepareFile(ctx context.Context, drv *sqlite.Driver, file, uri string) error {
	fi, err := os.Stat(file)
	switch {
	case err == nil && fi.Size() > 0:
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlite: %w", err)
	}
	db := sql.OpenDB(cachingConnector{dsn: "file:" + uri + "?_pragma=busy_timeout(10000)" +
		fmt.Sprintf("&_pragma=page_size(%d)", sqlitePageSize), driver: drv})
	defer db.Close() // nothing was written through it that a close could lose
	db.SetMaxOpenConns(1)
	// Processes starting together on one new file: the switch to WAL may
	// meet another's (retryBusy).
	if err := retryBusy(ctx, func() error { _, err := db.ExecContext(ctx, "PRAGMA journal_mode=WAL"); return err }); err != nil {
		return fmt.Errorf("sqlite: create %s: %w", file, err)
	}
	return nil
}
