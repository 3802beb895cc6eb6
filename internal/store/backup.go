package store

// Online backup of a SQLite store (docs/operations.md "Backup"): VACUUM INTO
// writes a consistent copy of the database as one read transaction sees it,
// while the server keeps appending (WAL readers do not block the writer).
// PostgreSQL is backed up with its own tools (pg_dump), not here.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"modernc.org/sqlite"
)

// ErrBackupExternal is returned by BackupTo on PostgreSQL: its backups are
// taken with pg_dump, which knows the server's version and its roles.
var ErrBackupExternal = errors.New("a PostgreSQL store is backed up with pg_dump, not by auditchain")

// BackupTo writes a consistent copy of a SQLite store to path, which must not
// exist (VACUUM INTO refuses an existing file too). The copy is a complete
// database: open it with --db sqlite:PATH. A copy that fails half way is
// removed.
func (s *Store) BackupTo(ctx context.Context, path string) error {
	if s.Dialect != SQLite {
		return ErrBackupExternal
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("backup: %s exists", path)
	}
	// A connection of its own: the read pool is query_only, which refuses
	// VACUUM INTO, and the writer's one connection must stay free for
	// appends. VACUUM INTO reads one snapshot, as a reader would.
	db := sql.OpenDB(cachingConnector{dsn: s.sqliteDSN, driver: &sqlite.Driver{}, faults: &s.ioFaults})
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer conn.Close()
	// The copy has the page size this version gives a new database, whatever
	// the store's own (VACUUM INTO takes the connection's page_size): a store
	// created with 4 KiB pages moves to sqlitePageSize by a backup and a
	// restore (docs/operations.md "Backup, restore and verify").
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", sqlitePageSize)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `VACUUM INTO $1`, path); err != nil {
		os.Remove(path)
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
