package store

// POST /v1/events/search, and the newest event with a dedup semantic key.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/jackc/pgx/v5"
)

// SearchFilter selects events for POST /v1/events/search.
type SearchFilter struct {
	UserID     string
	AfterTS    *int64 // ts strictly after, unix micros
	BeforeTS   *int64 // ts strictly before
	Cursor     *int64 // sequence strictly below
	Decision   *string
	EventTypes []string
	Tool       *string
	// Surface and Subagent are the console's filters (not the API's):
	// the stored surface, and raw's subagent member (a tool call's; the
	// subagent column, RawSubagent).
	Surface  *string
	Subagent *string
	Limit    int
	// Window, when above 0, bounds the rows a page reads (SearchWindowed):
	// at most Window rows below the cursor, in sequence order, matching
	// the one filter that has an index in that order.
	Window int
}

// SearchRow is a search result with raw's subagent member (the console's
// rows show it).
type SearchRow struct {
	api.Event
	Subagent *string
}

// SearchPage is what SearchWindowed found.
type SearchPage struct {
	Rows []SearchRow
	// Floor, set when fewer than Limit rows matched and older events
	// remain past the window, is the cursor that searches on below it.
	Floor *int64
}

// Search returns matching events, newest first, as a search result shows
// them: only those columns are read.
func (s *Store) Search(ctx context.Context, f SearchFilter) ([]api.Event, error) {
	account, err := s.accountKey(ctx, nil, f.UserID)
	if err != nil {
		return nil, err
	}
	q, args := s.searchStatement(account, f)
	out := make([]api.Event, 0, min(f.Limit, 1000))
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		e := api.Event{UserID: f.UserID}
		if err := rows.Scan(&e.Sequence, &e.EventID, &e.EventType, &e.PrevHash, &e.PayloadHash, &e.Decision, &e.Tool,
			&e.MachineID, &e.ParentID, &e.TS, &e.APIKeyID, &e.MachineSequence, &e.Surface); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// searchStatement is what Search sends. On PostgreSQL it is planned with its
// values (pgx inlines them, safely quoted): whether the time bounds or an
// event type select few rows decides between an index in sequence order and
// one whose matches must be sorted, and the pool forces generic plans for
// every prepared statement (openPostgres).
func (s *Store) searchStatement(account any, f SearchFilter) (string, []any) {
	// Without rows waiting to be indexed (index_behind.go) the tail is
	// empty, and reading it would cost every row of the page a step of the
	// merge. The count moves before the insert's commit, so an acknowledged
	// append is always counted here; it may count rolled-back rows, which
	// only costs the merge.
	q, args := searchQuery(s.Dialect, account, f, s.Dialect == SQLite && s.behind.Load() > 0)
	if s.Dialect == Postgres {
		args = append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
	}
	return q, args
}

// searchQuery is the SQL of Search. Every filter but the time bounds has a
// key that yields the account's rows in sequence order (the key by
// sequence, by type, tool, decision, sub-agent), so a page reads about
// limit rows whatever the chain length (TestSearchPlans). On SQLite the page
// reads the key of one filter (searchKey); on PostgreSQL the planner picks
// among its indexes (anyIndex).
//
// The surface filter has no index of its own (it would cost every append a
// write): a page with it reads rows in sequence order until it has limit
// matches.
//
// withTail (SQLite): the rows not yet in those keys (index_behind.go) are
// read from events_tail, also in sequence order, and merged with the
// indexed ones (SQLite's MERGE of the two ordered arms stops after limit
// rows), so that an acknowledged append is found at once.
func searchQuery(dialect Dialect, account any, f SearchFilter, withTail bool) (string, []any) {
	args := []any{account}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	key, use := searchKey(f), anyIndex
	if dialect == SQLite {
		use = key
	}
	where := searchWhere(dialect, f, nil, use, arg)
	limit := arg(f.Limit)
	return indexedArms(dialect, searchColumns, strings.Join(where, " AND "), key, withTail) +
		` ORDER BY sequence DESC LIMIT ` + limit, args
}

// searchKey is the filter of f whose key a page reads (searchWhere's use):
// the sub-agent, the most selective, else event types, the tool, the
// decision, the time bounds (whose key is in time order: the page sorts
// its matches); "" when f has none of them (the key by sequence).
func searchKey(f SearchFilter) string {
	if k := windowIndexed(f); k != "" {
		return k
	}
	if f.AfterTS != nil || f.BeforeTS != nil {
		return "ts"
	}
	return ""
}

// anyIndex lets searchWhere's planner take any index of the filters.
const anyIndex = "*"

// searchWhere is the one filter of Search and SearchWindowed: f's
// conditions on the account's rows ($1), its placeholders made by arg in
// the order they appear (SQLite numbers them so), with the rows above
// bound (SearchWindowed's window) when it is set. use names the one key a
// page reads: anyIndex (Search on PostgreSQL: its planner's choice), a
// column searchKey names, or "" (the key by sequence). Every other indexed
// filter is written so that no planner takes its index and sorts: a text
// column with the empty string appended, the time plus 0. (On SQLite a
// filter other than the key's is on the row's column in any case.)
func searchWhere(dialect Dialect, f SearchFilter, bound *int64, use string, arg func(any) string) []string {
	where := []string{"account = $1"}
	may := func(col string) bool { return use == anyIndex || use == col }
	text := func(col, v string) {
		if may(col) {
			where = append(where, col+" = "+arg(v))
		} else {
			where = append(where, col+" || '' = "+arg(v))
		}
	}
	if f.Cursor != nil {
		where = append(where, "sequence < "+arg(*f.Cursor))
	}
	if bound != nil {
		where = append(where, "sequence > "+arg(*bound))
	}
	if len(f.EventTypes) > 0 {
		ph := make([]string, len(f.EventTypes))
		for i, t := range f.EventTypes {
			ph[i] = arg(t)
		}
		col := "event_type"
		if !may(col) {
			col += " || ''"
		}
		where = append(where, col+" IN ("+strings.Join(ph, ", ")+")")
	}
	if f.Tool != nil {
		text("tool", *f.Tool)
	}
	if f.Decision != nil {
		text("decision", *f.Decision)
	}
	if f.AfterTS != nil {
		where = append(where, tsExpr(may("ts"))+" > "+arg(*f.AfterTS))
	}
	if f.BeforeTS != nil {
		where = append(where, tsExpr(may("ts"))+" < "+arg(*f.BeforeTS))
	}
	if f.Surface != nil {
		where = append(where, "surface = "+arg(*f.Surface))
	}
	if f.Subagent != nil {
		text("subagent", *f.Subagent)
	}
	return where
}

// tsExpr is the time column, as the key by time (events_ts on PostgreSQL,
// events_by_ts on SQLite) may serve it or not.
func tsExpr(indexed bool) string {
	if indexed {
		return "ts_micros"
	}
	return "ts_micros + 0"
}

// searchColumns are the columns a search result shows (SPEC.md "Event": no
// raw, signature or signature_key). Reading only these matters on SQLite,
// where the driver pays a locked call per column per row: 13 columns instead
// of 21 cut the row decoding of a 200-row page by a third.
const searchColumns = `sequence, event_id, event_type, prev_hash, payload_hash, decision, tool, machine_id, parent_id, ts, api_key_id,
	machine_sequence, surface`

// SearchWindowed is Search with a bounded cost, for the console, whose
// filters include the surface, the sub-agent and time bounds, which have no
// index in sequence order (an index each would cost every append a write,
// docs/decisions/console.md): the page reads at most f.Window rows below the
// cursor — in sequence order through the key by sequence, or through the index
// of one indexed filter (event type, tool or decision) — and keeps those
// that match every other filter, so a filter that matches little or nothing
// reads Window rows, never the whole chain. When fewer than f.Limit rows
// matched and older events remain, Floor is where to search on.
//
// Two statements: the window's end, the sequence of the first row past it
// (read from the index alone), then the page, a range of that index with
// the other filters checked on each row in place.
func (s *Store) SearchWindowed(ctx context.Context, f SearchFilter) (SearchPage, error) {
	account, err := s.accountKey(ctx, nil, f.UserID)
	if err != nil {
		return SearchPage{}, err
	}
	// As in searchStatement: the rows not yet in the search indexes are
	// read beside them only when there are some (index_behind.go).
	withTail := s.Dialect == SQLite && s.behind.Load() > 0
	var bound *int64
	// Without a filter every row below the cursor matches: the page is
	// full unless the chain ends, so it needs no window's end (reading it
	// walked 5,000 index entries, on PostgreSQL the rows too until a
	// vacuum marks the pages all-visible).
	if f.Window > 0 && (searchKey(f) != "" || f.Surface != nil) {
		q, args := windowBound(s.Dialect, account, f, withTail)
		var b int64
		switch err := s.read.QueryRowContext(ctx, q, args...).Scan(&b); {
		case err == nil:
			bound = &b
		case !errors.Is(err, sql.ErrNoRows):
			return SearchPage{}, err
		}
	}
	q, args := windowQuery(s.Dialect, account, f, bound, withTail)
	if s.Dialect == Postgres {
		args = append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
	}
	page := SearchPage{Rows: make([]SearchRow, 0, min(f.Limit, 1000))}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return SearchPage{}, err
	}
	defer rows.Close()
	for rows.Next() {
		e := SearchRow{Event: api.Event{UserID: f.UserID}}
		if err := rows.Scan(&e.Sequence, &e.EventID, &e.EventType, &e.PrevHash, &e.PayloadHash, &e.Decision, &e.Tool,
			&e.MachineID, &e.ParentID, &e.TS, &e.APIKeyID, &e.MachineSequence, &e.Surface, &e.Subagent); err != nil {
			return SearchPage{}, err
		}
		page.Rows = append(page.Rows, e)
	}
	if err := rows.Err(); err != nil {
		return SearchPage{}, err
	}
	if len(page.Rows) < f.Limit && bound != nil {
		next := *bound + 1 // the first row the window did not read, and below
		page.Floor = &next
	}
	return page, nil
}

