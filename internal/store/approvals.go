package store

// Tables approval_rules and approvals (CONTRACT.md "Approvals"; migrations
// 031 and 032). The use cases are internal/app/approvals.go; an approval's status
// changes only by the compare-and-sets below, each inside the write that
// records the change on the chain, and by the expiry job.
//
// A use is stored in used_at and used_event_id alone: the row keeps status
// 'approved', and an approved row with used_at set reads as used everywhere
// (scanApproval, the lists' filters). The status column, which the partial
// indexes approvals_pending and approvals_live_by_expiry name in their
// WHERE, is then left alone by the approved call's second pass, so the use
// rewrites the row and no index entry (issue #38: the second pass costs no
// more than a plain allowed call; docs/performance.md "Approvals at speed").
// The expiry job stores status 'used' once such a row's time is past, which
// takes it out of the live rows' index off the way a call runs.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Approval statuses as stored (CONTRACT.md "Approvals").
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalUsed     = "used"
)

// ApprovalRule is one row of approval_rules.
type ApprovalRule struct {
	UserID     string
	RuleID     string
	Subagent   string // an exact name or "*"
	Tool       string // an exact name or "*"
	TTLSeconds int64
	CreatedAt  time.Time
}

// Approval is one row of approvals.
type Approval struct {
	UserID        string
	ApprovalID    string
	RuleID        string
	Subagent      string
	Tool          string
	ArgsSHA256    string
	CallEventID   string
	RequestedBy   string // the identity (key or session id) that made the call
	RequestedKind string // api_key or session
	Status        string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	DecidedAt     *time.Time
	DecidedBy     *string
	DecidedKind   *string
	Note          *string
	UsedAt        *time.Time
	UsedEventID   *string
}

// InsertApprovalRule stores a new rule and bumps the account's rules
// generation (LockHeadRules); tx holds the account's head.
func (s *Store) InsertApprovalRule(ctx context.Context, tx *sql.Tx, r ApprovalRule) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO approval_rules (user_id, rule_id, subagent, tool, ttl_seconds, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, r.UserID, r.RuleID, r.Subagent, r.Tool, r.TTLSeconds, r.CreatedAt.UnixMicro())
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return err
	}
	return s.bumpApprovalRulesGen(ctx, tx, r.UserID)
}

// bumpApprovalRulesGen moves the account's rules generation on: every
// change of approval_rules does, in its transaction, so that a generation
// names one set of rules (an in-memory copy read at it stays exact, on any
// replica). The head row exists: the writer locked it first.
func (s *Store) bumpApprovalRulesGen(ctx context.Context, tx *sql.Tx, userID string) error {
	res, err := tx.ExecContext(ctx, `UPDATE chain_heads SET approval_rules_gen = approval_rules_gen + 1 WHERE user_id = $1`, userID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return cmp.Or(err, fmt.Errorf("approval rules of %s changed without its head row", userID))
	}
	return nil
}

// DeleteApprovalRule deletes one rule, bumping the account's rules
// generation, and returns it; ok is false when the account has no such
// rule. tx holds the account's head.
func (s *Store) DeleteApprovalRule(ctx context.Context, tx *sql.Tx, userID, ruleID string) (ApprovalRule, bool, error) {
	r, err := scanApprovalRule(tx.QueryRowContext(ctx, `DELETE FROM approval_rules WHERE user_id = $1 AND rule_id = $2
		RETURNING `+approvalRuleColumns, userID, ruleID))
	if errors.Is(err, sql.ErrNoRows) {
		return ApprovalRule{}, false, nil
	}
	if err != nil {
		return ApprovalRule{}, false, err
	}
	return r, true, s.bumpApprovalRulesGen(ctx, tx, userID)
}

const approvalRuleColumns = `user_id, rule_id, subagent, tool, ttl_seconds, created_at`

func scanApprovalRule(r scanner) (ApprovalRule, error) {
	var a ApprovalRule
	var created int64
	if err := r.Scan(&a.UserID, &a.RuleID, &a.Subagent, &a.Tool, &a.TTLSeconds, &created); err != nil {
		return ApprovalRule{}, err
	}
	a.CreatedAt = time.UnixMicro(created).UTC()
	return a, nil
}

