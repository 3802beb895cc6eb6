package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
)

// insertEvent appends e at its account's head inside tx, uncharged, the way
// the service's own events are appended (store.AppendEvent).
func insertEvent(ctx context.Context, s *store.Store, tx *sql.Tx, e *store.Event) error {
	head, err := s.LockHead(ctx, tx, e.UserID)
	if err != nil {
		return err
	}
	out, err := s.AppendEvent(ctx, tx, store.Append{Event: e, Expect: head})
	if err != nil {
		return err
	}
	if !out.Stored() {
		return fmt.Errorf("append %s: %+v", e.EventID, out)
	}
	return nil
}

// runDay and runLimit charge the runs of insertRun: a quota they never reach.
const (
	runDay   = "2026-01-01"
	runLimit = 1 << 40
)

// insertRun appends evs at their account's head inside tx, as batch ingest
// does (store.AppendRun).
func insertRun(ctx context.Context, s *store.Store, tx *sql.Tx, evs []store.Event) error {
	userID := evs[0].UserID
	head, err := s.LockHead(ctx, tx, userID)
	if err != nil {
		return err
	}
	out, err := s.AppendRun(ctx, tx, store.Run{UserID: userID, Head: head, Events: evs, Quota: store.Quota{Day: runDay, Limit: runLimit}})
	if err != nil {
		return err
	}
	if !out.QuotaOK {
		return fmt.Errorf("run of %d events refused by the quota: %+v", len(evs), out)
	}
	return nil
}

// indexBehindAll runs the writer's work behind the appends until no row
// waits (SQLite: search's indexes and the single appends' Merkle rows,
// index_behind.go and merkle_behind_sqlite.go; nothing on PostgreSQL).
func indexBehindAll(t *testing.T, s *store.Store) {
	t.Helper()
	for range 1000 {
		if s.EventsBehind() == 0 {
			return
		}
		if _, err := s.IndexBehind(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("%d rows still behind", s.EventsBehind())
}