// windowIndexed is the one filter the window follows through its index
// (the sub-agent, the most selective, else event types, the tool, the
// decision; none: the key by sequence).
func windowIndexed(f SearchFilter) string {
	switch {
	case f.Subagent != nil:
		return "subagent"
	case len(f.EventTypes) > 0:
		return "event_type"
	case f.Tool != nil:
		return "tool"
	case f.Decision != nil:
		return "decision"
	}
	return ""
}

// windowBound is the sequence of the first row past the window: the
// (Window+1)-th newest below the cursor matching the indexed filter (no row:
// the window reaches the chain's start).
func windowBound(dialect Dialect, account any, f SearchFilter, withTail bool) (string, []any) {
	indexed := windowIndexed(f)
	only := SearchFilter{Cursor: f.Cursor}
	switch indexed {
	case "subagent":
		only.Subagent = f.Subagent
	case "event_type":
		only.EventTypes = f.EventTypes
	case "tool":
		only.Tool = f.Tool
	case "decision":
		only.Decision = f.Decision
	}
	args := []any{account}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	where := searchWhere(dialect, only, nil, indexed, arg)
	offset := arg(f.Window) // before the return reads args
	return indexedArms(dialect, `sequence`, strings.Join(where, " AND "), indexed, withTail) +
		` ORDER BY sequence DESC LIMIT 1 OFFSET ` + offset, args
}