// ApprovalRules lists the account's rules, oldest first.
func (s *Store) ApprovalRules(ctx context.Context, q Querier, userID string) ([]ApprovalRule, error) {
	return queryAll(ctx, s, q, scanApprovalRule, `SELECT `+approvalRuleColumns+` FROM approval_rules WHERE user_id = $1
		ORDER BY created_at, rule_id`, userID)
}

// MatchingApprovalRule returns the rule that holds subagent's call of tool:
// of the rules naming them exactly or by "*", the one with the shortest
// life (the most cautious), ties to the oldest; ok is false when none does.
func (s *Store) MatchingApprovalRule(ctx context.Context, q Querier, userID, subagent, tool string) (ApprovalRule, bool, error) {
	if q == nil {
		q = s.read
	}
	r, err := scanApprovalRule(q.QueryRowContext(ctx, `SELECT `+approvalRuleColumns+` FROM approval_rules
		WHERE user_id = $1 AND subagent IN ($2, '*') AND tool IN ($3, '*')
		ORDER BY ttl_seconds, created_at, rule_id LIMIT 1`, userID, subagent, tool))
	if errors.Is(err, sql.ErrNoRows) {
		return ApprovalRule{}, false, nil
	}
	return r, err == nil, err
}

// InsertApproval stores a new approval.
func (s *Store) InsertApproval(ctx context.Context, tx *sql.Tx, a *Approval) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO approvals (user_id, approval_id, rule_id, subagent, tool, args_sha256,
		call_event_id, requested_by, requested_kind, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		a.UserID, a.ApprovalID, a.RuleID, a.Subagent, a.Tool, a.ArgsSHA256, a.CallEventID, a.RequestedBy, a.RequestedKind,
		a.Status, a.CreatedAt.UnixMicro(), a.ExpiresAt.UnixMicro())
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

const approvalColumns = `user_id, approval_id, rule_id, subagent, tool, args_sha256, call_event_id, requested_by,
	requested_kind, status, created_at, expires_at, decided_at, decided_by, decided_kind, note, used_at, used_event_id`

func scanApproval(r scanner) (Approval, error) {
	var a Approval
	var created, expires int64
	var decided, used sql.NullInt64
	if err := r.Scan(&a.UserID, &a.ApprovalID, &a.RuleID, &a.Subagent, &a.Tool, &a.ArgsSHA256, &a.CallEventID,
		&a.RequestedBy, &a.RequestedKind, &a.Status, &created, &expires, &decided, &a.DecidedBy, &a.DecidedKind, &a.Note,
		&used, &a.UsedEventID); err != nil {
		return Approval{}, err
	}
	a.CreatedAt, a.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	if used.Valid {
		// Approved and used: the use leaves status as it was (UseApproval).
		a.Status = ApprovalUsed
	}
	if decided.Valid {
		t := time.UnixMicro(decided.Int64).UTC()
		a.DecidedAt = &t
	}
	if used.Valid {
		t := time.UnixMicro(used.Int64).UTC()
		a.UsedAt = &t
	}
	return a, nil
}

