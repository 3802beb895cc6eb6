package store

// Notification rows (migration 016; CONTRACT.md
// "Notifications"). Queued email and webhook rows are the outboxes: a
// sender claims them (ClaimQueued), sends, and settles each in the same
// transaction on PostgreSQL, where the claim's FOR UPDATE SKIP LOCKED keeps
// every other replica's sender off them until it commits or its connection
// dies.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
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
	// DedupKey, when set, makes the row's notice once-only per account and
	// type (InsertNotifications); it marks the notice (table notice_once),
	// not the row, and is not read back.
	DedupKey *string
	Payload  string // JSON the email and the push carry; never listed
	Attempts int
	// Salt, when set, makes the row one of its notice's final rows (IsFinal),
	// stored together in notice_finals; its ID is FinalRowID(CreatedAt, Salt).
	Salt int64
}

const notificationColumns = `id, user_id, type, channel, severity, delivery_status, digest, created_at, sent_at, payload, attempts`

func scanNotification(r scanner) (Notification, error) {
	var n Notification
	var sent sql.NullInt64
	err := r.Scan(&n.ID, &n.UserID, &n.Type, &n.Channel, &n.Severity, &n.DeliveryStatus, &n.Digest, &n.CreatedAt,
		&sent, &n.Payload, &n.Attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return n, ErrNotFound
	}
	if sent.Valid {
		n.SentAt = &sent.Int64
	}
	return n, err
}

// inList appends values to args and returns their placeholders, comma
// separated, for an IN (…) after the args already bound.
func (s *Store) inList(args []any, values []string) (string, []any) {
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		args = append(args, v)
		b.WriteString(s.placeholder(len(args)))
	}
	return b.String(), args
}

// StampNotices stamps rows decided with offsets from their notice's stamp
// (each row's CreatedAt its offset, 0, 1, …, a notice's final rows first;
// SentAt, when set, the same offset): created_at becomes stamp + offset, a
// sent row's sent_at its created_at, and a final row's ID FinalRowID of its
// created_at. The stamp of an account's rows is NoticeContext.Stamp.
func StampNotices(rows []Notification, stamp int64) {
	for i := range rows {
		rows[i].CreatedAt += stamp
		if rows[i].SentAt != nil {
			sent := rows[i].CreatedAt
			rows[i].SentAt = &sent
		}
		if rows[i].Salt != 0 {
			rows[i].ID = FinalRowID(rows[i].CreatedAt, rows[i].Salt)
		}
	}
}

// InsertNotifications stores notices' rows in tx, a few hundred per
// statement, and reports how many it stored. A once-only notice (its rows'
// DedupKey) is marked first (markOnce); the rows of one marked before are
// skipped, so a job's notices stay once-only without reading their keys
// first. A notice's final rows (Salt set) go into notice_finals as one row.
// The caller holds the account's lock and stamped the rows above the
// account's newest (NoticeContext), which the unique keys on (user_id,
// created_at) of both tables check, each in its own: a stamp taken is an
// error.
func (s *Store) InsertNotifications(ctx context.Context, tx *sql.Tx, rows []Notification) (int64, error) {
	rows, err := s.markOnce(ctx, tx, rows)
	if err != nil {
		return 0, err
	}
	finals, rest, err := groupFinals(rows)
	if err != nil {
		return 0, err
	}
	if err := s.insertFinals(ctx, tx, finals); err != nil {
		return 0, err
	}
	stored, err := s.insertRows(ctx, tx, rest)
	if err != nil {
		return 0, err
	}
	s.noticesStamped(rows)
	return stored + int64(len(rows)-len(rest)), nil
}

// insertRows stores rows (none of them final) in notifications, a few
// hundred per statement, and reports how many it stored.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, rows []Notification) (int64, error) {
	var stored int64
	for len(rows) > 0 {
		// One statement for a run of rows of one account, type and
		// severity (a notice's rows, a job's notices), at most chunk: those
		// three are bound once, as $1 to $3.
		const chunk = 300 // at most 6 values a row, 3 a usual one: well under both stores' limits on parameters
		n := 1
		for n < min(chunk, len(rows)) && rows[n].UserID == rows[0].UserID && rows[n].Type == rows[0].Type && rows[n].Severity == rows[0].Severity {
			n++
		}
		q, args := s.notificationsInsert(rows[:n])
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return stored, err
		}
		affected, err := res.RowsAffected()
		if err != nil {
			return stored, err
		}
		stored += affected
		rows = rows[n:]
	}
	return stored, nil
}

// notificationsInsert is the INSERT of rows, which share their account,
// type and severity. Only what differs from row to row is bound: the id,
// created_at, sent_at when set, and a payload when not empty; the rest
// (channel, delivery status, digest, attempts; an empty payload, a null
// sent_at) is written into the statement's text. A notice's rows are
// decided alike for every notice of an account, so a job's chunks share one
// text (one prepared statement), and on SQLite, which copies every value
// bound, a row binds 2 or 3 values instead of 8.
func (s *Store) notificationsInsert(rows []Notification) (string, []any) {
	var b strings.Builder
	b.Grow(160 + 80*len(rows))
	b.WriteString(`INSERT INTO notifications (user_id, type, severity, id, channel, delivery_status, digest, created_at, sent_at, payload, attempts) VALUES `)
	args := make([]any, 0, 3+3*len(rows))
	args = append(args, rows[0].UserID, rows[0].Type, rows[0].Severity)
	// On SQLite the row's values are positional (?): a named or numbered
	// parameter costs a scan of the statement's list of names when bound.
	bind := func(v any) {
		args = append(args, v)
		b.WriteString(s.placeholder(len(args)))
	}
	word := func(v string) {
		if isSQLWord(v) {
			b.WriteByte('\'')
			b.WriteString(v)
			b.WriteByte('\'')
		} else {
			bind(v)
		}
	}
	var num [20]byte
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		// $1 to $3 come first in every tuple, so that on SQLite they are
		// its first three parameters (a ? is numbered after the largest
		// before it).
		b.WriteString("($1, $2, $3, ")
		bind(r.ID)
		b.WriteString(", ")
		word(r.Channel)
		b.WriteString(", ")
		word(r.DeliveryStatus)
		if r.Digest {
			b.WriteString(", TRUE, ")
		} else {
			b.WriteString(", FALSE, ")
		}
		bind(r.CreatedAt)
		b.WriteString(", ")
		if r.SentAt == nil {
			b.WriteString("NULL")
		} else {
			bind(*r.SentAt)
		}
		b.WriteString(", ")
		if r.Payload == "" {
			b.WriteString("''")
		} else {
			bind(r.Payload)
		}
		b.WriteString(", ")
		b.Write(strconv.AppendInt(num[:0], int64(r.Attempts), 10))
		b.WriteByte(')')
	}
	return b.String(), args
}

