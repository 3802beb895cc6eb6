package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// The account of an event or a Merkle row (the account column of events and
// merkle_hashes, migration 013).
//
// On SQLite it is the account's number (account_numbers.num), not its 36-byte
// user_id: every key of those tables' B-trees begins with it, and the single
// writer's time per appended row is mostly spent seeking and splitting them,
// which integer keys make cheaper (docs/performance.md). On
// PostgreSQL the column holds the user_id itself. Statements are shared; only
// the value bound for the account differs: accountKey for reads,
// accountKeyForWrite inside a write transaction.
//
// A number, once committed, never changes and never names another account,
// so the store keeps the numbers it has read from committed state in memory
// (accounts are not deleted). A number not committed yet is never kept: a
// transaction that gave an account its number may still roll back, and the
// number would then go to the next account that needs one.

// noAccount is bound where an account has no number: no row has account 0
// (SQLite's INTEGER PRIMARY KEY numbers from 1), so the query finds nothing,
// as it would for an account without events.
const noAccount int64 = 0

// numberConns bounds the connections that read committed numbers: a miss is
// rare (the first use of an account by this process), so a few suffice.
const numberConns = 2

// accountNumbers is the SQLite store's cache of committed numbers, and the
// connections it reads them through: its own, outside any write transaction,
// so that a number it finds is committed, and so that the writer does not
// wait for a read connection held by a long export (only for another miss).
type accountNumbers struct {
	db    *sql.DB
	known sync.Map // user_id → int64
}

// committed returns the account's committed number, reading it once.
func (n *accountNumbers) committed(ctx context.Context, userID string) (int64, bool, error) {
	if v, ok := n.known.Load(userID); ok {
		return v.(int64), true, nil
	}
	var num int64
	err := n.db.QueryRowContext(ctx, `SELECT num FROM account_numbers WHERE user_id = $1`, userID).Scan(&num)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("account number of %s: %w", userID, err)
	}
	n.known.Store(userID, num)
	return num, true, nil
}

// accountKey is the value bound for the account's rows of events and
// merkle_hashes in a query through q (nil: the read pool): its user_id on
// PostgreSQL, its number on SQLite. In a write transaction that is the number
// the transaction may have given the account itself; otherwise the committed
// one, or noAccount if there is none: then it has no rows q could see.
func (s *Store) accountKey(ctx context.Context, q Querier, userID string) (any, error) {
	if s.numbers == nil {
		return userID, nil
	}
	num, ok, err := s.numbers.committed(ctx, userID)
	if err != nil || ok {
		return num, err
	}
	if tx, inTx := q.(*sql.Tx); inTx {
		err := tx.QueryRowContext(ctx, `SELECT num FROM account_numbers WHERE user_id = $1`, userID).Scan(&num)
		if err == nil {
			return num, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("account number of %s: %w", userID, err)
		}
	}
	return noAccount, nil
}

// AccountKey is the value bound for the account's rows of events and
// merkle_hashes, for statements written outside the store (tests, tools): its
// committed number on SQLite (0 if it has none: no rows), its user_id on
// PostgreSQL.
func (s *Store) AccountKey(ctx context.Context, userID string) (any, error) {
	return s.accountKey(ctx, nil, userID)
}

// accountKeyForWrite is accountKey inside the write transaction tx, which is
// about to write the account's rows: on SQLite an account without a committed
// number gets one in tx (or has one from an earlier write of tx).
func (s *Store) accountKeyForWrite(ctx context.Context, tx *sql.Tx, userID string) (any, error) {
	if s.numbers == nil {
		return userID, nil
	}
	key, err := s.accountKey(ctx, tx, userID)
	if err != nil || key != any(noAccount) {
		return key, err
	}
	var num int64
	err = tx.QueryRowContext(ctx, `INSERT INTO account_numbers (user_id) VALUES ($1) RETURNING num`, userID).Scan(&num)
	if err != nil {
		return nil, fmt.Errorf("number account %s: %w", userID, err)
	}
	return num, nil
}

// numberAccount gives a new account its number in tx, the transaction that
// creates it (SQLite; nothing on PostgreSQL).
func (s *Store) numberAccount(ctx context.Context, tx *sql.Tx, userID string) error {
	if s.numbers == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO account_numbers (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`, userID)
	return err
}
