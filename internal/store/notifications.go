package store

// Notification rows and preferences (migration 016; CONTRACT.md
// "Notifications"). Queued email and webhook rows are the outboxes: a
// sender claims them (ClaimQueued), sends, and settles each in the same
// transaction on PostgreSQL, where the claim's FOR UPDATE SKIP LOCKED keeps
// every other replica's sender off them until it commits or its connection
// dies.

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Notification is one stored notification row.
type Notification struct {
	ID             string
	UserID         string
	Type           string
	Channel        string
	Severity       string
	DeliveryStatus string
	Digest         bool
	CreatedAt      int64 // Unix microseconds, unique per account
	SentAt         *int64
	DedupKey       *string
	Payload        string // JSON the email and the push carry; never listed
	Attempts       int
}

// Preference is one changed (type, channel) preference of an account.
type Preference struct {
	Type, Channel   string
	Enabled, Digest bool
}

// NoticeContext is what deciding a notice's rows for one account needs,
// read in one statement under the account's lock.
type NoticeContext struct {
	// LastCreatedAt is the account's newest row's created_at (0: none): new
	// rows are stamped above it.
	LastCreatedAt int64
	Email         *string
	// Subscribed: one of the account's endpoints takes the type.
	Subscribed bool
	// Prefs holds the account's changed preferences of the type by channel.
	Prefs map[string]Preference
	// Done: the account has a notice of the type with the dedup key asked.
	Done bool
}

// noticeChannels are the channels NoticeContext reads preferences of.
var noticeChannels = [...]string{"in_app", "email", "webhook"}

// NoticeContext reads what deciding a notice of typ for userID needs;
// dedupKey, when not empty, asks whether the notice was written already.
func (s *Store) NoticeContext(ctx context.Context, q Querier, userID, typ, dedupKey string) (NoticeContext, error) {
	// One round trip: the notice is written inside someone else's
	// transaction (a revoke's), which should not grow by four.
	pref := func(ch, col string) string {
		return `(SELECT ` + col + ` FROM notification_preferences WHERE user_id = $1 AND type = $2 AND channel = '` + ch + `')`
	}
	var b strings.Builder
	b.WriteString(`SELECT (SELECT COALESCE(MAX(created_at), 0) FROM notifications WHERE user_id = $1),
		(SELECT email FROM accounts WHERE user_id = $1),
		EXISTS (SELECT 1 FROM webhook_types WHERE user_id = $1 AND type = $2),
		EXISTS (SELECT 1 FROM notifications WHERE user_id = $1 AND type = $2 AND dedup_key = $3)`)
	for _, ch := range noticeChannels {
		b.WriteString(", " + pref(ch, "enabled") + ", " + pref(ch, "digest"))
	}
	var nc NoticeContext
	var enabled, digest [len(noticeChannels)]sql.NullBool
	dest := []any{&nc.LastCreatedAt, &nc.Email, &nc.Subscribed, &nc.Done}
	for i := range noticeChannels {
		dest = append(dest, &enabled[i], &digest[i])
	}
	if err := q.QueryRowContext(ctx, b.String(), userID, typ, dedupKey).Scan(dest...); err != nil {
		return nc, err
	}
	for i, ch := range noticeChannels {
		if enabled[i].Valid {
			if nc.Prefs == nil {
				nc.Prefs = make(map[string]Preference, len(noticeChannels))
			}
			nc.Prefs[ch] = Preference{Type: typ, Channel: ch, Enabled: enabled[i].Bool, Digest: digest[i].Bool}
		}
	}
	return nc, nil
}

const notificationColumns = `id, user_id, type, channel, severity, delivery_status, digest, created_at, sent_at, dedup_key, payload, attempts`

