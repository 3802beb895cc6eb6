package app

// Notifications (CONTRACT.md "Notifications"): notices written in the same
// transaction as the change that causes them. The account's list,
// preferences, the test dispatcher and redelivery are in notifications.go;
// sending — email after commit, the webhook drain, the digest — is in
// notify_send.go.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// Notice is one notice to write for an account.
type Notice struct {
	Type string
	// Subject names the object the notice is about (for grant.revoked:
	// grant_id and subagent); the push and the email carry it, the row never.
	Subject map[string]any
	// DedupKey makes the notice once-only per account and type: a second
	// notice with the same key writes nothing.
	DedupKey string
	// Title and Body replace the email's text (test dispatcher, announce);
	// Severity replaces the type's in the email and the push (never in the row).
	Title, Body, Severity string

	// encoded, when set, is the payload already marshalled, so that the
	// writer, which writes the rows, need not (expiringNotice: the expiry
	// job marshals its notices on the goroutine that reads the grants).
	encoded string
}

// noticePayload is what a row's email and push carry (store column payload).
type noticePayload struct {
	Subject  map[string]any `json:"subject,omitempty"`
	Severity string         `json:"severity"`
	Title    string         `json:"title,omitempty"`
	Body     string         `json:"body,omitempty"`
}

// payload is the JSON n's email and push rows carry, for a notice of type nt.
func (n Notice) payload(nt domain.NoticeType) (string, error) {
	if n.encoded != "" {
		return n.encoded, nil
	}
	b, err := json.Marshal(noticePayload{Subject: n.Subject, Severity: cmp.Or(n.Severity, nt.Severity), Title: n.Title, Body: n.Body})
	return string(b), err
}

// notify writes n's rows for userID inside t (CONTRACT.md "Notifications":
// one row per declared channel the preferences enable, in the same
// transaction as the change; writer.Tx.Notice), and once t committed wakes
// the senders for queued rows. It returns the rows written: none when the
// account's preferences silence every channel, or a once-only notice was
// written before.
func (a *App) notify(ctx context.Context, t *writer.Tx, userID string, n Notice) ([]store.Notification, error) {
	nt, ok := domain.LookupNoticeType(n.Type)
	if !ok {
		return nil, fmt.Errorf("notify: unknown notice type %q", n.Type)
	}
	rows, stored, err := t.Notice(ctx, userID, nt.Name, n.DedupKey, func(r domain.Recipient) ([]store.Notification, error) {
		return a.noticeRows(userID, nt, r, []Notice{n})
	})
	if err != nil {
		return nil, err
	}
	if stored > 0 {
		a.wakeSenders(t, rows)
	}
	return rows, nil
}

// notifyEach writes notices of one type for userID inside t, as notify
// does for each, with a handful of statements whatever their number (the
// expiry jobs write one per grant or key): it reports how many were written
// (once-only notices written before are not: the insert skips them).
func (a *App) notifyEach(ctx context.Context, t *writer.Tx, userID, typ string, ns []Notice) (int, error) {
	nt, ok := domain.LookupNoticeType(typ)
	if !ok {
		return 0, fmt.Errorf("notify: unknown notice type %q", typ)
	}
	seen := make(map[string]bool, len(ns))
	todo := make([]Notice, 0, len(ns))
	for _, n := range ns {
		if n.DedupKey == "" || !seen[n.DedupKey] { // a key twice in ns is one notice
			seen[n.DedupKey] = n.DedupKey != ""
			todo = append(todo, n)
		}
	}
	rows, stored, err := t.NoticeEach(ctx, userID, nt.Name, func(r domain.Recipient) ([]store.Notification, error) {
		return a.noticeRows(userID, nt, r, todo)
	})
	if err != nil || len(rows) == 0 { // preferences may silence every channel
		return 0, err
	}
	if stored > 0 {
		a.wakeSenders(t, rows)
	}
	// Each notice has the same rows (one per channel decided); a notice
	// written before has none stored now.
	return int(stored) / (len(rows) / len(todo)), nil
}

// wakeSenders registers, for after t commits, the wake-ups of the senders
// of rows' queued email and webhook rows (CONTRACT.md: the drain runs soon
// after a row is queued).
func (a *App) wakeSenders(t *writer.Tx, rows []store.Notification) {
	var mail, hooks bool
	for _, r := range rows {
		if r.DeliveryStatus != domain.DeliveryQueued {
			continue
		}
		switch r.Channel {
		case domain.ChannelEmail:
			if !mail {
				mail = true
				t.AfterCommit(a.notices.wakeMailer)
			}
		case domain.ChannelWebhook:
			if !hooks {
				hooks = true
				t.AfterCommit(a.kickWebhooks)
			}
		}
	}
}

