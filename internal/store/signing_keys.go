package store

// Machines' registered Ed25519 keys (signing_keys).

import (
	"context"
	"database/sql"
	"errors"
)

// SigningKey is a machine's registered Ed25519 key.
type SigningKey struct {
	UserID       string
	MachineID    string
	FromLeaf     int64
	PublicKey    string
	Fingerprint  string
	RegisteredAt int64
}

// CurrentSigningKey returns the machine's newest key, or ErrNotFound.
func (s *Store) CurrentSigningKey(ctx context.Context, q Querier, userID, machineID string) (SigningKey, error) {
	if q == nil {
		q = s.read
	}
	var k SigningKey
	err := q.QueryRowContext(ctx, `SELECT user_id, machine_id, from_leaf, public_key, fingerprint, registered_at FROM signing_keys
		WHERE user_id = $1 AND machine_id = $2 ORDER BY from_leaf DESC LIMIT 1`, userID, machineID).
		Scan(&k.UserID, &k.MachineID, &k.FromLeaf, &k.PublicKey, &k.Fingerprint, &k.RegisteredAt)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	return k, err
}

// SigningKeys lists every key the account registered, in registration order.
func (s *Store) SigningKeys(ctx context.Context, userID string) ([]SigningKey, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT user_id, machine_id, from_leaf, public_key, fingerprint, registered_at FROM signing_keys
		WHERE user_id = $1 ORDER BY from_leaf, machine_id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SigningKey
	for rows.Next() {
		var k SigningKey
		if err := rows.Scan(&k.UserID, &k.MachineID, &k.FromLeaf, &k.PublicKey, &k.Fingerprint, &k.RegisteredAt); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// InsertSigningKey records k inside tx, which holds the account's head, in
// force from leaf k.FromLeaf (the next appended event); a second key at the
// same leaf replaces the first.
func (s *Store) InsertSigningKey(ctx context.Context, tx *sql.Tx, k SigningKey, apiKeyID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO signing_keys (user_id, machine_id, from_leaf, public_key, fingerprint, registered_at, api_key_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (user_id, machine_id, from_leaf) DO UPDATE SET public_key = excluded.public_key,
			fingerprint = excluded.fingerprint, registered_at = excluded.registered_at, api_key_id = excluded.api_key_id`,
		k.UserID, k.MachineID, k.FromLeaf, k.PublicKey, k.Fingerprint, k.RegisteredAt, apiKeyID)
	return err
}
