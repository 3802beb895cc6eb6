package store

// Integrity tables (CONTRACT.md "Integrity", docs/integrity.md): each
// account's Merkle tree as tlog stored hashes (merkle_hashes), written in the
// append's transaction or statement (append.go), and its chain blocks
// (chain_blocks).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/pkg/verify"
)

// ErrMissingHash is returned by a HashReader when a stored hash the tree needs
// is absent: the account's tree was never built (rows from before migration
// 005) or rows were deleted.
var ErrMissingHash = errors.New("merkle: stored hash missing")

// ErrMalformedHash is returned by a HashReader when a stored hash is not 32
// bytes: the rows were altered (on SQLite, a run's length is not a multiple
// of 32). Unlike a missing tree it is not rebuilt on append.
var ErrMalformedHash = errors.New("merkle: stored hash malformed")

func malformedHash(userID string, idx int64, h []byte) error {
	return fmt.Errorf("%w: hash %d of account %s has %d bytes", ErrMalformedHash, idx, userID, len(h))
}

// hashReader reads an account's stored hashes through q (a transaction when
// appending, so reads see the rows the same transaction wrote).
type hashReader struct {
	s      *Store
	ctx    context.Context
	q      Querier
	userID string
	// account is the value bound for the account (accountKey), kept from
	// the first read that found one.
	account any
	// stored: read the stored rows only, never computing the hashes of the
	// tail past them (SQLite; merkle_behind_sqlite.go).
	stored bool
}

// accountKey is the reader's account as its queries bind it. An account
// without a number yet is looked up again by the next read: the transaction
// the reader reads through may give it one meanwhile.
func (r *hashReader) accountKey() (any, error) {
	if r.account != nil {
		return r.account, nil
	}
	a, err := r.s.accountKey(r.ctx, r.q, r.userID)
	if err == nil && a != any(noAccount) {
		r.account = a
	}
	return a, err
}

// HashReader returns the account's tree as a merkle.HashReader over q (nil:
// the read pool). Rows are immutable once committed, so any root or proof of a
// size at most the committed tree size is consistent without a lock.
func (s *Store) HashReader(ctx context.Context, q Querier, userID string) merkle.HashReader {
	if q == nil {
		q = s.read
	}
	return &hashReader{s: s, ctx: ctx, q: q, userID: userID}
}

// ReadHashes implements tlog.HashReader with one query for all indexes.
func (r *hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	if r.s.Dialect == SQLite {
		return r.readWithTail(indexes)
	}
	account, err := r.accountKey()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	args := make([]any, 0, len(indexes)+1)
	args = append(args, account)
	b.WriteString(`SELECT idx, hash FROM merkle_hashes WHERE account = ` + r.s.placeholder(1) + ` AND idx IN (`)
	for i, idx := range indexes {
		if i > 0 {
			b.WriteByte(',')
		}
		args = append(args, idx)
		b.WriteString(r.s.placeholder(len(args)))
	}
	b.WriteByte(')')
	rows, err := r.q.QueryContext(r.ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[int64]tlog.Hash, len(indexes))
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			return nil, err
		}
		if len(h) != len(tlog.Hash{}) {
			return nil, malformedHash(r.userID, idx, h)
		}
		got[idx] = tlog.Hash(h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := got[idx]
		if !ok {
			return nil, fmt.Errorf("%w: index %d of account %s", ErrMissingHash, idx, r.userID)
		}
		out[i] = h
	}
	return out, nil
}

// StoredTreeEnd is one past the highest stored hash index of the account's
// tree (0 without one): StoredHashCount of its leaves in a tree that is
// whole, more when hashes were stored past them.
func (s *Store) StoredTreeEnd(ctx context.Context, userID string) (int64, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return 0, err
	}
	q := `SELECT coalesce(max(idx) + 1, 0) FROM merkle_hashes WHERE account = $1`
	if s.Dialect == SQLite {
		q = `SELECT ` + treeEndSQL
	}
	var end int64
	err = s.read.QueryRowContext(ctx, q, account).Scan(&end)
	return end, err
}

