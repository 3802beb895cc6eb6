package store

// What decides a notice's rows for one account (its newest stamp, email,
// endpoints and preferences of the type), read under the account's lock,
// and the insert that checks a remembered context instead of reading it
// (docs/decisions/notifications.md "Rows").

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

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

// Stamp is the stamp of rows written now (Unix microseconds) for the account
// nc describes: max(now, its newest + 1), so created_at stays unique per
// account (InsertNoticeRowsIf's SQL spells the same rule).
func (nc NoticeContext) Stamp(now int64) int64 { return max(now, nc.LastCreatedAt+1) }

// NoticeContext reads what deciding a notice of typ for userID needs;
// dedupKey, when not empty, asks whether the notice was written already.
//
// On SQLite, read through the writer's transaction, all but the dedup
// check comes from the notice cache when it holds it (noticecache.go). A
// *sql.Tx given as q must be the writer's: the cache is checked against its
// connection (no reader begins transactions).
func (s *Store) NoticeContext(ctx context.Context, q Querier, userID, typ, dedupKey string) (NoticeContext, error) {
	tx, cached := q.(*sql.Tx)
	cached = cached && s.noticeCache != nil
	if cached {
		if err := s.noticeCacheValid(ctx, tx); err != nil {
			return NoticeContext{}, err
		}
		if nc, ok := s.noticeCache.context(userID, typ); ok && dedupKey == "" {
			return nc, nil
		}
	}
	// One statement of five index probes: the notice is written inside
	// someone else's transaction (a revoke's), which should not grow by more.
	done := `FALSE`
	args := []any{userID, typ}
	if dedupKey != "" {
		done = `EXISTS (SELECT 1 FROM notice_once WHERE user_id = $1 AND type = $2 AND dedup_key = $3)`
		args = append(args, dedupKey)
	}
	var nc NoticeContext
	var prefs string
	err := q.QueryRowContext(ctx, `SELECT `+s.newestNotice("$1")+`,
		(SELECT email FROM accounts WHERE user_id = $1),
		EXISTS (SELECT 1 FROM webhook_types WHERE user_id = $1 AND type = $2),
		`+done+`,
		COALESCE((SELECT `+s.prefsAggregate()+` FROM notification_preferences WHERE user_id = $1 AND type = $2), '')`,
		args...).Scan(&nc.LastCreatedAt, &nc.Email, &nc.Subscribed, &nc.Done, &prefs)
	if err != nil {
		return nc, err
	}
	if nc.Prefs, err = parsePrefsKey(typ, prefs); err != nil {
		return nc, err
	}
	if cached {
		s.noticeCache.remember(userID, typ, nc)
	}
	return nc, nil
}

// newestNotice is the SQL reading the created_at of the newest row (0:
// none) of the account whose id is the parameter userID, in notifications
// and among the final rows. Not MAX(created_at): a generic plan made while
// the table is empty (PostgreSQL's pool forces generic plans,
// docs/decisions/postgres-append.md "Plans") reads every row of the account
// for MAX until an ANALYZE replans it, while ORDER BY … LIMIT 1 has one
// plan at every size: one step down the index.
func (s *Store) newestNotice(userID string) string {
	return s.greatest() + `(COALESCE((SELECT created_at FROM notifications WHERE user_id = ` + userID +
		` ORDER BY created_at DESC LIMIT 1), 0), COALESCE((` + finalNewestSQL(userID) + `), 0))`
}

// greatest is the dialect's function of the largest of its arguments.
func (s *Store) greatest() string {
	if s.Dialect == SQLite {
		return "MAX"
	}
	return "GREATEST"
}

// prefsAggregate is the SQL aggregate spelling an account's changed
// preferences of one type as PrefsKey does.
func (s *Store) prefsAggregate() string {
	if s.Dialect == SQLite {
		return `group_concat(channel || ':' || enabled || digest, ',' ORDER BY channel)`
	}
	return `string_agg(channel || ':' || enabled::int || digest::int, ',' ORDER BY channel)`
}

// parsePrefsKey reads back what prefsAggregate wrote.
func parsePrefsKey(typ, key string) (map[string]Preference, error) {
	if key == "" {
		return nil, nil
	}
	prefs := make(map[string]Preference)
	for item := range strings.SplitSeq(key, ",") {
		ch, bits, ok := strings.Cut(item, ":")
		if !ok || len(bits) != 2 || strings.Trim(bits, "01") != "" {
			return nil, fmt.Errorf("notification preferences of %s: unexpected %q", typ, item)
		}
		prefs[ch] = Preference{Type: typ, Channel: ch, Enabled: bits[0] == '1', Digest: bits[1] == '1'}
	}
	return prefs, nil
}

// NoticeGuess is what an account's notice rows of one type were last
// decided from: whether it has an email, whether an endpoint takes the type,
// and its changed preferences of the type (PrefsKey). InsertNoticeRowsIf
// writes rows decided from a guess only while the account still matches it.
type NoticeGuess struct {
	HasEmail, Subscribed bool
	Prefs                string // PrefsKey of the changed preferences
}

// Guess is what nc says rows are decided from.
func (nc NoticeContext) Guess() NoticeGuess {
	return NoticeGuess{HasEmail: nc.Email != nil, Subscribed: nc.Subscribed, Prefs: PrefsKey(nc.Prefs)}
}

