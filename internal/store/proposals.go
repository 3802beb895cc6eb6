package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// Proposal is a stored governance proposal: the resource as SPEC.md shows it,
// plus the account it belongs to, its creation order and the reasons sent with
// each transition (TransitionBody.reason; kept, not part of the resource).
type Proposal struct {
	domain.Proposal
	UserID string
	// Seq is the chain sequence of the proposal's governance.proposed event.
	Seq          int64
	RatifyReason *string
	EnactReason  *string
	RejectReason *string
}

const proposalColumns = `user_id, proposal_id, seq, status, kind, note, evidence, subagent, tool,
	proposed_at, proposer, ratified_at, ratifier, ratify_reason, enacted_at, enactor, enact_reason,
	rejected_at, rejector, reject_reason`

// InsertProposal stores a new proposal inside the caller's transaction.
func (s *Store) InsertProposal(ctx context.Context, tx *sql.Tx, p *Proposal) error {
	evidence, err := json.Marshal(p.Evidence)
	if err != nil {
		return err
	}
	proposer, err := json.Marshal(p.Proposer)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO proposals (`+proposalColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
		p.UserID, p.ProposalID, p.Seq, p.Status, p.Kind, p.Note, string(evidence), p.Subject.Subagent, p.Subject.Tool,
		p.ProposedAt.UnixMicro(), string(proposer))
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// UpdateProposal stores the status, stamps and reasons of p, which the caller
// read with ProposalForUpdate in the same transaction.
func (s *Store) UpdateProposal(ctx context.Context, tx *sql.Tx, p *Proposal) error {
	ratifier, err := nullableJSON(p.Ratifier)
	if err != nil {
		return err
	}
	enactor, err := nullableJSON(p.Enactor)
	if err != nil {
		return err
	}
	rejector, err := nullableJSON(p.Rejector)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE proposals SET status = $3,
		ratified_at = $4, ratifier = $5, ratify_reason = $6,
		enacted_at = $7, enactor = $8, enact_reason = $9,
		rejected_at = $10, rejector = $11, reject_reason = $12
		WHERE user_id = $1 AND proposal_id = $2`,
		p.UserID, p.ProposalID, p.Status,
		micros(p.RatifiedAt), ratifier, p.RatifyReason,
		micros(p.EnactedAt), enactor, p.EnactReason,
		micros(p.RejectedAt), rejector, p.RejectReason)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("update proposal %s: %d rows", p.ProposalID, n)
	}
	return nil
}

