package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// Leaf positions without a leaf_index index (migration 007): chain order is
// leaf order, and sequences may have gaps (SPEC.md accepts a higher sequence).
func TestLeafPositionsFollowChainOrder(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-leaf"
		seqs := []int64{0, 1, 5, 6, 7, 100, 101, 1 << 40, 1<<40 + 3}
		var hashes []string
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for leaf, seq := range seqs {
				if _, err := s.LockHead(ctx, tx, user); err != nil {
					return err
				}
				h := fmt.Sprintf("sha256:%064x", leaf+1)
				hashes = append(hashes, h)
				e := store.Event{UserID: user, Sequence: seq, LeafIndex: int64(leaf), EventID: fmt.Sprintf("evt-%d", leaf),
					EventType: "t", PayloadHash: h, TS: "2026-11-21T00:00:00Z", Surface: "rest"}
				if err := s.InsertEvent(ctx, tx, &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for leaf, seq := range seqs {
			e, err := s.EventAtLeaf(ctx, user, int64(leaf))
			if err != nil || e.Sequence != seq {
				t.Fatalf("EventAtLeaf(%d) = sequence %d, %v; want %d", leaf, e.Sequence, err, seq)
			}
		}
		if _, err := s.EventAtLeaf(ctx, user, int64(len(seqs))); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("EventAtLeaf past the tip: %v", err)
		}
		for from := 0; from <= len(seqs); from++ {
			var got []int64
			if err := s.EventsFrom(ctx, user, int64(from), func(e *store.Event) error {
				got = append(got, e.Sequence)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(seqs[from:]) && !(len(got) == 0 && from == len(seqs)) {
				t.Fatalf("EventsFrom(%d) = %v, want %v", from, got, seqs[from:])
			}
		}
		// The ancestry lookup finds an earlier event by hash, never a later one.
		if e, err := s.EventByPayloadHash(ctx, user, hashes[2], seqs[6]); err != nil || e.Sequence != seqs[2] {
			t.Fatalf("EventByPayloadHash = %d, %v", e.Sequence, err)
		}
		if _, err := s.EventByPayloadHash(ctx, user, hashes[6], seqs[6]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("EventByPayloadHash at or after the start: %v", err)
		}
		// It looks back PayloadHashSearchWindow positions and no further.
		edge := seqs[4] + store.PayloadHashSearchWindow
		if e, err := s.EventByPayloadHash(ctx, user, hashes[4], edge); err != nil || e.Sequence != seqs[4] {
			t.Fatalf("EventByPayloadHash at the window's edge = %d, %v; want %d", e.Sequence, err, seqs[4])
		}
		if _, err := s.EventByPayloadHash(ctx, user, hashes[4], edge+1); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("EventByPayloadHash one past the window: %v, want not found", err)
		}
	})
}
