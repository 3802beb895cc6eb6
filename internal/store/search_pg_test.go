package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
)

// The PostgreSQL pool forces generic plans (the append's statements were
// planned again on every execution otherwise), but a search's best plan
// depends on its values: a narrow time window must be read through the ts
// index, a window covering the chain from its tip through the primary key.
// Search sends its values inlined, so they are planned each time; the
// generic plan of the same statement reads the wide window through the ts
// index, which on a long chain means reading and sorting all of it.
func TestSearchOnPostgresIsPlannedWithItsValues(t *testing.T) {
	ctx := context.Background()
	s, db := openOneSession(t)
	var mode string
	if err := db.QueryRowContext(ctx, `SHOW plan_cache_mode`).Scan(&mode); err != nil || mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode = %q, %v", mode, err)
	}
	// 50,000 events, one per second from ts_micros 1e12.
	if _, err := db.ExecContext(ctx, `INSERT INTO events (account, sequence, leaf_index, event_id, event_type, payload_hash, ts,
		ts_micros, surface, machine_sequence, created_at)
		SELECT 'u', i, i, 'evt-' || i, 'tool_call', 'sha256:' || md5(i::text) || md5(i::text), 'x', 1000000000000 + i::bigint * 1000000,
			'rest', i, 0 FROM generate_series(0, 49999) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	const second = int64(1000000)
	start := int64(1000000000000)
	window := func(after, before int64) store.SearchFilter {
		return store.SearchFilter{UserID: "u", AfterTS: &after, BeforeTS: &before, Limit: 200}
	}
	narrow, wide := window(start+100*second, start+110*second), window(start-second, start+50000*second)

	// What Search sends, planned with its values: ten seconds are found
	// through the ts index; for a window covering the chain the newest 200
	// are read from the tip through the primary key.
	q, args := s.SearchStatement(narrow)
	if p := explain(t, db, "EXPLAIN "+q, args...); !strings.Contains(p, "events_ts") {
		t.Fatalf("a ten-second window of a 50,000-event chain is not read through events_ts:\n%s", p)
	}
	q, args = s.SearchStatement(wide)
	if p := explain(t, db, "EXPLAIN "+q, args...); strings.Contains(p, "events_ts") || !strings.Contains(p, "events_pkey") {
		t.Fatalf("a window covering the chain is not read from the tip:\n%s", p)
	}
	// Why Search must not be a prepared statement under this pool: the
	// generic plan cannot tell the windows apart and reads the whole chain
	// through the ts index, then sorts it, for the wide one.
	raw, rawArgs := store.SearchQuery(wide)
	if _, err := db.ExecContext(ctx, "PREPARE search_generic AS "+raw); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for _, a := range rawArgs {
		vals = append(vals, fmt.Sprint(a))
	}
	if p := explain(t, db, "EXPLAIN EXECUTE search_generic("+"'"+vals[0]+"', "+strings.Join(vals[1:], ", ")+")"); !strings.Contains(p, "events_ts") {
		t.Fatalf("the generic plan of the wide window does not use events_ts (then this test no longer shows why Search inlines its values):\n%s", p)
	}
	after, before := start+100*second, start+110*second
	got, err := s.Search(ctx, store.SearchFilter{UserID: "u", AfterTS: &after, BeforeTS: &before, Limit: 200})
	if err != nil || len(got) != 9 || got[0].Sequence != 109 || got[8].Sequence != 101 {
		t.Fatalf("search of the window: %d events, %v", len(got), err)
	}
}

// The gate's read of one grant id is its own statement: under the pool's
// generic plans, "($4 IS NULL OR grant_id = $4)" could not be dropped and the
// newest-grant half walked all of a sub-agent's grants to find an old id.
func TestGateByGrantIDReadsThePrimaryKeyUnderGenericPlans(t *testing.T) {
	ctx := context.Background()
	s, db := openOneSession(t)
	if _, err := db.ExecContext(ctx, `INSERT INTO grants (user_id, grant_id, generation, subagent, allowed_tools, max_tool_calls,
		expires_at, created_at, revoked_at, epoch, token)
		SELECT 'u', 'grant-' || i, 0, 'w', '[]', 10, 1000 + i, i, 1000 + i, 'e', 't' FROM generate_series(0, 19999) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE grants`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "PREPARE gate AS "+store.GateQuery(true)); err != nil {
		t.Fatal(err)
	}
	p := explain(t, db, `EXPLAIN EXECUTE gate('u', 'w', 5000000, 'grant-5')`)
	if !strings.Contains(p, "grants_pkey") || strings.Contains(p, "grants_subagent") {
		t.Fatalf("the generic plan of the gate by id does not go to the grant through the primary key:\n%s", p)
	}
	// The same statement answers: grant-5 is expired (expires_at 1005 < now).
	id := "grant-5"
	gs, err := s.GateCandidates(ctx, nil, "u", "w", &id, time.UnixMicro(5000000))
	if err != nil || len(gs) != 1 || gs[0].GrantID != "grant-5" {
		t.Fatalf("GateCandidates by id = %+v, %v", gs, err)
	}
}

// explain returns the plan a query prints (an EXPLAIN statement).
func explain(t *testing.T, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// openOneSession opens a fresh PostgreSQL store with a pool of one
// connection, so PREPARE and EXPLAIN EXECUTE share a session.
func openOneSession(t *testing.T) (*store.Store, *sql.DB) {
	t.Helper()
	s, err := store.OpenWith(context.Background(), storetest.DSN(t, storetest.Postgres), store.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.WriteDB()
}
