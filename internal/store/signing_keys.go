package store

// Machines' registered Ed25519 keys (signing_keys).

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
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
// same leaf replaces the first. It moves the account's signing keys
// generation on (Head.SigningKeysGen): this is the only write of
// signing_keys.
func (s *Store) InsertSigningKey(ctx context.Context, tx *sql.Tx, k SigningKey, apiKeyID string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO signing_keys (user_id, machine_id, from_leaf, public_key, fingerprint, registered_at, api_key_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (user_id, machine_id, from_leaf) DO UPDATE SET public_key = excluded.public_key,
			fingerprint = excluded.fingerprint, registered_at = excluded.registered_at, api_key_id = excluded.api_key_id`,
		k.UserID, k.MachineID, k.FromLeaf, k.PublicKey, k.Fingerprint, k.RegisteredAt, apiKeyID)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE chain_heads SET signing_keys_gen = signing_keys_gen + 1 WHERE user_id = $1`, k.UserID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return cmp.Or(err, fmt.Errorf("signing key of %s registered without its head row", k.UserID))
	}
	return nil
}

// SigningKeyAtGen returns the machine's current key (found false when it
// has none) with the account's signing keys generation, both read from
// committed state in one statement, so the key is the machine's key at that
// generation. An account without a head row has never had a key; its
// generation is then not known (0), which no locked head matches, so its
// first append reads the key under the lock rather than trusting that.
func (s *Store) SigningKeyAtGen(ctx context.Context, userID, machineID string) (k SigningKey, found bool, gen int64, err error) {
	var fromLeaf, registeredAt sql.NullInt64
	var publicKey, fingerprint sql.NullString
	err = s.read.QueryRowContext(ctx, `SELECT h.signing_keys_gen, k.from_leaf, k.public_key, k.fingerprint, k.registered_at
		FROM chain_heads h LEFT JOIN signing_keys k ON k.user_id = h.user_id AND k.machine_id = $2
		WHERE h.user_id = $1 ORDER BY k.from_leaf DESC LIMIT 1`, userID, machineID).
		Scan(&gen, &fromLeaf, &publicKey, &fingerprint, &registeredAt)
	if errors.Is(err, sql.ErrNoRows) {
		return SigningKey{}, false, 0, nil
	}
	if err != nil || !fromLeaf.Valid {
		return SigningKey{}, false, gen, err
	}
	return SigningKey{UserID: userID, MachineID: machineID, FromLeaf: fromLeaf.Int64, PublicKey: publicKey.String,
		Fingerprint: fingerprint.String, RegisteredAt: registeredAt.Int64}, true, gen, nil
}