// LeafHashes returns the Merkle rows that appending e's leaf (at e.LeafIndex)
// adds, reading the at most log2(n) hashes tlog needs through tx. An account
// whose tree predates migration 005 is built first, once.
//
// On SQLite the hashes it returns begin where the stored tree ends: it reads
// that end with the leaf's hashes and refuses a tree that runs past it (a
// tree that stops short of it is missing hashes, and is rebuilt).
func (s *Store) LeafHashes(ctx context.Context, tx *sql.Tx, e *Event) ([]merkle.StoredHash, error) {
	leaf, err := verify.HashBytes(e.PayloadHash)
	if err != nil {
		return nil, err
	}
	if s.Dialect == SQLite {
		return s.leafHashesSQLite(ctx, tx, e, leaf)
	}
	r := s.HashReader(ctx, tx, e.UserID)
	if check, ok := treeCheckIndex(e.LeafIndex); ok {
		if _, err := s.readTree(ctx, tx, e.UserID, e.LeafIndex, []int64{check}); err != nil {
			return nil, err
		}
	}
	hs, err := merkle.AppendLeaf(e.LeafIndex, leaf, r)
	if errors.Is(err, ErrMissingHash) {
		if err := s.buildTree(ctx, tx, e.UserID, e.LeafIndex); err != nil {
			return nil, err
		}
		hs, err = merkle.AppendLeaf(e.LeafIndex, leaf, r)
	}
	return hs, err
}

// treeCheckIndex is the row that proves the tree of n leaves is there before
// leaf n is appended, when appending reads none: an even leaf reads no earlier
// hash, so a missing tree would go unnoticed until the next odd leaf, and the
// tree (seals, proofs, chain verify) would be incomplete meanwhile. The tree's
// last hash (TreeCheckIndex) exists in any tree that is there: one point read
// every other append. (An odd leaf reads that hash anyway: leaf n-1 is even
// and wrote only its leaf hash.)
func treeCheckIndex(n int64) (int64, bool) {
	if n > 0 && n%2 == 0 {
		return TreeCheckIndex(n), true
	}
	return 0, false
}

// LeafReads are the stored-hash indexes appending leaf n reads: the hashes
// merkle.AppendLeaf combines it with and, for an even leaf, the row that
// shows the tree is there. Reading them all ahead and finding one missing
// means the tree must be built first (LeafHashes does, under the head's lock).
func LeafReads(n int64) []int64 {
	idx := merkle.AppendReads(n)
	if check, ok := treeCheckIndex(n); ok {
		idx = append(idx, check)
	}
	return idx
}

// readTree reads the hashes at indexes of the account's tree of n leaves,
// which any complete tree of n leaves holds, building the tree first when one
// is missing (an account written before migration 005, or one whose rows were
// lost). On SQLite it also rebuilds a tree that does not end where leaf n
// begins (merkle_runs_sqlite.go).
func (s *Store) readTree(ctx context.Context, tx *sql.Tx, userID string, n int64, indexes []int64) ([]tlog.Hash, error) {
	if s.Dialect == SQLite {
		got, whole, err := s.readTreeSQLite(ctx, tx, userID, n, indexes)
		if err != nil || whole {
			return got, err
		}
		// Short of n leaves: single appends left their rows to be built
		// behind (merkle_behind_sqlite.go); grown from where it ends.
		if err := s.catchUpTree(ctx, tx, userID, n); err != nil {
			return nil, err
		}
		return s.HashReader(ctx, tx, userID).ReadHashes(indexes)
	} else {
		got, err := s.HashReader(ctx, tx, userID).ReadHashes(indexes)
		if !errors.Is(err, ErrMissingHash) {
			return got, err
		}
	}
	if err := s.buildTree(ctx, tx, userID, n); err != nil {
		return nil, err
	}
	return s.HashReader(ctx, tx, userID).ReadHashes(indexes)
}

// appendLeaves adds the leaves of evs (consecutive leaf indexes) to the
// account's tree inside tx. Every earlier hash the run's leaves need is a
// hash of the frontier of the tree it extends (any leaf, not only the first,
// may need one): that frontier is read once, and a merkle.Appender computes
// the run's hashes from it alone; all new rows are written with one statement
// per chunk.
func (s *Store) appendLeaves(ctx context.Context, tx *sql.Tx, evs []Event) error {
	userID, first := evs[0].UserID, evs[0].LeafIndex
	var frontier []tlog.Hash
	// On SQLite a tree of no leaves is read too: it must have no row.
	if first > 0 || s.Dialect == SQLite {
		var err error
		if frontier, err = s.readTree(ctx, tx, userID, first, merkle.FrontierIndexes(first)); err != nil {
			return err
		}
	}
	a, err := merkle.NewAppender(first, frontier)
	if err != nil {
		return err
	}
	hs := make([]merkle.StoredHash, 0, 2*len(evs)+64)
	for i := range evs {
		if evs[i].LeafIndex != a.Size() {
			return fmt.Errorf("merkle: leaf %d in a run that is at leaf %d", evs[i].LeafIndex, a.Size())
		}
		leaf, err := verify.HashBytes(evs[i].PayloadHash)
		if err != nil {
			return err
		}
		if hs, err = a.Append(hs, leaf); err != nil {
			return err
		}
	}
	for start := 0; start < len(hs); start += maxHashesPerInsert {
		if err := s.insertHashes(ctx, tx, userID, hs[start:min(start+maxHashesPerInsert, len(hs))]); err != nil {
			return err
		}
	}
	return nil
}

