package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
)

// hashesFrom returns n consecutive stored hashes from index first, each
// filled with its index's low byte.
func hashesFrom(first int64, n int) []merkle.StoredHash {
	out := make([]merkle.StoredHash, n)
	for i := range out {
		idx := first + int64(i)
		var h tlog.Hash
		for j := range h {
			h[j] = byte(idx)
		}
		out[i] = merkle.StoredHash{Index: idx, Hash: h}
	}
	return out
}

// insertRuns writes consecutive hashes only, in rows of up to four.
func TestRunsAreConsecutiveHashes(t *testing.T) {
	ctx := context.Background()
	s := testSQLiteStore(t)
	insert := func(hs []merkle.StoredHash) error {
		return s.InTx(ctx, func(tx *sql.Tx) error { return s.insertHashes(ctx, tx, "u1", hs) })
	}
	if err := insert([]merkle.StoredHash{hashesFrom(0, 1)[0], hashesFrom(2, 1)[0]}); err == nil || !strings.Contains(err.Error(), "consecutive") {
		t.Fatalf("hashes with a gap between them: %v, want refused", err)
	}
	if err := insert(nil); err != nil {
		t.Fatalf("no hashes: %v", err)
	}
	if err := insert(hashesFrom(0, 9)); err != nil {
		t.Fatal(err)
	}
	var rows, longest int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*), max(length(hash)) / 32 FROM merkle_hashes WHERE account = $1`, s.KeyOfAccount(t, "u1")).Scan(&rows, &longest); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || longest != 4 {
		t.Fatalf("9 hashes in %d rows, the longest of %d; want 3 rows of at most 4", rows, longest)
	}
	all := make([]int64, 9)
	for i := range all {
		all[i] = int64(i)
	}
	got, err := s.HashReader(ctx, nil, "u1").ReadHashes(all)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range got {
		if h != hashesFrom(int64(i), 1)[0].Hash {
			t.Fatalf("hash %d: %x", i, h)
		}
	}
}

// A run whose bytes are not whole hashes reads as malformed, not missing:
// a tree cut short is not rebuilt over, and the chain verification reports it.
func TestRunCutShortReadsAsMalformed(t *testing.T) {
	ctx := context.Background()
	s := testSQLiteStore(t)
	if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.insertHashes(ctx, tx, "u1", hashesFrom(0, 4)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteDB().ExecContext(ctx, `UPDATE merkle_hashes SET hash = substr(hash, 1, 100) WHERE account = $1`, s.KeyOfAccount(t, "u1")); err != nil {
		t.Fatal(err)
	}
	r := s.HashReader(ctx, nil, "u1")
	if got, err := r.ReadHashes([]int64{0, 1, 2}); err != nil || got[2] != hashesFrom(2, 1)[0].Hash {
		t.Fatalf("the whole hashes of a cut run: %v", err)
	}
	if _, err := r.ReadHashes([]int64{3}); !errors.Is(err, ErrMalformedHash) || errors.Is(err, ErrMissingHash) {
		t.Fatalf("the cut hash: %v, want ErrMalformedHash", err)
	}
}
