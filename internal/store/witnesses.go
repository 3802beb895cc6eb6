package store

// What each witness holds of each account's log, and the cosignatures it
// answered (migration 030; docs/integrity.md "Witnesses").

import (
	"context"
	"database/sql"
)

// WitnessState is one account's row for one witness.
type WitnessState struct {
	UserID  string
	Witness string // the witness's key name
	// WitnessSize is the size the witness is known to hold for the
	// account's origin: the old size of the next submission.
	WitnessSize int64
	// CosignedSize, CosignedRoot and CosignedBlock are the newest
	// checkpoint it cosigned for us (size 0 and nil: none yet).
	CosignedSize  int64
	CosignedRoot  []byte
	CosignedBlock *int64
	// LogSize is the newest block's size when the job last looked.
	LogSize       int64
	Failures      int
	NextAttemptAt int64 // unix microseconds
	LastError     *string
	UpdatedAt     int64
}

const witnessStateColumns = `user_id, witness, witness_size, cosigned_size, cosigned_root, cosigned_block, log_size, failures, next_attempt_at, last_error, updated_at`

// WitnessStates returns the account's rows, by witness name.
func (s *Store) WitnessStates(ctx context.Context, q Querier, userID string) (map[string]WitnessState, error) {
	if q == nil {
		q = s.read
	}
	rows, err := q.QueryContext(ctx, `SELECT `+witnessStateColumns+` FROM witness_state WHERE user_id = $1`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]WitnessState{}
	for rows.Next() {
		var w WitnessState
		var block sql.NullInt64
		var lastErr sql.NullString
		if err := rows.Scan(&w.UserID, &w.Witness, &w.WitnessSize, &w.CosignedSize, &w.CosignedRoot, &block,
			&w.LogSize, &w.Failures, &w.NextAttemptAt, &lastErr, &w.UpdatedAt); err != nil {
			return nil, err
		}
		if block.Valid {
			w.CosignedBlock = &block.Int64
		}
		if lastErr.Valid {
			w.LastError = &lastErr.String
		}
		out[w.Witness] = w
	}
	return out, rows.Err()
}

// SaveWitnessState writes w's row. The cosigned checkpoint never moves
// back: a row already holding a larger cosigned size keeps it (two runs
// that overlap cannot undo each other's progress).
func (s *Store) SaveWitnessState(ctx context.Context, tx *sql.Tx, w WitnessState) error {
	var block any
	if w.CosignedBlock != nil {
		block = *w.CosignedBlock
	}
	var lastErr any
	if w.LastError != nil {
		lastErr = *w.LastError
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO witness_state (`+witnessStateColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (user_id, witness) DO UPDATE SET
		  witness_size = excluded.witness_size,
		  cosigned_root = CASE WHEN excluded.cosigned_size >= witness_state.cosigned_size THEN excluded.cosigned_root ELSE witness_state.cosigned_root END,
		  cosigned_block = CASE WHEN excluded.cosigned_size >= witness_state.cosigned_size THEN excluded.cosigned_block ELSE witness_state.cosigned_block END,
		  cosigned_size = CASE WHEN excluded.cosigned_size >= witness_state.cosigned_size THEN excluded.cosigned_size ELSE witness_state.cosigned_size END,
		  log_size = excluded.log_size, failures = excluded.failures, next_attempt_at = excluded.next_attempt_at,
		  last_error = excluded.last_error, updated_at = excluded.updated_at`,
		w.UserID, w.Witness, w.WitnessSize, w.CosignedSize, w.CosignedRoot, block, w.LogSize, w.Failures, w.NextAttemptAt, lastErr, w.UpdatedAt)
	return err
}

// Cosignature is a witness's cosignature line on a block.
type Cosignature struct {
	Witness   string
	Signature string // "— <name> <base64>", without its newline
}

// InsertCosignature stores a witness's cosignature on a block; a later one
// by the same witness on the same block replaces it (a witness may cosign a
// checkpoint again, at another time).
func (s *Store) InsertCosignature(ctx context.Context, tx *sql.Tx, userID string, block int64, c Cosignature, at int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO block_cosignatures (user_id, block_index, witness, signature, created_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (user_id, block_index, witness) DO UPDATE SET signature = excluded.signature, created_at = excluded.created_at`,
		userID, block, c.Witness, c.Signature, at)
	return err
}

// Cosignatures returns the cosignatures on the account's blocks with index
// in [from, to], by block index, each block's in witness-name order.
func (s *Store) Cosignatures(ctx context.Context, userID string, from, to int64) (map[int64][]Cosignature, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT block_index, witness, signature FROM block_cosignatures
		WHERE user_id = $1 AND block_index >= $2 AND block_index <= $3 ORDER BY block_index, witness`, userID, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64][]Cosignature{}
	for rows.Next() {
		var b int64
		var c Cosignature
		if err := rows.Scan(&b, &c.Witness, &c.Signature); err != nil {
			return nil, err
		}
		out[b] = append(out[b], c)
	}
	return out, rows.Err()
}

// WitnessLag is one witness's lag over every account it has a row for.
type WitnessLag struct {
	// Leaves sums, over the accounts, the newest block's size (when the job
	// last looked) minus the size the witness last cosigned.
	Leaves int64
	// Accounts counts the accounts whose newest block it has not cosigned.
	Accounts int64
}

// WitnessLags returns each witness's lag, by name.
func (s *Store) WitnessLags(ctx context.Context) (map[string]WitnessLag, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT witness,
		COALESCE(SUM(CASE WHEN log_size > cosigned_size THEN log_size - cosigned_size ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN log_size > cosigned_size THEN 1 ELSE 0 END), 0)
		FROM witness_state GROUP BY witness`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]WitnessLag{}
	for rows.Next() {
		var name string
		var l WitnessLag
		if err := rows.Scan(&name, &l.Leaves, &l.Accounts); err != nil {
			return nil, err
		}
		out[name] = l
	}
	return out, rows.Err()
}
