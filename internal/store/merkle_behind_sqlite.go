package store

// The Merkle rows of single appends built behind the append (SQLite; issue
// #39, docs/performance.md "Merkle rows behind the append").
//
// merkle_hashes is keyed by (account, idx): with many accounts in one group
// commit, each single append wrote a leaf page of its own account's part of
// that B-tree, about a third of the pages a commit wrote to the WAL. Now a
// single append on SQLite writes no Merkle row. Its row is in the tail
// (events_tail, index_behind.go), and the account's tree is grown over its
// tail by IndexBehind before it takes the rows out of the tail: each
// account's Merkle page is written once for all of its rows in the chunk.
//
// The invariant that keeps every read exact: the stored tree of an account is
// whole for its first m leaves (its rows end at StoredHashCount(m)), and every
// leaf from m to the head's count is a row of the tail. A reader that needs a
// hash past the stored end computes it from those rows' payload hashes and
// the stored frontier of m (tailHashes), so roots, proofs, seals and exports
// are the same as if the rows were stored (the rows are a function of the
// events: the tree is derived from the record, as buildTree always was).
// What keeps the invariant:
//   - a single append adds a row of the tail at the next leaf;
//   - a batch (AppendRun) grows the tree over the tail first (catchUpTree),
//     then stores its own leaves' rows, as before; its rows enter the tail
//     too (migration 039), below the stored end, where tailOf skips them;
//   - IndexBehind grows each account's tree over all of its tail before
//     taking any of its rows out of the tail, in the same transaction;
//   - a crash keeps the committed tail.
// A tree that breaks it (rows deleted or added behind the store's back) is
// found as before: the fill refuses a tail whose leaves from the stored
// tree's end on are not consecutive (ErrMissingHash), and a write rebuilds
// it (buildTree).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/pkg/verify"
)

// leavesOfEnd is the m whose whole tree ends at stored-hash index end
// (StoredHashCount(m) == end), and false when no tree ends there (a tree cut
// inside a leaf's hashes, or grown past them).
func leavesOfEnd(end int64) (int64, bool) {
	// StoredHashCount(m) = 2m - popcount(m) grows with m: end/2 ≤ m ≤ end.
	lo, hi := end/2, end
	for lo < hi {
		mid := lo + (hi-lo)/2
		if merkle.StoredHashCount(mid) < end {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, merkle.StoredHashCount(lo) == end
}

// tailLeaf is a tail row's leaf: its index and payload hash.
type tailLeaf struct {
	index int64
	hash  string
}

// growTree computes the stored hashes of leaves from m on (consecutive, in
// leaf order) onto the tree of m leaves whose frontier r reads.
func growTree(r merkle.HashReader, m int64, leaves []tailLeaf) ([]merkle.StoredHash, error) {
	var frontier []tlog.Hash
	if m > 0 {
		var err error
		if frontier, err = r.ReadHashes(merkle.FrontierIndexes(m)); err != nil {
			return nil, err
		}
	}
	a, err := merkle.NewAppender(m, frontier)
	if err != nil {
		return nil, err
	}
	hs := make([]merkle.StoredHash, 0, 2*len(leaves)+8)
	for _, l := range leaves {
		if l.index != a.Size() {
			return nil, fmt.Errorf("%w: leaf %d where the tree is at %d", ErrMissingHash, l.index, a.Size())
		}
		leaf, err := verify.HashBytes(l.hash)
		if err != nil {
			return nil, err
		}
		if hs, err = a.Append(hs, leaf); err != nil {
			return nil, err
		}
	}
	return hs, nil
}

// tailOf keeps the leaves from m on, sorted, and reports whether they are
// exactly m, m+1, …: the invariant's tail.
func tailOf(m int64, rows []tailLeaf) ([]tailLeaf, bool) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].index < rows[j].index })
	i := sort.Search(len(rows), func(i int) bool { return rows[i].index >= m })
	rows = rows[i:]
	for k, l := range rows {
		if l.index != m+int64(k) {
			return nil, false
		}
	}
	return rows, true
}

