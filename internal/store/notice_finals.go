package store

// A notice's final rows, stored as one row of notice_finals (migration 022;
// docs/decisions/notifications.md "Rows"): its in_app row (sent as written),
// its email row of an account without email (failed as written) and its
// webhook row no endpoint takes (pending). None is ever in an outbox, so on
// the one SQLite writer, inside the transaction of the change that causes
// the notice, they cost one B-tree entry together instead of three each.
// They are expanded per channel when read; every reader of rows (the list,
// a row by id, redelivery, the counts) reads both tables.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// The kinds of final row, as notice_finals.kinds holds them; a notice's
// final rows are stamped in this order.
const (
	finalInApp        = 1 // in_app, sent
	finalEmailFailed  = 2 // email, failed: the account has no email
	finalWebhookNoOne = 4 // webhook, pending: no endpoint takes the type
)

// finalKinds lists the kinds in their stamping order, with their rows'
// channel and status.
var finalKinds = []struct {
	bit             int
	channel, status string
}{{finalInApp, "in_app", "sent"}, {finalEmailFailed, "email", "failed"}, {finalWebhookNoOne, "webhook", "pending"}}

// finalKind is the kind of final row a row of channel in status is, or 0
// when the row may still change (it goes to notifications).
func finalKind(channel, status string) int {
	for _, k := range finalKinds {
		if k.channel == channel && k.status == status {
			return k.bit
		}
	}
	return 0
}

// IsFinal reports whether a notice's row on channel, written in status, is
// final: stored among its notice's final rows (give it the notice's salt,
// NewSalt, and stamp those rows first, in channel order in_app, email,
// webhook: InsertNotifications groups them).
func IsFinal(channel, status string) bool { return finalKind(channel, status) != 0 }

// NewSalt draws the random part of a notice's final rows' ids: 62 bits, never 0.
func NewSalt(r io.Reader) (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int64(max(binary.BigEndian.Uint64(b[:])>>2, 1)), nil
}

// FinalRowID is the id of the final row created at createdAt (Unix
// microseconds) of the notice with salt: a UUIDv7 (RFC 9562) whose
// timestamp is createdAt's millisecond, whose rand_a holds its microseconds
// within that millisecond scaled to 12 bits (§6.2, method 3: floor(µs ×
// 4096 / 1000), which keeps every microsecond apart), and whose rand_b is
// salt. Read back (parseFinalRowID), it names the row's account stamp: the
// row is found by the primary key of notice_finals, with no index on ids.
func FinalRowID(createdAt, salt int64) string {
	var u uuid.UUID
	ms, frac := uint64(createdAt/1000), uint64(createdAt%1000)*4096/1000
	binary.BigEndian.PutUint64(u[0:8], ms<<16|0x7000|frac)
	binary.BigEndian.PutUint64(u[8:16], 0x8000_0000_0000_0000|uint64(salt)&(1<<62-1))
	return u.String()
}

// parseFinalRowID reads FinalRowID's stamp and salt back from id; ok is
// false when id cannot be one.
func parseFinalRowID(id string) (createdAt, salt int64, ok bool) {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		return 0, 0, false
	}
	hi, lo := binary.BigEndian.Uint64(u[0:8]), binary.BigEndian.Uint64(u[8:16])
	us := ((hi&0x0fff)*1000 + 4095) / 4096 // the microsecond FinalRowID scaled down to it
	if us >= 1000 {
		return 0, 0, false
	}
	createdAt, salt = int64(hi>>16)*1000+int64(us), int64(lo&(1<<62-1))
	// Only the canonical spelling: the id as listed.
	return createdAt, salt, FinalRowID(createdAt, salt) == id
}

// finalRank is the offset from a notice's first final row of its row of
// kind bit: how many of kinds's rows come before it.
func finalRank(kinds, bit int) int64 { return int64(bits.OnesCount(uint(kinds & (bit - 1)))) }

// finalRow is one row of notice_finals.
type finalRow struct {
	userID, typ, severity string
	createdAt             int64
	kinds, moved          int
	salt                  int64
	payload               string
}

// rows expands f into the rows the API lists, newest first, leaving out
// the moved ones (listed from notifications).
func (f finalRow) rows() []Notification {
	out := make([]Notification, 0, 3)
	for i := len(finalKinds) - 1; i >= 0; i-- {
		k := finalKinds[i]
		if f.kinds&k.bit == 0 || f.moved&k.bit != 0 {
			continue
		}
		out = append(out, f.row(k.bit))
	}
	return out
}

// row is f's row of kind bit.
func (f finalRow) row(bit int) Notification {
	at := f.createdAt + finalRank(f.kinds, bit)
	n := Notification{ID: FinalRowID(at, f.salt), UserID: f.userID, Type: f.typ, Severity: f.severity, CreatedAt: at, Salt: f.salt}
	for _, k := range finalKinds {
		if k.bit == bit {
			n.Channel, n.DeliveryStatus = k.channel, k.status
		}
	}
	if bit == finalInApp {
		n.SentAt = &at // sent as written
	}
	if bit == finalEmailFailed {
		n.Payload = f.payload
	}
	return n
}

const finalColumns = `user_id, type, severity, created_at, kinds, moved, salt, payload`

func scanFinal(r scanner) (finalRow, error) {
	var f finalRow
	err := r.Scan(&f.userID, &f.typ, &f.severity, &f.createdAt, &f.kinds, &f.moved, &f.salt, &f.payload)
	return f, err
}