// ApprovalByID reads one of the account's approvals (q nil: the read pool);
// ok is false when the account has none of that id.
func (s *Store) ApprovalByID(ctx context.Context, q Querier, userID, approvalID string) (Approval, bool, error) {
	if q == nil {
		q = s.read
	}
	a, err := scanApproval(q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE user_id = $1 AND approval_id = $2`, userID, approvalID))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, false, nil
	}
	return a, err == nil, err
}

// Approvals lists the account's approvals newest first, at most limit, in
// the status they read as at now (status "" for every one): a pending or
// approved row past its expires_at reads as expired before the job marks
// it, and an approved row with used_at set reads as used (UseApproval).
func (s *Store) Approvals(ctx context.Context, userID, status string, now time.Time, limit int) ([]Approval, error) {
	at := now.UnixMicro()
	var where string
	args := []any{userID, limit}
	switch status {
	case "":
	// "+expires_at" (a no-op on both dialects) keeps SQLite's planner off
	// approvals_live_by_expiry, whose range on expires_at would have it sort
	// every live row: the pending list walks approvals_pending (migration
	// 032) newest first and stops at the limit (docs/performance.md
	// "Approvals at speed").
	case ApprovalPending:
		where, args = ` AND status = 'pending' AND +expires_at > $3`, append(args, at)
	case ApprovalApproved:
		where, args = ` AND status = 'approved' AND used_at IS NULL AND +expires_at > $3`, append(args, at)
	case ApprovalUsed:
		// Marked 'used' by the expiry job, or still 'approved' (live).
		where = ` AND used_at IS NOT NULL`
	case ApprovalExpired:
		// Two walks, each stopped at the limit, merged: the marked rows,
		// and those past due the job has not marked yet; not an OR, which
		// SQLite answered by reading every row of the account (4.5–8 ms
		// against 0.1 ms at 10,000 pending; docs/performance.md
		// "Approvals panel").
		const order = ` ORDER BY created_at DESC, approval_id DESC LIMIT $2`
		return queryAll(ctx, s, nil, scanApproval, `SELECT `+approvalColumns+` FROM (
			SELECT * FROM (SELECT `+approvalColumns+` FROM approvals WHERE user_id = $1 AND status = 'expired'`+order+`) marked
			UNION ALL
			SELECT * FROM (SELECT `+approvalColumns+` FROM approvals WHERE user_id = $1 AND status IN ('pending', 'approved')
				AND used_at IS NULL AND expires_at <= $3`+order+`) due
			) expired`+order, userID, limit, at)
	default:
		where, args = ` AND status = $3`, append(args, status)
	}
	return queryAll(ctx, s, nil, scanApproval, `SELECT `+approvalColumns+` FROM approvals WHERE user_id = $1`+where+`
		ORDER BY created_at DESC, approval_id DESC LIMIT $2`, args...)
}

// DecideApproval sets a pending approval, not expired at now, to status
// (approved or denied) with its decider, and reports whether it did: false
// when it is no longer pending. tx holds the account's head.
func (s *Store) DecideApproval(ctx context.Context, tx *sql.Tx, userID, approvalID, status, by, kind string, note *string,
	now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = $1, decided_at = $2, decided_by = $3, decided_kind = $4, note = $5
		WHERE user_id = $6 AND approval_id = $7 AND status = 'pending' AND expires_at > $2`,
		status, now.UnixMicro(), by, kind, note, userID, approvalID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// UseApproval marks used by the call eventID an approval of the account
// that is approved, not used, not expired at now, and binds subagent, tool
// and argsSHA256, and reports whether it did: the compare-and-set (on
// used_at) that lets an approval be used once across any number of
// replicas, in the same transaction as the allow it records. One statement
// on the way a call runs; the caller reads the approval only when it did
// not (to say why). It sets used_at and used_event_id and leaves status
// 'approved': no column an index names changes, so SQLite rewrites the row
// alone and PostgreSQL may update it in place (a heap-only tuple).
func (s *Store) UseApproval(ctx context.Context, tx *sql.Tx, userID, approvalID, subagent, tool, argsSHA256, eventID string,
	now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET used_at = $1, used_event_id = $2
		WHERE user_id = $3 AND approval_id = $4 AND status = 'approved' AND used_at IS NULL AND expires_at > $1
		AND subagent = $5 AND tool = $6 AND args_sha256 = $7`,
		now.UnixMicro(), eventID, userID, approvalID, subagent, tool, argsSHA256)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// UnuseApproval undoes UseApproval of eventID inside the same transaction
// (the grant could not be metered after all): the approval is approved
// again, as if the call had not tried it.
func (s *Store) UnuseApproval(ctx context.Context, tx *sql.Tx, userID, approvalID, eventID string) error {
	_, err := tx.ExecContext(ctx, `UPDATE approvals SET used_at = NULL, used_event_id = NULL
		WHERE user_id = $1 AND approval_id = $2 AND status = 'approved' AND used_event_id = $3`, userID, approvalID, eventID)
	return err
}

// ExpireApprovals marks expired every pending or approved approval not
// used whose expires_at is at or before now, and returns how many it
// marked; and stores status 'used' on the approved ones used (UseApproval
// left them 'approved'), which takes them out of approvals_live_by_expiry.
// Both walk that index's rows past due.
func (s *Store) ExpireApprovals(ctx context.Context, tx *sql.Tx, now time.Time) (int64, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND used_at IS NULL AND expires_at <= $1`, now.UnixMicro())
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	_, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'used'
		WHERE status IN ('pending', 'approved') AND used_at IS NOT NULL AND expires_at <= $1`, now.UnixMicro())
	return n, err
}