// tailHashes computes the hashes of the account's leaves past its stored tree
// from its tail (the invariant above), with one statement reading the stored
// end and the tail together (one snapshot). It returns nil when the tail does
// not continue the stored tree; then the hashes past the end are missing.
func (r *hashReader) tailHashes() (map[int64]tlog.Hash, error) {
	account, err := r.accountKey()
	if err != nil {
		return nil, err
	}
	rows, err := r.q.QueryContext(r.ctx, `SELECT -1, NULL, `+treeEndSQL+`
		UNION ALL SELECT e.leaf_index, e.payload_hash, NULL FROM events_tail t CROSS JOIN events e ON e.rowid = t.rid WHERE t.account = ?1`, account)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var end int64
	var tail []tailLeaf
	for rows.Next() {
		var idx int64
		var h sql.NullString
		var e sql.NullInt64
		if err := rows.Scan(&idx, &h, &e); err != nil {
			return nil, err
		}
		if idx == -1 {
			end = e.Int64
			continue
		}
		tail = append(tail, tailLeaf{index: idx, hash: h.String})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	m, ok := leavesOfEnd(end)
	if !ok {
		return nil, nil
	}
	leaves, ok := tailOf(m, tail)
	if !ok || len(leaves) == 0 {
		return nil, nil
	}
	hs, err := growTree(&hashReader{s: r.s, ctx: r.ctx, q: r.q, userID: r.userID, account: account, stored: true}, m, leaves)
	if errors.Is(err, ErrMissingHash) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int64]tlog.Hash, len(hs))
	for _, h := range hs {
		out[h.Index] = h.Hash
	}
	return out, nil
}

// readWithTail is ReadHashes on SQLite: the stored runs, and for the indexes
// past the stored tree, the hashes computed from the tail. Rows may leave the
// tail between the reads (IndexBehind stores the Merkle rows first): the
// stored rows are read again then.
func (r *hashReader) readWithTail(indexes []int64) ([]tlog.Hash, error) {
	got, err := r.readRuns(indexes)
	if !errors.Is(err, ErrMissingHash) || r.stored {
		return got, err
	}
	for range 3 {
		tail, err := r.tailHashes()
		if err != nil {
			return nil, err
		}
		var rest []int64
		for _, idx := range indexes {
			if _, ok := tail[idx]; !ok {
				rest = append(rest, idx)
			}
		}
		stored, err := r.readRuns(rest)
		if errors.Is(err, ErrMissingHash) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out := make([]tlog.Hash, len(indexes))
		k := 0
		for i, idx := range indexes {
			if h, ok := tail[idx]; ok {
				out[i] = h
			} else {
				out[i] = stored[k]
				k++
			}
		}
		return out, nil
	}
	return nil, err
}

