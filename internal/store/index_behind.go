package store

// The keys of the record built behind the append (SQLite, migrations 023,
// 037 and 039; issue #39).
//
// Every row inserted into events enters events_tail, the tail's key (a
// trigger, migration 039): its own B-tree, which stays a few pages small.
// The key by sequence of the rows indexed (events_seq) and search's keys
// (events_by_type, _tool, _decision, _subagent, _ts) are tables of their
// own that only IndexBehind writes: between two group commits the writer
// calls it to copy a chunk of the tail into them in key order (account by
// account, sweeping round the accounts) and delete it from the tail. An
// account's key pages are then written to the WAL once for all of its rows
// in the chunk instead of once per row, and the row itself is never written
// again (docs/performance.md "The keys in tables of their own"). Every read
// by key reads the tail beside them (indexedArms), so a client finds its
// own appends as soon as they are acknowledged, and a crash leaves nothing
// to repair: a row in the tail is found all the same, and indexed by a
// later IndexBehind (Open counts the tail it finds).
//
// The tail's Merkle rows are written behind the same way: IndexBehind
// stores the tree of each account of the chunk over its whole tail before
// it takes a row out of the tail (merkle_behind_sqlite.go).
//
// A batch's rows enter the tail too; its Merkle rows it stores itself, so
// the tree skips them (tailOf). PostgreSQL has no tail.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
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

// EventsBehind is how many inserted rows wait to be indexed: the tail
// counted when the store opens and by each IndexBehind, and the rows
// inserted since (rows of rolled-back savepoints count too, until the next
// IndexBehind counts the tail).
func (s *Store) EventsBehind() int64 { return s.behind.Load() }

// countBehind counts the tail a previous run left (a crash, or a stop
// before the writer indexed it).
func (s *Store) countBehind(ctx context.Context) error {
	var n int64
	if err := s.write.QueryRowContext(ctx, `SELECT count(*) FROM events_tail`).Scan(&n); err != nil {
		return fmt.Errorf("count the rows to index: %w", err)
	}
	s.behind.Store(n)
	return nil
}

// indexBehindInserts copy the chunk's rows (from t, the tail, and e, their
// rows; the chunk's bounds are $1 to ($2, $3)) into the keys of the rows
// indexed, each in its key's order. A row without a value for a key is not
// in it: search never matches NULL.
var indexBehindInserts = [...]string{
	`INSERT INTO events_seq (account, sequence, rid) SELECT t.account, t.sequence, t.rid` + tailChunk + ` ORDER BY t.account, t.sequence`,
	`INSERT INTO events_by_type (account, event_type, sequence, rid) SELECT t.account, e.event_type, t.sequence, t.rid` + tailChunk +
		` ORDER BY t.account, e.event_type, t.sequence`,
	`INSERT INTO events_by_tool (account, tool, sequence, rid) SELECT t.account, e.tool, t.sequence, t.rid` + tailChunk +
		` AND e.tool IS NOT NULL ORDER BY t.account, e.tool, t.sequence`,
	`INSERT INTO events_by_decision (account, decision, sequence, rid) SELECT t.account, e.decision, t.sequence, t.rid` + tailChunk +
		` AND e.decision IS NOT NULL ORDER BY t.account, e.decision, t.sequence`,
	`INSERT INTO events_by_subagent (account, subagent, sequence, rid) SELECT t.account, e.subagent, t.sequence, t.rid` + tailChunk +
		` AND e.subagent IS NOT NULL ORDER BY t.account, e.subagent, t.sequence`,
	`INSERT INTO events_by_ts (account, ts_micros, sequence, rid) SELECT t.account, e.ts_micros, t.sequence, t.rid` + tailChunk +
		` AND e.ts_micros IS NOT NULL ORDER BY t.account, e.ts_micros, t.sequence`,
}

// tailChunk is the FROM and WHERE of the chunk's rows: the tail from
// account $1 up to and including ($2, $3).
const tailChunk = ` FROM events_tail t CROSS JOIN events e ON e.rowid = t.rid
	WHERE t.account >= $1 AND (t.account, t.sequence) <= ($2, $3)`

// IndexBehind indexes up to IndexBehindChunk rows of the tail in a
// transaction of its own on the writer's connection, continuing the sweep
// from the account where the last call stopped. The writer calls it between
// two group commits; a failure leaves the rows in the tail, as found.
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
	// The chunk's last key: the next call starts at its account (its
	// remaining rows, if the chunk ended inside it). None: the chunk takes
	// the rest of the sweep, which starts over.
	lastAccount, lastSequence := int64(math.MaxInt64), int64(math.MaxInt64)
	err = tx.QueryRowContext(ctx, `SELECT account, sequence FROM events_tail WHERE account >= $1
		ORDER BY account, sequence LIMIT 1 OFFSET $2`, from, IndexBehindChunk-1).Scan(&lastAccount, &lastSequence)
	full := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	// The chunk's accounts' trees are grown over their whole tails first:
	// a leaf past the stored tree must stay a row of the tail
	// (merkle_behind_sqlite.go).
	to := int64(-1)
	if full {
		to = lastAccount
	}
	if err := s.growTails(ctx, tx, from, to); err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	for _, q := range indexBehindInserts {
		if _, err := tx.ExecContext(ctx, q, from, lastAccount, lastSequence); err != nil {
			return 0, fmt.Errorf("index behind: %w", err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM events_tail WHERE account >= $1 AND (account, sequence) <= ($2, $3)`,
		from, lastAccount, lastSequence)
	if err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	// The tail left, counted (a few pages): the count of inserts drifts
	// from it by rows of rolled-back savepoints, and by rows a write past
	// the service put back in the tail (migration 039's triggers).
	var left int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM events_tail`).Scan(&left); err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("index behind: %w", err)
	}
	// Rows inserted since the commit were counted by their inserts: the
	// count moves by the difference, never onto them.
	s.behind.Add(left - counted)
	if full {
		s.sweep = lastAccount
	} else {
		s.sweep = 0
	}
	return n, nil
}
