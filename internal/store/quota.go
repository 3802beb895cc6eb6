package store

// The daily quota of client events: kept in the head row on SQLite
// (chain_heads, migration 011), in daily_usage on PostgreSQL.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ConsumeQuota adds n to the account's usage of day if the total stays within
// limit, and reports the usage after the call. Because it is one conditional
// upsert in the caller's transaction, the quota holds across replicas.
//
// n = 0 charges nothing and is refused (ok false) once the quota is used up:
// an account over its quota is refused whatever it sent (CONTRACT.md "Batch").
func (s *Store) ConsumeQuota(ctx context.Context, tx *sql.Tx, userID, day string, n, limit int64) (used int64, ok bool, err error) {
	if n == 0 || n > limit {
		used, err = s.QuotaUsed(ctx, tx, userID, day)
		return used, err == nil && n == 0 && used < limit, err
	}
	if s.Dialect == SQLite {
		err = tx.QueryRowContext(ctx, `UPDATE chain_heads SET quota_used = `+sqliteQuotaUsed+` + $3, quota_day = `+sqliteQuotaDay+`
			WHERE user_id = $1 AND `+sqliteQuotaUsed+` + $3 <= $4 RETURNING quota_used`, userID, day, n, limit).Scan(&used)
		if errors.Is(err, sql.ErrNoRows) {
			if used, err = s.QuotaUsed(ctx, tx, userID, day); err == nil && used+n <= limit {
				err = fmt.Errorf("quota of %s: %w", userID, errNoHead)
			}
			return used, false, err
		}
		return used, err == nil, err
	}
	err = tx.QueryRowContext(ctx, `INSERT INTO daily_usage (user_id, day, used) VALUES ($1, $2, $3)
		ON CONFLICT (user_id, day) DO UPDATE SET used = daily_usage.used + excluded.used
		WHERE daily_usage.used + excluded.used <= $4
		RETURNING used`, userID, day, n, limit).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		used, err = s.QuotaUsed(ctx, tx, userID, day)
		return used, false, err
	}
	return used, err == nil, err
}

// sqliteQuotaUsed is, in a statement on chain_heads whose $2 is today's
// day, the account's usage today, and sqliteQuotaDay the day a charge
// records. The head row keeps one day (quota_day): a later day starts from
// 0. A day just before it — a clock set back across midnight — counts
// against it, so the quota does not open again; a day further back means the
// clock had run ahead and was corrected, and the count starts over at today
// rather than keeping the wrong day's quota until that date (found by a
// reviewer: a clock 30 days ahead for a moment took the quota for 30 days).
const (
	sqliteQuotaStartsOver = `(quota_day IS NULL OR $2 > quota_day OR $2 < date(quota_day, '-1 day'))`
	sqliteQuotaUsed       = `(CASE WHEN ` + sqliteQuotaStartsOver + ` THEN 0 ELSE quota_used END)`
	sqliteQuotaDay        = `(CASE WHEN ` + sqliteQuotaStartsOver + ` THEN $2 ELSE quota_day END)`
)

// QuotaUsed reads the account's usage of day.
func (s *Store) QuotaUsed(ctx context.Context, q Querier, userID, day string) (int64, error) {
	if q == nil {
		q = s.read
	}
	var used int64
	query := `SELECT used FROM daily_usage WHERE user_id = $1 AND day = $2`
	if s.Dialect == SQLite {
		query = `SELECT ` + sqliteQuotaUsed + ` FROM chain_heads WHERE user_id = $1`
	}
	err := q.QueryRowContext(ctx, query, userID, day).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return used, err
}
