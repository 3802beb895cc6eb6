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
// the first at idx. A batch writes about one row per maxRunHashes hashes and
// a single append usually one row instead of two: every row is a B-tree
// insert by SQLite's single writer, whose time bounds batch ingest
// (docs/performance.md). PostgreSQL keeps one hash per row
// (its one-statement appends check single rows: store/append_pg.go); a row of
// one hash is a run of one, so the schema and the migrated rows are the same.
//
// Runs stay short because merkle_hashes is a WITHOUT ROWID table, whose
// interior pages hold whole rows: SQLite advises rows under about a
// twentieth of a page (200 bytes of 4 KiB); four hashes and the key are ~180.
// The 2 KiB pages of newer databases (store.go, sqlitePageSize) hold about
// eleven such rows: the table's frames per append rose with every other
// B-tree's (0.06 to 0.09, docs/performance.md "2 KiB pages and a smaller
// writer's cache"), and shorter runs were not measured there.

// maxRunHashes bounds the hashes of one row.
const maxRunHashes = 4

// maxRunReads bounds the indexes one read statement binds (SQLite allows
// 32,766 parameters).
const maxRunReads = 1000

// The primary key refused a second write of any index when each row held one
// hash; with runs it only refuses one starting where a row starts. So before
// runs are written, the stored tree is read to end exactly where they begin:
// its last row ends at the first new index (or there is no row and they
// begin the tree). Then no index is written twice and no gap is left. A tree
// that does not end there, cut short or running past it (rows written behind
// the store's back), is rebuilt from the events, as a tree with missing
// hashes always was: the rows are derived from the record, and the chain
// verification compares them with the signed roots.
//
// treeEndSQL is that end, in a statement whose ?1 is the account. It is read
// as one more row of the statement that reads the hashes an append needs
// (readTreeSQLite). Not inside the INSERT: a read of the table written makes
// SQLite copy the new rows to a temporary B-tree first; and not inside the
// head's UPDATE, where a subquery cost an append more than the read
// (BenchmarkInsertEventCharged; docs/performance.md).
const treeEndSQL = `coalesce((SELECT m.idx + length(m.hash) / 32 FROM merkle_hashes m
	WHERE m.account = ?1 ORDER BY m.idx DESC LIMIT 1), 0)`

// readTreeSQLite reads the stored hashes at indexes of the account's tree of
// n leaves in one statement with where the tree ends. whole is false when one
// is missing or the tree does not end at StoredHashCount(n): it must be
// rebuilt (buildTree) before it grows.
func (s *Store) readTreeSQLite(ctx context.Context, tx *sql.Tx, userID string, n int64, indexes []int64) (got []tlog.Hash, whole bool, err error) {
	r := &hashReader{s: s, ctx: ctx, q: tx, userID: userID}
	got, end, err := r.readRunsAndEnd(indexes)
	if errors.Is(err, ErrMissingHash) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return got, end == merkle.StoredHashCount(n), nil
}

// leafHashesSQLite is LeafHashes on SQLite: one statement reads the hashes
// appending leaf n needs (LeafReads) and where the stored tree ends.
func (s *Store) leafHashesSQLite(ctx context.Context, tx *sql.Tx, e *Event, leaf []byte) ([]merkle.StoredHash, error) {
	n := e.LeafIndex
	r := &hashReader{s: s, ctx: ctx, q: tx, userID: e.UserID}
	reads := LeafReads(n)
	got, whole, err := s.readTreeSQLite(ctx, tx, e.UserID, n, reads)
	if err != nil {
		return nil, err
	}
	if !whole {
		if err := s.catchUpTree(ctx, tx, e.UserID, n); err != nil {
			return nil, err
		}
		return merkle.AppendLeaf(n, leaf, r)
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
	query, args, err := r.runsQuery(indexes)
	if err != nil {
		return nil, 0, err
	}
	return r.scanRuns(indexes, query+` UNION ALL SELECT -1, `+treeEndSQL, args, true)
}

// insertRuns writes hs, which must be consecutive indexes from where the
// stored tree ends (read before by readTreeSQLite, or emptied by buildTree),
// as runs.
func (s *Store) insertRuns(ctx context.Context, tx *sql.Tx, userID string, hs []merkle.StoredHash) error {
	if len(hs) == 0 {
		return nil
	}
	account, err := s.accountKeyForWrite(ctx, tx, userID)
	if err != nil {
		return err
	}
	return s.insertRunsFor(ctx, tx, account, hs)
}

// insertRunsFor is insertRuns for the account's key (accountKeyForWrite).
func (s *Store) insertRunsFor(ctx context.Context, tx *sql.Tx, account any, hs []merkle.StoredHash) error {
	if len(hs) == 0 {
		return nil
	}
	for i := 1; i < len(hs); i++ {
		if hs[i].Index != hs[i-1].Index+1 {
			return fmt.Errorf("insert merkle hashes: index %d follows %d (a run must be consecutive)", hs[i].Index, hs[i-1].Index)
		}
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO merkle_hashes (account, idx, hash) VALUES `)
	rows := (len(hs) + maxRunHashes - 1) / maxRunHashes
	args := make([]any, 0, 2*rows+1)
	args = append(args, account)
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
	query, args, err := r.runsQuery(indexes)
	if err != nil {
		return nil, err
	}
	out, _, err := r.scanRuns(indexes, query, args, false)
	return out, err
}

// runsQuery is the statement that reads indexes from their runs: one row
// (n, the run's bytes for indexes[n]) per index.
func (r *hashReader) runsQuery(indexes []int64) (string, []any, error) {
	account, err := r.accountKey()
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	args := make([]any, 0, len(indexes)+1)
	args = append(args, account)
	if len(indexes) == 0 {
		// Nothing to read (leaf 0): a statement that yields no row, so
		// that the tree's end can still follow with UNION ALL.
		return `SELECT 0, NULL WHERE 0`, args, nil
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
		WHERE m.account = ?1 AND m.idx <= want.i ORDER BY m.idx DESC LIMIT 1) FROM want`)
	return b.String(), args, nil
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
		var h []byte
		switch v := v.(type) {
		case nil:
		case []byte:
			h = v
		default: // stored as another type than a blob
			return nil, 0, fmt.Errorf("%w: hash of account %s read as %T", ErrMalformedHash, r.userID, v)
		}
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
