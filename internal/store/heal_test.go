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

// insertSequences stores events with the given sequences for user in one
// run, as batch ingest does (payload hashes are placeholders: only order
// matters here).
func insertSequences(t *testing.T, s *store.Store, user string, seqs []int64) {
	t.Helper()
	ctx := context.Background()
	evs := make([]store.Event, len(seqs))
	for i, seq := range seqs {
		evs[i] = store.Event{UserID: user, Sequence: seq, EventID: fmt.Sprintf("evt-%d", seq), EventType: "t",
			PayloadHash: fmt.Sprintf("sha256:%064x", seq+1), TS: "2026-01-01T00:00:00Z", Surface: "rest"}
	}
	if err := s.InTx(ctx, func(tx *sql.Tx) error { return insertRun(ctx, s, tx, evs) }); err != nil {
		t.Fatal(err)
	}
}

func TestEventsBySequenceStreamsInOrder(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		// More than two pages, a hole, and sparse sequences far apart.
		var seqs []int64
		for i := int64(0); i < 2*store.ScanPage+500; i++ {
			if i != 1234 {
				seqs = append(seqs, i)
			}
		}
		seqs = append(seqs, 1<<40, 1<<41)
		insertSequences(t, s, "u1", seqs)
		insertSequences(t, s, "u2", []int64{0, 1, 2})

		var got []int64
		if err := s.EventsBySequence(ctx, "u1", 1<<41, func(e *store.Event) error {
			if e.UserID != "u1" || e.EventID != fmt.Sprintf("evt-%d", e.Sequence) {
				return fmt.Errorf("row %+v", e)
			}
			got = append(got, e.Sequence)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(seqs) {
			t.Fatalf("streamed %d events, want %d", len(got), len(seqs))
		}
		for i := range seqs {
			if got[i] != seqs[i] {
				t.Fatalf("event %d has sequence %d, want %d", i, got[i], seqs[i])
			}
		}
		// maxSequence bounds the snapshot; an error from fn stops the stream.
		n := 0
		s.EventsBySequence(ctx, "u1", 99, func(*store.Event) error { n++; return nil })
		if n != 100 {
			t.Fatalf("bounded stream gave %d events", n)
		}
		stop := errors.New("stop")
		n = 0
		if err := s.EventsBySequence(ctx, "u1", 1<<41, func(*store.Event) error {
			if n++; n == store.ScanPage+3 {
				return stop
			}
			return nil
		}); !errors.Is(err, stop) || n != store.ScanPage+3 {
			t.Fatalf("stopped stream: %v after %d", err, n)
		}
		n = 0
		if err := s.EventsBySequence(ctx, "nobody", 10, func(*store.Event) error { n++; return nil }); err != nil || n != 0 {
			t.Fatalf("empty account: %v, %d events", err, n)
		}
	})
}

func TestHealRepairsAndAnchorsAreUnique(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		r := store.HealRepair{UserID: "u", FindingKey: "gap:4:5:5", Kind: "gap", RepairEventID: "evt-r", RepairSequence: 9, CreatedAt: 1}
		if _, err := s.HealRepairByKey(ctx, nil, "u", r.FindingKey); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("before insert: %v", err)
		}
		insert := func(fn func(tx *sql.Tx) error) error { return s.InTx(ctx, fn) }
		if err := insert(func(tx *sql.Tx) error { return s.InsertHealRepair(ctx, tx, r) }); err != nil {
			t.Fatal(err)
		}
		if err := insert(func(tx *sql.Tx) error { return s.InsertHealRepair(ctx, tx, r) }); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second insert: %v", err)
		}
		if got, err := s.HealRepairByKey(ctx, nil, "u", r.FindingKey); err != nil || got != r {
			t.Fatalf("read back %+v, %v", got, err)
		}

		a := store.Anchor{UserID: "u", BlockIndex: 2, TreeSize: 10, RootHash: make([]byte, 32), BlockHash: make([]byte, 32),
			Provider: "rfc3161", TSAURL: "http://tsa", Token: []byte{1, 2}, GenTime: 5, SerialNumber: "7", EventID: "evt-a", ChainSize: 11, CreatedAt: 6}
		if _, err := s.LastAnchor(ctx, nil, "u"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("before insert: %v", err)
		}
		if err := insert(func(tx *sql.Tx) error { return s.InsertAnchor(ctx, tx, a) }); err != nil {
			t.Fatal(err)
		}
		if err := insert(func(tx *sql.Tx) error { return s.InsertAnchor(ctx, tx, a) }); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second insert: %v", err)
		}
		older := a
		older.BlockIndex, older.EventID = 1, "evt-old"
		if err := insert(func(tx *sql.Tx) error { return s.InsertAnchor(ctx, tx, older) }); err != nil {
			t.Fatal(err)
		}
		if got, err := s.LastAnchor(ctx, nil, "u"); err != nil || got.BlockIndex != 2 || got.ChainSize != 11 || got.EventID != "evt-a" {
			t.Fatalf("last anchor %+v, %v", got, err)
		}
	})
}
