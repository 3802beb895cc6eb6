package store

// Per-call approvals (migrations 031_approvals.sql; CONTRACT.md
// "Approvals"). Every change of an approval's status is a conditional
// update naming the status it leaves, so two writers never both move it:
// an approval is decided once and used at most once, on any number of
// replicas over one database.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Approval statuses as stored. An approval still pending or approved past
// its expires_at reads as expired (EffectiveStatus) before the expiry job
// has marked it.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalUsed     = "used"
)

// ApprovalRule says which calls wait for a person.
type ApprovalRule struct {
	UserID     string
	RuleID     string
	Subagent   string // an exact name or "*"
	Tool       string // an exact name or "*"
	TTLSeconds int64
	CreatedAt  time.Time
}

const approvalRuleColumns = `user_id, rule_id, subagent, tool, ttl_seconds, created_at`

func scanApprovalRule(r scanner) (ApprovalRule, error) {
	var ru ApprovalRule
	var created int64
	err := r.Scan(&ru.UserID, &ru.RuleID, &ru.Subagent, &ru.Tool, &ru.TTLSeconds, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return ru, ErrNotFound
	}
	ru.CreatedAt = time.UnixMicro(created).UTC()
	return ru, err
}

// InsertApprovalRule stores a rule.
func (s *Store) InsertApprovalRule(ctx context.Context, tx *sql.Tx, ru *ApprovalRule) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO approval_rules (`+approvalRuleColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		ru.UserID, ru.RuleID, ru.Subagent, ru.Tool, ru.TTLSeconds, ru.CreatedAt.UnixMicro())
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("insert approval rule: %w", err)
	}
	return nil
}

// ApprovalRules lists the account's rules, oldest first.
func (s *Store) ApprovalRules(ctx context.Context, q Querier, userID string) ([]ApprovalRule, error) {
	return queryAll(ctx, s, q, scanApprovalRule, `SELECT `+approvalRuleColumns+` FROM approval_rules WHERE user_id = $1
		ORDER BY created_at, rule_id`, userID)
}

// DeleteApprovalRule deletes a rule and returns it; ErrNotFound when the
// account has no rule by that id.
func (s *Store) DeleteApprovalRule(ctx context.Context, tx *sql.Tx, userID, ruleID string) (ApprovalRule, error) {
	ru, err := scanApprovalRule(tx.QueryRowContext(ctx, `SELECT `+approvalRuleColumns+` FROM approval_rules
		WHERE user_id = $1 AND rule_id = $2`, userID, ruleID))
	if err != nil {
		return ru, err
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM approval_rules WHERE user_id = $1 AND rule_id = $2`, userID, ruleID)
	return ru, err
}

// MatchApprovalRule returns the oldest rule of the account matching
// subagent and tool (each the exact name or "*"), or ok false.
func (s *Store) MatchApprovalRule(ctx context.Context, q Querier, userID, subagent, tool string) (ApprovalRule, bool, error) {
	if q == nil {
		q = s.read
	}
	ru, err := scanApprovalRule(q.QueryRowContext(ctx, `SELECT `+approvalRuleColumns+` FROM approval_rules
		WHERE user_id = $1 AND subagent IN ($2, '*') AND tool IN ($3, '*') ORDER BY created_at, rule_id LIMIT 1`,
		userID, subagent, tool))
	if errors.Is(err, ErrNotFound) {
		return ru, false, nil
	}
	return ru, err == nil, err
}

// Approval is one call waiting for, or having had, a person's decision.
type Approval struct {
	UserID        string
	ApprovalID    string
	RuleID        string
	Subagent      string
	Tool          string
	ArgsSHA256    string
	Status        string // as stored; see EffectiveStatus
	RequestedBy   string // the identity (key or session id) that made the call
	RequestedKind string // api_key or session
	CallEventID   string // the tool_call event that answered ask
	CreatedAt     time.Time
	ExpiresAt     time.Time
	DecidedAt     *time.Time
	DecidedBy     *string
	DecidedKind   *string
	Note          *string
	UsedAt        *time.Time
	UsedEventID   *string
}

// EffectiveStatus is the approval's status at now: a pending or approved
// approval past its expiry is expired, whether or not the job has marked
// it yet.
func (ap *Approval) EffectiveStatus(now time.Time) string {
	if (ap.Status == ApprovalPending || ap.Status == ApprovalApproved) && !now.Before(ap.ExpiresAt) {
		return ApprovalExpired
	}
	return ap.Status
}

const approvalColumns = `user_id, approval_id, rule_id, subagent, tool, args_sha256, status, requested_by, requested_kind,
	call_event_id, created_at, expires_at, decided_at, decided_by, decided_kind, note, used_at, used_event_id`