// isSQLWord reports whether v, a word of lower-case letters and underscores
// (the channels and delivery statuses), may be written into a statement as
// a string literal.
func isSQLWord(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// Notifications lists userID's rows newest first: those created before
// before (when not nil), of severity (when not nil), at most limit. One
// statement (one snapshot: a row moving from notice_finals to notifications
// meanwhile is never missed) reads up to limit rows of notifications and
// limit + 1 of notice_finals, whose newest may hold only rows at or after
// before; they are expanded and merged here.
func (s *Store) Notifications(ctx context.Context, userID string, before *int64, severity *string, limit int) ([]Notification, error) {
	where := ` WHERE user_id = $1`
	args := []any{userID}
	if before != nil {
		args = append(args, *before)
		where += ` AND created_at < $` + strconv.Itoa(len(args))
	}
	if severity != nil {
		args = append(args, *severity)
		where += ` AND severity = $` + strconv.Itoa(len(args))
	}
	args = append(args, limit, limit+1)
	n := strconv.Itoa(len(args))
	// kinds is 0 for a row of notifications; user_id and payload are not listed.
	q := `SELECT * FROM (SELECT id, type, channel, severity, delivery_status, digest, created_at, sent_at, attempts, 0 AS kinds, 0 AS moved, 0 AS salt
			FROM notifications` + where + ` ORDER BY created_at DESC LIMIT $` + strconv.Itoa(len(args)-1) + `) n
		UNION ALL
		SELECT * FROM (SELECT '', type, '', severity, '', FALSE, created_at, CAST(NULL AS BIGINT), 0, kinds, moved, salt
			FROM notice_finals` + where + ` AND moved <> kinds ORDER BY created_at DESC LIMIT $` + n + `) f`
	// Each row read is a row of notifications, or (kinds set) one of
	// notice_finals, to expand.
	type read struct {
		row   Notification
		final finalRow
	}
	all, err := queryAll(ctx, s, nil, func(r scanner) (read, error) {
		var x read
		var sent sql.NullInt64
		err := r.Scan(&x.row.ID, &x.row.Type, &x.row.Channel, &x.row.Severity, &x.row.DeliveryStatus, &x.row.Digest, &x.row.CreatedAt,
			&sent, &x.row.Attempts, &x.final.kinds, &x.final.moved, &x.final.salt)
		if sent.Valid {
			x.row.SentAt = &sent.Int64
		}
		x.row.UserID = userID
		x.final.userID, x.final.typ, x.final.severity, x.final.createdAt = userID, x.row.Type, x.row.Severity, x.row.CreatedAt
		return x, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	out := make([]Notification, 0, min(limit, 3*len(all)))
	for _, x := range all {
		if x.final.kinds == 0 {
			out = append(out, x.row)
			continue
		}
		for _, e := range x.final.rows() {
			if before == nil || e.CreatedAt < *before {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b Notification) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	return out[:min(limit, len(out))], nil
}

// NotificationByID reads one of userID's rows; ErrNotFound when it has none
// with that id.
func (s *Store) NotificationByID(ctx context.Context, q Querier, userID, id string) (Notification, error) {
	if q == nil {
		q = s.read
	}
	n, err := scanNotification(q.QueryRowContext(ctx, `SELECT `+notificationColumns+` FROM notifications WHERE user_id = $1 AND id = $2`, userID, id))
	if !errors.Is(err, ErrNotFound) {
		return n, err
	}
	f, bit, err := s.finalByID(ctx, q, userID, id)
	if err != nil {
		return Notification{}, err
	}
	if f.moved&bit != 0 {
		// Moved to notifications since the first read looked there.
		return scanNotification(q.QueryRowContext(ctx, `SELECT `+notificationColumns+` FROM notifications WHERE user_id = $1 AND id = $2`, userID, id))
	}
	return f.row(bit), nil
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
	if n.Salt != 0 { // a final row: it moves to notifications, queued
		f, bit, err := s.finalByID(ctx, tx, userID, id)
		if err != nil {
			return n, err
		}
		err = s.moveFinal(ctx, tx, f, bit, "queued")
		if errors.Is(err, errMovedAlready) {
			// A concurrent redelivery moved it first: it is queued, not failed.
			return s.NotificationByID(ctx, tx, userID, id)
		}
		return n, err
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
		list, args := s.inList([]any{at.UnixMicro()}, ids[:n])
		if _, err := tx.ExecContext(ctx, `UPDATE notifications SET digested_at = `+s.placeholder(1)+` WHERE id IN (`+list+`)`, args...); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}