// ProposalForUpdate reads one of the account's proposals and holds it for the
// rest of tx, so concurrent transitions of one proposal run one after the
// other and each sees the status the previous one stored. On PostgreSQL that
// is a row lock (READ COMMITTED re-reads the row once the holder commits); on
// SQLite the write transaction already holds the database's only write lock.
func (s *Store) ProposalForUpdate(ctx context.Context, tx *sql.Tx, userID, proposalID string) (Proposal, error) {
	q := `SELECT ` + proposalColumns + ` FROM proposals WHERE user_id = $1 AND proposal_id = $2`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE`
	}
	return scanProposal(tx.QueryRowContext(ctx, q, userID, proposalID))
}

// ProposalByID reads one of the account's proposals (q nil: the read pool).
// Another account's proposal is ErrNotFound, like a missing one.
func (s *Store) ProposalByID(ctx context.Context, q Querier, userID, proposalID string) (Proposal, error) {
	if q == nil {
		q = s.read
	}
	return scanProposal(q.QueryRowContext(ctx, `SELECT `+proposalColumns+` FROM proposals WHERE user_id = $1 AND proposal_id = $2`, userID, proposalID))
}

// ProposalFilter selects proposals for GET /v1/governance/proposals; nil
// fields do not filter.
type ProposalFilter struct {
	UserID   string
	Status   *string
	Subagent *string
	// Before, when set, keeps the proposals created before the one with this
	// seq (the page after it); Limit, when positive, caps the page.
	Before *int64
	Limit  int
}

// Proposals lists the account's matching proposals, newest first.
func (s *Store) Proposals(ctx context.Context, f ProposalFilter) ([]Proposal, error) {
	where := []string{"user_id = $1"}
	args := []any{f.UserID}
	if f.Status != nil {
		args = append(args, *f.Status)
		where = append(where, fmt.Sprintf("status = $%d", len(args)))
	}
	if f.Subagent != nil {
		args = append(args, *f.Subagent)
		where = append(where, fmt.Sprintf("subagent = $%d", len(args)))
	}
	if f.Before != nil {
		args = append(args, *f.Before)
		where = append(where, fmt.Sprintf("seq < $%d", len(args)))
	}
	limit := ""
	if f.Limit > 0 {
		args = append(args, f.Limit)
		limit = fmt.Sprintf(" LIMIT $%d", len(args))
	}
	return s.queryProposals(ctx, s.read, `SELECT `+proposalColumns+` FROM proposals WHERE `+strings.Join(where, " AND ")+` ORDER BY seq DESC`+limit, args...)
}

// EnactedProposals lists the account's enacted proposals, oldest enactment
// first (q nil: the read pool).
func (s *Store) EnactedProposals(ctx context.Context, q Querier, userID string) ([]Proposal, error) {
	if q == nil {
		q = s.read
	}
	return s.queryProposals(ctx, q, `SELECT `+proposalColumns+` FROM proposals WHERE user_id = $1 AND status = 'enacted'
		ORDER BY enacted_at, proposal_id`, userID)
}

// LastEnactedAt is the latest enacted_at of the account's proposals, or nil
// when none was enacted.
func (s *Store) LastEnactedAt(ctx context.Context, tx *sql.Tx, userID string) (*time.Time, error) {
	var m sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(enacted_at) FROM proposals WHERE user_id = $1 AND status = 'enacted'`, userID).Scan(&m); err != nil {
		return nil, err
	}
	if !m.Valid {
		return nil, nil
	}
	t := time.UnixMicro(m.Int64).UTC()
	return &t, nil
}

func (s *Store) queryProposals(ctx context.Context, q Querier, query string, args ...any) ([]Proposal, error) {
	return queryAll(ctx, s, q, scanProposal, query, args...)
}

func scanProposal(r scanner) (Proposal, error) {
	var p Proposal
	var evidence, proposer string
	var ratifier, enactor, rejector sql.NullString
	var proposedAt int64
	var ratifiedAt, enactedAt, rejectedAt sql.NullInt64
	err := r.Scan(&p.UserID, &p.ProposalID, &p.Seq, &p.Status, &p.Kind, &p.Note, &evidence, &p.Subject.Subagent, &p.Subject.Tool,
		&proposedAt, &proposer, &ratifiedAt, &ratifier, &p.RatifyReason, &enactedAt, &enactor, &p.EnactReason,
		&rejectedAt, &rejector, &p.RejectReason)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(evidence), &p.Evidence); err != nil {
		return p, fmt.Errorf("proposal %s evidence: %w", p.ProposalID, err)
	}
	if err := json.Unmarshal([]byte(proposer), &p.Proposer); err != nil {
		return p, fmt.Errorf("proposal %s proposer: %w", p.ProposalID, err)
	}
	p.ProposedAt = time.UnixMicro(proposedAt).UTC()
	for _, st := range []struct {
		at    sql.NullInt64
		actor sql.NullString
		dstAt **time.Time
		dst   **api.Actor
	}{
		{ratifiedAt, ratifier, &p.RatifiedAt, &p.Ratifier},
		{enactedAt, enactor, &p.EnactedAt, &p.Enactor},
		{rejectedAt, rejector, &p.RejectedAt, &p.Rejector},
	} {
		if st.at.Valid {
			t := time.UnixMicro(st.at.Int64).UTC()
			*st.dstAt = &t
		}
		if st.actor.Valid {
			var a api.Actor
			if err := json.Unmarshal([]byte(st.actor.String), &a); err != nil {
				return p, fmt.Errorf("proposal %s actor: %w", p.ProposalID, err)
			}
			*st.dst = &a
		}
	}
	return p, nil
}

func nullableJSON(v *api.Actor) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
