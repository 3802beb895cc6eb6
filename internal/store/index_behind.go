package store

// Search's indexes built behind the append (SQLite, migration 023; issue #39).
//
// A single append marks its row unindexed = 1, which keeps it out of the
// four partial indexes only search reads (events_type, events_tool,
// events_ts, events_decision) and puts it in events_unindexed, which holds
// only such rows and stays a few pages small. Between two group commits the
// writer calls IndexBehind, which clears the mark of the tail at once: the
// rows enter the four indexes together, so an account's index page is
// written to the WAL once for all of its rows in the tail instead of once
// per row. Search reads the tail beside the indexes (searchQuery), so a
// client finds its own appends as soon as they are acknowledged, and a
// crash leaves nothing to repair: a marked row is found by search all the
// same, and the next IndexBehind indexes it.
//
// Batch rows are stored indexed (unindexed NULL): the rows of one batch
// share their index pages already. PostgreSQL never marks a row.

import (
	"context"
	"fmt"
)

const (
	// IndexBehindRows is the tail that makes the writer index between two
	// commits: enough rows that 100 accounts' index pages each take tens of
	// them per write, few enough that search reads the tail in well under a
	// millisecond.
	IndexBehindRows = 4096
	// indexBehindChunk bounds the rows one IndexBehind transaction indexes
	// (a tail left by a crash or by failed runs is indexed in several).
	indexBehindChunk = 16384
)

// EventsBehind is about how many appended rows wait to be indexed (counted
// as they are inserted, so rows of rolled-back savepoints count too until
// the next IndexBehind). After opening, the tail is unknown and counts as
// one row, so that the writer's first chance indexes what the last run left.
func (s *Store) EventsBehind() int64 { return s.behind.Load() }

// IndexBehind indexes the marked rows, up to indexBehindChunk of them, in a
// transaction of its own on the writer's connection. The writer calls it
// between two group commits; a failure leaves the rows marked, as found.
func (s *Store) IndexBehind(ctx context.Context) (int64, error) {
	if s.Dialect != SQLite {
		return 0, nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	// The transaction holds the writer's only connection: every row counted
	// so far was committed or rolled back, and none is counted until it ends.
	counted := s.behind.Load()
	// In the tail's key order (events_unindexed): account by account.
	res, err := tx.ExecContext(ctx, `UPDATE events SET unindexed = NULL WHERE rowid IN (
		SELECT rowid FROM events WHERE unindexed IS NOT NULL ORDER BY account, sequence LIMIT $1)`, indexBehindChunk)
	if err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	if n < indexBehindChunk {
		s.behind.Add(-counted) // every row marked is indexed now
	} else {
		s.behind.Add(-min(n, counted))
	}
	return n, nil
}
