package store

// Table approval_args (migration 034; docs/approvals.md "The arguments'
// text"): the text of a pending approval's arguments, where the operator
// told the hook or the proxy to send it. A row lives only while its
// approval is pending: the decision deletes it in its own transaction, and
// the expiry job deletes those of approvals no longer pending. It is no
// part of the chain or of an export.

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// InsertApprovalArgs keeps text for the account's approval approvalID.
func (s *Store) InsertApprovalArgs(ctx context.Context, tx *sql.Tx, userID, approvalID, text string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO approval_args (user_id, approval_id, args_text) VALUES ($1, $2, $3)`,
		userID, approvalID, text)
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

// ApprovalArgs reads the kept text of the account's approval approvalID
// (the read pool); ok is false when none was kept.
func (s *Store) ApprovalArgs(ctx context.Context, userID, approvalID string) (text string, ok bool, err error) {
	err = s.read.QueryRowContext(ctx, `SELECT args_text FROM approval_args WHERE user_id = $1 AND approval_id = $2`,
		userID, approvalID).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return text, err == nil, err
}

// PendingApprovalArgs reads the kept texts of the account's newest limit
// pending approvals at now (those Approvals(userID, pending, now, limit)
// lists), by approval id. One join down the list's index: an IN list of
// ids was slower on PostgreSQL than the rows it read (docs/performance.md
// "Approvals panel").
func (s *Store) PendingApprovalArgs(ctx context.Context, userID string, now time.Time, limit int) (map[string]string, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT a.approval_id, g.args_text FROM
		(SELECT user_id, approval_id FROM approvals WHERE user_id = $1 AND status = 'pending' AND +expires_at > $2
		 ORDER BY created_at DESC, approval_id DESC LIMIT $3) a
		JOIN approval_args g ON g.user_id = a.user_id AND g.approval_id = a.approval_id`, userID, now.UnixMicro(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, err
		}
		out[id] = text
	}
	return out, rows.Err()
}

// DeleteApprovalArgs forgets the text of the account's approval approvalID
// (nothing when none was kept).
func (s *Store) DeleteApprovalArgs(ctx context.Context, tx *sql.Tx, userID, approvalID string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM approval_args WHERE user_id = $1 AND approval_id = $2`, userID, approvalID)
	return err
}

// DeleteSettledApprovalArgs forgets every kept text whose approval is no
// longer pending (the expiry job's, after ExpireApprovals) and returns how
// many it deleted.
func (s *Store) DeleteSettledApprovalArgs(ctx context.Context, tx *sql.Tx) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM approval_args WHERE NOT EXISTS (SELECT 1 FROM approvals a
		WHERE a.user_id = approval_args.user_id AND a.approval_id = approval_args.approval_id AND a.status = 'pending')`)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
