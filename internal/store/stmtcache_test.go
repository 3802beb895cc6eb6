package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

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

// The statement cache evicts the least recently used statement: a statement
// that turns hot after the cache filled up with one-off texts (bulk inserts
// of every batch size) is prepared once however many one-offs follow, and a
// statement whose rows are open is never closed under them.
func TestStatementCacheKeepsTheHotStatementsWhenFull(t *testing.T) {
	d := &countingDriver{Driver: &sqlite.Driver{}, prepared: map[string]int{}}
	db := sql.OpenDB(cachingConnector{dsn: "file:" + filepath.Join(t.TempDir(), "s.db"), driver: d})
	defer db.Close()
	db.SetMaxOpenConns(1)
	oneOff := func(i int) {
		t.Helper()
		var n int
		if err := db.QueryRow(fmt.Sprintf(`SELECT %d`, i)).Scan(&n); err != nil || n != i {
			t.Fatalf("one-off %d: %v", i, err)
		}
	}
	for i := range stmtCacheLimit {
		oneOff(i)
	}
	// Rows open on a cached statement while everything else goes through the
	// same (only) connection.
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, `WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM c WHERE v < 3) SELECT v FROM c`)
	if err != nil {
		t.Fatal(err)
	}
	const hot = `SELECT 'hot'`
	for i := range 2 * stmtCacheLimit {
		var s string
		if err := conn.QueryRowContext(ctx, hot).Scan(&s); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d`, 1000+i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("rows open across the evictions read %v, %v; want [1 2 3]", got, err)
	}
	rows.Close()
	conn.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.prepared[hot]; n != 1 {
		t.Fatalf("the hot statement was prepared %d times, want once (least recently used eviction)", n)
	}
}

// The writer's argument check gives each type the store binds exactly what
// database/sql's default conversion would, and leaves other types to it.
func TestCheckNamedValueMatchesTheDefaultConversion(t *testing.T) {
	s, i := "text", int64(-7)
	var nilString *string
	var nilInt *int64
	at := time.Date(2026, 11, 22, 1, 2, 3, 4, time.UTC)
	c := &cachingConn{}
	for _, v := range []any{nil, int64(42), "s", []byte{1, 2}, 1.5, true, at, &s, nilString, &i, nilInt, 7} {
		want, err := driver.DefaultParameterConverter.ConvertValue(v)
		if err != nil {
			t.Fatal(err)
		}
		nv := driver.NamedValue{Ordinal: 1, Value: v}
		if err := c.CheckNamedValue(&nv); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(nv.Value, want) {
			t.Fatalf("%T %v: checked to %#v, the default gives %#v", v, v, nv.Value, want)
		}
	}
	type other struct{}
	nv := driver.NamedValue{Ordinal: 1, Value: other{}}
	if err := c.CheckNamedValue(&nv); err != driver.ErrSkip {
		t.Fatalf("a type the store does not bind: %v, want driver.ErrSkip (the default conversion decides)", err)
	}
}
