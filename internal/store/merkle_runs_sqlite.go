package store

import (
	"context"
	"database/sql"
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

// insertRuns writes hs, which must be consecutive indexes, as runs. The
// primary key refused a second write of any index when each row held one
// hash; with runs it only refuses one starting where a row starts, so the
// statement writes nothing unless the stored tree ends exactly where hs
// begins: the row before hs[0] ends at it (or hs begins the tree), and no
// row starts at or after it. No index is written twice and no gap is left.
// (A tree cut short at its end is found before, by the append's reads, and
// rebuilt: LeafHashes, appendLeaves.)
func (s *Store) insertRuns(ctx context.Context, tx *sql.Tx, userID string, hs []merkle.StoredHash) error {
	for i := 1; i < len(hs); i++ {
		if hs[i].Index != hs[i-1].Index+1 {
			return fmt.Errorf("insert merkle hashes: index %d follows %d (a run must be consecutive)", hs[i].Index, hs[i-1].Index)
		}
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO merkle_hashes (user_id, idx, hash) SELECT ?1, column1, column2 FROM (VALUES `)
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
		b.WriteString("(?" + strconv.Itoa(len(args)+1) + ", ?" + strconv.Itoa(len(args)+2) + ")")
		args = append(args, run[0].Index, blob[first:len(blob):len(blob)])
	}
	// ?2 is hs[0].Index.
	b.WriteString(`) WHERE coalesce((SELECT m.idx + length(m.hash) / 32 FROM merkle_hashes m
		WHERE m.user_id = ?1 AND m.idx < ?2 ORDER BY m.idx DESC LIMIT 1), 0) = ?2
		AND NOT EXISTS (SELECT 1 FROM merkle_hashes m WHERE m.user_id = ?1 AND m.idx >= ?2)`)
	res, err := tx.ExecContext(ctx, b.String(), args...)
	if err != nil {
		return fmt.Errorf("insert merkle hashes: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("insert merkle hashes: %w", err)
	} else if n != int64(rows) {
		return fmt.Errorf("insert merkle hashes: the stored tree of %s does not end at index %d", userID, hs[0].Index)
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
	var b strings.Builder
	args := make([]any, 0, len(indexes)+1)
	args = append(args, r.userID)
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
	rows, err := r.q.QueryContext(r.ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]tlog.Hash, len(indexes))
	found := 0
	for rows.Next() {
		var n int
		var h []byte
		if err := rows.Scan(&n, &h); err != nil {
			return nil, err
		}
		switch {
		case n < 0 || n >= len(indexes):
			return nil, fmt.Errorf("merkle: read of hash %d of %d", n, len(indexes))
		case len(h) == 0:
			return nil, fmt.Errorf("%w: index %d of account %s", ErrMissingHash, indexes[n], r.userID)
		case len(h) != len(tlog.Hash{}):
			return nil, malformedHash(r.userID, indexes[n], h)
		}
		out[n] = tlog.Hash(h)
		found++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if found != len(indexes) {
		return nil, fmt.Errorf("merkle: %d hashes read for %d indexes", found, len(indexes))
	}
	return out, nil
}
