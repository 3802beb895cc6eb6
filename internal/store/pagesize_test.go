package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"modernc.org/sqlite"
)

func pragmaInt(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// A database this version creates has sqlitePageSize pages, and WAL mode
// from its first page (docs/performance.md "2 KiB pages and a smaller
// writer's cache").
func TestANewDatabaseHasTheChosenPageSize(t *testing.T) {
	s := testSQLiteStore(t)
	if got := pragmaInt(t, s.write, "page_size"); got != sqlitePageSize {
		t.Fatalf("a new database's page_size = %d, want %d", got, sqlitePageSize)
	}
	var mode string
	if err := s.read.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v), want wal", mode, err)
	}
}

// A database an earlier version created with 4 KiB pages keeps them: the
// store opens it, migrates it and writes to it as before.
func TestAnExistingDatabaseKeepsItsPageSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := sql.OpenDB(cachingConnector{dsn: "file:" + path + "?_pragma=page_size(4096)", driver: &sqlite.Driver{}})
	old.SetMaxOpenConns(1)
	for _, q := range []string{"PRAGMA journal_mode=WAL", "CREATE TABLE earlier (x)"} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := pragmaInt(t, s.write, "page_size"); got != 4096 {
		t.Fatalf("an existing database's page_size = %d after Open, want the 4096 it was created with", got)
	}
	if _, err := s.write.Exec("INSERT INTO earlier VALUES (1)"); err != nil {
		t.Fatalf("write to the existing database: %v", err)
	}
	var tables int64
	if err := s.read.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = 'events'").Scan(&tables); err != nil || tables != 1 {
		t.Fatalf("the existing database was not migrated: %d events tables (%v)", tables, err)
	}
}

// Each pool has the page cache chosen for it. The driver runs a DSN's
// pragmas sorted by name, so one cache_size shared by every pool's DSN and
// another appended for one pool would leave the last in that order, not
// the pool's own.
func TestEachPoolHasItsOwnPageCache(t *testing.T) {
	s := testSQLiteStore(t)
	for _, c := range []struct {
		pool string
		db   *sql.DB
		want int64
	}{
		{"writer", s.write, 8192},
		{"readers", s.read, -65536},
		{"account numbers", s.numbers.db, -256},
	} {
		if got := pragmaInt(t, c.db, "cache_size"); got != c.want {
			t.Errorf("the %s' cache_size = %d, want %d", c.pool, got, c.want)
		}
	}
}

// A backup has the page size a new database gets, whatever the store's own:
// a store an earlier version created with 4 KiB pages moves to the chosen
// size by a backup and a restore, with its rows.
func TestABackupHasTheChosenPageSize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.db")
	old := sql.OpenDB(cachingConnector{dsn: "file:" + path + "?_pragma=page_size(4096)", driver: &sqlite.Driver{}})
	old.SetMaxOpenConns(1)
	if _, err := old.Exec("PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.write.Exec("CREATE TABLE kept (x); INSERT INTO kept VALUES (1), (2), (3)"); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "backup.db")
	if err := s.BackupTo(ctx, copyPath); err != nil {
		t.Fatal(err)
	}
	restored, err := Open(ctx, "sqlite:"+copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	var n int64
	if err := restored.read.QueryRow("SELECT count(*) FROM kept").Scan(&n); err != nil || n != 3 {
		t.Fatalf("the backup holds %d rows of 3 (%v)", n, err)
	}
	if got := pragmaInt(t, restored.write, "page_size"); got != sqlitePageSize {
		t.Fatalf("the backup of a 4 KiB store has %d-byte pages, want %d", got, sqlitePageSize)
	}
}
