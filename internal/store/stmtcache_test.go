package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"modernc.org/sqlite"
)

// countingDriver counts the statements its connections prepare, by text.
type countingDriver struct {
	driver.Driver
	mu       sync.Mutex
	prepared map[string]int
}

type countingConn struct {
	driver.Conn
	d *countingDriver
}

func (d *countingDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, d: d}, nil
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.d.mu.Lock()
	c.d.prepared[query]++
	c.d.mu.Unlock()
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// A statement that turns hot after the cache filled up with one-off texts
// (bulk inserts of every batch size) is still prepared only once: the least
// recently used statement gives way.
func TestStatementCacheKeepsTheHotStatementsWhenFull(t *testing.T) {
	d := &countingDriver{Driver: &sqlite.Driver{}, prepared: map[string]int{}}
	db := sql.OpenDB(cachingConnector{dsn: "file:" + filepath.Join(t.TempDir(), "s.db"), driver: d})
	defer db.Close()
	db.SetMaxOpenConns(1)
	for i := range stmtCacheLimit + 10 {
		var n int
		if err := db.QueryRow(fmt.Sprintf(`SELECT %d`, i)).Scan(&n); err != nil || n != i {
			t.Fatalf("one-off %d: %v", i, err)
		}
	}
	const hot = `SELECT 'hot'`
	for range 20 {
		var s string
		if err := db.QueryRow(hot).Scan(&s); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if got := d.prepared[hot]; got != 1 {
		t.Fatalf("the hot statement was prepared %d times, want once", got)
	}
	if got := d.prepared[`SELECT 0`]; got != 1 {
		t.Fatalf("a one-off statement was prepared %d times, want once", got)
	}
}
