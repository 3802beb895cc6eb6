package store

import (
	"strings"
	"testing"
)

// Every read by sequence reads the key's two tables on SQLite (migration
// 039): events_seq for the rows indexed and events_tail for the tail, each
// row found by its rowid, never a scan of events, and a read in sequence
// order merges the two arms without sorting them.
func TestReadsBySequencePlans(t *testing.T) {
	s := testSQLiteStore(t)
	tests := []struct {
		name    string
		q       string
		args    []any
		ordered bool
	}{
		{"the event at a sequence (EventAtLeaf)", eventAtSequenceSQL(SQLite), []any{1, 5}, false},
		{"event ids at sequences (a batch below the tip)", eventIDsAtSQL(SQLite, 3), []any{1, 5, 6, 7}, false},
		{"events before a sequence", eventsBeforeSQL(SQLite), []any{1, 100, 20}, true},
		{"the ancestor by payload hash", eventByPayloadHashSQL(SQLite), []any{1, 100, "sha256:00", 0}, true},
		{"a page of the tip in leaf order", tipPageSQL(SQLite), []any{1, 10, 500}, true},
		{"the probe of the first sequence from a leaf", leafProbeSQL(SQLite), []any{1, 10}, true},
		{"the heal scan's page end", scanPageEndSQL(SQLite), []any{1, 0, 100, 9}, true},
		{"the heal scan's page", scanRangeSQL(SQLite), []any{1, 0, 100}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := queryPlan(t, s, tt.q, tt.args...)
			if !strings.Contains(p, "SEARCH events_seq USING PRIMARY KEY (account=? AND sequence") ||
				!strings.Contains(p, "SEARCH events_tail USING PRIMARY KEY (account=? AND sequence") {
				t.Errorf("plan %q: want both parts of the key searched by account and sequence", p)
			}
			if strings.Count(p, "SEARCH events USING INTEGER PRIMARY KEY (rowid=?)") != 2 {
				t.Errorf("plan %q: want each arm's rows found by rowid", p)
			}
			if strings.Contains(p, "SCAN events") {
				t.Errorf("plan %q: a scan of events", p)
			}
			if tt.ordered && (strings.Contains(p, "TEMP B-TREE") || !strings.Contains(p, "MERGE (UNION ALL)")) {
				t.Errorf("plan %q: want the two ordered arms merged, not sorted", p)
			}
		})
	}
}
