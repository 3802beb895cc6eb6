package store_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/auditchain/auditchain/internal/checkpoint"
	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/verify"
)

// appendRaw stores events [from, to) for user the way the append path does:
// head locked, InsertEvent in one transaction per event.
func appendRaw(t *testing.T, s *store.Store, user string, from, to int64) []string {
	t.Helper()
	ctx := context.Background()
	var hashes []string
	for i := from; i < to; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", user, i)))
		h := verify.HashPrefix + hex.EncodeToString(sum[:])
		hashes = append(hashes, h)
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			head, err := s.LockHead(ctx, tx, user)
			if err != nil {
				return err
			}
			return s.InsertEvent(ctx, tx, &store.Event{UserID: user, Sequence: i, LeafIndex: head.EventCount,
				EventID: fmt.Sprintf("evt-%d", i), EventType: "t", PayloadHash: h, TS: "2026-01-01T00:00:00Z", Surface: "rest"})
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	return hashes
}

func refTree(t *testing.T, hashes []string) *testonly.Tree {
	ref := testonly.New(rfc6962.DefaultHasher)
	for _, h := range hashes {
		b, err := verify.HashBytes(h)
		if err != nil {
			t.Fatal(err)
		}
		ref.AppendData(b)
	}
	return ref
}

func TestMerkleTreeMaintainedOnAppend(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		hashes := appendRaw(t, s, "u1", 0, 37)
		appendRaw(t, s, "u2", 0, 5) // another account's tree is separate
		ref := refTree(t, hashes)
		r := s.HashReader(ctx, nil, "u1")
		for n := int64(0); n <= 37; n++ {
			root, err := merkle.Root(n, r)
			if err != nil {
				t.Fatal(err)
			}
			if root != verify.Hash(ref.HashAt(uint64(n))) {
				t.Fatalf("root of %d: %s, reference %x", n, root, ref.HashAt(uint64(n)))
			}
		}
		var rows int64
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM merkle_hashes WHERE user_id = 'u1'`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != merkle.StoredHashCount(37) {
			t.Fatalf("%d rows, want %d", rows, merkle.StoredHashCount(37))
		}

		// A tree that lost its rows (or predates migration 005) is rebuilt
		// from the events by the next append, in its transaction.
		if _, err := s.WriteDB().ExecContext(ctx, `DELETE FROM merkle_hashes WHERE user_id = 'u1'`); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, appendRaw(t, s, "u1", 37, 40)...)
		root, err := merkle.Root(40, s.HashReader(ctx, nil, "u1"))
		if err != nil || root != verify.Hash(refTree(t, hashes).Hash()) {
			t.Fatalf("rebuilt root %s: %v", root, err)
		}
		if _, err := merkle.Root(6, s.HashReader(ctx, nil, "nobody")); !errors.Is(err, store.ErrMissingHash) {
			t.Fatalf("missing tree: %v", err)
		}
	})
}

func TestChainBlocksStored(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		appendRaw(t, s, "u1", 0, 9)
		_, key, _ := ed25519.GenerateKey(nil)
		signer, err := checkpoint.NewSigner(verify.Origin("u1"), key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.LastBlock(ctx, nil, "u1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("no blocks yet: %v", err)
		}
		var prev *checkpoint.Block
		for i, size := range []int64{3, 9} {
			root, err := merkle.Root(size, s.HashReader(ctx, nil, "u1"))
			if err != nil {
				t.Fatal(err)
			}
			b, err := signer.Seal(prev, uint64(size), root)
			if err != nil {
				t.Fatal(err)
			}
			row := store.BlockRow{Block: b, CreatedAt: int64(i)}
			if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.InsertBlock(ctx, tx, "u1", row) }); err != nil {
				t.Fatal(err)
			}
			// A second sealer of the same index fails instead of forking the chain.
			if err := s.InTx(ctx, func(tx *sql.Tx) error { return s.InsertBlock(ctx, tx, "u1", row) }); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("duplicate block index: %v", err)
			}
			prev = &row.Block
		}
		last, err := s.LastBlock(ctx, nil, "u1")
		if err != nil || last.Index != 1 || last.Size != 9 || *last.PrevHash != verify.BlockHash(mustNote(t, s, 0)) {
			t.Fatalf("last block %+v: %v", last, err)
		}
		for _, tc := range []struct {
			name    string
			get     func() (store.BlockRow, error)
			wantIdx int64
		}{
			{"by size", func() (store.BlockRow, error) { return s.BlockBySize(ctx, "u1", 3) }, 0},
			{"at or below", func() (store.BlockRow, error) { return s.BlockAtOrBelow(ctx, "u1", 8) }, 0},
			{"above", func() (store.BlockRow, error) { return s.BlockAbove(ctx, "u1", 3) }, 1},
		} {
			b, err := tc.get()
			if err != nil || b.Index != tc.wantIdx {
				t.Errorf("%s: %+v %v", tc.name, b, err)
			}
		}
		if _, err := s.BlockAbove(ctx, "u1", 9); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("above the last: %v", err)
		}
		var n int
		if err := s.BlocksFrom(ctx, "u1", 1, func(b *store.BlockRow) error { n++; return nil }); err != nil || n != 1 {
			t.Errorf("BlocksFrom(1): %d %v", n, err)
		}
	})
}

func mustNote(t *testing.T, s *store.Store, index int64) []byte {
	t.Helper()
	bs, err := s.Blocks(context.Background(), "u1", index, 1)
	if err != nil || len(bs) != 1 {
		t.Fatalf("block %d: %v", index, err)
	}
	return bs[0].Note
}

// BenchmarkInsertEvent measures the append path's store work (event row, its
// Merkle rows, the head) with 256 appends per transaction, as group commit
// does, so the figure is not just fsync.
func BenchmarkInsertEvent(b *testing.B) {
	for _, backend := range []storetest.Backend{storetest.SQLite, storetest.Postgres} {
		b.Run(string(backend), func(b *testing.B) {
			s := storetest.Open(b, storetest.DSN(b, backend))
			ctx := context.Background()
			var i int64
			for b.Loop() {
				err := s.InTx(ctx, func(tx *sql.Tx) error {
					head, err := s.LockHead(ctx, tx, "u")
					if err != nil {
						return err
					}
					for range 256 {
						sum := sha256.Sum256([]byte(fmt.Sprint(i)))
						e := store.Event{UserID: "u", Sequence: i, LeafIndex: head.EventCount, EventID: fmt.Sprintf("evt-%d", i), EventType: "t",
							PayloadHash: verify.HashPrefix + hex.EncodeToString(sum[:]), TS: "2026-01-01T00:00:00Z", Surface: "rest"}
						if err := s.InsertEvent(ctx, tx, &e); err != nil {
							return err
						}
						head.EventCount++
						i++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i), "ns/event")
		})
	}
}