func scanApproval(r scanner) (Approval, error) {
	var ap Approval
	var created, expires int64
	var decided, used sql.NullInt64
	err := r.Scan(&ap.UserID, &ap.ApprovalID, &ap.RuleID, &ap.Subagent, &ap.Tool, &ap.ArgsSHA256, &ap.Status, &ap.RequestedBy,
		&ap.RequestedKind, &ap.CallEventID, &created, &expires, &decided, &ap.DecidedBy, &ap.DecidedKind, &ap.Note, &used,
		&ap.UsedEventID)
	if errors.Is(err, sql.ErrNoRows) {
		return ap, ErrNotFound
	}
	if err != nil {
		return ap, err
	}
	ap.CreatedAt = time.UnixMicro(created).UTC()
	ap.ExpiresAt = time.UnixMicro(expires).UTC()
	ap.DecidedAt = fromMicros(decided)
	ap.UsedAt = fromMicros(used)
	return ap, nil
}

// InsertApproval stores a pending approval.
func (s *Store) InsertApproval(ctx context.Context, tx *sql.Tx, ap *Approval) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO approvals (user_id, approval_id, rule_id, subagent, tool, args_sha256, status,
		requested_by, requested_kind, call_event_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		ap.UserID, ap.ApprovalID, ap.RuleID, ap.Subagent, ap.Tool, ap.ArgsSHA256, ApprovalPending, ap.RequestedBy,
		ap.RequestedKind, ap.CallEventID, ap.CreatedAt.UnixMicro(), ap.ExpiresAt.UnixMicro())
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("insert approval: %w", err)
	}
	return nil
}

// ApprovalByID reads one approval of the account (ErrNotFound otherwise).
func (s *Store) ApprovalByID(ctx context.Context, q Querier, userID, approvalID string) (Approval, error) {
	if q == nil {
		q = s.read
	}
	return scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE user_id = $1 AND approval_id = $2`,
		userID, approvalID))
}

// ListApprovals lists the account's approvals newest first, at most limit;
// status, when set, filters by the effective status at now.
func (s *Store) ListApprovals(ctx context.Context, q Querier, userID, status string, now time.Time, limit int) ([]Approval, error) {
	at := now.UnixMicro()
	where := `user_id = $1`
	args := []any{userID}
	switch status {
	case "":
	case ApprovalPending, ApprovalApproved:
		where += ` AND status = $2 AND expires_at > $3`
		args = append(args, status, at)
	case ApprovalExpired:
		where += ` AND (status = $2 OR (status IN ('pending', 'approved') AND expires_at <= $3))`
		args = append(args, status, at)
	default:
		where += ` AND status = $2`
		args = append(args, status)
	}
	args = append(args, limit)
	return queryAll(ctx, s, q, scanApproval, fmt.Sprintf(`SELECT %s FROM approvals WHERE %s
		ORDER BY created_at DESC, approval_id DESC LIMIT $%d`, approvalColumns, where, len(args)), args...)
}

// DecideApproval moves a pending, unexpired approval to status (approved
// or denied), naming who decided; false when it was not pending at now
// (another decision, the expiry, or a use came first).
func (s *Store) DecideApproval(ctx context.Context, tx *sql.Tx, userID, approvalID, status, by, kind string, note *string,
	now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = $1, decided_at = $2, decided_by = $3, decided_kind = $4, note = $5
		WHERE user_id = $6 AND approval_id = $7 AND status = 'pending' AND expires_at > $2`,
		status, now.UnixMicro(), by, kind, note, userID, approvalID)
	if err != nil {
		return false, fmt.Errorf("decide approval: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// UseApproval moves an approved, unexpired approval to used, naming the
// tool_call that used it; false when it was not approved at now. It is the
// one-use guarantee: of any number of concurrent uses, on any replicas,
// exactly one sees true.
func (s *Store) UseApproval(ctx context.Context, tx *sql.Tx, userID, approvalID, eventID string, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'used', used_at = $1, used_event_id = $2
		WHERE user_id = $3 AND approval_id = $4 AND status = 'approved' AND expires_at > $1`,
		now.UnixMicro(), eventID, userID, approvalID)
	if err != nil {
		return false, fmt.Errorf("use approval: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ExpireApprovals marks every pending or approved approval whose expiry has
// passed at now as expired, and returns how many it marked.
func (s *Store) ExpireApprovals(ctx context.Context, tx *sql.Tx, now time.Time) (int64, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND expires_at <= $1`, now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("expire approvals: %w", err)
	}
	return res.RowsAffected()
}
