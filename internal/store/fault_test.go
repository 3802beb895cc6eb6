package store_test

import (
	"fmt"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// A connection that met a storage fault is replaced, never reused. SQLITE_FULL
// is provoked with max_page_count, a setting of the connection itself: the
// write after the fault succeeds only because it runs on a new connection.
func TestStorageFaultReplacesTheConnection(t *testing.T) {
	s := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	db := s.WriteDB()
	if _, err := db.Exec(`CREATE TABLE blobs (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1)); err != nil {
		t.Fatal(err)
	}
	opened := s.WriteConnsOpened()
	big := make([]byte, 256<<10)
	_, err := db.Exec(`INSERT INTO blobs (b) VALUES ($1)`, big)
	if !store.IsStorageFault(err) {
		t.Fatalf("insert beyond max_page_count: %v, want a storage fault (SQLITE_FULL)", err)
	}
	if s.IOFaults() != 1 {
		t.Fatalf("IOFaults = %d, want 1", s.IOFaults())
	}
	if _, err := db.Exec(`INSERT INTO blobs (b) VALUES ($1)`, big); err != nil {
		t.Fatalf("the write after the fault ran on the poisoned connection: %v", err)
	}
	if got := s.WriteConnsOpened(); got != opened+1 {
		t.Fatalf("the writer opened %d connections since the fault, want 1", got-opened)
	}
	if s.IOFaults() != 1 {
		t.Fatalf("IOFaults = %d after a clean write, want still 1", s.IOFaults())
	}
}
