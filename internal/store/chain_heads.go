package store

// An account's chain head (chain_heads): its tip, the lock every append
// takes first, and the counter of events without a machine that SQLite keeps
// in the head row (migration 011).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Head is an account's chain tip. Empty() when nothing was appended yet.
type Head struct {
	LastSequence int64
	LastHash     *string
	LastEventID  *string
	EventCount   int64
	// SigningKeysGen is the generation of the account's signing keys
	// (migration 038) where the head was read with it (LockHeadRules): a new
	// value, never 0, with every change of its keys. 0 means not known. A
	// transaction that changes the keys after reading the head must forget
	// it (writer.Tx.SigningKeysChanged).
	SigningKeysGen int64
}

// Empty reports whether the chain has no event.
func (h Head) Empty() bool { return h.EventCount == 0 }

// LockHead reads the account's chain head and holds it for the rest of tx, so
// appends to one account are serialised while other accounts proceed. On
// SQLite the write transaction already holds the database's only write lock.
// The head's SigningKeysGen is not read (0: not known).
func (s *Store) LockHead(ctx context.Context, tx *sql.Tx, userID string) (Head, error) {
	var h Head
	err := s.lockHeadRow(ctx, tx, userID, `SELECT last_sequence, last_hash, last_event_id, event_count FROM chain_heads WHERE user_id = $1`,
		&h.LastSequence, &h.LastHash, &h.LastEventID, &h.EventCount)
	return h, err
}

// LockHeadRules is LockHead that also returns the account's approval rules
// generation (migration 032), read with the head in the same statement: 0
// while the account has never had an approval rule, and a new value with
// every change of its rules (InsertApprovalRule and DeleteApprovalRule bump
// it in their transaction, under this lock). Whoever holds the head
// therefore knows, without reading approval_rules, whether its rules are
// the ones it saw at a generation before. The head carries the account's
// signing keys generation the same way (Head.SigningKeysGen).
func (s *Store) LockHeadRules(ctx context.Context, tx *sql.Tx, userID string) (Head, int64, error) {
	var h Head
	var gen int64
	err := s.lockHeadRow(ctx, tx, userID, `SELECT last_sequence, last_hash, last_event_id, event_count, approval_rules_gen, signing_keys_gen
		FROM chain_heads WHERE user_id = $1`, &h.LastSequence, &h.LastHash, &h.LastEventID, &h.EventCount, &gen, &h.SigningKeysGen)
	return h, gen, err
}

// lockHeadRow scans the account's head row, read by query, into dest,
// holding it for the rest of tx; the first append of an account creates it.
func (s *Store) lockHeadRow(ctx context.Context, tx *sql.Tx, userID, query string, dest ...any) error {
	if s.Dialect == Postgres {
		query += ` FOR UPDATE`
	}
	for attempt := 0; ; attempt++ {
		err := tx.QueryRowContext(ctx, query, userID).Scan(dest...)
		if !errors.Is(err, sql.ErrNoRows) || attempt > 0 {
			return err
		}
		// First append of the account: create the head row, then lock it.
		if _, err := tx.ExecContext(ctx, `INSERT INTO chain_heads (user_id, last_sequence, last_hash, last_event_id, event_count)
			VALUES ($1, -1, NULL, NULL, 0) ON CONFLICT (user_id) DO NOTHING`, userID); err != nil {
			return err
		}
	}
}

// Head reads the chain tip without locking (GET /v1/chain/tip).
func (s *Store) Head(ctx context.Context, userID string) (Head, error) {
	var h Head
	err := s.read.QueryRowContext(ctx, `SELECT last_sequence, last_hash, last_event_id, event_count FROM chain_heads WHERE user_id = $1`, userID).
		Scan(&h.LastSequence, &h.LastHash, &h.LastEventID, &h.EventCount)
	if errors.Is(err, sql.ErrNoRows) {
		return Head{LastSequence: -1}, nil
	}
	return h, err
}

// On SQLite the counter of an account's events without a machine lives in
// its head row, and so does its daily quota (migration 011): an append moves
// the head anyway, and each statement costs the single writer more than the
// row it writes. PostgreSQL keeps both in machine_heads ("") and daily_usage.

// errNoHead: a counter kept in the head row was moved before the head row
// was created (LockHead creates it; every writer takes it first).
var errNoHead = errors.New("the account has no head row")

func (s *Store) eventsWithoutMachine(ctx context.Context, tx *sql.Tx, userID string) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `SELECT events_without_machine FROM chain_heads WHERE user_id = $1`, userID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func (s *Store) setEventsWithoutMachine(ctx context.Context, tx *sql.Tx, userID string, n int64) error {
	res, err := tx.ExecContext(ctx, `UPDATE chain_heads SET events_without_machine = $2 WHERE user_id = $1`, userID, n)
	if err != nil {
		return err
	}
	if k, err := res.RowsAffected(); err != nil {
		return err
	} else if k == 0 {
		return fmt.Errorf("machine counter of %s: %w", userID, errNoHead)
	}
	return nil
}
