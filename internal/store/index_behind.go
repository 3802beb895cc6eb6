package store

// Search's indexes built behind the append (SQLite, migration 023; issue #39).
//
// A single append marks its row unindexed = 1, which keeps it out of the
// four partial indexes only search reads (events_type, events_tool,
// events_ts, events_decision) and puts it in events_unindexed, which holds
// only such rows and stays a few pages small. Between two group commits the
// writer calls IndexBehind, which clears the mark of a chunk of the tail in
// key order (account by account, sweeping round the accounts): the rows
// enter the four indexes together, so an account's index page is written to
// the WAL once for all of its rows in the tail instead of once per row.
// Search reads the tail beside the indexes (searchQuery), so a client finds
// its own appends as soon as they are acknowledged, and a crash leaves
// nothing to repair: a marked row is found by search all the same, and is
// indexed by a later IndexBehind (Open counts the tail it finds).
//
// The tail's Merkle rows are written behind the same way: IndexBehind
// stores the tree of each account of the chunk over its whole tail before it
// clears a mark (merkle_behind_sqlite.go).
//
// Batch rows are stored indexed (unindexed NULL): the rows of one batch
// share their index pages already. PostgreSQL never marks a row.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const (
	// IndexBehindRows is the tail that makes the writer index between two
	// commits: enough rows that 100 accounts' index pages each take tens of
	// them per write, few enough that search reads the tail in well under a
	// millisecond.
	IndexBehindRows = 4096
	// IndexBehindChunk bounds the rows one IndexBehind indexes: its
	// transaction pauses the writer between two group commits, for about
	// 14 µs per row (BenchmarkIndexBehind), so a chunk is a pause of a few
	// milliseconds, not of the whole tail's 60. A chunk in key order takes
	// whole accounts' tails, so it amortises the index pages as well. Half
	// of the 1,024 it was before the key by sequence moved behind the
	// append (migration 037), whose entries made each chunk longer: the
	// appends' p99 under load came back below the earlier figure
	// (docs/performance.md "The key by sequence behind the append").
	IndexBehindChunk = 512
)

// EventsBehind is how many appended rows wait to be indexed, counted when
// the store opens and as rows are inserted (rows of rolled-back savepoints
// count too, until an IndexBehind that finds the whole tail indexed).
func (s *Store) EventsBehind() int64 { return s.behind.Load() }

// countBehind counts the marked rows a previous run left (a crash, or a
// stop before the writer indexed them).
func (s *Store) countBehind(ctx context.Context) error {
	var n int64
	if err := s.write.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE unindexed IS NOT NULL`).Scan(&n); err != nil {
		return fmt.Errorf("count the rows to index: %w", err)
	}
	s.behind.Store(n)
	return nil
}

// IndexBehind indexes up to IndexBehindChunk marked rows in a transaction
// of its own on the writer's connection, continuing the sweep from the
// account where the last call stopped. The writer calls it between two
// group commits; a failure leaves the rows marked, as found.
func (s *Store) IndexBehind(ctx context.Context) (int64, error) {
	if s.Dialect != SQLite {
		return 0, nil
	}
	s.indexing.Lock()
	defer s.indexing.Unlock()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	// The transaction holds the writer's only connection: every row counted
	// so far was committed or rolled back, and none is counted until it ends.
	counted := s.behind.Load()
	from := s.sweep
	// The account of the chunk's last row: the next call starts there (its
	// remaining rows, if the chunk ended inside it). None: the chunk takes
	// the rest of the sweep, which starts over.
	var last int64
	err = tx.QueryRowContext(ctx, `SELECT account FROM events WHERE unindexed IS NOT NULL AND account >= $1
		ORDER BY account, sequence LIMIT 1 OFFSET $2`, from, IndexBehindChunk-1).Scan(&last)
	full := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	// The chunk's accounts' trees are grown over their whole tails first:
	// a leaf past the stored tree must stay a marked row
	// (merkle_behind_sqlite.go).
	to := int64(-1)
	if full {
		to = last
	}
	if err := s.growTails(ctx, tx, from, to); err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE events SET unindexed = NULL WHERE rowid IN (
		SELECT rowid FROM events WHERE unindexed IS NOT NULL AND account >= $1 ORDER BY account, sequence LIMIT $2)`,
		from, IndexBehindChunk)
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
	switch {
	case full:
		s.sweep = last
		s.behind.Add(-min(n, counted))
	case from == 0:
		s.behind.Add(-counted) // the sweep took every marked row
	default:
		s.sweep = 0
		s.behind.Add(-min(n, counted))
	}
	return n, nil
}
