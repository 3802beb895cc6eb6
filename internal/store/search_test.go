package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// testSQLiteStore opens a store on a new SQLite file, closed when the test ends.
func testSQLiteStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// queryPlan is SQLite's plan of q, its steps' details joined by "; ".
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.read.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// Search pages must cost about limit rows at any chain length: every filter
// but the time bounds is served by a key in sequence order, never by a
// scan of the account's events or a sort of them (SQLite's plan; PostgreSQL
// plans by statistics), each row found by its rowid. The rows not yet
// indexed (index_behind.go) are read from events_tail, in sequence order
// too, and merged.
func TestSearchPlans(t *testing.T) {
	s := testSQLiteStore(t)
	str := func(v string) *string { return &v }
	cur := int64(1000)
	tests := []struct {
		name      string
		f         SearchFilter
		wantIndex string
	}{
		{"newest page", SearchFilter{}, "events_seq"},
		{"cursor", SearchFilter{Cursor: &cur}, "events_seq"},
		{"decision", SearchFilter{Decision: str("deny")}, "events_by_decision"},
		{"decision after a cursor", SearchFilter{Decision: str("deny"), Cursor: &cur}, "events_by_decision"},
		{"tool", SearchFilter{Tool: str("bash")}, "events_by_tool"},
		{"one event type", SearchFilter{EventTypes: []string{"tool_call"}}, "events_by_type"},
		{"a tool and a decision", SearchFilter{Tool: str("bash"), Decision: str("deny")}, "events_by_tool"},
		{"sub-agent", SearchFilter{Subagent: str("worker")}, "events_by_subagent"},
	}
	for _, tt := range tests {
		for _, withTail := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, tail %v", tt.name, withTail), func(t *testing.T) {
				tt.f.UserID, tt.f.Limit = "u", 200
				q, args := searchQuery(SQLite, int64(1), tt.f, withTail)
				p := queryPlan(t, s, q, args...)
				if !strings.Contains(p, "SEARCH "+tt.wantIndex+" USING PRIMARY KEY (account=?") || strings.Contains(p, "TEMP B-TREE") {
					t.Errorf("plan %q: want a search of %s in sequence order", p, tt.wantIndex)
				}
				if strings.Contains(p, "SCAN ") || !strings.Contains(p, "SEARCH events USING INTEGER PRIMARY KEY (rowid=?)") {
					t.Errorf("plan %q: want each row found by its rowid", p)
				}
				if withTail && (!strings.Contains(p, "MERGE (UNION ALL)") || !strings.Contains(p, "SEARCH events_tail USING PRIMARY KEY (account=?")) {
					t.Errorf("plan %q: want the rows not yet indexed read from events_tail and merged", p)
				}
			})
		}
	}
}

// A windowed page (the console's) finds its window's end and reads its
// rows through one index in sequence order, the window's: no sort, no other
// index, so a page whose matches come early stops early.
func TestSearchWindowedPlans(t *testing.T) {
	s := testSQLiteStore(t)
	str := func(v string) *string { return &v }
	cur, ts := int64(1000), int64(5)
	tests := []struct {
		name      string
		f         SearchFilter
		wantIndex string
	}{
		{"sub-agent", SearchFilter{Subagent: str("worker")}, "events_by_subagent"},
		{"a sub-agent and a type", SearchFilter{Subagent: str("worker"), EventTypes: []string{"tool_call"}}, "events_by_subagent"},
		{"surface after a cursor", SearchFilter{Surface: str("hook"), Cursor: &cur}, "events_seq"},
		{"after", SearchFilter{AfterTS: &ts}, "events_seq"},
		{"before and a tool", SearchFilter{BeforeTS: &ts, Tool: str("bash")}, "events_by_tool"},
		{"decision and a sub-agent", SearchFilter{Decision: str("deny"), Subagent: str("w")}, "events_by_subagent"},
		{"decision and a surface", SearchFilter{Decision: str("deny"), Surface: str("hook")}, "events_by_decision"},
		{"a type, a tool and a decision", SearchFilter{EventTypes: []string{"tool_call"}, Tool: str("bash"), Decision: str("deny")}, "events_by_type"},
	}
	for _, tt := range tests {
		for _, withTail := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, tail %v", tt.name, withTail), func(t *testing.T) {
				tt.f.UserID, tt.f.Limit, tt.f.Window = "u", 50, 10000
				bound := int64(10)
				bq, bargs := windowBound(SQLite, int64(1), tt.f, withTail)
				q, args := windowQuery(SQLite, int64(1), tt.f, &bound, withTail)
				for _, stmt := range []struct {
					q    string
					args []any
				}{{bq, bargs}, {q, args}} {
					p := queryPlan(t, s, stmt.q, stmt.args...)
					if !strings.Contains(p, "SEARCH "+tt.wantIndex+" USING PRIMARY KEY (account=?") || strings.Contains(p, "TEMP B-TREE") ||
						strings.Contains(p, "SCAN ") {
						t.Errorf("plan %q: want a search of %s in sequence order", p, tt.wantIndex)
					}
					if withTail && !strings.Contains(p, "SEARCH events_tail USING PRIMARY KEY (account=?") {
						t.Errorf("plan %q: want the rows not yet indexed read from events_tail", p)
					}
				}
			})
		}
	}
}
