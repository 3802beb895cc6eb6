package writer

// Notices (CONTRACT.md "Notifications"; docs/decisions/notifications.md
// "Rows"). A notice's rows are written inside the transaction of the change
// that causes it (a revoke's), under the account's lock, stamped a
// microsecond above the account's newest row, so created_at is unique per
// account and the list's created_at cursor never loses or repeats a row.
//
// What decides the rows — the account's email, whether an endpoint takes
// the type, its preferences of the type — rarely changes, and each engine
// remembers it its own way:
//
//   - SQLite: the context is read (store.NoticeContext), and served by the
//     store's notice cache, which this process, the only writer, keeps
//     exact (store/noticecache.go). A statement costs no round trip there,
//     so the read and the insert cost less than one statement that checks
//     a remembered context (BenchmarkNoticeRows).
//   - PostgreSQL, where several replicas write one database: a notice
//     without a dedup key is decided from what this replica last read for
//     the account and type (noticeGuesses) and written by one statement
//     that checks it still holds (store.InsertNoticeRowsIf); only when it
//     does not, or nothing was read yet, is the context read first. A
//     revoke's transaction thus grows by one statement, not two.

import (
	"context"
	"sync"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// Decide returns the rows of notices for an account that is r, as
// store.StampNotices takes them: each row's CreatedAt its offset from its
// notice's stamp, a notice's final rows first.
type Decide func(r domain.Recipient) ([]store.Notification, error)

// Notice writes the rows decide returns for one notice of typ to userID,
// and returns them stamped, with how many were stored. dedupKey, when not
// empty, makes the notice once-only per account and type: if it was written
// before, nothing is (decide is not called). The transaction holds the
// account's lock from then on.
func (t *Tx) Notice(ctx context.Context, userID, typ, dedupKey string, decide Decide) ([]store.Notification, int64, error) {
	if _, err := t.Lock(ctx, userID); err != nil {
		return nil, 0, err
	}
	if dedupKey == "" && t.w.guesses != nil {
		if rows, ok, err := t.noticeAsGuessed(ctx, userID, typ, decide); ok || err != nil {
			return rows, int64(len(rows)), err
		}
	}
	nc, r, err := t.noticeContext(ctx, userID, typ, dedupKey)
	if err != nil {
		return nil, 0, err
	}
	if dedupKey != "" && nc.Done {
		return nil, 0, nil
	}
	rows, err := decide(r)
	if err != nil {
		return nil, 0, err
	}
	stored, err := t.insertNotices(ctx, nc, rows)
	return rows, stored, err
}

// NoticeEach writes the rows decide returns for several notices of typ to
// userID (a job's: one per grant or key), with a handful of statements
// whatever their number, and returns them stamped, with how many were
// stored: the rows of a once-only notice written before (their DedupKey)
// are skipped. The transaction holds the account's lock from then on.
func (t *Tx) NoticeEach(ctx context.Context, userID, typ string, decide Decide) ([]store.Notification, int64, error) {
	if _, err := t.Lock(ctx, userID); err != nil {
		return nil, 0, err
	}
	nc, r, err := t.noticeContext(ctx, userID, typ, "")
	if err != nil {
		return nil, 0, err
	}
	rows, err := decide(r)
	if err != nil || len(rows) == 0 { // preferences may silence every channel
		return nil, 0, err
	}
	stored, err := t.insertNotices(ctx, nc, rows)
	return rows, stored, err
}

// noticeContext reads what decides userID's rows of typ (and, dedupKey
// given, whether that notice was written), and the recipient it describes;
// on PostgreSQL it is remembered for the next notice.
func (t *Tx) noticeContext(ctx context.Context, userID, typ, dedupKey string) (store.NoticeContext, domain.Recipient, error) {
	nc, err := t.w.store.NoticeContext(ctx, t.tx, userID, typ, dedupKey)
	if err != nil {
		return nc, domain.Recipient{}, err
	}
	r := recipientOf(nc)
	if t.w.guesses != nil {
		t.w.guesses.remember(userID, typ, noticeGuess{recipient: r, guess: nc.Guess()})
	}
	return nc, r, nil
}

// insertNotices stamps rows above the account's newest row as nc read it
// and stores them; it reports how many it stored.
func (t *Tx) insertNotices(ctx context.Context, nc store.NoticeContext, rows []store.Notification) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	store.StampNotices(rows, nc.Stamp(t.w.now().UnixMicro()))
	return t.w.store.InsertNotifications(ctx, t.tx, rows)
}

// noticeAsGuessed writes the rows decide returns for the recipient this
// replica last read for userID and typ, if the account still matches it;
// ok is false, nothing written, when nothing was read yet or it no longer
// matches.
func (t *Tx) noticeAsGuessed(ctx context.Context, userID, typ string, decide Decide) ([]store.Notification, bool, error) {
	g, ok := t.w.guesses.get(userID, typ)
	if !ok {
		return nil, false, nil
	}
	rows, err := decide(g.recipient)
	if err != nil {
		return nil, false, err
	}
	written, err := t.w.store.InsertNoticeRowsIf(ctx, t.tx, userID, typ, t.w.now().UnixMicro(), g.guess, rows)
	if err != nil || !written {
		return nil, false, err
	}
	return rows, true, nil
}

// recipientOf is the recipient nc describes.
func recipientOf(nc store.NoticeContext) domain.Recipient {
	prefs := make(map[string]domain.Preference, len(nc.Prefs))
	for ch, p := range nc.Prefs {
		prefs[ch] = domain.Preference{Type: p.Type, Channel: p.Channel, Enabled: p.Enabled, Digest: p.Digest}
	}
	return domain.Recipient{Prefs: prefs, HasEmail: nc.Email != nil, WebhookSubscribe: nc.Subscribed}
}

// noticeGuesses holds, by account and type, what notices' rows were last
// decided from (PostgreSQL's engine); bounded by maxNoticeGuesses.
type noticeGuesses struct {
	mu sync.Mutex
	m  map[noticeKey]noticeGuess
}

// noticeKey names an account's notices of one type.
type noticeKey struct{ userID, typ string }

// noticeGuess is what an account's rows of a type were last decided from.
type noticeGuess struct {
	recipient domain.Recipient
	guess     store.NoticeGuess
}

// maxNoticeGuesses bounds the accounts and types remembered; past it the
// memory starts again (a guess is only ever a saving: InsertNoticeRowsIf
// checks it).
const maxNoticeGuesses = 100_000

func (n *noticeGuesses) get(userID, typ string) (noticeGuess, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	g, ok := n.m[noticeKey{userID, typ}]
	return g, ok
}

// remember keeps g as what userID's rows of typ were last decided from.
func (n *noticeGuesses) remember(userID, typ string, g noticeGuess) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m) >= maxNoticeGuesses {
		n.m = make(map[noticeKey]noticeGuess)
	}
	n.m[noticeKey{userID, typ}] = g
}