func scanNotification(r scanner) (Notification, error) {
	var n Notification
	var sent sql.NullInt64
	var dedup sql.NullString
	err := r.Scan(&n.ID, &n.UserID, &n.Type, &n.Channel, &n.Severity, &n.DeliveryStatus, &n.Digest, &n.CreatedAt,
		&sent, &dedup, &n.Payload, &n.Attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return n, ErrNotFound
	}
	if sent.Valid {
		n.SentAt = &sent.Int64
	}
	if dedup.Valid {
		n.DedupKey = &dedup.String
	}
	return n, err
}

// DedupKeysWritten reports which of keys userID's notices of typ carry,
// read through q (nil: the read pool).
func (s *Store) DedupKeysWritten(ctx context.Context, q Querier, userID, typ string, keys []string) (map[string]bool, error) {
	done := make(map[string]bool, len(keys))
	const chunk = 500
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		var b strings.Builder
		b.WriteString(`SELECT DISTINCT dedup_key FROM notifications WHERE user_id = ` + s.placeholder(1) + ` AND type = ` + s.placeholder(2) +
			` AND dedup_key IN (`)
		args := []any{userID, typ}
		for i, k := range keys[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			args = append(args, k)
			b.WriteString(s.placeholder(len(args)))
		}
		b.WriteString(")")
		found, err := queryAll(ctx, s, q, func(r scanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, b.String(), args...)
		if err != nil {
			return nil, err
		}
		for _, k := range found {
			done[k] = true
		}
		keys = keys[n:]
	}
	return done, nil
}

// InsertNotifications stores notices' rows in tx, a few hundred per statement.
// The caller holds the account's lock and stamped the rows above the
// account's newest (NoticeContext), which the unique indexes check.
func (s *Store) InsertNotifications(ctx context.Context, tx *sql.Tx, rows []Notification) error {
	const chunk = 300 // 12 values a row: well under both stores' limits on parameters
	for len(rows) > chunk {
		if err := s.InsertNotifications(ctx, tx, rows[:chunk]); err != nil {
			return err
		}
		rows = rows[chunk:]
	}
	if len(rows) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO notifications (` + notificationColumns + `) VALUES `)
	args := make([]any, 0, 12*len(rows))
	for i, n := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j := range 12 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(s.placeholder(len(args) + j + 1))
		}
		b.WriteString(")")
		args = append(args, n.ID, n.UserID, n.Type, n.Channel, n.Severity, n.DeliveryStatus, n.Digest, n.CreatedAt,
			n.SentAt, n.DedupKey, n.Payload, n.Attempts)
	}
	_, err := tx.ExecContext(ctx, b.String(), args...)
	return err
}

// Notifications lists userID's rows newest first: those created before
// before (when not nil), of severity (when not nil), at most limit.
func (s *Store) Notifications(ctx context.Context, userID string, before *int64, severity *string, limit int) ([]Notification, error) {
	q := `SELECT ` + notificationColumns + ` FROM notifications WHERE user_id = $1`
	args := []any{userID}
	if before != nil {
		args = append(args, *before)
		q += ` AND created_at < $` + strconv.Itoa(len(args))
	}
	if severity != nil {
		args = append(args, *severity)
		q += ` AND severity = $` + strconv.Itoa(len(args))
	}
	args = append(args, limit)
	q += ` ORDER BY created_at DESC LIMIT $` + strconv.Itoa(len(args))
	return queryAll(ctx, s, nil, scanNotification, q, args...)
}

// NotificationByID reads one of userID's rows; ErrNotFound when it has none
// with that id.
func (s *Store) NotificationByID(ctx context.Context, q Querier, userID, id string) (Notification, error) {
	if q == nil {
		q = s.read
	}
	return scanNotification(q.QueryRowContext(ctx, `SELECT `+notificationColumns+` FROM notifications WHERE user_id = $1 AND id = $2`, userID, id))
}

// Preferences lists userID's changed preferences.
func (s *Store) Preferences(ctx context.Context, q Querier, userID string) ([]Preference, error) {
	return queryAll(ctx, s, q, func(r scanner) (Preference, error) {
		var p Preference
		err := r.Scan(&p.Type, &p.Channel, &p.Enabled, &p.Digest)
		return p, err
	}, `SELECT type, channel, enabled, digest FROM notification_preferences WHERE user_id = $1 ORDER BY type, channel`, userID)
}

// PutPreference stores one preference of userID.
func (s *Store) PutPreference(ctx context.Context, tx *sql.Tx, userID string, p Preference) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO notification_preferences (user_id, type, channel, enabled, digest) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (user_id, type, channel) DO UPDATE SET enabled = excluded.enabled, digest = excluded.digest`,
		userID, p.Type, p.Channel, p.Enabled, p.Digest)
	return err
}

