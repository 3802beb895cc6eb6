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

// Search finds an appended event at once, before the writer indexed it
// (store/index_behind.go: a client reads its own writes), and the same
// events after: every filter, cursor and limit gives the same page whether
// the rows are in the tail, indexed, or some of each.
func TestSearchFindsEventsBeforeAndAfterTheyAreIndexed(t *testing.T) {
	storetest.EachStore(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		const user = "u-behind"
		var all []store.Event
		appendN := func(n int) {
			t.Helper()
			err := s.InTx(ctx, func(tx *sql.Tx) error {
				for range n {
					i := int64(len(all))
					dec, tool := "allow", "bash"
					if i%3 == 0 {
						dec = "deny"
					}
					if i%2 == 0 {
						tool = "edit"
					}
					ts := 1_000_000 + i
					e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: i, EventID: fmt.Sprintf("evt-%d", i),
						EventType: []string{"tool_call", "tool_result"}[i%2], PayloadHash: fmt.Sprintf("sha256:%064x", i+1),
						TS: "2026-11-28T00:00:00Z", Surface: "rest", Decision: &dec, Tool: &tool}}, LeafIndex: i, TSMicros: &ts}
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
		str := func(v string) *string { return &v }
		i64 := func(v int64) *int64 { return &v }
		filters := []struct {
			name  string
			f     store.SearchFilter
			match func(e *store.Event) bool
		}{
			{"all", store.SearchFilter{}, func(*store.Event) bool { return true }},
			{"deny", store.SearchFilter{Decision: str("deny")}, func(e *store.Event) bool { return *e.Decision == "deny" }},
			{"tool", store.SearchFilter{Tool: str("edit")}, func(e *store.Event) bool { return *e.Tool == "edit" }},
			{"type", store.SearchFilter{EventTypes: []string{"tool_result"}}, func(e *store.Event) bool { return e.EventType == "tool_result" }},
			{"types", store.SearchFilter{EventTypes: []string{"tool_result", "tool_call"}}, func(*store.Event) bool { return true }},
			{"after ts", store.SearchFilter{AfterTS: i64(1_000_004)}, func(e *store.Event) bool { return *e.TSMicros > 1_000_004 }},
			{"cursor", store.SearchFilter{Cursor: i64(9), Decision: str("allow")}, func(e *store.Event) bool {
				return e.Sequence < 9 && *e.Decision == "allow"
			}},
		}
		check := func(stage string) {
			t.Helper()
			for _, tt := range filters {
				for _, limit := range []int{3, 200} {
					f := tt.f
					f.UserID, f.Limit = user, limit
					got, err := s.Search(ctx, f)
					if err != nil {
						t.Fatalf("%s, %s: %v", stage, tt.name, err)
					}
					var want, have []int64
					for i := len(all) - 1; i >= 0 && len(want) < limit; i-- {
						if tt.match(&all[i]) {
							want = append(want, all[i].Sequence)
						}
					}
					for _, e := range got {
						have = append(have, e.Sequence)
					}
					if !slices.Equal(have, want) {
						t.Errorf("%s, %s, limit %d: sequences %v, want %v", stage, tt.name, limit, have, want)
					}
				}
			}
		}
		appendN(12)
		check("not yet indexed")
		if _, err := s.IndexBehind(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.EventsBehind(); s.Dialect == store.SQLite && n != 0 {
			t.Fatalf("EventsBehind after IndexBehind = %d", n)
		}
		var marked int
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE unindexed IS NOT NULL`).Scan(&marked); err != nil {
			t.Fatal(err)
		}
		if marked != 0 {
			t.Fatalf("%d rows still marked unindexed after IndexBehind", marked)
		}
		check("indexed")
		appendN(7)
		if n := s.EventsBehind(); s.Dialect == store.SQLite && n != 7 {
			t.Fatalf("EventsBehind after 7 appends = %d", n)
		}
		check("indexed and tail")
	})
}