// maxHashesPerInsert keeps one INSERT of Merkle rows within the parameter limits
// (and, in runs on SQLite, well within them).
const maxHashesPerInsert = 2000

// overlayReader serves hashes read ahead from memory (known) and reads the
// others from base (stored hashes never change).
type overlayReader struct {
	base  merkle.HashReader
	known map[int64]tlog.Hash
}

func (r *overlayReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var missing []int64
	for _, idx := range indexes {
		if _, ok := r.known[idx]; !ok {
			missing = append(missing, idx)
		}
	}
	if len(missing) > 0 {
		got, err := r.base.ReadHashes(missing)
		if err != nil {
			return nil, err
		}
		for i, idx := range missing {
			r.known[idx] = got[i]
		}
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		out[i] = r.known[idx]
	}
	return out, nil
}

func (s *Store) insertHashes(ctx context.Context, tx *sql.Tx, userID string, hs []merkle.StoredHash) error {
	if len(hs) == 0 {
		return nil
	}
	if s.Dialect == SQLite {
		// Every caller read where the stored tree ends first (LeafHashes,
		// readTree) or emptied it (buildTree).
		return s.insertRuns(ctx, tx, userID, hs)
	}
	account, err := s.accountKeyForWrite(ctx, tx, userID)
	if err != nil {
		return err
	}
	var b strings.Builder
	args := make([]any, 0, 3*len(hs))
	b.WriteString(`INSERT INTO merkle_hashes (account, idx, hash) VALUES `)
	for i, h := range hs {
		if i > 0 {
			b.WriteByte(',')
		}
		n := len(args)
		b.WriteString("(" + s.placeholder(n+1) + ", " + s.placeholder(n+2) + ", " + s.placeholder(n+3) + ")")
		args = append(args, account, h.Index, h.Hash[:])
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("insert merkle hashes: %w", err)
	}
	return nil
}

