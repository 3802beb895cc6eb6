package store

// Grants of the delegation gate (migrations 003_grants.sql). The gate's
// decisions are domain.DecideGate's; this file only loads and meters rows.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Grant is a stored grant row. Generation tells apart grants of one account
// that reuse an id (a dead grant's id may be issued again).
type Grant struct {
	UserID       string
	GrantID      string
	Generation   int64
	Subagent     string
	ParentAgent  *string
	AllowedTools []string
	MaxToolCalls int64
	ExpiresAt    time.Time
	CreatedAt    time.Time
	RevokedAt    *time.Time
	Epoch        json.RawMessage
	Token        json.RawMessage // empty when read by a query that skips it
	Uses         int64
}

// grantColumns are every column but token, which only the writer needs.
const grantColumns = `user_id, grant_id, generation, subagent, parent_agent, allowed_tools, max_tool_calls,
	expires_at, created_at, revoked_at, epoch, uses`

func scanGrant(r scanner) (Grant, error) {
	var g Grant
	var tools, epoch string
	var expires, created int64
	var revoked sql.NullInt64
	err := r.Scan(&g.UserID, &g.GrantID, &g.Generation, &g.Subagent, &g.ParentAgent, &tools, &g.MaxToolCalls,
		&expires, &created, &revoked, &epoch, &g.Uses)
	if errors.Is(err, sql.ErrNoRows) {
		return g, ErrNotFound
	}
	if err != nil {
		return g, err
	}
	if err := json.Unmarshal([]byte(tools), &g.AllowedTools); err != nil {
		return g, fmt.Errorf("grant %s: allowed_tools: %w", g.GrantID, err)
	}
	if g.AllowedTools == nil {
		g.AllowedTools = []string{}
	}
	g.ExpiresAt = time.UnixMicro(expires).UTC()
	g.CreatedAt = time.UnixMicro(created).UTC()
	g.RevokedAt = fromMicros(revoked)
	g.Epoch = json.RawMessage(epoch)
	return g, nil
}

func (s *Store) queryGrants(ctx context.Context, q Querier, query string, args ...any) ([]Grant, error) {
	return queryAll(ctx, s, q, scanGrant, query, args...)
}

// InsertGrant stores a new grant with uses 0. The caller holds the account's
// chain head (creations of one account are serialised) and chose Generation
// with NextGrantGeneration in the same transaction.
func (s *Store) InsertGrant(ctx context.Context, tx *sql.Tx, g *Grant) error {
	tools := g.AllowedTools
	if tools == nil {
		tools = []string{}
	}
	toolsJSON, err := json.Marshal(tools)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO grants (user_id, grant_id, generation, subagent, parent_agent, allowed_tools,
		max_tool_calls, expires_at, created_at, revoked_at, epoch, token, uses)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, $10, $11, 0)`,
		g.UserID, g.GrantID, g.Generation, g.Subagent, g.ParentAgent, string(toolsJSON), g.MaxToolCalls,
		g.ExpiresAt.UnixMicro(), g.CreatedAt.UnixMicro(), string(g.Epoch), string(g.Token))
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("insert grant: %w", err)
	}
	return nil
}

// NextGrantGeneration is the generation a new grant with grantID takes: 0 for
// an unused id, else one above the last.
func (s *Store) NextGrantGeneration(ctx context.Context, tx *sql.Tx, userID, grantID string) (int64, error) {
	var next int64
	err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(generation) + 1, 0) FROM grants WHERE user_id = $1 AND grant_id = $2`,
		userID, grantID).Scan(&next)
	return next, err
}

// GrantsByID returns every grant of the account bearing grantID (all
// sub-agents and generations), oldest first.
func (s *Store) GrantsByID(ctx context.Context, q Querier, userID, grantID string) ([]Grant, error) {
	return s.queryGrants(ctx, q, `SELECT `+grantColumns+` FROM grants WHERE user_id = $1 AND grant_id = $2 ORDER BY generation`,
		userID, grantID)
}

// GateCandidates returns what the gate needs to answer for subagent at now
// (optionally only grants bearing grantID): every grant that is neither
// revoked nor expired — the only ones that can authorize — plus the most
// recent grant, whose own status answers when none authorizes. DecideGate over
// this subset answers exactly as over all the sub-agent's grants, while the
// read stays two index ranges however many dead grants the sub-agent has.
// The most recent grant may appear twice; callers need not care (DecideGate
// picks one) but it is dropped here anyway.
func (s *Store) GateCandidates(ctx context.Context, q Querier, userID, subagent string, grantID *string, now time.Time) ([]Grant, error) {
	args := []any{userID, subagent, now.UnixMicro()}
	if grantID != nil {
		args = append(args, *grantID)
	}
	// The status check is the hottest read of the service; its statement is
	// prepared once per connection by the SQLite statement cache (stmtcache.go)
	// and by pgx's own cache on PostgreSQL.
	gs, err := s.queryGrants(ctx, q, gateQuery(grantID != nil), args...)
	if err != nil {
		return nil, err
	}
	if n := len(gs); n >= 2 {
		last := gs[n-1]
		for _, g := range gs[:n-1] {
			if g.GrantID == last.GrantID && g.Generation == last.Generation {
				return gs[:n-1], nil
			}
		}
	}
	return gs, nil
}

