package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
)

// Merkle runs (SQLite, migration 012). The stored hashes one append adds are
// consecutive indexes, [StoredHashIndex(0, n), StoredHashIndex(0, n+1)), and a
// batch's are consecutive across its leaves, so on SQLite a merkle_hashes row
// holds a run: its hash column is up to maxRunHashes hashes, concatenated,
// the first at idx. A 500-event batch writes about 250 rows instead of about
// 1,000 and a single append usually one instead of about two: every row is a
// B-tree insert by SQLite's single writer, whose time bounds batch ingest
// (docs/performance.md "Fifth round"). PostgreSQL keeps one hash per row
// (its one-statement appends check single rows: store/append_pg.go); a row of
// one hash is a run of one, so the schema and the migrated rows are the same.
//
// Runs stay short because merkle_hashes is a WITHOUT ROWID table, whose
// interior pages hold whole rows: SQLite advises rows under about a
// twentieth of a page (200 bytes of 4 KiB); four hashes and the key are ~180.

// maxRunHashes bounds the hashes of one row.
const maxRunHashes = 4

// maxRunReads bounds the indexes one read statement binds (SQLite allows
// 32,766 parameters).
const maxRunReads = 1000

// The primary key refused a second write of any index when each row held one
// hash; with runs it only refuses one starting where a row starts. So runs
// are written only where the stored tree ends: its last row must end exactly
// at the first new index (or there is no row and the run begins the tree).
// Then no index is written twice and no gap is left. (A tree cut short at
// its end is found before, by the append's reads, and rebuilt: LeafHashes,
// appendLeaves.) treeEndSQL is that end, in a statement whose ?1 is the
// account. A single append reads it in the statement that reads its leaf's
// hashes (leafHashesSQLite); other writes check it with a statement of their
// own (checkTreeEnd). Not inside the INSERT: a read of the table written makes
// SQLite copy the new rows to a temporary B-tree first, and not inside the
// head's UPDATE, where a subquery cost an append more (≈9 µs, +18 % of the
// store's work per append in a micro-benchmark) than a column of a read it
// makes anyway.
const treeEndSQL = `coalesce((SELECT m.idx + length(m.hash) / 32 FROM merkle_hashes m
	WHERE m.user_id = ?1 ORDER BY m.idx DESC LIMIT 1), 0)`

// checkTreeEnd returns an error unless the account's stored tree ends at first.
func (s *Store) checkTreeEnd(ctx context.Context, tx *sql.Tx, userID string, first int64) error {
	var end int64
	if err := tx.QueryRowContext(ctx, `SELECT `+treeEndSQL, userID).Scan(&end); err != nil {
		return fmt.Errorf("insert merkle hashes: %w", err)
	}
	if end != first {
		return fmt.Errorf("insert merkle hashes: the stored tree of %s ends at index %d, not %d", userID, end, first)
	}
	return nil
}

// leafHashesSQLite is LeafHashes on SQLite: one statement reads the hashes
// appending leaf n needs (LeafReads) and where the stored tree ends.
func (s *Store) leafHashesSQLite(ctx context.Context, tx *sql.Tx, e *Event, leaf []byte) ([]merkle.StoredHash, error) {
	n := e.LeafIndex
	r := &hashReader{s: s, ctx: ctx, q: tx, userID: e.UserID}
	reads := LeafReads(n)
	got, end, err := r.readRunsAndEnd(reads)
	if errors.Is(err, ErrMissingHash) {
		// A tree never built, or cut short: build it (its end is then
		// where leaf n begins).
		if err := s.buildTree(ctx, tx, e.UserID, n); err != nil {
			return nil, err
		}
		return merkle.AppendLeaf(n, leaf, r)
	}
	if err != nil {
		return nil, err
	}
	if first := tlog.StoredHashIndex(0, n); end != first {
		return nil, fmt.Errorf("merkle: the stored tree of %s ends at index %d, not %d where leaf %d begins", e.UserID, end, first, n)
	}
	known := make(map[int64]tlog.Hash, len(reads))
	for i, idx := range reads {
		known[idx] = got[i]
	}
	return merkle.AppendLeaf(n, leaf, &overlayReader{base: r, known: known})
}

// readRunsAndEnd is readRuns (at most maxRunReads indexes) with the stored
// tree's end (treeEndSQL), in one statement.
func (r *hashReader) readRunsAndEnd(indexes []int64) ([]tlog.Hash, int64, error) {
	if len(indexes) > maxRunReads {
		return nil, 0, fmt.Errorf("merkle: %d reads in one statement", len(indexes))
	}
	query, args := r.runsQuery(indexes)
	query += ` UNION ALL SELECT -1, ` + treeEndSQL
	out, end, err := r.scanRuns(indexes, query, args, true)
	return out, end, err
}