// catchUpTree grows the account's stored tree, found short of n leaves or
// missing a hash, to n leaves inside tx (the writer's), from where it ends:
// from the account's events in leaf order past it. A tree that does not end
// at a whole number of leaves short of n, or whose rows do not continue, is
// rebuilt (buildTree).
func (s *Store) catchUpTree(ctx context.Context, tx *sql.Tx, userID string, n int64) error {
	account, err := s.accountKeyForWrite(ctx, tx, userID)
	if err != nil {
		return err
	}
	r := &hashReader{s: s, ctx: ctx, q: tx, userID: userID, account: account, stored: true}
	_, end, err := r.readRunsAndEnd(nil)
	if err != nil {
		return err
	}
	// Its callers found it short of n leaves or missing a hash: one that
	// ends at n leaves or past them is missing one, and is rebuilt.
	m, ok := leavesOfEnd(end)
	if !ok || m >= n {
		return s.buildTree(ctx, tx, userID, n)
	}
	var leaves []tailLeaf
	errStop := errors.New("stop")
	err = s.eventsFrom(ctx, tx, userID, m, func(e *Event) error {
		if e.LeafIndex >= n {
			return errStop
		}
		leaves = append(leaves, tailLeaf{index: e.LeafIndex, hash: e.PayloadHash})
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	hs, err := growTree(r, m, leaves)
	if err == nil && m+int64(len(leaves)) != n {
		err = fmt.Errorf("%w: %d leaves of %d", ErrMissingHash, m+int64(len(leaves)), n)
	}
	if errors.Is(err, ErrMissingHash) {
		return s.buildTree(ctx, tx, userID, n)
	}
	if err != nil {
		return err
	}
	return s.insertRunsFor(ctx, tx, account, hs)
}

// growTails stores the Merkle rows of the tails of the accounts in
// [from, to] (to < 0: every account from from on) inside tx, IndexBehind's
// transaction, before their rows leave the tail: one read of the tails in key
// order, then per account its stored end, its frontier and one insert.
func (s *Store) growTails(ctx context.Context, tx *sql.Tx, from, to int64) error {
	q := `SELECT t.account, e.leaf_index, e.payload_hash FROM events_tail t CROSS JOIN events e ON e.rowid = t.rid WHERE t.account >= $1`
	args := []any{from}
	if to >= 0 {
		q += ` AND t.account <= $2`
		args = append(args, to)
	}
	rows, err := tx.QueryContext(ctx, q+` ORDER BY t.account, t.sequence`, args...)
	if err != nil {
		return err
	}
	tails := map[int64][]tailLeaf{}
	var order []int64
	for rows.Next() {
		var account int64
		var l tailLeaf
		if err := rows.Scan(&account, &l.index, &l.hash); err != nil {
			rows.Close()
			return err
		}
		if _, ok := tails[account]; !ok {
			order = append(order, account)
		}
		tails[account] = append(tails[account], l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, account := range order {
		if err := s.growTail(ctx, tx, account, tails[account]); err != nil {
			return fmt.Errorf("grow the Merkle tree of account %d: %w", account, err)
		}
	}
	return nil
}

// growTail stores the rows of one account's tail leaves past its stored tree.
func (s *Store) growTail(ctx context.Context, tx *sql.Tx, account int64, tail []tailLeaf) error {
	r := &hashReader{s: s, ctx: ctx, q: tx, account: account, stored: true}
	_, end, err := r.readRunsAndEnd(nil)
	if err != nil {
		return err
	}
	m, whole := leavesOfEnd(end)
	n := tail[0].index
	for _, l := range tail {
		n = max(n, l.index+1)
	}
	if whole && m >= n {
		// A batch grew the tree over the tail already, if the tail's last
		// leaf hash and the tree's frontier are there (a stray row can end
		// a tree at a whole number of leaves).
		last := tail[0]
		for _, l := range tail {
			if l.index > last.index {
				last = l
			}
		}
		got, err := r.ReadHashes(append([]int64{tlog.StoredHashIndex(0, last.index)}, merkle.FrontierIndexes(m)...))
		if err == nil {
			leaf, err := verify.HashBytes(last.hash)
			if err != nil {
				return err
			}
			if got[0] == tlog.RecordHash(leaf) {
				return nil
			}
		} else if !errors.Is(err, ErrMissingHash) {
			return err
		}
	} else if leaves, ok := tailOf(m, tail); whole && ok {
		hs, err := growTree(r, m, leaves)
		if err == nil {
			return s.insertRunsFor(ctx, tx, account, hs)
		}
		if !errors.Is(err, ErrMissingHash) {
			return err
		}
	}
	// The tail does not continue the stored tree (rows written or deleted
	// behind the store's back, or a tree from before the tail): grow or
	// rebuild it from the events, to the head's count.
	var userID string
	if err := tx.QueryRowContext(ctx, `SELECT h.user_id, h.event_count FROM account_numbers a
		JOIN chain_heads h ON h.user_id = a.user_id WHERE a.num = $1`, account).Scan(&userID, &n); err != nil {
		return err
	}
	return s.catchUpTree(ctx, tx, userID, n)
}