// indexedArms is a SELECT of columns (of events) over the rows matching
// cond, read through the key of the filter key names (searchKey's names; ""
// the key by sequence), in sequence order but for the time's.
//
// On SQLite each key is a table of its own (migration 039): the arm joins
// it to events USING its key columns, so that cond's account, sequence and
// the filter's column are the key's (the planner reads a range of the key
// table) and every other column is the row's, found by its rowid. The rows
// not yet indexed (withTail) are read the same way from events_tail beside
// them: two arms in sequence order that the ORDER BY after them merges.
//
// On PostgreSQL search's indexes are partial on unindexed IS NULL
// (migrations 023 and 033, which never holds a row out of them), and a
// planner uses them only when the query names that predicate. Without a
// filter they serve, the primary key holds every row and reads them in
// order; naming the predicate then would only offer a planner without
// statistics (a freshly loaded PostgreSQL) an index to read the whole
// account through and sort (1–2 s at 1M events, docs/performance.md
// "Console at size").
func indexedArms(dialect Dialect, columns, cond, key string, withTail bool) string {
	if dialect != SQLite {
		if key != "" {
			cond = `unindexed IS NULL AND ` + cond
		}
		return `SELECT ` + columns + ` FROM events WHERE ` + cond
	}
	arm := func(table, using string) string {
		return `SELECT ` + columns + ` FROM ` + table + ` CROSS JOIN events USING (` + using + `) WHERE events.rowid = rid AND ` + cond
	}
	t := searchKeyTables[key]
	q := arm(t.table, t.using)
	if withTail {
		q = arm("events_tail", "account, sequence") + ` UNION ALL ` + q
	}
	return q
}

// searchKeyTables are SQLite's keys of the rows indexed (migration 039) by
// the filter searchKey names: the table and its key's columns.
var searchKeyTables = map[string]struct{ table, using string }{
	"":           {"events_seq", "account, sequence"},
	"event_type": {"events_by_type", "account, event_type, sequence"},
	"tool":       {"events_by_tool", "account, tool, sequence"},
	"decision":   {"events_by_decision", "account, decision, sequence"},
	"subagent":   {"events_by_subagent", "account, subagent, sequence"},
	"ts":         {"events_by_ts", "account, ts_micros, sequence"},
}

// windowQuery is the page of SearchWindowed: the rows above bound (nil: to
// the chain's start) and below the cursor, newest first, matching every
// filter, at most f.Limit, with the sub-agent of each. Only the window's
// filter may use an index (searchWhere).
func windowQuery(dialect Dialect, account any, f SearchFilter, bound *int64, withTail bool) (string, []any) {
	args := []any{account}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	indexed := windowIndexed(f)
	where := searchWhere(dialect, f, bound, indexed, arg)
	limit := arg(f.Limit) // before the return reads args
	// The sub-agent shown is the column the filter compares (RawSubagent's
	// value), so a row shows the sub-agent that finds it.
	return indexedArms(dialect, searchColumns+`, subagent`, strings.Join(where, " AND "), indexed, withTail) +
		` ORDER BY sequence DESC LIMIT ` + limit, args
}

// LatestSemanticMatch returns the newest event of the account with that dedup
// semantic key and a sequence of at least minSequence.
func (s *Store) LatestSemanticMatch(ctx context.Context, q Querier, userID, key string, minSequence int64) (Event, error) {
	if q == nil {
		q = s.read
	}
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return Event{}, err
	}
	return scanEvent(q.QueryRowContext(ctx, `SELECT `+eventFields+` FROM events
		WHERE account = $1 AND semantic_key = $2 AND sequence >= $3 ORDER BY sequence DESC LIMIT 1`, account, key, minSequence), userID)
}