// buildTree (re)builds the stored hashes of leaves [0, n) from the account's
// events in leaf order. It only runs for a tree that is missing rows, which
// happens once per account stored before migration 005, or (SQLite) that runs
// past its n leaves.
func (s *Store) buildTree(ctx context.Context, tx *sql.Tx, userID string, n int64) error {
	account, err := s.accountKeyForWrite(ctx, tx, userID)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM merkle_hashes WHERE account = $1`, account); err != nil {
		return err
	}
	a, err := merkle.NewAppender(0, nil)
	if err != nil {
		return err
	}
	var hs []merkle.StoredHash
	flush := func() error {
		err := s.insertHashes(ctx, tx, userID, hs)
		hs = hs[:0]
		return err
	}
	errStop := errors.New("stop")
	err = s.eventsFrom(ctx, tx, userID, 0, func(e *Event) error {
		if a.Size() == n {
			return errStop
		}
		if e.LeafIndex != a.Size() {
			return fmt.Errorf("merkle: account %s has no event at leaf %d to build its tree from", userID, a.Size())
		}
		leaf, err := verify.HashBytes(e.PayloadHash)
		if err != nil {
			return err
		}
		if hs, err = a.Append(hs, leaf); err != nil {
			return err
		}
		if len(hs) >= maxHashesPerInsert {
			return flush()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if a.Size() != n {
		return fmt.Errorf("merkle: account %s has no event at leaf %d to build its tree from", userID, a.Size())
	}
	return flush()
}

// EventAtLeaf reads the account's event at a leaf position: a row stored
// below the tip through its partial index, or else by a binary search over
// chain order (there is no leaf_index index, see EventsFrom).
func (s *Store) EventAtLeaf(ctx context.Context, userID string, leaf int64) (Event, error) {
	account, err := s.accountKey(ctx, nil, userID)
	if err != nil {
		return Event{}, err
	}
	e, err := scanEvent(s.read.QueryRowContext(ctx, `SELECT `+eventFields+` FROM events
		WHERE account = $1 AND below_tip IS NOT NULL AND leaf_index = $2`, account, leaf), userID)
	if !errors.Is(err, ErrNotFound) {
		return e, err
	}
	seq, found, err := s.firstSequenceFromLeaf(ctx, nil, userID, leaf)
	if err != nil {
		return Event{}, err
	}
	if !found {
		return Event{}, ErrNotFound
	}
	e, err = scanEvent(s.read.QueryRowContext(ctx, eventAtSequenceSQL(s.Dialect), account, seq), userID)
	if err == nil && e.LeafIndex != leaf {
		return Event{}, ErrNotFound
	}
	return e, err
}

// EventsRange streams the account's events with leaf_index in [from, to), in
// leaf order and in pages, so memory stays flat in chain length.
func (s *Store) EventsRange(ctx context.Context, userID string, from, to int64, fn func(*Event) error) error {
	errStop := errors.New("stop")
	err := s.EventsFrom(ctx, userID, from, func(e *Event) error {
		if e.LeafIndex >= to {
			return errStop
		}
		return fn(e)
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// BlockRow is a stored chain block.
type BlockRow struct {
	checkpoint.Block
	CreatedAt int64 // unix microseconds
}

const blockColumns = `block_index, tree_size, root_hash, prev_block_hash, block_hash, note, created_at`

func scanBlock(r scanner) (BlockRow, error) {
	var b BlockRow
	var size int64
	var root, prev, hash, note []byte
	err := r.Scan(&b.Index, &size, &root, &prev, &hash, &note, &b.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return b, ErrNotFound
	}
	if err != nil {
		return b, err
	}
	b.Size = uint64(size)
	// Stored columns are read as they are; GET /v1/chain/verify compares them
	// with the signed note, so a short or altered column is reported, not fatal.
	copy(b.Root[:], root)
	copy(b.Hash[:], hash)
	if prev != nil {
		var p verify.Hash
		copy(p[:], prev)
		b.PrevHash = &p
	}
	b.Note = note
	return b, nil
}

// LastBlock returns the account's newest block, or ErrNotFound.
func (s *Store) LastBlock(ctx context.Context, q Querier, userID string) (BlockRow, error) {
	if q == nil {
		q = s.read
	}
	return scanBlock(q.QueryRowContext(ctx, `SELECT `+blockColumns+` FROM chain_blocks WHERE user_id = $1
		ORDER BY block_index DESC LIMIT 1`, userID))
}

// InsertBlock stores a sealed block. The caller holds the account's head lock;
// a concurrent sealer that got past it anyway hits the primary key (ErrConflict).
func (s *Store) InsertBlock(ctx context.Context, tx *sql.Tx, userID string, b BlockRow) error {
	var prev any
	if b.PrevHash != nil {
		prev = b.PrevHash[:]
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO chain_blocks (user_id, `+blockColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		userID, b.Index, int64(b.Size), b.Root[:], prev, b.Hash[:], b.Note, b.CreatedAt)
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// Blocks returns up to limit blocks with index ≥ from, oldest first.
func (s *Store) Blocks(ctx context.Context, userID string, from int64, limit int) ([]BlockRow, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+blockColumns+` FROM chain_blocks WHERE user_id = $1 AND block_index >= $2
		ORDER BY block_index LIMIT $3`, userID, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []BlockRow
	for rows.Next() {
		b, err := scanBlock(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// BlocksFrom streams the account's blocks with index ≥ from in index order, in
// pages, calling fn for each.
func (s *Store) BlocksFrom(ctx context.Context, userID string, from int64, fn func(*BlockRow) error) error {
	const page = 500
	for {
		bs, err := s.Blocks(ctx, userID, from, page)
		if err != nil {
			return err
		}
		for i := range bs {
			if err := fn(&bs[i]); err != nil {
				return err
			}
		}
		if len(bs) < page {
			return nil
		}
		from = bs[len(bs)-1].Index + 1
	}
}

// BlockBySize returns the account's block of exactly that tree size, or ErrNotFound.
func (s *Store) BlockBySize(ctx context.Context, userID string, size int64) (BlockRow, error) {
	return scanBlock(s.read.QueryRowContext(ctx, `SELECT `+blockColumns+` FROM chain_blocks WHERE user_id = $1 AND tree_size = $2`, userID, size))
}

// BlockAtOrBelow returns the account's last block with tree size ≤ size, or ErrNotFound.
func (s *Store) BlockAtOrBelow(ctx context.Context, userID string, size int64) (BlockRow, error) {
	return scanBlock(s.read.QueryRowContext(ctx, `SELECT `+blockColumns+` FROM chain_blocks WHERE user_id = $1 AND tree_size <= $2
		ORDER BY tree_size DESC LIMIT 1`, userID, size))
}

// BlockAbove returns the account's first block with tree size > size, or ErrNotFound.
func (s *Store) BlockAbove(ctx context.Context, userID string, size int64) (BlockRow, error) {
	return scanBlock(s.read.QueryRowContext(ctx, `SELECT `+blockColumns+` FROM chain_blocks WHERE user_id = $1 AND tree_size > $2
		ORDER BY tree_size LIMIT 1`, userID, size))
}
