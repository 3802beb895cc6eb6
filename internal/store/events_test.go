package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
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
				e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq, EventID: fmt.Sprintf("evt-%d", leaf),
					EventType: "t", PayloadHash: h, TS: "2026-11-21T00:00:00Z", Surface: "rest"}}, LeafIndex: int64(leaf)}
				if err := insertEvent(ctx, s, tx, &e); err != nil {
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

// A batch's rows read back exactly as given, column by column, whether a
// column holds one value for every row (which the insert binds once) or not:
// here the machine, parent, signature and semantic key are shared by the
// first chunk's rows and differ in the second's, and the surface, key and
// creation time differ in one row only.
func TestInsertEventsStoresEveryColumnAsGiven(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-columns"
		str := func(v string) *string { return &v }
		num := func(v int64) *int64 { return &v }
		event := func(i int64, varied bool) store.Event {
			e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
				EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", i+1), Decision: str("allow"),
				Tool: str("bash"), MachineID: str("m1"), TS: "2026-11-26T00:00:00Z", Surface: "rest", APIKeyID: str("key-1"),
				MachineSequence: i}, Raw: []byte(fmt.Sprintf(`{"i":%d}`, i))}, LeafIndex: i, TSMicros: num(1_790_000_000_000_000 + i),
				CreatedAt: 1_790_000_000_000_000}
			if i > 0 {
				e.PrevHash = str(fmt.Sprintf("sha256:%064x", i))
			}
			if varied {
				switch i % 4 {
				case 0:
					e.MachineID, e.ParentID = nil, str("evt-0")
				case 1:
					e.Signature, e.SignatureKey = str(fmt.Sprintf("sig-%d", i)), str("fp-1")
				case 2:
					e.SemanticKey, e.Raw = str(fmt.Sprintf("sem-%d", i)), nil
				}
			}
			return e
		}
		var want []store.Event
		for i := range int64(12) {
			want = append(want, event(i, false))
		}
		for i := int64(12); i < 30; i++ {
			want = append(want, event(i, true))
		}
		want[20].Surface, want[21].APIKeyID, want[22].CreatedAt = "sdk", str("key-2"), 7
		for _, chunk := range [][]store.Event{want[:12], want[12:]} {
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				if _, err := s.LockHead(ctx, tx, user); err != nil {
					return err
				}
				return insertRun(ctx, s, tx, chunk)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var got []store.Event
		if err := s.EventsFrom(ctx, user, 0, func(e *store.Event) error { got = append(got, *e); return nil }); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("stored rows differ from the batch (-want +got):\n%s", diff)
		}
	})
}

