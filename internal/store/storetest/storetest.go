// Package storetest runs the same tests on every store: SQLite always, and
// PostgreSQL whenever AUDITCHAIN_TEST_POSTGRES holds a URL. Each test gets an
// isolated database: a fresh SQLite file, or a fresh PostgreSQL database that is
// dropped when the test ends.
//
// A fresh database already holds the current schema: it is a copy of a
// template that the migrations built once, so that a test does not spend its
// setup re-running every migration (under the race detector, half a second on
// SQLite). The SQLite template is built once per test binary and kept in
// memory. The PostgreSQL template is a database on the server named after a
// digest of the migrations (ac_tmpl_…), built by the first test binary that
// needs it and kept for later runs, like a build cache; it refuses connections,
// and dropping it is always safe (ALTER DATABASE … IS_TEMPLATE false, then
// DROP DATABASE): the next run builds it again. Tests of the migrations
// themselves take EmptyDSN.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/auditchain/auditchain/internal/store"
)

// PostgresEnv names the environment variable holding the PostgreSQL admin URL.
const PostgresEnv = "AUDITCHAIN_TEST_POSTGRES"

// Backend is one store kind under test.
type Backend string

const (
	SQLite   Backend = "sqlite"
	Postgres Backend = "postgres"
)

// Each runs fn once per available backend as a subtest named after it.
func Each(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	t.Run(string(SQLite), func(t *testing.T) { fn(t, DSN(t, SQLite)) })
	t.Run(string(Postgres), func(t *testing.T) { fn(t, DSN(t, Postgres)) })
}

// EachEmpty is Each with empty databases (EmptyDSN).
func EachEmpty(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	t.Run(string(SQLite), func(t *testing.T) { fn(t, EmptyDSN(t, SQLite)) })
	t.Run(string(Postgres), func(t *testing.T) { fn(t, EmptyDSN(t, Postgres)) })
}

// EachStore is Each with the store opened (and closed at cleanup).
func EachStore(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	Each(t, func(t *testing.T, dsn string) { fn(t, Open(t, dsn)) })
}

// DSN returns the data source of a new database of backend b holding the
// current schema and nothing else: what opening an empty one makes of it. On
// PostgreSQL without AUDITCHAIN_TEST_POSTGRES the test is skipped, saying so.
func DSN(t testing.TB, b Backend) string {
	t.Helper()
	switch b {
	case SQLite:
		path := filepath.Join(t.TempDir(), "auditchain.db")
		file, err := sqliteTemplate()
		if err == nil {
			err = os.WriteFile(path, file, 0o644)
		}
		if err != nil {
			t.Fatalf("SQLite template: %v", err)
		}
		return "sqlite:" + path
	case Postgres:
		return freshPostgres(t, adminURL(t), true)
	}
	t.Fatalf("unknown backend %q", b)
	return ""
}

// EmptyDSN returns the data source of a new, empty database of backend b (for
// SQLite, a path where no file exists yet), for tests of the migrations.
func EmptyDSN(t testing.TB, b Backend) string {
	t.Helper()
	switch b {
	case SQLite:
		return "sqlite:" + filepath.Join(t.TempDir(), "auditchain.db")
	case Postgres:
		return freshPostgres(t, adminURL(t), false)
	}
	t.Fatalf("unknown backend %q", b)
	return ""
}

// Open opens dsn (migrations applied) and closes it when the test ends.
func Open(t testing.TB, dsn string) *store.Store {
	t.Helper()
	// Small pools: tests open many stores (replicas) on one PostgreSQL server.
	s, err := store.OpenWith(context.Background(), dsn, store.Options{MaxConns: 6})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func adminURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(PostgresEnv)
	if admin == "" {
		t.Skip("PostgreSQL tests skipped: set " + PostgresEnv + " to a postgres:// URL (CI always does)")
	}
	return admin
}

// migrate opens dsn, which applies every migration, and closes it.
func migrate(dsn string) error {
	s, err := store.OpenWith(context.Background(), dsn, store.Options{MaxConns: 1})
	if err != nil {
		return err
	}
	return s.Close()
}

var sqliteTmpl struct {
	once sync.Once
	file []byte
	err  error
}

