package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
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

// On SQLite a run is written only where the stored tree ends: no index is
// written twice (a run starting inside another, or where another starts) and
// no gap is left, as when every row held one hash under the primary key.
func TestRunsAreWrittenOnlyWhereTheTreeEnds(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	insert := func(hs []merkle.StoredHash) error {
		return s.InTx(ctx, func(tx *sql.Tx) error { return s.insertHashes(ctx, tx, "u1", hs) })
	}
	if err := insert(hashesFrom(1, 3)); err == nil || !strings.Contains(err.Error(), "ends at index 0, not 1") {
		t.Fatalf("a first run not at index 0: %v, want refused", err)
	}
	if err := insert(hashesFrom(0, 6)); err != nil { // rows [0..3] and [4..5]
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		first int64
		n     int
	}{
		{"inside the first run", 2, 3},
		{"inside the last run", 5, 2},
		{"where a run starts", 4, 2},
		{"at the tree's start", 0, 1},
		{"past the tree's end", 7, 1},
	} {
		if err := insert(hashesFrom(tc.first, tc.n)); err == nil || !strings.Contains(err.Error(), "stored tree of u1 ends at index") {
			t.Fatalf("%s (from %d): %v, want refused by the guard", tc.name, tc.first, err)
		}
	}
	if err := insert([]merkle.StoredHash{hashesFrom(6, 1)[0], hashesFrom(8, 1)[0]}); err == nil || !strings.Contains(err.Error(), "consecutive") {
		t.Fatalf("hashes with a gap between them: %v, want refused", err)
	}
	if err := insert(hashesFrom(6, 9)); err != nil {
		t.Fatalf("the run that continues the tree: %v", err)
	}
	all := make([]int64, 15)
	for i := range all {
		all[i] = int64(i)
	}
	got, err := s.HashReader(ctx, nil, "u1").ReadHashes(all)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range got {
		if h != hashesFrom(int64(i), 1)[0].Hash {
			t.Fatalf("hash %d: %x, want the one first written", i, h)
		}
	}
	// Another account's tree starts on its own.
	if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.insertHashes(ctx, tx, "u2", hashesFrom(0, 2)) }); err != nil {
		t.Fatal(err)
	}
	// A stray row ahead of the tree's end (written behind the store's back)
	// stops the run that would reach it.
	if _, err := s.WriteDB().ExecContext(ctx, `INSERT INTO merkle_hashes (user_id, idx, hash) VALUES ('u1', 17, zeroblob(32))`); err != nil {
		t.Fatal(err)
	}
	if err := insert(hashesFrom(15, 4)); err == nil || !strings.Contains(err.Error(), "ends at index 18, not 15") {
		t.Fatalf("a run over a stray row: %v, want refused by the guard", err)
	}
}

// A run whose bytes are not whole hashes reads as malformed, not missing:
// a tree cut short is not rebuilt over, and the chain verification reports it.
func TestRunCutShortReadsAsMalformed(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.insertHashes(ctx, tx, "u1", hashesFrom(0, 4)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteDB().ExecContext(ctx, `UPDATE merkle_hashes SET hash = substr(hash, 1, 100) WHERE user_id = 'u1'`); err != nil {
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

// A client append reads the stored tree's end with its leaf's hashes
// (LeafHashes): where the tree does not end at the new leaf's first hash, it
// fails with the store's error, and nothing is written.
func TestClientAppendRefusedWhereTheTreeDoesNotEnd(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendOne := func(seq int64) (ChargedInsert, error) {
		var out ChargedInsert
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			head, err := s.LockHead(ctx, tx, "u1")
			if err != nil {
				return err
			}
			hash := fmt.Sprintf("sha256:%064x", seq+1)
			e := &Event{UserID: "u1", Sequence: seq, LeafIndex: head.EventCount, EventID: fmt.Sprintf("evt-%d", seq), EventType: "t",
				PrevHash: head.LastHash, PayloadHash: hash, TS: "2026-01-01T00:00:00Z", Surface: "rest"}
			hs, err := s.LeafHashes(ctx, tx, e)
			if err != nil {
				return err
			}
			out, err = s.InsertEventCharged(ctx, tx, ChargedAppend{Event: e, Hashes: hs, Expect: head, Day: "2026-01-01", Limit: 1000})
			return err
		})
		return out, err
	}
	for seq := range int64(3) {
		if out, err := appendOne(seq); err != nil || !out.Appended() {
			t.Fatalf("append %d: %+v %v", seq, out, err)
		}
	}
	// Leaf 3's first hash is index 4; a stray row ahead of it.
	if _, err := s.WriteDB().ExecContext(ctx, `INSERT INTO merkle_hashes (user_id, idx, hash) VALUES ('u1', 9, zeroblob(32))`); err != nil {
		t.Fatal(err)
	}
	if out, err := appendOne(3); err == nil || !strings.Contains(err.Error(), "ends at index 10, not 4") {
		t.Fatalf("append over a stray row: %+v %v, want refused for the tree's end", out, err)
	}
	var events int64
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE user_id = 'u1'`).Scan(&events); err != nil || events != 3 {
		t.Fatalf("%d events stored (%v), want 3", events, err)
	}
}
