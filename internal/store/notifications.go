package store

// Notification rows and preferences (migration 016; CONTRACT.md
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
	"fmt"
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
// for MAX until an ANALYZE replans it (docs/performance.md, "Revoke, second
// round"), while ORDER BY … LIMIT 1 has one plan at every size: one step
// down the index.
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

// GuessedNoticesPay reports whether InsertNoticeRowsIf is the cheaper way
// to write a notice: on PostgreSQL it saves a round trip and a statement;
// on SQLite, where a statement costs no round trip, the one statement with
// its checks costs more than the pair (BenchmarkNoticeRows; figures in
// docs/performance.md, "Revoke, second round").
func (s *Store) GuessedNoticesPay() bool { return s.Dialect == Postgres }

// InsertNoticeRowsIf writes the rows of one notice of typ for userID, if
// the account still matches g: the same email presence, endpoint
// subscription and changed preferences the rows were decided from. It
// stamps them as InsertNotifications's callers do — consecutive
// microseconds from max(now, the account's newest + 1), each row's CreatedAt
// holding its offset (the final rows first) and SentAt (when set) the same
// offset — and fills in the stamps and the final rows' ids. It reports
// false, having written nothing, when the account no longer matches g. The
// caller holds the account's lock.
//
// It folds NoticeContext's read into the first insert: one statement where
// the read and the insert were two (a round trip on PostgreSQL, a statement
// on the SQLite writer), inside the transaction of the change that causes
// the notice (a revoke's). A notice with final rows and others (an account
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
	stamp := at - offset
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