// QueuedAccounts lists up to limit accounts that have queued rows on
// channel, the one with the oldest queued row first.
func (s *Store) QueuedAccounts(ctx context.Context, channel string, limit int) ([]string, error) {
	return queryAll(ctx, s, nil, func(r scanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, `SELECT user_id FROM notifications WHERE delivery_status = 'queued' AND channel = $1
		GROUP BY user_id ORDER BY MIN(created_at), user_id LIMIT $2`, channel, limit)
}

// ClaimQueued returns up to limit of userID's queued rows on channel, oldest
// first, and on PostgreSQL locks them until tx ends, skipping rows another
// transaction holds: two senders never hold one row.
func (s *Store) ClaimQueued(ctx context.Context, tx *sql.Tx, channel, userID string, limit int) ([]Notification, error) {
	q := `SELECT ` + notificationColumns + ` FROM notifications
		WHERE channel = $1 AND user_id = $2 AND delivery_status = 'queued' ORDER BY created_at LIMIT $3`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE SKIP LOCKED`
	}
	return queryAll(ctx, s, tx, scanNotification, q, channel, userID, limit)
}

// SettleNotification records a claimed row's outcome: its status, when it
// was sent (nil: not sent), and attempts made by this claim.
func (s *Store) SettleNotification(ctx context.Context, tx *sql.Tx, id, status string, sentAt *int64, attempts int) error {
	_, err := tx.ExecContext(ctx, `UPDATE notifications SET delivery_status = $2, sent_at = $3, attempts = attempts + $4
		WHERE id = $1 AND delivery_status = 'queued'`, id, status, sentAt, attempts)
	return err
}

// Requeue puts userID's failed row id back in its outbox (redeliver). It
// reports the row as it was; ErrNotFound when userID has no such row.
func (s *Store) Requeue(ctx context.Context, tx *sql.Tx, userID, id string) (Notification, error) {
	n, err := s.NotificationByID(ctx, tx, userID, id)
	if err != nil {
		return n, err
	}
	if n.DeliveryStatus != "failed" {
		return n, nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE notifications SET delivery_status = 'queued', sent_at = NULL WHERE id = $1`, id)
	return n, err
}

// HeldEmail returns userID's email rows held for the digest since since and
// not yet digested, locking them on PostgreSQL (skipping rows another digest
// holds).
func (s *Store) HeldEmail(ctx context.Context, tx *sql.Tx, userID string, since time.Time) ([]Notification, error) {
	q := `SELECT ` + notificationColumns + ` FROM notifications
		WHERE user_id = $1 AND delivery_status = 'suppressed_digest' AND digested_at IS NULL AND created_at >= $2 ORDER BY created_at`
	if s.Dialect == Postgres {
		q += ` FOR UPDATE SKIP LOCKED`
	}
	return queryAll(ctx, s, tx, scanNotification, q, userID, since.UnixMicro())
}

// MarkDigested records that the rows ids went out in a digest at at.
func (s *Store) MarkDigested(ctx context.Context, tx *sql.Tx, ids []string, at time.Time) error {
	const chunk = 500
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		var b strings.Builder
		b.WriteString(`UPDATE notifications SET digested_at = ` + s.placeholder(1) + ` WHERE id IN (`)
		args := []any{at.UnixMicro()}
		for i, id := range ids[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			args = append(args, id)
			b.WriteString(s.placeholder(len(args)))
		}
		b.WriteString(")")
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
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