// gateQuery is GateCandidates' one statement, so both parts read one
// snapshot; with byID, only grants bearing the id $4. Two texts rather than
// one with "($4 IS NULL OR grant_id = $4)": PostgreSQL's generic plan (the
// pool forces them, docs/decisions/postgres-append.md "Plans") cannot drop
// that condition, and walked all of a sub-agent's grants to find an old id
// (docs/performance.md).
func gateQuery(byID bool) string {
	id := ""
	if byID {
		id = " AND grant_id = $4"
	}
	return `SELECT ` + grantColumns + ` FROM grants
		WHERE user_id = $1 AND subagent = $2 AND revoked_at IS NULL AND expires_at > $3` + id + `
		UNION ALL
		SELECT * FROM (SELECT ` + grantColumns + ` FROM grants
			WHERE user_id = $1 AND subagent = $2` + id + `
			ORDER BY created_at DESC, grant_id DESC, generation DESC LIMIT 1) newest`
}

// Grants lists the account's grants, newest first, optionally of one sub-agent.
func (s *Store) Grants(ctx context.Context, userID string, subagent *string) ([]Grant, error) {
	if subagent != nil {
		return s.queryGrants(ctx, nil, `SELECT `+grantColumns+` FROM grants WHERE user_id = $1 AND subagent = $2
			ORDER BY created_at DESC, grant_id DESC, generation DESC`, userID, *subagent)
	}
	return s.queryGrants(ctx, nil, `SELECT `+grantColumns+` FROM grants WHERE user_id = $1
		ORDER BY created_at DESC, grant_id DESC, generation DESC`, userID)
}

// NewestGrants is the account's newest limit grants (Grants' order): a page
// of them (the console's gate panel) reads limit rows of grants_created,
// not every grant.
func (s *Store) NewestGrants(ctx context.Context, userID string, limit int) ([]Grant, error) {
	return s.queryGrants(ctx, nil, `SELECT `+grantColumns+` FROM grants WHERE user_id = $1
		ORDER BY created_at DESC, grant_id DESC, generation DESC LIMIT $2`, userID, limit)
}

// GrantRow reads one grant by its full key.
func (s *Store) GrantRow(ctx context.Context, q Querier, userID, grantID string, generation int64) (Grant, error) {
	if q == nil {
		q = s.read
	}
	return scanGrant(q.QueryRowContext(ctx, `SELECT `+grantColumns+` FROM grants WHERE user_id = $1 AND grant_id = $2 AND generation = $3`,
		userID, grantID, generation))
}

// ConsumeGrantUses records n uses against one grant if, at the moment the row
// is written, it is neither revoked nor expired at now and n fits its budget:
// one conditional UPDATE, so concurrent uses (on any replica) never overspend —
// PostgreSQL re-checks the condition on the latest row version after waiting
// for a concurrent writer, and SQLite has one writer. ok is false, and nothing
// is written, when the condition fails; uses is then zero.
func (s *Store) ConsumeGrantUses(ctx context.Context, tx *sql.Tx, userID, grantID string, generation, n int64, now time.Time) (uses int64, ok bool, err error) {
	err = tx.QueryRowContext(ctx, `UPDATE grants SET uses = uses + $1
		WHERE user_id = $2 AND grant_id = $3 AND generation = $4
		  AND revoked_at IS NULL AND expires_at > $5 AND uses + $1 <= max_tool_calls
		RETURNING uses`, n, userID, grantID, generation, now.UnixMicro()).Scan(&uses)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uses, true, nil
}

// RevokeGrant sets revoked_at on one grant unless it is revoked already (a
// revoked grant keeps its first revoked_at), and reports whether it did.
func (s *Store) RevokeGrant(ctx context.Context, tx *sql.Tx, userID, grantID string, generation int64, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE grants SET revoked_at = $1
		WHERE user_id = $2 AND grant_id = $3 AND generation = $4 AND revoked_at IS NULL`,
		now.UnixMicro(), userID, grantID, generation)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// CountGrants counts the account's grants (tests and the admin digest).
func (s *Store) CountGrants(ctx context.Context, userID string) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM grants WHERE user_id = $1`, userID).Scan(&n)
	return n, err
}
