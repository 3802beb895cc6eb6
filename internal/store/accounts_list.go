package store

import (
	"context"
	"time"
)

// AccountSummary is one row of `auditchain admin list-accounts`: an account
// and how many events its chain holds.
type AccountSummary struct {
	Account
	EventCount int64
}

// AccountSummaries lists up to limit accounts with user_id above after, in
// user_id order (page by passing the last one back).
func (s *Store) AccountSummaries(ctx context.Context, after string, limit int) ([]AccountSummary, error) {
	return queryAll(ctx, s, nil, func(r scanner) (AccountSummary, error) {
		var a AccountSummary
		var created int64
		err := r.Scan(&a.UserID, &a.Email, &a.IsAdmin, &created, &a.EventCount)
		a.CreatedAt = time.UnixMicro(created).UTC()
		return a, err
	}, `SELECT a.user_id, a.email, a.is_admin, a.created_at, coalesce(h.event_count, 0)
		FROM accounts a LEFT JOIN chain_heads h ON h.user_id = a.user_id
		WHERE a.user_id > $1 ORDER BY a.user_id LIMIT $2`, after, limit)
}