// insertRuns writes hs, which must be consecutive indexes from where the
// stored tree ends (checkTreeEnd), as runs.
func (s *Store) insertRuns(ctx context.Context, tx *sql.Tx, userID string, hs []merkle.StoredHash) error {
	for i := 1; i < len(hs); i++ {
		if hs[i].Index != hs[i-1].Index+1 {
			return fmt.Errorf("insert merkle hashes: index %d follows %d (a run must be consecutive)", hs[i].Index, hs[i-1].Index)
		}
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO merkle_hashes (user_id, idx, hash) VALUES `)
	rows := (len(hs) + maxRunHashes - 1) / maxRunHashes
	args := make([]any, 0, 2*rows+1)
	args = append(args, userID)
	blob := make([]byte, 0, len(hs)*len(tlog.Hash{}))
	for start := 0; start < len(hs); start += maxRunHashes {
		run := hs[start:min(start+maxRunHashes, len(hs))]
		first := len(blob)
		for _, h := range run {
			blob = append(blob, h.Hash[:]...)
		}
		if start > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?1, ?" + strconv.Itoa(len(args)+1) + ", ?" + strconv.Itoa(len(args)+2) + ")")
		args = append(args, run[0].Index, blob[first:len(blob):len(blob)])
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("insert merkle hashes: %w", err)
	}
	return nil
}

// readRuns reads each index from the run that starts at or before it, in one
// statement: a point seek per index, as the IN list of one-hash rows was.
// An index past the end of the run found (or before any run) is missing.
func (r *hashReader) readRuns(indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) > maxRunReads {
		out := make([]tlog.Hash, 0, len(indexes))
		for start := 0; start < len(indexes); start += maxRunReads {
			got, err := r.readRuns(indexes[start:min(start+maxRunReads, len(indexes))])
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		return out, nil
	}
	query, args := r.runsQuery(indexes)
	out, _, err := r.scanRuns(indexes, query, args, false)
	return out, err
}

// runsQuery is the statement that reads indexes from their runs: one row
// (n, the run's bytes for indexes[n]) per index.
func (r *hashReader) runsQuery(indexes []int64) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, len(indexes)+1)
	args = append(args, r.userID)
	if len(indexes) == 0 {
		// Nothing to read (leaf 0): a statement that yields no row, so
		// that the tree's end can still follow with UNION ALL.
		return `SELECT 0, NULL WHERE 0`, args
	}
	b.WriteString(`WITH want(n, i) AS (VALUES `)
	for n, idx := range indexes {
		if n > 0 {
			b.WriteByte(',')
		}
		args = append(args, idx)
		b.WriteString("(" + strconv.Itoa(n) + ", ?" + strconv.Itoa(len(args)) + ")")
	}
	// The run's bytes for i: substr on a blob counts bytes from 1 and is
	// empty past the blob's end.
	b.WriteString(`) SELECT want.n, (SELECT substr(m.hash, (want.i - m.idx) * 32 + 1, 32) FROM merkle_hashes m
		WHERE m.user_id = ?1 AND m.idx <= want.i ORDER BY m.idx DESC LIMIT 1) FROM want`)
	return b.String(), args
}

// scanRuns runs query and places each hash at its index's position; with
// withEnd, the row numbered -1 carries the tree's end.
func (r *hashReader) scanRuns(indexes []int64, query string, args []any, withEnd bool) ([]tlog.Hash, int64, error) {
	rows, err := r.q.QueryContext(r.ctx, query, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := make([]tlog.Hash, len(indexes))
	var end int64
	found, ended := 0, false
	for rows.Next() {
		var n int
		var v any
		if err := rows.Scan(&n, &v); err != nil {
			return nil, 0, err
		}
		if n == -1 && withEnd {
			e, ok := v.(int64)
			if !ok {
				return nil, 0, fmt.Errorf("merkle: the stored tree's end read as %T", v)
			}
			end, ended = e, true
			continue
		}
		h, _ := v.([]byte)
		switch {
		case n < 0 || n >= len(indexes):
			return nil, 0, fmt.Errorf("merkle: read of hash %d of %d", n, len(indexes))
		case len(h) == 0:
			return nil, 0, fmt.Errorf("%w: index %d of account %s", ErrMissingHash, indexes[n], r.userID)
		case len(h) != len(tlog.Hash{}):
			return nil, 0, malformedHash(r.userID, indexes[n], h)
		}
		out[n] = tlog.Hash(h)
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if found != len(indexes) || ended != withEnd {
		return nil, 0, fmt.Errorf("merkle: %d hashes read for %d indexes", found, len(indexes))
	}
	return out, end, nil
}
