package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Every read by sequence finds an account's events whether they are indexed,
// still in the tail (SQLite's key by sequence is built behind the append,
// migration 037), or some of each, in the same order.
func TestReadsBySequenceFindTheTailAndTheIndexedRows(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-by-sequence"
		var all []store.Event
		appendN := func(n int) {
			t.Helper()
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				for range n {
					i := int64(len(all))
					e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
						EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", i+1), TS: "2026-11-28T00:00:00Z", Surface: "rest"}},
						LeafIndex: i}
					if err := insertEvent(ctx, s, tx, &e); err != nil {
						return err
					}
					all = append(all, e)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		sequences := func(evs []store.Event) []int64 {
			var out []int64
			for _, e := range evs {
				out = append(out, e.Sequence)
			}
			return out
		}
		check := func(stage string) {
			t.Helper()
			want := sequences(all)
			// EventsBySequence (the heal scan) and EventsFrom (exports,
			// proofs, the tree's rebuild): every row, in order.
			var got []int64
			if err := s.EventsBySequence(ctx, user, math.MaxInt64, func(e *store.Event) error {
				got = append(got, e.Sequence)
				return nil
			}); err != nil || !slices.Equal(got, want) {
				t.Errorf("%s: EventsBySequence read %v (%v), want %v", stage, got, err, want)
			}
			got = got[:0]
			if err := s.EventsFrom(ctx, user, 0, func(e *store.Event) error {
				got = append(got, e.Sequence)
				return nil
			}); err != nil || !slices.Equal(got, want) {
				t.Errorf("%s: EventsFrom read %v (%v), want %v", stage, got, err, want)
			}
			got = got[:0]
			if err := s.EventsFrom(ctx, user, 5, func(e *store.Event) error {
				got = append(got, e.Sequence)
				return nil
			}); err != nil || !slices.Equal(got, want[5:]) {
				t.Errorf("%s: EventsFrom leaf 5 read %v (%v), want %v", stage, got, err, want[5:])
			}
			// EventAtLeaf and the ancestor by payload hash, at each row.
			for _, e := range all {
				at, err := s.EventAtLeaf(ctx, user, e.LeafIndex)
				if err != nil || at.EventID != e.EventID {
					t.Errorf("%s: EventAtLeaf(%d) = %s, %v; want %s", stage, e.LeafIndex, at.EventID, err, e.EventID)
				}
				anc, err := s.EventByPayloadHash(ctx, user, e.PayloadHash, int64(len(all)))
				if err != nil || anc.EventID != e.EventID {
					t.Errorf("%s: EventByPayloadHash(%s) = %s, %v; want %s", stage, e.PayloadHash, anc.EventID, err, e.EventID)
				}
			}
			if _, err := s.EventAtLeaf(ctx, user, int64(len(all))); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: EventAtLeaf past the head: %v, want not found", stage, err)
			}
			// EventsBefore (newest first) and EventIDsAt.
			before, err := s.EventsBefore(ctx, user, int64(len(all)), 1000)
			if err != nil {
				t.Fatal(err)
			}
			newestFirst := slices.Clone(want)
			slices.Reverse(newestFirst)
			if got := sequences(before); !slices.Equal(got, newestFirst) {
				t.Errorf("%s: EventsBefore read %v", stage, got)
			}
			ids, err := s.EventIDsAt(ctx, s.DB(), user, append(slices.Clone(want), 999))
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != len(all) {
				t.Errorf("%s: EventIDsAt found %d of %d (and none at 999): %v", stage, len(ids), len(all), ids)
			}
			for _, e := range all {
				if ids[e.Sequence] != e.EventID {
					t.Errorf("%s: EventIDsAt[%d] = %q, want %q", stage, e.Sequence, ids[e.Sequence], e.EventID)
				}
			}
		}
		appendN(12)
		check("in the tail")
		if _, err := s.IndexBehind(ctx); err != nil {
			t.Fatal(err)
		}
		check("indexed")
		appendN(7)
		check("indexed and in the tail")
	})
}

// The key by sequence stays unique on SQLite (migration 037) as the primary
// key kept it: a second row at a sequence is refused at its insert, with
// the primary key's error, whether the row it meets is in its own part of
// the key (the tail or the rows indexed) or in the other.
func TestTheKeyBySequenceRefusesADuplicate(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	const user = "u-dup"
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		for i := range int64(3) {
			e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
				EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", i+1), TS: "2026-11-28T00:00:00Z", Surface: "rest"}},
				LeafIndex: i}
			if err := insertEvent(ctx, s, tx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var account int64
	if err := s.DB().QueryRowContext(ctx, `SELECT account FROM events LIMIT 1`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	insert := func(seq int64, id string, unindexed any) error {
		_, err := s.WriteDB().ExecContext(ctx, `INSERT INTO events (account, sequence, leaf_index, event_id, event_type,
			payload_hash, ts, surface, machine_sequence, created_at, unindexed)
			VALUES ($1, $2, $2, $3, 'tool_call', $4, '2026-11-28T00:00:00Z', 'rest', $2, 1, $5)`,
			account, seq, id, fmt.Sprintf("sha256:%064x", 100+seq), unindexed)
		return err
	}
	refused := func(what string, err error) {
		t.Helper()
		if !store.IsUniqueViolation(err) {
			t.Errorf("%s: %v, want a unique violation", what, err)
		}
	}
	// Every row is in the tail: single appends.
	refused("a tail row beside a tail row", insert(1, "evt-dup-1", 1))
	refused("an indexed row beside a tail row", insert(1, "evt-dup-2", nil))
	if _, err := s.IndexBehind(ctx); err != nil {
		t.Fatal(err)
	}
	refused("an indexed row beside an indexed row", insert(1, "evt-dup-3", nil))
	refused("a tail row beside an indexed row", insert(1, "evt-dup-4", 1))
	// A new sequence is taken in either part.
	if err := insert(3, "evt-3", 1); err != nil {
		t.Fatalf("a tail row at a new sequence: %v", err)
	}
	if err := insert(4, "evt-4", nil); err != nil {
		t.Fatalf("an indexed row at a new sequence: %v", err)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE account = $1`, account).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d rows (%v), want 5", n, err)
	}
	if _, err := s.IndexBehind(ctx); err != nil {
		t.Fatalf("indexing after the refusals: %v", err)
	}
}
