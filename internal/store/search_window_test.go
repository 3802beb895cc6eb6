package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// A windowed search (the console's) reads at most Window rows below the
// cursor and keeps those matching every filter; when fewer than a page
// matched it says where it stopped. The sub-agent is raw's top-level member
// however raw spells its name or its value (escapes included), never a nested
// one, nor text that only mentions it.
func TestSearchWindowed(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-window"
		str := func(v string) *string { return &v }
		raws := map[int64]string{
			3:  `{"subagent":"w1","tool_input":{}}`,
			7:  `{"sub\u0061gent":"w1"}`,
			11: `{"x":{"subagent":"w1"}}`,
			13: `{"subagent":"\u0077\u0031"}`,
			15: `{"subagent":"a\"b"}`,
			17: `{"tool_input":{"cmd":"grep \"subagent\" log"}}`,
			19: `{"note":"caf\u00e9","tool_input":{"cmd":"a\\b"}}`,
			21: `{"subagent":"w1"}`,
			27: `{"cmd":"a\\b","subagent":"w2"}`,
		}
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for seq := range int64(30) {
				surface, tool, decision := "rest", "bash", "allow"
				if seq%5 == 0 {
					surface = "hook"
				}
				if seq%2 == 0 {
					tool = "grep"
				}
				if seq%3 == 0 {
					decision = "deny"
				}
				e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq, EventID: fmt.Sprintf("evt-%d", seq),
					EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", seq+1), TS: "2026-11-21T00:00:00Z", Surface: surface,
					Tool: str(tool), Decision: str(decision)}}, LeafIndex: seq}
				ts := 1_000_000 + seq
				e.TSMicros = &ts
				if r, ok := raws[seq]; ok {
					e.Raw = []byte(r)
				}
				if err := insertEvent(ctx, s, tx, &e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		search := func(f store.SearchFilter) ([]int64, store.SearchPage) {
			t.Helper()
			f.UserID = user
			if f.Limit == 0 {
				f.Limit = 50
			}
			pg, err := s.SearchWindowed(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, r := range pg.Rows {
				seqs = append(seqs, r.Sequence)
			}
			return seqs, pg
		}
		floor := func(pg store.SearchPage) int64 {
			if pg.Floor == nil {
				return -1
			}
			return *pg.Floor
		}
		check := func(name string, got, want []int64, pg store.SearchPage, wantFloor int64) {
			t.Helper()
			if !slices.Equal(got, want) || floor(pg) != wantFloor {
				t.Errorf("%s: %v floor %d; want %v floor %d", name, got, floor(pg), want, wantFloor)
			}
		}

		got, pg := search(store.SearchFilter{Subagent: str("w1"), Window: 1000})
		check("sub-agent w1", got, []int64{21, 13, 7, 3}, pg, -1)
		for _, r := range pg.Rows {
			if r.Subagent == nil || *r.Subagent != "w1" {
				t.Errorf("row %d: subagent %v", r.Sequence, r.Subagent)
			}
		}
		got, pg = search(store.SearchFilter{Subagent: str(`a"b`), Window: 1000})
		check(`sub-agent a"b`, got, []int64{15}, pg, -1)
		got, pg = search(store.SearchFilter{Subagent: str("w2"), Window: 1000})
		check("sub-agent w2 (raw with a backslash)", got, []int64{27}, pg, -1)

		// A window of 10 reads sequences 29…20: the next page is below 20.
		got, pg = search(store.SearchFilter{Surface: str("hook"), Window: 10})
		check("surface, first window", got, []int64{25, 20}, pg, 20)
		cur := int64(20)
		got, pg = search(store.SearchFilter{Surface: str("hook"), Window: 10, Cursor: &cur})
		check("surface, next window", got, []int64{15, 10}, pg, 10)
		cur = 10
		got, pg = search(store.SearchFilter{Surface: str("hook"), Window: 10, Cursor: &cur})
		check("surface, the last window (the chain ends in it)", got, []int64{5, 0}, pg, -1)
		got, pg = search(store.SearchFilter{Surface: str("hook"), Window: 10, Limit: 2})
		check("a full page", got, []int64{25, 20}, pg, -1)

		// The window follows the index of one filter: 10 grep rows reach
		// down to sequence 10, and the next grep row is 8.
		after := int64(1_000_000 + 11)
		got, pg = search(store.SearchFilter{Tool: str("grep"), Decision: str("deny"), Window: 10})
		check("tool and decision", got, []int64{24, 18, 12}, pg, 9)
		got, pg = search(store.SearchFilter{EventTypes: []string{"tool_call"}, Tool: str("grep"), Decision: str("deny"), AfterTS: &after, Window: 100})
		check("type, tool, decision and after", got, []int64{24, 18, 12}, pg, -1)
		before := int64(1_000_000 + 4)
		got, pg = search(store.SearchFilter{BeforeTS: &before, Window: 100})
		check("before", got, []int64{3, 2, 1, 0}, pg, -1)
		got, pg = search(store.SearchFilter{Decision: str("deny"), Window: 100, Limit: 3})
		check("decision alone", got, []int64{27, 24, 21}, pg, -1)
	})
}

// The sub-agent filter takes any raw: an escape PostgreSQL's text cannot hold
// (\u0000, a lone surrogate) neither refuses the append nor stops SQLite's
// indexer, and the filter answers, through events_subagent, before and
// after the rows are indexed.
func TestSubagentIndexTakesAnyRaw(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-hostile"
		raws := []string{
			`{"note":"\u0000","subagent":"w3"}`,
			`{"subagent":"w3\u0000"}`,
			`{"subagent":"\ud800"}`,
			`{"subagent":"w3"}`,
			`[1,2,"subagent"]`,
		}
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for i, r := range raws {
				e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: int64(i), EventID: fmt.Sprintf("evt-%d", i),
					EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", i+1), TS: "2026-11-21T00:00:00Z", Surface: "hook"}},
					LeafIndex: int64(i)}
				e.Raw = []byte(r)
				if err := insertEvent(ctx, s, tx, &e); err != nil {
					return fmt.Errorf("append raw %s: %w", r, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		w3 := "w3"
		for _, when := range []string{"before indexing", "after indexing"} {
			page, err := s.SearchWindowed(ctx, store.SearchFilter{UserID: user, Subagent: &w3, Limit: 50, Window: 5000})
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			var got []string
			for _, r := range page.Rows {
				got = append(got, r.EventID)
			}
			// evt-0 and evt-3 on both stores: a \u0000 elsewhere in raw
			// is no matter (migration 036; before it, PostgreSQL could not
			// read evt-0's member).
			if !slices.Equal(got, []string{"evt-3", "evt-0"}) {
				t.Errorf("%s: subagent=w3 found %v", when, got)
			}
			if _, err := s.IndexBehind(ctx); err != nil {
				t.Fatalf("the indexer stopped: %v", err)
			}
		}
	})
}
