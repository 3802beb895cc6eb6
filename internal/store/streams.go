package store

import (
	"context"
	"database/sql"
)

// StreamLease is one open event stream (table stream_leases).
type StreamLease struct {
	LeaseID   string
	UserID    string
	Identity  string // the key (or session) the stream counts against
	Replica   string
	ExpiresAt int64 // unix microseconds
}

// TakeStreamLease stores l unless the account already holds maxPerAccount
// live leases, or l.Identity maxPerIdentity, at now (unix microseconds);
// lapsed leases of the account are deleted first. tx must hold the account's
// head (LockHead), so that two replicas never both take the last slot. It
// reports which cap refused ("" when taken).
func (s *Store) TakeStreamLease(ctx context.Context, tx *sql.Tx, l StreamLease, now int64, maxPerAccount, maxPerIdentity int) (string, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM stream_leases WHERE user_id = $1 AND expires_at <= $2`, l.UserID, now); err != nil {
		return "", err
	}
	var account, identity int
	if err := tx.QueryRowContext(ctx, `SELECT count(*), count(CASE WHEN identity = $2 THEN 1 END) FROM stream_leases WHERE user_id = $1`,
		l.UserID, l.Identity).Scan(&account, &identity); err != nil {
		return "", err
	}
	switch {
	case identity >= maxPerIdentity:
		return "key", nil
	case account >= maxPerAccount:
		return "account", nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO stream_leases (lease_id, user_id, identity, replica, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		l.LeaseID, l.UserID, l.Identity, l.Replica, l.ExpiresAt)
	return "", err
}

// DropStreamLease deletes a lease (its stream ended).
func (s *Store) DropStreamLease(ctx context.Context, tx *sql.Tx, leaseID string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM stream_leases WHERE lease_id = $1`, leaseID)
	return err
}

// RenewStreamLeases extends every lease of replica to until.
func (s *Store) RenewStreamLeases(ctx context.Context, tx *sql.Tx, replica string, until int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE stream_leases SET expires_at = $1 WHERE replica = $2`, until, replica)
	return err
}