// sqliteTemplate returns the bytes of a SQLite file the migrations built,
// built on first use. Closing the store checkpoints its write-ahead log into
// the file and removes it, so the file alone is the database.
func sqliteTemplate() ([]byte, error) {
	sqliteTmpl.once.Do(func() {
		dir, err := os.MkdirTemp("", "auditchain-storetest-")
		if err != nil {
			sqliteTmpl.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "template.db")
		if err := migrate("sqlite:" + path); err != nil {
			sqliteTmpl.err = err
			return
		}
		if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
			sqliteTmpl.err = fmt.Errorf("the template's write-ahead log (%d bytes) outlived its store", fi.Size())
			return
		}
		sqliteTmpl.file, sqliteTmpl.err = os.ReadFile(path)
	})
	return sqliteTmpl.file, sqliteTmpl.err
}

var pgTmpl struct {
	mu   sync.Mutex
	name string // built (or found) by this process; "" before
}

// freshPostgres creates a database (dropped when the test ends), from the
// migrated template when migrated is set.
func freshPostgres(t testing.TB, admin string, migrated bool) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	name := randomName("ac_test_")
	create := func() error {
		if !migrated {
			_, err := db.Exec("CREATE DATABASE " + name)
			return err
		}
		tmpl, err := postgresTemplate(db, u)
		if err == nil {
			_, err = db.Exec("CREATE DATABASE " + name + " TEMPLATE " + tmpl)
		}
		return err
	}
	err = create()
	if pe := (*pgconn.PgError)(nil); migrated && errors.As(err, &pe) && pe.Code == "3D000" {
		// The template was dropped since this process found it: build it again.
		pgTmpl.mu.Lock()
		pgTmpl.name = ""
		pgTmpl.mu.Unlock()
		err = create()
	}
	if err != nil {
		db.Close()
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return withDatabase(u, name)
}

// postgresTemplate returns the name of the migrated template database, which
// it builds when the server has none for these migrations.
func postgresTemplate(db *sql.DB, admin *url.URL) (string, error) {
	pgTmpl.mu.Lock()
	defer pgTmpl.mu.Unlock()
	if pgTmpl.name != "" {
		return pgTmpl.name, nil
	}
	digest, err := migrationsDigest()
	if err != nil {
		return "", err
	}
	name := templatePrefix + digest
	if err := ensureTemplate(db, admin, name); err != nil {
		return "", err
	}
	pgTmpl.name = name
	return name, nil
}

// templatePrefix begins the template's name (tests name a template of their own).
var templatePrefix = "ac_tmpl_"

// ensureTemplate builds the migrated template database name unless the server
// has it. Test binaries running at once serialize on a session advisory lock
// keyed by the name: two sessions altering one pg_database row at once fail
// with "tuple concurrently updated" (XX000), so only the lock holder checks,
// builds and marks. The build still happens under a name of its own and is
// renamed into place, so a binary killed mid-build leaves no half-built
// template behind the real name.
func ensureTemplate(db *sql.DB, admin *url.URL, name string) error {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext($1))`, name); err != nil {
		return fmt.Errorf("lock the template %s: %w", name, err)
	}
	defer conn.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, name)
	var found bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&found); err != nil || found {
		return err
	}
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&found); err != nil {
		return err
	}
	if found {
		// A binary died between the rename and the mark: the copy is complete
		// (it is renamed only after migrating), so only the mark is missing.
		_, err := conn.ExecContext(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true")
		return err
	}
	building := randomName(name + "_")
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+building); err != nil {
		return err
	}
	err = migrate(withDatabase(admin, building))
	if err == nil {
		// No session may connect to a template while it is copied.
		_, err = conn.ExecContext(ctx, "ALTER DATABASE "+building+" WITH ALLOW_CONNECTIONS false")
	}
	if err == nil {
		_, err = conn.ExecContext(ctx, "ALTER DATABASE "+building+" RENAME TO "+name)
		if err == nil {
			building = ""
		}
	}
	if building != "" {
		conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
	}
	if err != nil {
		return fmt.Errorf("build the template %s: %w", name, err)
	}
	// Marked a template, it can be dropped only after an ALTER to false.
	_, err = conn.ExecContext(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true")
	return err
}

// migrationsDigest names the PostgreSQL schema the migrations build: a digest
// of their files, read beside this package (test binaries run from the
// source tree, and are built from the same files the store embeds).
func migrationsDigest() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no source path for storetest")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "migrations", "postgres")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read the migrations: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		body, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", fmt.Errorf("read the migrations: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func randomName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func withDatabase(u *url.URL, name string) string {
	c := *u
	c.Path = "/" + name
	return c.String()
}
