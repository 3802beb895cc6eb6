package store

// Sign-in: one-time codes, sessions and legal acceptances (migration 015;
// CONTRACT.md "Credentials", "Legal agreements"). Codes and session tokens
// are stored only as hashes; every write takes the caller's transaction.

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// OTPCode is a one-time code as stored: its hash, never the code.
type OTPCode struct {
	ID          string
	Email       string
	CodeHash    []byte
	Acceptances []byte // JSON; nil for an email with an account
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Attempts    int
	UsedAt      *time.Time
	// UserID is, as LiveOTPCode read it, the account of Email; empty when
	// the email had none.
	UserID string
}

// LockEmail holds the email's sign-in row until tx ends, so that code
// requests of one email are counted against each other (PostgreSQL; on
// SQLite the writer holds the database).
func (s *Store) LockEmail(ctx context.Context, tx *sql.Tx, email string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO otp_emails (email) VALUES ($1) ON CONFLICT (email) DO NOTHING`, email); err != nil {
		return err
	}
	if s.Dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT 1 FROM otp_emails WHERE email = $1 FOR UPDATE`, email)
	return err
}

// OTPRequestsSince lists the creation times of the email's codes created
// after since, oldest first.
func (s *Store) OTPRequestsSince(ctx context.Context, q Querier, email string, since time.Time) ([]time.Time, error) {
	return queryAll(ctx, s, q, func(r scanner) (time.Time, error) {
		var at int64
		err := r.Scan(&at)
		return time.UnixMicro(at).UTC(), err
	}, `SELECT created_at FROM otp_codes WHERE email = $1 AND created_at > $2 ORDER BY created_at`, email, since.UnixMicro())
}

// InsertOTPCode stores a code and burns every earlier unused code of its
// email: only the newest code can be verified.
func (s *Store) InsertOTPCode(ctx context.Context, tx *sql.Tx, c OTPCode) error {
	if _, err := tx.ExecContext(ctx, `UPDATE otp_codes SET used_at = $2 WHERE email = $1 AND used_at IS NULL`,
		c.Email, c.CreatedAt.UnixMicro()); err != nil {
		return err
	}
	var acceptances any
	if c.Acceptances != nil {
		acceptances = string(c.Acceptances)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO otp_codes (id, email, code_hash, acceptances, created_at, expires_at, attempts)
		VALUES ($1, $2, $3, $4, $5, $6, 0)`, c.ID, c.Email, c.CodeHash, acceptances, c.CreatedAt.UnixMicro(), c.ExpiresAt.UnixMicro())
	return err
}

// DeleteOTPCode removes a code that was never mailed: it is no longer
// counted against its email's hourly limit.
func (s *Store) DeleteOTPCode(ctx context.Context, tx *sql.Tx, id string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM otp_codes WHERE id = $1`, id)
	return err
}

// LiveOTPCode returns the email's newest code that is unused, unexpired at
// now and has tries left (fewer than maxAttempts), or ErrNotFound; with it,
// the email's account if there is one (one read for both).
func (s *Store) LiveOTPCode(ctx context.Context, q Querier, email string, now time.Time, maxAttempts int) (OTPCode, error) {
	if q == nil {
		q = s.read
	}
	var c OTPCode
	var acceptances, userID sql.NullString
	var created, expires int64
	err := q.QueryRowContext(ctx, `SELECT c.id, c.email, c.code_hash, c.acceptances, c.created_at, c.expires_at, c.attempts, a.user_id
		FROM otp_codes c LEFT JOIN accounts a ON a.email = c.email
		WHERE c.email = $1 AND c.used_at IS NULL AND c.expires_at > $2 AND c.attempts < $3 ORDER BY c.created_at DESC LIMIT 1`,
		email, now.UnixMicro(), maxAttempts).Scan(&c.ID, &c.Email, &c.CodeHash, &acceptances, &created, &expires, &c.Attempts, &userID)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	if acceptances.Valid {
		c.Acceptances = []byte(acceptances.String)
	}
	c.UserID = userID.String
	c.CreatedAt, c.ExpiresAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC()
	return c, err
}

// SpendOTPCode marks the code used if it still is live at now; false when
// another verification spent it, or it ran out of tries, first.
func (s *Store) SpendOTPCode(ctx context.Context, tx *sql.Tx, id string, now time.Time, maxAttempts int) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE otp_codes SET used_at = $2 WHERE id = $1 AND used_at IS NULL AND expires_at > $2 AND attempts < $3`,
		id, now.UnixMicro(), maxAttempts)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// FailOTPAttempt counts a wrong try against the code (never past
// maxAttempts, where the code is burnt).
func (s *Store) FailOTPAttempt(ctx context.Context, tx *sql.Tx, id string, maxAttempts int) error {
	_, err := tx.ExecContext(ctx, `UPDATE otp_codes SET attempts = attempts + 1 WHERE id = $1 AND attempts < $2`, id, maxAttempts)
	return err
}

// AccountByEmail reads the account with that (lowercase) email.
func (s *Store) AccountByEmail(ctx context.Context, q Querier, email string) (Account, error) {
	if q == nil {
		q = s.read
	}
	var a Account
	var created int64
	err := q.QueryRowContext(ctx, `SELECT user_id, email, is_admin, created_at FROM accounts WHERE email = $1`, email).
		Scan(&a.UserID, &a.Email, &a.IsAdmin, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	a.CreatedAt = time.UnixMicro(created).UTC()
	return a, err
}

// CreateAccount stores a new account without a key inside tx (sign-in);
// ErrConflict when its id or email exists.
func (s *Store) CreateAccount(ctx context.Context, tx *sql.Tx, a Account) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO accounts (user_id, email, is_admin, created_at) VALUES ($1, $2, $3, $4)`,
		a.UserID, a.Email, a.IsAdmin, a.CreatedAt.UnixMicro())
	if IsUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return err
	}
	return s.numberAccount(ctx, tx, a.UserID)
}