// Rows a batch stores below the tip take the next leaves all the same: the
// leaf-order reads (EventsFrom from any leaf, EventAtLeaf, the tree's
// rebuild) merge them back in leaf order, the tip stays the highest
// sequence, and the tree built from the events is the tree appended.
func TestRowsStoredBelowTheTipKeepLeafOrder(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-below"
		event := func(seq int64) store.Event {
			return store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq, EventID: fmt.Sprintf("evt-%d", seq),
				EventType: "t", PayloadHash: fmt.Sprintf("sha256:%064x", seq+1), TS: "2026-11-21T00:00:00Z",
				Surface: "rest"}}}
		}
		// Runs in the order a client imports a history: the tip first, then
		// what lies below it, some above again, with gaps; then a single event.
		runs := [][]int64{{10, 12}, {3, 7, 13}, {0, 1, 2, 11}, {20}}
		var leaves []int64 // sequence at each leaf
		for _, run := range runs {
			var evs []store.Event
			for _, seq := range run {
				evs = append(evs, event(seq))
				leaves = append(leaves, seq)
			}
			if err := s.InTx(ctx, func(tx *sql.Tx) error { return insertRun(ctx, s, tx, evs) }); err != nil {
				t.Fatal(err)
			}
		}
		single := event(21)
		leaves = append(leaves, 21)
		if err := s.InTx(ctx, func(tx *sql.Tx) error { return insertEvent(ctx, s, tx, &single) }); err != nil {
			t.Fatal(err)
		}
		head, err := s.Head(ctx, user)
		if err != nil || head.EventCount != int64(len(leaves)) || head.LastSequence != 21 || *head.LastEventID != "evt-21" {
			t.Fatalf("head %+v, %v; want %d events, tip 21", head, err, len(leaves))
		}
		wantBelow := map[int64]bool{3: true, 7: true, 0: true, 1: true, 2: true, 11: true}
		for from := range int64(len(leaves) + 1) {
			var got []int64
			err := s.EventsFrom(ctx, user, from, func(e *store.Event) error {
				if e.BelowTip != wantBelow[e.Sequence] {
					return fmt.Errorf("event %d below the tip: %v", e.Sequence, e.BelowTip)
				}
				if e.LeafIndex != from+int64(len(got)) {
					return fmt.Errorf("event %d at leaf %d, delivered as leaf %d", e.Sequence, e.LeafIndex, from+int64(len(got)))
				}
				got = append(got, e.Sequence)
				return nil
			})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(leaves[from:]) && len(got)+len(leaves[from:]) > 0 {
				t.Fatalf("EventsFrom(%d) = %v, %v; want %v", from, got, err, leaves[from:])
			}
		}
		for leaf, seq := range leaves {
			if e, err := s.EventAtLeaf(ctx, user, int64(leaf)); err != nil || e.Sequence != seq {
				t.Fatalf("EventAtLeaf(%d) = %d, %v; want %d", leaf, e.Sequence, err, seq)
			}
		}
		root := func() string {
			t.Helper()
			r, err := merkle.Root(int64(len(leaves)), s.HashReader(ctx, nil, user))
			if err != nil {
				t.Fatal(err)
			}
			return r.String()
		}
		before := root()
		ref := &merkle.HashStore{}
		for _, seq := range leaves {
			leaf, _ := verify.HashBytes(event(seq).PayloadHash)
			ref.Append(leaf)
		}
		if before != ref.Root().String() {
			t.Fatalf("stored root %s, the leaves in stored order give %s", before, ref.Root())
		}
		// Lose the tree: the next append rebuilds it from the events, in leaf
		// order (SQLite: the writer's work behind the append does).
		account, err := s.AccountKey(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.WriteDB().ExecContext(ctx, `DELETE FROM merkle_hashes WHERE account = $1`, account); err != nil {
			t.Fatal(err)
		}
		next := event(22)
		if err := s.InTx(ctx, func(tx *sql.Tx) error { return insertEvent(ctx, s, tx, &next) }); err != nil {
			t.Fatal(err)
		}
		if err := ref.Append(mustHashBytes(t, next.PayloadHash)); err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, 22)
		indexBehindAll(t, s)
		if got := root(); got != ref.Root().String() {
			t.Fatalf("rebuilt root %s, want %s", got, ref.Root())
		}
	})
}

func mustHashBytes(t *testing.T, h string) []byte {
	t.Helper()
	b, err := verify.HashBytes(h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Rows stored below the tip farther than any reordering of the sequence
// order could cover (EventsFrom's window for damaged rows): a history of
// 3,000 events imported tip first, then the 2,500 below it in batches, reads
// back in leaf order, from any leaf, and its tree is the one appended.
func TestRowsStoredFarBelowTheTipKeepLeafOrder(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-far"
		var leaves []int64
		run := func(from, to int64) {
			var evs []store.Event
			for seq := from; seq < to; seq++ {
				evs = append(evs, store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq,
					EventID: fmt.Sprintf("evt-%d", seq), EventType: "t", PayloadHash: fmt.Sprintf("sha256:%064x", seq+1),
					TS: "2026-11-21T00:00:00Z", Surface: "rest"}}})
				leaves = append(leaves, seq)
			}
			if err := s.InTx(ctx, func(tx *sql.Tx) error { return insertRun(ctx, s, tx, evs) }); err != nil {
				t.Fatal(err)
			}
		}
		run(2500, 3000)
		for from := int64(0); from < 2500; from += 500 {
			run(from, from+500)
		}
		for _, from := range []int64{0, 1, 499, 500, 1999, 2999} {
			next := from
			err := s.EventsFrom(ctx, user, from, func(e *store.Event) error {
				if e.LeafIndex != next || e.Sequence != leaves[next] {
					return fmt.Errorf("leaf %d: delivered sequence %d at leaf %d", next, e.Sequence, e.LeafIndex)
				}
				next++
				return nil
			})
			if err != nil || next != int64(len(leaves)) {
				t.Fatalf("EventsFrom(%d): %v, ended at %d", from, err, next)
			}
		}
		ref := &merkle.HashStore{}
		for _, seq := range leaves {
			ref.Append(mustHashBytes(t, fmt.Sprintf("sha256:%064x", seq+1)))
		}
		root, err := merkle.Root(int64(len(leaves)), s.HashReader(ctx, nil, user))
		if err != nil || root != ref.Root() {
			t.Fatalf("stored root %s (%v), want %s", root, err, ref.Root())
		}
	})
}
