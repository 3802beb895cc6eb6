// Package storetest runs the same tests on every store: SQLite always, and
// PostgreSQL whenever AUDITCHAIN_TEST_POSTGRES holds a URL. Each test gets an
// isolated database: a fresh SQLite file, or a fresh PostgreSQL database that is
// dropped when the test ends.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

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

// EachStore is Each with the store opened (and closed at cleanup).
func EachStore(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	Each(t, func(t *testing.T, dsn string) { fn(t, Open(t, dsn)) })
}

// DSN returns the data source of a new, empty database of backend b. On
// PostgreSQL without AUDITCHAIN_TEST_POSTGRES the test is skipped, saying so.
func DSN(t testing.TB, b Backend) string {
	t.Helper()
	switch b {
	case SQLite:
		return "sqlite:" + filepath.Join(t.TempDir(), "auditchain.db")
	case Postgres:
		admin := os.Getenv(PostgresEnv)
		if admin == "" {
			t.Skip("PostgreSQL tests skipped: set " + PostgresEnv + " to a postgres:// URL (CI always does)")
		}
		return freshPostgres(t, admin)
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

func freshPostgres(t testing.TB, admin string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "ac_test_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		db.Close()
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