// Session is a signed-in session as stored: its token's hash, never the
// token.
type Session struct {
	ID        string
	TokenHash []byte
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
	EndedAt   *time.Time
}

// InsertSession stores a new session.
func (s *Store) InsertSession(ctx context.Context, tx *sql.Tx, ss Session) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		ss.ID, ss.TokenHash, ss.UserID, ss.CreatedAt.UnixMicro(), ss.ExpiresAt.UnixMicro())
	return err
}

// SessionByHash finds a session, with its account's email and administrator
// flag, by the SHA-256 of its token: one indexed read.
func (s *Store) SessionByHash(ctx context.Context, hash []byte) (Session, Account, error) {
	var ss Session
	var a Account
	var created, expires, accountCreated int64
	var ended sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT s.id, s.token_hash, s.user_id, s.created_at, s.expires_at, s.ended_at,
			a.email, a.is_admin, a.created_at
		FROM sessions s JOIN accounts a ON a.user_id = s.user_id WHERE s.token_hash = $1`, hash).
		Scan(&ss.ID, &ss.TokenHash, &ss.UserID, &created, &expires, &ended, &a.Email, &a.IsAdmin, &accountCreated)
	if errors.Is(err, sql.ErrNoRows) {
		return ss, a, ErrNotFound
	}
	ss.CreatedAt, ss.ExpiresAt, ss.EndedAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC(), fromMicros(ended)
	a.UserID, a.CreatedAt = ss.UserID, time.UnixMicro(accountCreated).UTC()
	return ss, a, err
}

// EndSession ends the session now (logout); ending it again keeps the first
// time.
func (s *Store) EndSession(ctx context.Context, tx *sql.Tx, id string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE sessions SET ended_at = $2 WHERE id = $1 AND ended_at IS NULL`, id, now.UnixMicro())
	return err
}

// EndUserSessions ends every live session of the account now (sign out
// everywhere); sessions already ended keep their first time. It returns how
// many it ended.
func (s *Store) EndUserSessions(ctx context.Context, tx *sql.Tx, userID string, now time.Time) (int64, error) {
	res, err := tx.ExecContext(ctx, `UPDATE sessions SET ended_at = $2 WHERE user_id = $1 AND ended_at IS NULL`, userID, now.UnixMicro())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Acceptance is one recorded acceptance of a legal document's version.
type Acceptance struct {
	UserID      string
	DocumentID  string
	Version     string
	ContentHash string
	Source      string // portal or signin
	Email       string
	RecordedAt  time.Time
}

// InsertAcceptance records an acceptance; an acceptance of a version the
// account already accepted keeps the first record (inserted false).
func (s *Store) InsertAcceptance(ctx context.Context, tx *sql.Tx, a Acceptance) (inserted bool, err error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO legal_acceptances (user_id, document_id, version, content_hash, source, email, recorded_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_id, document_id, version) DO NOTHING`,
		a.UserID, a.DocumentID, a.Version, a.ContentHash, a.Source, a.Email, a.RecordedAt.UnixMicro())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Acceptances lists the account's acceptances through q (nil: the read
// pool), by document and then by time.
func (s *Store) Acceptances(ctx context.Context, q Querier, userID string) ([]Acceptance, error) {
	return queryAll(ctx, s, q, func(r scanner) (Acceptance, error) {
		var a Acceptance
		var at int64
		err := r.Scan(&a.UserID, &a.DocumentID, &a.Version, &a.ContentHash, &a.Source, &a.Email, &at)
		a.RecordedAt = time.UnixMicro(at).UTC()
		return a, err
	}, `SELECT user_id, document_id, version, content_hash, source, email, recorded_at FROM legal_acceptances
		WHERE user_id = $1 ORDER BY document_id, recorded_at`, userID)
}

// SessionByID reads a session by its id.
func (s *Store) SessionByID(ctx context.Context, id string) (Session, error) {
	var ss Session
	var created, expires int64
	var ended sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT id, token_hash, user_id, created_at, expires_at, ended_at FROM sessions WHERE id = $1`, id).
		Scan(&ss.ID, &ss.TokenHash, &ss.UserID, &created, &expires, &ended)
	if errors.Is(err, sql.ErrNoRows) {
		return ss, ErrNotFound
	}
	ss.CreatedAt, ss.ExpiresAt, ss.EndedAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC(), fromMicros(ended)
	return ss, err
}