// PrefsKey names a type's changed preferences by channel as the SQL of
// InsertNoticeRowsIf spells them: "channel:enabled digest" in channel order,
// comma separated, with 1 and 0 for the booleans ("" when none changed).
func PrefsKey(prefs map[string]Preference) string {
	chans := make([]string, 0, len(prefs))
	for ch := range prefs {
		chans = append(chans, ch)
	}
	slices.Sort(chans)
	var b strings.Builder
	bit := func(v bool) byte {
		if v {
			return '1'
		}
		return '0'
	}
	for i, ch := range chans {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(ch + ":")
		b.WriteByte(bit(prefs[ch].Enabled))
		b.WriteByte(bit(prefs[ch].Digest))
	}
	return b.String()
}

// InsertNoticeRowsIf writes the rows of one notice of typ for userID, if
// the account still matches g: the same email presence, endpoint
// subscription and changed preferences the rows were decided from. It
// stamps them (StampNotices) with NoticeContext.Stamp's rule, max(now, the
// account's newest + 1), computed in the statement. It reports
// false, having written nothing, when the account no longer matches g. The
// caller holds the account's lock.
//
// It folds NoticeContext's read into the first insert: one statement, not
// a read and an insert (a round trip each on PostgreSQL), inside the
// transaction of the change that causes the notice (a revoke's). A notice with final rows and others (an account
// with email: its email row is queued) takes a second, the others' insert.
func (s *Store) InsertNoticeRowsIf(ctx context.Context, tx *sql.Tx, userID, typ string, now int64, g NoticeGuess, rows []Notification) (bool, error) {
	if len(rows) == 0 {
		return false, nil
	}
	finals, rest, err := groupFinals(rows)
	if err != nil {
		return false, err
	}
	if len(finals) > 1 {
		return false, errors.New("notice rows: more than one notice")
	}
	var args []any
	arg := func(v any, pgType string) string {
		args = append(args, v)
		if s.Dialect == SQLite {
			return "?"
		}
		return "$" + strconv.Itoa(len(args)) + pgType
	}
	var b strings.Builder
	if len(finals) == 0 {
		b.WriteString(`WITH v (id, channel, severity, status, digest, ord, sent, payload) AS (VALUES `)
		for i, r := range rest {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + arg(r.ID, "::text") + ", " + arg(r.Channel, "::text") + ", " + arg(r.Severity, "::text") + ", " +
				arg(r.DeliveryStatus, "::text") + ", " + arg(r.Digest, "::boolean") + ", " + arg(r.CreatedAt, "::bigint") + ", " +
				arg(r.SentAt != nil, "::boolean") + ", " + arg(r.Payload, "::text") + ")")
		}
		b.WriteString("), ")
	} else {
		b.WriteString("WITH ")
	}
	// base is one row, computed once: the stamp, and whether the account
	// still matches g.
	prefs := s.prefsAggregate()
	b.WriteString(`base (stamp, holds) AS MATERIALIZED (SELECT ` + s.greatest() + `(` + arg(now, "::bigint") + `, `)
	if s.Dialect == SQLite {
		args = append(args, userID, userID) // newestNotice reads it twice
		b.WriteString(s.newestNotice("?"))
	} else {
		b.WriteString(s.newestNotice(arg(userID, "::text")))
	}
	b.WriteString(` + 1),
		(SELECT email IS NOT NULL FROM accounts WHERE user_id = ` + arg(userID, "") + `) = ` + arg(g.HasEmail, "") + `
		AND EXISTS (SELECT 1 FROM webhook_types WHERE user_id = ` + arg(userID, "") + ` AND type = ` + arg(typ, "") + `) = ` + arg(g.Subscribed, "") + `
		AND COALESCE((SELECT ` + prefs + ` FROM notification_preferences WHERE user_id = ` + arg(userID, "") + ` AND type = ` + arg(typ, "") + `), '') = ` + arg(g.Prefs, "::text") + `)
		`)
	if len(finals) == 0 {
		b.WriteString(`INSERT INTO notifications (` + notificationColumns + `)
		SELECT v.id, ` + arg(userID, "::text") + `, ` + arg(typ, "::text") + `, v.channel, v.severity, v.status, v.digest, base.stamp + v.ord,
			CASE WHEN v.sent THEN base.stamp + v.ord END, v.payload, 0
		FROM base, v WHERE base.holds
		RETURNING id, created_at`)
	} else {
		f := finals[0]
		b.WriteString(`INSERT INTO notice_finals (user_id, type, severity, created_at, kinds, salt, payload)
		SELECT ` + arg(userID, "::text") + `, ` + arg(typ, "::text") + `, ` + arg(f.severity, "::text") + `, base.stamp + ` + arg(f.createdAt, "::bigint") +
			`, ` + strconv.Itoa(f.kinds) + `, ` + arg(f.salt, "::bigint") + `, ` + arg(f.payload, "::text") + `
		FROM base WHERE base.holds
		RETURNING '', created_at`)
	}
	// Which row comes back first is not promised: its id says which it is.
	var first string
	var at int64
	err = tx.QueryRowContext(ctx, b.String(), args...).Scan(&first, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var offset int64 // of the row that came back
	if len(finals) > 0 {
		offset = finals[0].createdAt
	} else {
		for _, r := range rest {
			if r.ID == first {
				offset = r.CreatedAt
			}
		}
	}
	StampNotices(rows, at-offset)
	if len(finals) > 0 && len(rest) > 0 {
		stamped := make([]Notification, 0, len(rest))
		for _, r := range rows {
			if r.Salt == 0 {
				stamped = append(stamped, r)
			}
		}
		if _, err := s.insertRows(ctx, tx, stamped); err != nil {
			return false, err
		}
	}
	s.noticesStamped(rows[len(rows)-1:])
	return true, nil
}
