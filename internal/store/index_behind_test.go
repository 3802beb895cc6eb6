package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
					// The console's bounded search reads the same rows
					// when its window holds the whole chain.
					f.Window = 1000
					page, err := s.SearchWindowed(ctx, f)
					if err != nil {
						t.Fatalf("%s, %s: SearchWindowed: %v", stage, tt.name, err)
					}
					have = have[:0]
					for _, e := range page.Rows {
						have = append(have, e.Sequence)
					}
					if !slices.Equal(have, want) {
						t.Errorf("%s, %s, limit %d: SearchWindowed sequences %v, want %v", stage, tt.name, limit, have, want)
					}
				}
			}
		}
		appendN(12)
		check("not yet indexed")
		if _, err := s.IndexBehind(ctx); err != nil {
			t.Fatal(err)
		}
		if s.Dialect == store.SQLite {
			var tail int
			if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events_tail`).Scan(&tail); err != nil {
				t.Fatal(err)
			}
			if n := s.EventsBehind(); n != 0 || tail != 0 {
				t.Fatalf("EventsBehind %d and %d rows in the tail after IndexBehind, want 0 and 0", n, tail)
			}
		}
		check("indexed")
		appendN(7)
		if n := s.EventsBehind(); s.Dialect == store.SQLite && n != 7 {
			t.Fatalf("EventsBehind after 7 appends = %d", n)
		}
		check("indexed and tail")
	})
}

// BenchmarkIndexBehind measures IndexBehind on a tail as the writer leaves
// it under load: store.IndexBehindRows single appends spread over 100
// accounts, indexed chunk by chunk. A chunk's time (ms/chunk) is a pause of
// the writer between two group commits.
func BenchmarkIndexBehind(b *testing.B) { benchIndexBehind(b, nil) }

// benchIndexBehind is BenchmarkIndexBehind with raw on every appended row.
func benchIndexBehind(b *testing.B, raw json.RawMessage) {
	s := storetest.Open(b, storetest.DSN(b, storetest.SQLite))
	ctx := context.Background()
	const accounts = 100
	seq := make([]int64, accounts)
	var rows, chunks int64
	for b.Loop() {
		b.StopTimer()
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for i := range store.IndexBehindRows {
				a := i % accounts
				user := fmt.Sprintf("u-%03d", a)
				head, err := s.LockHead(ctx, tx, user)
				if err != nil {
					return err
				}
				dec, tool := "allow", "bash"
				e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq[a],
					EventID: fmt.Sprintf("evt-%d-%d", a, seq[a]), EventType: "tool_call",
					PayloadHash: fmt.Sprintf("sha256:%064x", rows+int64(i)), TS: "2026-11-28T00:00:00Z", Surface: "rest",
					Decision: &dec, Tool: &tool}, Raw: raw}, LeafIndex: head.EventCount, TSMicros: &rows}
				if err := insertEvent(ctx, s, tx, &e); err != nil {
					return err
				}
				seq[a]++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for s.EventsBehind() > 0 {
			n, err := s.IndexBehind(ctx)
			if err != nil {
				b.Fatal(err)
			}
			rows += n
			chunks++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks)/1e6, "ms/chunk")
}

// A tail longer than a chunk is indexed chunk by chunk, sweeping round the
// accounts, and a store opened on a tail left behind (a crash, a stop)
// counts it, so that search reads it and the writer indexes it.
func TestIndexBehindSweepsTheTailInChunks(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t, storetest.SQLite)
	s := storetest.Open(t, dsn)
	const accounts = 7
	rows := store.IndexBehindChunk*2 + 100
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		for i := range rows {
			user := fmt.Sprintf("u-sweep-%d", i%accounts)
			head, err := s.LockHead(ctx, tx, user)
			if err != nil {
				return err
			}
			seq := int64(i / accounts)
			e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq, EventID: fmt.Sprintf("evt-%d", seq),
				EventType: "tool_call", PayloadHash: fmt.Sprintf("sha256:%064x", i+1), TS: "2026-11-28T00:00:00Z", Surface: "rest"}},
				LeafIndex: head.EventCount}
			if err := insertEvent(ctx, s, tx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	inTail := func() int64 {
		t.Helper()
		var n int64
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events_tail`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A store opened now finds the whole tail.
	again, err := store.Open(ctx, "sqlite:"+strings.TrimPrefix(dsn, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	if n := again.EventsBehind(); n != int64(rows) {
		t.Fatalf("a store opened on a tail of %d rows counts %d", rows, n)
	}
	again.Close()

	if n := s.EventsBehind(); n != int64(rows) {
		t.Fatalf("EventsBehind = %d, want %d", n, rows)
	}
	var calls int
	for s.EventsBehind() > 0 {
		n, err := s.IndexBehind(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > store.IndexBehindChunk {
			t.Fatalf("one IndexBehind indexed %d rows, more than a chunk", n)
		}
		if calls++; calls > 10 {
			t.Fatalf("%d calls and %d rows still behind", calls, s.EventsBehind())
		}
	}
	if m := inTail(); m != 0 {
		t.Fatalf("%d rows still in the tail when EventsBehind is 0", m)
	}
	if calls < 3 {
		t.Fatalf("%d rows indexed in %d calls, want chunks of at most %d", rows, calls, store.IndexBehindChunk)
	}
	got, err := s.Search(ctx, store.SearchFilter{UserID: "u-sweep-3", EventTypes: []string{"tool_call"}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if want := (rows - 3 + accounts - 1) / accounts; len(got) != want {
		t.Fatalf("search after the sweep found %d events of u-sweep-3, want %d", len(got), want)
	}
}

// IndexBehind called from two goroutines at once (the writer's loop and a
// test, or any second caller) counts each row off once: the count of rows
// behind ends at zero with the tail empty, never below zero, which would
// hide the tail from the reads that skip it when the count says it is
// empty.
func TestIndexBehindCountsRowsOffOnceUnderConcurrentCallers(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t, storetest.DSN(t, storetest.SQLite))
	seq := map[string]int64{}
	for round := range 20 {
		err := s.InTx(ctx, func(tx *sql.Tx) error {
			for i := range 30 {
				user := fmt.Sprintf("u-conc-%d", i%3)
				e := store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: user, Sequence: seq[user],
					EventID: fmt.Sprintf("evt-%d-%d", round, i), EventType: "tool_call",
					PayloadHash: fmt.Sprintf("sha256:%064x", round*100+i+1), TS: "2026-11-28T00:00:00Z", Surface: "rest"}},
					LeafIndex: seq[user]}
				if err := insertEvent(ctx, s, tx, &e); err != nil {
					return err
				}
				seq[user]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		for range 2 {
			go func() {
				for s.EventsBehind() > 0 {
					if _, err := s.IndexBehind(ctx); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		var tail int64
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events_tail`).Scan(&tail); err != nil {
			t.Fatal(err)
		}
		if n := s.EventsBehind(); n != 0 || tail != 0 {
			t.Fatalf("round %d: EventsBehind %d with %d rows in the tail, want 0 and 0", round, n, tail)
		}
	}
}
