package store

// GCRA states (rate_state): a key's batch rate and the mail throttles' budgets.

import (
	"context"
	"database/sql"
	"errors"
)

// RateState reads and locks a GCRA state (0 when never used): a key's batch
// rate, or a mail throttle's budget (throttles.go).
func (s *Store) RateState(ctx context.Context, tx *sql.Tx, keyID string) (int64, error) {
	q := `SELECT tat_micros FROM rate_state WHERE key_id = $1`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE`
	}
	for try := 0; ; try++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rate_state (key_id, tat_micros) VALUES ($1, 0) ON CONFLICT (key_id) DO NOTHING`, keyID); err != nil {
			return 0, err
		}
		var tat int64
		err := tx.QueryRowContext(ctx, q, keyID).Scan(&tat)
		// PostgreSQL: an idle row PruneRateStates deleted between the two
		// statements is inserted again.
		if errors.Is(err, sql.ErrNoRows) && try < 2 {
			continue
		}
		return tat, err
	}
}

// SetRateState stores a key's GCRA state.
func (s *Store) SetRateState(ctx context.Context, tx *sql.Tx, keyID string, tat int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE rate_state SET tat_micros = $2 WHERE key_id = $1`, keyID, tat)
	return err
}