// noticeRows decides the rows of notices of type nt for userID, whose
// account is r: each notice's final rows (store.IsFinal) first, sharing a
// salt and stamped before its others, then the others, each in channel
// order. Each row's CreatedAt holds its offset from the stamp the rows get
// when written (0, 1, …), and SentAt, for a row sent as it is written
// (in_app), the same offset. A final row's ID is set when it is stamped
// (store.StampNotices).
func (a *App) noticeRows(userID string, nt domain.NoticeType, r domain.Recipient, ns []Notice) ([]store.Notification, error) {
	decided := domain.NoticeRows(nt, r)
	if len(decided) == 0 || len(ns) == 0 {
		return nil, nil
	}
	ordered := make([]domain.NoticeRow, 0, len(decided))
	finals := 0
	for _, d := range decided {
		if store.IsFinal(d.Channel, d.Status) {
			ordered = append(ordered, d)
			finals++
		}
	}
	for _, d := range decided {
		if !store.IsFinal(d.Channel, d.Status) {
			ordered = append(ordered, d)
		}
	}
	rows := make([]store.Notification, 0, len(decided)*len(ns))
	for _, n := range ns {
		payload, err := n.payload(nt)
		if err != nil {
			return nil, err
		}
		var dedup *string
		if n.DedupKey != "" {
			dedup = &n.DedupKey
		}
		var salt int64
		if finals > 0 {
			if salt, err = store.NewSalt(a.rand); err != nil {
				return nil, err
			}
		}
		for i, d := range ordered {
			row := store.Notification{UserID: userID, Type: nt.Name, Channel: d.Channel, Severity: nt.Severity,
				DeliveryStatus: d.Status, Digest: d.Status == domain.DeliverySuppressedDigest, CreatedAt: int64(len(rows)),
				DedupKey: dedup}
			if i < finals {
				row.Salt = salt
			} else {
				id, err := uuid.NewV7FromReader(a.rand)
				if err != nil {
					return nil, err
				}
				row.ID = id.String()
			}
			if carriesPayload(d) {
				row.Payload = payload
			}
			if d.Status == domain.DeliverySent {
				sent := row.CreatedAt
				row.SentAt = &sent
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// carriesPayload reports whether a row decided as d may ever be sent, and
// so needs the payload its email or push would carry. An in_app row is sent
// as it is written, and a pending webhook row (no endpoint took the type)
// stays pending: neither is ever in an outbox, nor redelivered (only a
// failed row is), so they store none.
func carriesPayload(d domain.NoticeRow) bool {
	return d.Channel != domain.ChannelInApp && d.Status != domain.DeliveryPending
}

// noteLimitHit writes the account's rate.limit_hit notice for a 429 it was
// just answered, at most once per account and hour (CONTRACT.md), even
// though the request was refused. This process remembers the hours it
// wrote, so a client hammering past its limit costs one write an hour here;
// the notice's dedup key holds the rule across replicas.
func (a *App) noteLimitHit(ctx context.Context, userID, code string) {
	hour := a.now().UTC().Truncate(time.Hour)
	if !a.notices.firstHitThisHour(userID, hour) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		_, err := a.notify(ctx, t, userID, Notice{Type: domain.NoticeRateLimitHit, Subject: map[string]any{"code": code},
			DedupKey: hour.Format("2006-01-02T15Z")})
		return err
	})
	if err != nil {
		a.log.Error("writing the rate.limit_hit notice failed", "user_id", userID, "err", err)
	}
}

// notices is the App's notification state of this process.
type notices struct {
	// mailerWake wakes the mail sender (runMailer) after a commit queued an email.
	mailerWake chan struct{}

	mu       sync.Mutex
	hitHour  time.Time
	hitNoted map[string]bool

	// Counters for metrics (NotifyStats).
	attemptsOK, attemptsFailed, webhookSent, webhookFailed atomic.Int64
}

// NotifyStats counts webhook work since the process started, for metrics.
type NotifyStats struct {
	AttemptsOK, AttemptsFailed int64 // delivery attempts answered 2xx, or not
	RowsSent, RowsFailed       int64 // webhook rows settled sent or failed
}

// NotifyStats reports this process's webhook counters.
func (a *App) NotifyStats() NotifyStats {
	n := &a.notices
	return NotifyStats{AttemptsOK: n.attemptsOK.Load(), AttemptsFailed: n.attemptsFailed.Load(),
		RowsSent: n.webhookSent.Load(), RowsFailed: n.webhookFailed.Load()}
}

func newNotices() notices { return notices{mailerWake: make(chan struct{}, 1)} }

func (n *notices) wakeMailer() {
	select {
	case n.mailerWake <- struct{}{}:
	default:
	}
}

// maxHitMemo bounds the accounts remembered per hour; past it the dedup key
// alone holds the rule.
const maxHitMemo = 100_000

func (n *notices) firstHitThisHour(userID string, hour time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !hour.Equal(n.hitHour) {
		n.hitHour, n.hitNoted = hour, make(map[string]bool)
	}
	if n.hitNoted[userID] {
		return false
	}
	if len(n.hitNoted) < maxHitMemo {
		n.hitNoted[userID] = true
	}
	return true
}
