package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
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

// The key by sequence stays unique on SQLite (migrations 037 and 039) as the
// primary key kept it: a second row at a sequence is refused at its insert,
// with the primary key's error, whether the row it meets is in the tail or
// indexed, and nothing of it is stored, even under the append's ON CONFLICT
// of the dedup key.
func TestTheKeyBySequenceRefusesADuplicate(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	const user = "u-dup"
	appendRange(t, s, user, "evt", 0, 3)
	var account int64
	if err := s.DB().QueryRowContext(ctx, `SELECT account FROM events LIMIT 1`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	insert := func(seq int64, id string) error {
		_, err := s.WriteDB().ExecContext(ctx, `INSERT INTO events (account, sequence, leaf_index, event_id, event_type,
			payload_hash, ts, surface, machine_sequence, created_at)
			VALUES ($1, $2, $2, $3, 'tool_call', $4, '2026-11-28T00:00:00Z', 'rest', $2, 1)
			ON CONFLICT (account, event_id) DO NOTHING`,
			account, seq, id, fmt.Sprintf("sha256:%064x", 100+seq))
		return err
	}
	refused := func(what string, err error) {
		t.Helper()
		if !store.IsUniqueViolation(err) {
			t.Errorf("%s: %v, want a unique violation", what, err)
		}
	}
	// Every row is in the tail (events_tail): single appends.
	refused("a row beside a row of the tail", insert(1, "evt-dup-1"))
	if _, err := s.IndexBehind(ctx); err != nil {
		t.Fatal(err)
	}
	// Every row is indexed (events_seq).
	refused("a row beside an indexed row", insert(1, "evt-dup-2"))
	// A new sequence is taken, beside both parts.
	if err := insert(3, "evt-3"); err != nil {
		t.Fatalf("a row at a new sequence: %v", err)
	}
	refused("a row beside a row of the tail, beside indexed rows", insert(3, "evt-dup-3"))
	if err := insert(4, "evt-4"); err != nil {
		t.Fatalf("a second row at a new sequence: %v", err)
	}
	// The append's ON CONFLICT (the dedup key's) skips a stored event_id
	// and nothing else: the key's refusal above failed the whole insert.
	if err := insert(5, "evt-4"); err != nil {
		t.Fatalf("a stored event_id at a new sequence: %v, want it skipped", err)
	}
	// A conflict policy of an insert past the service (the service sends
	// none) does not reach the key: refused all the same, in either part.
	for _, policy := range []string{"OR IGNORE", "OR REPLACE"} {
		for _, seq := range []int64{1, 4} {
			_, err := s.WriteDB().ExecContext(ctx, `INSERT `+policy+` INTO events (account, sequence, leaf_index, event_id, event_type,
				payload_hash, ts, surface, machine_sequence, created_at)
				VALUES ($1, $2, $2, $3, 'tool_call', 'sha256:00', '2026-11-28T00:00:00Z', 'rest', $2, 1)`,
				account, seq, fmt.Sprintf("evt-%s-%d", policy, seq))
			refused(fmt.Sprintf("INSERT %s at the taken %d", policy, seq), err)
		}
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE account = $1`, account).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d rows (%v), want 5", n, err)
	}
	if _, err := s.IndexBehind(ctx); err != nil {
		t.Fatalf("indexing after the refusals: %v", err)
	}
	var keys, tail int
	if err := s.DB().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events_seq WHERE account = $1),
		(SELECT count(*) FROM events_tail WHERE account = $1)`, account).Scan(&keys, &tail); err != nil || keys != 5 || tail != 0 {
		t.Fatalf("%d keys and %d in the tail (%v), want 5 and 0", keys, tail, err)
	}
}

// A write to the file past the service (an operator's repair, or tampering
// the verification must report) keeps SQLite's keys exact, as the indexes
// they replaced were kept (migration 039): an updated row is read by key at
// its new sequence and refused at a taken one, a deleted row leaves no key,
// and search finds the row by its new values once the tail is indexed.
func TestTheKeysFollowAWritePastTheService(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t, storetest.SQLite)
	s := storetest.Open(t, dsn)
	const user = "u-past"
	appendRange(t, s, user, "evt", 0, 6)
	var account int64
	if err := s.DB().QueryRowContext(ctx, `SELECT account FROM events LIMIT 1`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	// Rows 0–2 indexed, 3–5 in the tail.
	if _, err := s.IndexBehind(ctx); err != nil {
		t.Fatal(err)
	}
	appendRange(t, s, user, "evt", 6, 9)
	exec := func(q string, args ...any) error {
		_, err := s.WriteDB().ExecContext(ctx, q, append([]any{account}, args...)...)
		return err
	}
	idAt := func(seq int64) string {
		t.Helper()
		var id string
		switch err := s.DB().QueryRowContext(ctx, `SELECT event_id FROM events_seq k JOIN events e ON e.rowid = k.rid
			WHERE k.account = $1 AND k.sequence = $2 AND e.sequence = k.sequence
			UNION ALL SELECT event_id FROM events_tail k JOIN events e ON e.rowid = k.rid
			WHERE k.account = $1 AND k.sequence = $2 AND e.sequence = k.sequence`, account, seq).Scan(&id); {
		case errors.Is(err, sql.ErrNoRows):
			return ""
		case err != nil:
			t.Fatal(err)
		}
		return id
	}
	// Swapped through a free sequence, an indexed row and a tail row.
	for _, q := range []struct{ from, to int64 }{{1, -1}, {7, 1}, {-1, 7}} {
		if err := exec(`UPDATE events SET sequence = $3 WHERE account = $1 AND sequence = $2`, q.from, q.to); err != nil {
			t.Fatalf("update %d to %d: %v", q.from, q.to, err)
		}
	}
	if a, b := idAt(1), idAt(7); a != "evt-7" || b != "evt-1" {
		t.Fatalf("after the swap: sequence 1 reads %q, 7 reads %q; want evt-7 and evt-1", a, b)
	}
	// A taken sequence is refused, indexed or in the tail.
	for _, to := range []int64{0, 4} {
		if err := exec(`UPDATE events SET sequence = $3 WHERE account = $1 AND sequence = $2`, 2, to); !store.IsUniqueViolation(err) {
			t.Errorf("update of 2 to the taken %d: %v, want a unique violation", to, err)
		}
	}
	if idAt(2) != "evt-2" {
		t.Fatalf("sequence 2 reads %q after the refused updates", idAt(2))
	}
	// A deleted row leaves no key, in either part.
	if err := exec(`DELETE FROM events WHERE account = $1 AND sequence IN (0, 8)`); err != nil {
		t.Fatal(err)
	}
	var stale int
	if err := s.DB().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events_seq k LEFT JOIN events e ON e.rowid = k.rid WHERE e.rowid IS NULL)
		+ (SELECT count(*) FROM events_tail k LEFT JOIN events e ON e.rowid = k.rid WHERE e.rowid IS NULL)
		+ (SELECT count(*) FROM events_by_type k LEFT JOIN events e ON e.rowid = k.rid WHERE e.rowid IS NULL)`).Scan(&stale); err != nil || stale != 0 {
		t.Fatalf("%d keys of deleted rows (%v)", stale, err)
	}
	// A changed type: search finds the row by its new type once the tail
	// the update put it in is indexed: by this store's next IndexBehind,
	// which counts the tail it leaves (EventsBehind did not count the row),
	// or after a start, which counts the tail.
	if err := exec(`UPDATE events SET event_type = 'session_start' WHERE account = $1 AND sequence = 2`); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := s.IndexBehind(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var tail int64
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events_tail`).Scan(&tail); err != nil || tail != 0 || s.EventsBehind() != 0 {
		t.Fatalf("after indexing: %d rows in the tail (%v), EventsBehind %d; want 0 and 0", tail, err, s.EventsBehind())
	}
	if got, err := s.Search(ctx, store.SearchFilter{UserID: user, EventTypes: []string{"session_start"}, Limit: 10}); err != nil || len(got) != 1 {
		t.Fatalf("search by the new type on the same store: %v, %v; want evt-2", got, err)
	}
	if err := exec(`UPDATE events SET event_type = 'session_start' WHERE account = $1 AND sequence = 3`); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for again.EventsBehind() > 0 {
		if _, err := again.IndexBehind(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := again.Search(ctx, store.SearchFilter{UserID: user, EventTypes: []string{"session_start"}, Limit: 10})
	if err != nil || len(got) != 2 || got[0].EventID != "evt-3" || got[1].EventID != "evt-2" {
		t.Fatalf("search by the new type after a start: %v, %v; want evt-3 and evt-2", got, err)
	}
	if got, err := again.Search(ctx, store.SearchFilter{UserID: user, EventTypes: []string{"tool_call"}, Limit: 10}); err != nil || len(got) != 5 {
		t.Fatalf("search by the old type: %d rows, %v; want 5", len(got), err)
	}
}

// SQLite's keys name their rows by rowid (migration 039), and events has no
// INTEGER PRIMARY KEY, whose rowids SQLite's documentation lets VACUUM
// renumber: a backup (VACUUM INTO) and a VACUUM must keep every row found
// by its keys, gaps in the rowids included (a row deleted past the service).
func TestTheKeysSurviveABackupAndAVacuum(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	const user = "u-vacuum"
	// A gap in the rowids amid the account's rows: another account's rows,
	// deleted past the service before they were indexed.
	appendRange(t, s, user, "evt", 0, 15)
	appendRange(t, s, "u-gone", "evt-gone", 0, 5)
	appendRange(t, s, user, "evt", 15, 30)
	if _, err := s.WriteDB().ExecContext(ctx, `DELETE FROM events WHERE event_id LIKE 'evt-gone-%'`); err != nil {
		t.Fatal(err)
	}
	for s.EventsBehind() > 0 {
		if _, err := s.IndexBehind(ctx); err != nil {
			t.Fatal(err)
		}
	}
	appendRange(t, s, user, "evt", 30, 40) // in the tail
	var gap int64
	if err := s.DB().QueryRowContext(ctx, `SELECT max(rowid) - count(*) FROM events`).Scan(&gap); err != nil || gap != 5 {
		t.Fatalf("the rowids have a gap of %d (%v), want 5", gap, err)
	}
	const rows = 40
	check := func(what string, st *store.Store) {
		t.Helper()
		all, err := st.EventsBefore(ctx, user, 1<<62, 1000)
		if err != nil || len(all) != rows || all[0].EventID != "evt-39" || all[rows-1].EventID != "evt-0" {
			t.Fatalf("%s: %d events by sequence (%v), want %d", what, len(all), err, rows)
		}
		found, err := st.Search(ctx, store.SearchFilter{UserID: user, EventTypes: []string{"tool_call"}, Limit: 1000})
		if err != nil || len(found) != rows {
			t.Fatalf("%s: search found %d (%v), want %d", what, len(found), err, rows)
		}
	}
	check("the store", s)
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := s.BackupTo(ctx, path); err != nil {
		t.Fatal(err)
	}
	backup, err := store.Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer backup.Close()
	check("the backup", backup)
	if _, err := s.WriteDB().ExecContext(ctx, `VACUUM`); err != nil {
		t.Fatal(err)
	}
	check("the store after VACUUM", s)
}

// appendRange appends the events from to to of user's chain (event ids
// prefix-N, one transaction), as single appends do: each row enters the
// tail.
func appendRange(t *testing.T, s *store.Store, user, prefix string, from, to int64) {
	t.Helper()
	ctx := context.Background()
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		for i := from; i < to; i++ {
			e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("%s-%d", prefix, i),
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
}
