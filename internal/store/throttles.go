package store

// The mail throttles' budgets (docs/decisions/throttles.md): GCRA states in
// rate_state beside the batch rate's, under keys of their own
// ("otp:global", "invite:to:<email>"; a batch key's row is its key id), read
// and locked with RateState and written with SetRateState.

import (
	"context"
	"database/sql"
	"time"
)

// RefundRate gives back what a unit cost (interval) to a budget that was
// charged for mail that did not go out. A state already paid off or pruned
// meanwhile is idle either way.
func (s *Store) RefundRate(ctx context.Context, tx *sql.Tx, key string, interval time.Duration) error {
	_, err := tx.ExecContext(ctx, `UPDATE rate_state SET tat_micros = tat_micros - $2 WHERE key_id = $1`, key, interval.Microseconds())
	return err
}

// PruneRateStates deletes the states that were idle before: a state whose
// theoretical arrival time has passed is the same as none, and budgets
// keyed by client address or recipient would otherwise pile up. On
// PostgreSQL rows another transaction holds are skipped (SKIP LOCKED), so
// the prune waits for nobody and cannot take part in a deadlock.
func (s *Store) PruneRateStates(ctx context.Context, tx *sql.Tx, before time.Time) (int64, error) {
	q := `DELETE FROM rate_state WHERE tat_micros < $1`
	if s.Dialect == Postgres {
		q = `DELETE FROM rate_state WHERE key_id IN (SELECT key_id FROM rate_state WHERE tat_micros < $1 FOR UPDATE SKIP LOCKED)`
	}
	res, err := tx.ExecContext(ctx, q, before.UnixMicro())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
