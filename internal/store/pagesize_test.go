package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// A database this version creates has sqlitePageSize pages.
func TestANewDatabaseHasTheChosenPageSize(t *testing.T) {
	s := testSQLiteStore(t)
	if got := pragmaInt(t, s.write, "page_size"); got != sqlitePageSize {
		t.Fatalf("a new database's page_size = %d, want %d", got, sqlitePageSize)
	}
}

// fileHeader reads the page size and the write version (2: WAL) from a SQLite
// file's header.
func fileHeader(t *testing.T, path string) (pageSize int, writeVersion byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 100 || string(b[:16]) != "SQLite format 3\x00" {
		t.Fatalf("%s is not a SQLite file (%d bytes, %v)", path, len(b), err)
	}
	return int(b[16])<<8 | int(b[17]), b[18]
}

// prepareFile writes page 1 of a new file (and of an empty one) with the
// chosen page size, already in WAL mode, before any pool opens it; processes
// starting together on one new file all succeed (switching to WAL does not
// wait on busy_timeout: retryBusy). A path with the characters a file: URI
// escapes names the file itself.
func TestPrepareFileCreatesTheFileInWALWithTheChosenPageSize(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	drv := &sqlite.Driver{}
	check := func(path string) {
		t.Helper()
		if size, version := fileHeader(t, path); size != sqlitePageSize || version != 2 {
			t.Fatalf("%s: page size %d, write version %d; want %d and 2 (WAL)", filepath.Base(path), size, version, sqlitePageSize)
		}
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(dir, "a%3F?b#c.db")
	for _, path := range []string{empty, odd} {
		if err := prepareFile(ctx, drv, path, fileURI(path)); err != nil {
			t.Fatal(err)
		}
		check(path)
	}
	for i := range 20 {
		path := filepath.Join(dir, fmt.Sprintf("together-%d.db", i))
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for g := range errs {
			wg.Go(func() { errs[g] = prepareFile(ctx, &sqlite.Driver{}, path, fileURI(path)) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("one of %d starting together on a new file: %v", len(errs), err)
			}
		}
		check(path)
	}
}

// earlierStore creates at path a database with pageSize pages in WAL mode,
// as an earlier version (or another tool) would have.
func earlierStore(t *testing.T, path string, pageSize int) {
	t.Helper()
	db := sql.OpenDB(cachingConnector{dsn: fmt.Sprintf("file:%s?_pragma=page_size(%d)", fileURI(path), pageSize), driver: &sqlite.Driver{}})
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A database created with other pages keeps them (an earlier version's 4
// KiB, or any other: 8 KiB here, which neither the default nor the chosen
// size could produce): the store opens it, migrates it and writes to it.
func TestAnExistingDatabaseKeepsItsPageSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	earlierStore(t, path, 8192)
	s, err := Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := pragmaInt(t, s.write, "page_size"); got != 8192 {
		t.Fatalf("an existing database's page_size = %d after Open, want the 8192 it was created with", got)
	}
	if _, err := s.write.Exec("CREATE TABLE earlier (x); INSERT INTO earlier VALUES (1)"); err != nil {
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
		{"checkpointer", s.walCkpt.db, -65536},
	} {
		if got := pragmaInt(t, c.db, "cache_size"); got != c.want {
			t.Errorf("the %s' cache_size = %d, want %d", c.pool, got, c.want)
		}
	}
}

// A backup has the page size a new database gets, whatever the store's own:
// a store created with other pages (an earlier version's 4 KiB; 8 KiB here,
// which neither default could produce) moves to the chosen size by a backup
// and a restore, with its rows.
func TestABackupHasTheChosenPageSize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.db")
	earlierStore(t, path, 8192)
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
		t.Fatalf("the backup of an 8 KiB store has %d-byte pages, want %d", got, sqlitePageSize)
	}
}

// Migrations keep their statement journals in SQLite's temporary files (a
// rewrite of events held the whole table in memory otherwise), and the
// writer's connection, which ran them, is back to temporary structures in
// memory for the group commit's savepoints.
func TestMigrationsLeaveTheWriterWithTemporaryStructuresInMemory(t *testing.T) {
	s := testSQLiteStore(t)
	const memory = 2 // PRAGMA temp_store: 0 default, 1 file, 2 memory
	if got := pragmaInt(t, s.write, "temp_store"); got != memory {
		t.Fatalf("the writer's temp_store after the migrations = %d, want %d", got, memory)
	}
}
