package store

// POST /v1/events/search, and the newest event with a dedup semantic key.

import (
	"context"
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
	// the stored surface, and raw's subagent member (a tool call's).
	Surface  *string
	Subagent *string
	Limit    int
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

// searchQuery is the SQL of Search. Every filter but the time bounds has an
// index that yields the account's rows in sequence order (the primary key,
// events_type, events_tool, events_decision), so a page reads about limit
// rows whatever the chain length (TestSearchPlans).
//
// The surface and sub-agent filters have no index of their own (each would
// cost every append a write): a page with them reads rows in sequence order
// until it has limit matches.
//
// withTail (SQLite): the rows not yet in those indexes (unindexed,
// index_behind.go) are read from events_unindexed, also in sequence order,
// and merged with the indexed ones (SQLite's MERGE of the two ordered arms
// stops after limit rows), so that an acknowledged append is found at once.
func searchQuery(dialect Dialect, account any, f SearchFilter, withTail bool) (string, []any) {
	var where []string
	args := []any{account}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	where = append(where, "account = $1")
	if f.AfterTS != nil {
		where = append(where, "ts_micros > "+arg(*f.AfterTS))
	}
	if f.BeforeTS != nil {
		where = append(where, "ts_micros < "+arg(*f.BeforeTS))
	}
	if f.Cursor != nil {
		where = append(where, "sequence < "+arg(*f.Cursor))
	}
	if f.Decision != nil {
		where = append(where, "decision = "+arg(*f.Decision))
	}
	if f.Tool != nil {
		where = append(where, "tool = "+arg(*f.Tool))
	}
	if f.Surface != nil {
		where = append(where, "surface = "+arg(*f.Surface))
	}
	if f.Subagent != nil {
		where = append(where, subagentExpr(dialect)+" = "+arg(*f.Subagent))
	}
	if len(f.EventTypes) > 0 {
		ph := make([]string, len(f.EventTypes))
		for i, t := range f.EventTypes {
			ph[i] = arg(t)
		}
		where = append(where, "event_type IN ("+strings.Join(ph, ", ")+")")
	}
	limit := arg(f.Limit)
	cond := strings.Join(where, " AND ")
	if withTail {
		return `SELECT ` + searchColumns + ` FROM events WHERE unindexed IS NOT NULL AND ` + cond +
			` UNION ALL SELECT ` + searchColumns + ` FROM events WHERE unindexed IS NULL AND ` + cond +
			` ORDER BY sequence DESC LIMIT ` + limit, args
	}
	// No row is marked (PostgreSQL never marks one): the indexes, partial
	// (migration 023), hold every row, and the planner uses them only when
	// the query names their predicate.
	return `SELECT ` + searchColumns + ` FROM events WHERE unindexed IS NULL AND ` + cond + ` ORDER BY sequence DESC LIMIT ` + limit, args
}

// searchColumns are the columns a search result shows (SPEC.md "Event": no
// raw, signature or signature_key). Reading only these matters on SQLite,
// where the driver pays a locked call per column per row: 13 columns instead
// of 21 cut the row decoding of a 200-row page by a third.
const searchColumns = `sequence, event_id, event_type, prev_hash, payload_hash, decision, tool, machine_id, parent_id, ts, api_key_id,
	machine_sequence, surface`

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

// subagentExpr reads raw's subagent member in dialect's SQL (raw is stored
// JSON text on both stores).
func subagentExpr(dialect Dialect) string {
	if dialect == Postgres {
		return "(raw::jsonb ->> 'subagent')"
	}
	return "json_extract(raw, '$.subagent')"
}