// DedupKeysWritten reports which of keys userID's notices of typ carry,
// read through q (nil: the read pool).
func (s *Store) DedupKeysWritten(ctx context.Context, q Querier, userID, typ string, keys []string) (map[string]bool, error) {
	done := make(map[string]bool, len(keys))
	const chunk = 500
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		list, args := s.inList([]any{userID, typ}, keys[:n])
		found, err := queryAll(ctx, s, q, func(r scanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, `SELECT dedup_key FROM notice_once WHERE user_id = `+s.placeholder(1)+` AND type = `+s.placeholder(2)+
			` AND dedup_key IN (`+list+`)`, args...)
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

// noticesStamped raises the notice cache's newest stamps to rows'.
func (s *Store) noticesStamped(rows []Notification) {
	if s.noticeCache == nil {
		return
	}
	for i, r := range rows {
		if i+1 == len(rows) || rows[i+1].UserID != r.UserID {
			s.noticeCache.stamped(r.UserID, r.CreatedAt)
		}
	}
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

// markOnce marks the once-only notices among rows — each (user_id, type,
// DedupKey) once, in notice_once — and returns rows without those of the
// notices that were marked before. rows itself is not changed.
func (s *Store) markOnce(ctx context.Context, tx *sql.Tx, rows []Notification) ([]Notification, error) {
	type group struct{ userID, typ string }
	var order []group
	keys := make(map[group][]string)
	var last group
	for _, r := range rows {
		if r.DedupKey == nil {
			continue
		}
		if g := (group{r.UserID, r.Type}); g != last || len(order) == 0 {
			if _, ok := keys[g]; !ok {
				order = append(order, g)
			}
			last = g
		}
		keys[last] = append(keys[last], *r.DedupKey)
	}
	var fresh map[group]map[string]bool // of the groups with keys marked before
	for _, g := range order {
		// In key order, each once: a batch's marks go into the B-tree side
		// by side (a job's keys come in expiry order, scattered across it).
		ks := slices.Compact(slices.Sorted(slices.Values(keys[g])))
		var marked map[string]bool
		for chunk := range slices.Chunk(ks, 1000) {
			got, err := s.markKeys(ctx, tx, g.userID, g.typ, chunk)
			if err != nil {
				return nil, err
			}
			if got != nil && marked == nil {
				marked = make(map[string]bool, len(ks))
				for _, k := range ks {
					marked[k] = true // until a chunk says otherwise
				}
			}
			for k, isNew := range got {
				marked[k] = isNew
			}
		}
		if marked != nil {
			if fresh == nil {
				fresh = make(map[group]map[string]bool)
			}
			fresh[g] = marked
		}
	}
	if fresh == nil {
		return rows, nil
	}
	out := make([]Notification, 0, len(rows))
	for _, r := range rows {
		if f, some := fresh[group{r.UserID, r.Type}]; r.DedupKey == nil || !some || f[*r.DedupKey] {
			out = append(out, r)
		}
	}
	return out, nil
}

// markKeys marks userID's notices of typ with the (sorted, distinct) keys
// ks. It returns nil when every key was new, and otherwise which were (true)
// and which marked before (false).
//
// On PostgreSQL one statement returns the keys it inserted (a conflict with
// a concurrent transaction waits for it, then skips). On SQLite, where the
// one writer runs the transaction, the insert is counted instead of
// returning each key — in a savepoint, which is released when every key was
// new (a job's, read before it: the rule) and otherwise undone, to mark the
// keys not found.
func (s *Store) markKeys(ctx context.Context, tx *sql.Tx, userID, typ string, ks []string) (map[string]bool, error) {
	insert := func(suffix string) (string, []any) {
		var b strings.Builder
		b.WriteString(`INSERT INTO notice_once (user_id, type, dedup_key) VALUES `)
		args := make([]any, 0, 2+len(ks))
		args = append(args, userID, typ)
		for i, k := range ks {
			if i > 0 {
				b.WriteString(", ")
			}
			// $1 and $2 first in every tuple: on SQLite, where the key is
			// positional (?), they are its first two parameters.
			args = append(args, k)
			b.WriteString("($1, $2, " + s.placeholder(len(args)) + ")")
		}
		return b.String() + suffix, args
	}
	result := func(inserted []string) map[string]bool {
		if len(inserted) == len(ks) {
			return nil
		}
		out := make(map[string]bool, len(ks))
		for _, k := range ks {
			out[k] = false
		}
		for _, k := range inserted {
			out[k] = true
		}
		return out
	}
	if s.Dialect == Postgres {
		q, args := insert(` ON CONFLICT DO NOTHING RETURNING dedup_key`)
		inserted, err := queryAll(ctx, s, tx, func(r scanner) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, q, args...)
		if err != nil {
			return nil, err
		}
		return result(inserted), nil
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT once`); err != nil {
		return nil, err
	}
	q, args := insert(` ON CONFLICT DO NOTHING`)
	res, err := tx.ExecContext(ctx, q, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n == int64(len(ks)) {
		_, err = tx.ExecContext(ctx, `RELEASE once`)
		return nil, err
	}
	if err != nil {
		// The insert's error first; the savepoint's, if undoing it failed too.
		_, undoErr := tx.ExecContext(ctx, `ROLLBACK TO once`)
		_, releaseErr := tx.ExecContext(ctx, `RELEASE once`)
		return nil, errors.Join(err, undoErr, releaseErr)
	}
	// Some were marked before: undo, find them, mark the others.
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO once`); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE once`); err != nil {
		return nil, err
	}
	done, err := s.DedupKeysWritten(ctx, tx, userID, typ, ks)
	if err != nil {
		return nil, err
	}
	var todo []string
	for _, k := range ks {
		if !done[k] {
			todo = append(todo, k)
		}
	}
	if len(todo) > 0 {
		if _, err := s.markKeys(ctx, tx, userID, typ, todo); err != nil {
			return nil, err
		}
	}
	return result(todo), nil
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
	s.forgetNotices(userID)
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

// forgetNotices drops userID's entry of the notice cache: a write changes
// what decides its notices' rows.
func (s *Store) forgetNotices(userID string) {
	if s.noticeCache != nil {
		s.noticeCache.forget(userID)
	}
}