// finalNewestSQL is the SQL of the created_at of userID's newest final row
// (a parameter's placeholder), from its notice's first and kinds.
func finalNewestSQL(userID string) string {
	return `SELECT created_at + (kinds & 1) + ((kinds & 2) >> 1) + ((kinds & 4) >> 2) - 1 FROM notice_finals WHERE user_id = ` +
		userID + ` ORDER BY created_at DESC LIMIT 1`
}

// groupFinals turns the final rows among rows (Salt set) into notice_finals
// rows, one per notice, and returns them with the other rows. A notice's
// final rows must be stamped consecutively from its first, in kind order.
func groupFinals(rows []Notification) ([]finalRow, []Notification, error) {
	var finals []finalRow
	var rest []Notification
	for _, r := range rows {
		if r.Salt == 0 {
			rest = append(rest, r)
			continue
		}
		bit := finalKind(r.Channel, r.DeliveryStatus)
		if bit == 0 {
			return nil, nil, errors.New("notice rows: a " + r.Channel + " row " + r.DeliveryStatus + " is not final")
		}
		if n := len(finals); n > 0 && finals[n-1].salt == r.Salt && finals[n-1].userID == r.UserID {
			f := &finals[n-1]
			if f.kinds&^(bit-1) != 0 || r.CreatedAt != f.createdAt+finalRank(f.kinds|bit, bit) {
				return nil, nil, errors.New("notice rows: a notice's final rows out of order")
			}
			f.kinds |= bit
			if bit == finalEmailFailed {
				f.payload = r.Payload
			}
			continue
		}
		f := finalRow{userID: r.UserID, typ: r.Type, severity: r.Severity, createdAt: r.CreatedAt, kinds: bit, salt: r.Salt}
		if bit == finalEmailFailed {
			f.payload = r.Payload
		}
		finals = append(finals, f)
	}
	return finals, rest, nil
}

// insertFinals stores finals in tx, a few hundred per statement.
func (s *Store) insertFinals(ctx context.Context, tx *sql.Tx, finals []finalRow) error {
	for len(finals) > 0 {
		const chunk = 300 // 3 values a row
		n := 1
		for n < min(chunk, len(finals)) && finals[n].userID == finals[0].userID && finals[n].typ == finals[0].typ && finals[n].severity == finals[0].severity {
			n++
		}
		var b strings.Builder
		b.Grow(100 + 40*n)
		b.WriteString(`INSERT INTO notice_finals (user_id, type, severity, created_at, kinds, salt, payload) VALUES `)
		args := make([]any, 0, 3+3*n)
		args = append(args, finals[0].userID, finals[0].typ, finals[0].severity)
		bind := func(v any) {
			args = append(args, v)
			b.WriteString(s.placeholder(len(args)))
		}
		for i, f := range finals[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("($1, $2, $3, ") // first in every tuple: see notificationsInsert
			bind(f.createdAt)
			b.WriteString(", " + strconv.Itoa(f.kinds) + ", ")
			bind(f.salt)
			if f.payload == "" {
				b.WriteString(", '')")
			} else {
				b.WriteString(", ")
				bind(f.payload)
				b.WriteByte(')')
			}
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		finals = finals[n:]
	}
	return nil
}

// finalByID reads userID's final row id names (ErrNotFound when none):
// the row of notice_finals whose notice it belongs to, and its kind.
func (s *Store) finalByID(ctx context.Context, q Querier, userID, id string) (finalRow, int, error) {
	at, salt, ok := parseFinalRowID(id)
	if !ok {
		return finalRow{}, 0, ErrNotFound
	}
	f, err := scanFinal(q.QueryRowContext(ctx, `SELECT `+finalColumns+` FROM notice_finals
		WHERE user_id = $1 AND created_at <= $2 ORDER BY created_at DESC LIMIT 1`, userID, at))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && f.salt != salt) {
		return finalRow{}, 0, ErrNotFound
	}
	if err != nil {
		return finalRow{}, 0, err
	}
	for _, k := range finalKinds {
		if f.kinds&k.bit != 0 && f.createdAt+finalRank(f.kinds, k.bit) == at {
			return f, k.bit, nil
		}
	}
	return finalRow{}, 0, ErrNotFound
}

// errMovedAlready: another transaction moved the row first.
var errMovedAlready = errors.New("the notice row moved already")

// moveFinal moves f's row of kind bit to notifications, as it is but in
// status (redelivery: a failed email row goes back to queued);
// errMovedAlready when another transaction moved it since f was read.
func (s *Store) moveFinal(ctx context.Context, tx *sql.Tx, f finalRow, bit int, status string) error {
	r := f.row(bit)
	res, err := tx.ExecContext(ctx, `UPDATE notice_finals SET moved = moved | `+strconv.Itoa(bit)+`
		WHERE user_id = $1 AND created_at = $2 AND (moved & `+strconv.Itoa(bit)+`) = 0`, f.userID, f.createdAt)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return errMovedAlready
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO notifications (`+notificationColumns+`) VALUES ($1, $2, $3, $4, $5, $6, FALSE, $7, NULL, $8, 0)`,
		r.ID, r.UserID, r.Type, r.Channel, r.Severity, status, r.CreatedAt, r.Payload)
	return err
}
