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
	"strconv"
	"strings"
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

// ApprovalArgs reads the kept text of the account's approvals ids (q nil:
// the read pool), by approval id; an approval without one is absent.
func (s *Store) ApprovalArgs(ctx context.Context, q Querier, userID string, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	if q == nil {
		q = s.read
	}
	args := []any{userID}
	marks := make([]string, len(ids))
	for i, id := range ids {
		args = append(args, id)
		marks[i] = "$" + strconv.Itoa(i+2)
	}
	rows, err := q.QueryContext(ctx, `SELECT approval_id, args_text FROM approval_args
		WHERE user_id = $1 AND approval_id IN (`+strings.Join(marks, ", ")+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
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
