package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Account is one tenant: every record, grant and proposal belongs to one.
type Account struct {
	UserID    string
	Email     *string
	IsAdmin   bool
	CreatedAt time.Time
}

// APIKey is a key's metadata; the token itself is never stored, only its hash.
type APIKey struct {
	ID        string
	UserID    string
	Hash      []byte
	Prefix    string
	Machine   string
	Label     string
	Scopes    []string
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// ErrNotFound is returned when a row does not exist (or belongs to another account).
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a unique row already exists.
var ErrConflict = errors.New("already exists")

// CreateAccountWithKey stores a new account and its first key inside tx;
// ErrConflict when the account (its id or email) exists.
func (s *Store) CreateAccountWithKey(ctx context.Context, tx *sql.Tx, a Account, k APIKey) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO accounts (user_id, email, is_admin, created_at) VALUES ($1, $2, $3, $4)`,
		a.UserID, a.Email, a.IsAdmin, a.CreatedAt.UnixMicro())
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return err
	}
	if err := s.numberAccount(ctx, tx, a.UserID); err != nil {
		return err
	}
	return insertKey(ctx, tx, k)
}

// Account reads one account.
func (s *Store) Account(ctx context.Context, userID string) (Account, error) {
	return s.AccountIn(ctx, nil, userID)
}

// AccountIn reads one account through q (nil: the read pool).
func (s *Store) AccountIn(ctx context.Context, q Querier, userID string) (Account, error) {
	if q == nil {
		q = s.read
	}
	var a Account
	var created int64
	err := q.QueryRowContext(ctx, `SELECT user_id, email, is_admin, created_at FROM accounts WHERE user_id = $1`, userID).
		Scan(&a.UserID, &a.Email, &a.IsAdmin, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	a.CreatedAt = time.UnixMicro(created).UTC()
	return a, err
}

// CreateKey stores a key for an existing account inside tx; ErrNotFound
// when there is no such account.
func (s *Store) CreateKey(ctx context.Context, tx *sql.Tx, k APIKey) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM accounts WHERE user_id = $1`, k.UserID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return insertKey(ctx, tx, k)
}

// LiveKeys counts the account's keys neither revoked nor expired at now.
func (s *Store) LiveKeys(ctx context.Context, tx *sql.Tx, userID string, now time.Time) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL
		AND (expires_at IS NULL OR expires_at > $2)`, userID, now.UnixMicro()).Scan(&n)
	return n, err
}

func insertKey(ctx context.Context, tx *sql.Tx, k APIKey) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, user_id, key_hash, prefix, machine, label, scopes, created_at, expires_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)`,
		k.ID, k.UserID, k.Hash, k.Prefix, k.Machine, k.Label, strings.Join(k.Scopes, ","), k.CreatedAt.UnixMicro(), micros(k.ExpiresAt))
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	return err
}

const keyColumns = `id, user_id, key_hash, prefix, machine, label, scopes, created_at, expires_at, revoked_at`

// KeyByHash finds a key, and whether its account is an administrator, by the
// SHA-256 of its token. The lookup is an index probe on a hash of a 256-bit
// secret, so its timing reveals nothing about which tokens are valid.
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (APIKey, bool, error) {
	var admin bool
	k, err := scanKey(rowWith{s.read.QueryRowContext(ctx, `SELECT k.id, k.user_id, k.key_hash, k.prefix, k.machine, k.label, k.scopes, k.created_at, k.expires_at, k.revoked_at, a.is_admin
		FROM api_keys k JOIN accounts a ON a.user_id = k.user_id WHERE k.key_hash = $1`, hash), &admin})
	return k, admin, err
}

// rowWith scans one extra trailing column into extra.
type rowWith struct {
	row   *sql.Row
	extra any
}

func (r rowWith) Scan(dest ...any) error { return r.row.Scan(append(dest, r.extra)...) }

// Keys lists an account's keys, newest first.
func (s *Store) Keys(ctx context.Context, userID string) ([]APIKey, error) {
	return queryAll(ctx, s, nil, scanKey, `SELECT `+keyColumns+` FROM api_keys WHERE user_id = $1 ORDER BY created_at DESC, id DESC`, userID)
}

// RevokeKey sets revoked_at once inside tx; revoking a revoked key keeps the
// first time. ErrNotFound when the account has no such key.
func (s *Store) RevokeKey(ctx context.Context, tx *sql.Tx, userID, keyID string, now time.Time) (APIKey, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = $1 WHERE user_id = $2 AND id = $3 AND revoked_at IS NULL`,
		now.UnixMicro(), userID, keyID); err != nil {
		return APIKey{}, err
	}
	return scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE user_id = $1 AND id = $2`, userID, keyID))
}

type scanner interface{ Scan(...any) error }

func scanKey(r scanner) (APIKey, error) {
	var k APIKey
	var scopes string
	var created int64
	var expires, revoked sql.NullInt64
	err := r.Scan(&k.ID, &k.UserID, &k.Hash, &k.Prefix, &k.Machine, &k.Label, &scopes, &created, &expires, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	if err != nil {
		return k, err
	}
	if scopes != "" {
		k.Scopes = strings.Split(scopes, ",")
	}
	k.CreatedAt = time.UnixMicro(created).UTC()
	k.ExpiresAt = fromMicros(expires)
	k.RevokedAt = fromMicros(revoked)
	return k, nil
}

// Setting reads a service-wide setting (for example the service identity key).
func (s *Store) Setting(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	err := s.read.QueryRowContext(ctx, `SELECT value FROM service_settings WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return v, err
}

// SettingOnce stores value under name unless a value exists, and returns the
// value that won, so replicas starting together agree on one.
func (s *Store) SettingOnce(ctx context.Context, name string, value []byte) ([]byte, error) {
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO service_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, value)
		return err
	})
	if err != nil {
		return nil, err
	}
	var v []byte
	err = s.write.QueryRowContext(ctx, `SELECT value FROM service_settings WHERE name = $1`, name).Scan(&v)
	return v, err
}

func micros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMicro(v.Int64).UTC()
	return &t
}

// AccountsWithEmail lists every account that has an email, oldest first.
func (s *Store) AccountsWithEmail(ctx context.Context) ([]Account, error) {
	return queryAll(ctx, s, nil, func(r scanner) (Account, error) {
		var a Account
		var created int64
		err := r.Scan(&a.UserID, &a.Email, &a.IsAdmin, &created)
		a.CreatedAt = time.UnixMicro(created).UTC()
		return a, err
	}, `SELECT user_id, email, is_admin, created_at FROM accounts WHERE email IS NOT NULL ORDER BY created_at`)
}
