package app

// Sending notices (CONTRACT.md "Notifications", "Webhooks"): queued email
// rows through the mailer after commit, queued webhook rows by the drain
// (the webhooks job), held email rows by the digest, and the operator's
// announcements (the webhook drain is webhook_drain.go). Each outbox is
// claimed per account through the write seam's Claim, so two senders — here
// or on another replica — never send for one account at once, and a sender
// that dies leaves its rows queued.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Bounds of one pass over an outbox.
const (
	// outboxAccounts is how many accounts one pass visits, and outboxClaim
	// how many rows one claim takes.
	outboxAccounts = 1000
	outboxClaim    = 100
	// DigestWindow is how far back a digest looks (SPEC.md: the last 24 hours).
	DigestWindow = 24 * time.Hour
)

// addCounts adds what one pass over an outbox did to r.
func addCounts(r *api.DrainCounts, o api.DrainCounts) {
	r.Drained, r.Sent, r.Failed = r.Drained+o.Drained, r.Sent+o.Sent, r.Failed+o.Failed
}

// SendQueuedEmail sends the queued email rows account by account, oldest
// queued row first, until none is left (rows queued during the pass
// included, up to the pass's bounds): each through the mailer (which tries
// up to three times), then sent or failed.
func (a *App) SendQueuedEmail(ctx context.Context) (api.DrainCounts, error) {
	accounts, err := a.store.QueuedAccounts(ctx, domain.ChannelEmail, outboxAccounts)
	if err != nil {
		return api.DrainCounts{}, err
	}
	var total api.DrainCounts
	var first error
	for _, userID := range accounts {
		res, err := a.passAccount(ctx, domain.ChannelEmail, userID, a.sendEmailRows)
		addCounts(&total, res)
		if err != nil && first == nil {
			first = fmt.Errorf("email outbox of %s: %w", userID, err)
		}
	}
	return total, first
}

// outboxSender prepares the sending of claimed rows inside the claim's
// transaction (reading what it needs), and returns work, which sends
// outside any database write, and settle, which records the outcome.
type outboxSender func(ctx context.Context, t *writer.Tx, rows []store.Notification) (work func() api.DrainCounts, settle func(*writer.Tx) error, err error)

// maxClaimsPerPass bounds one account's claims in one pass.
const maxClaimsPerPass = 100

func (a *App) passAccount(ctx context.Context, channel, userID string, send outboxSender) (api.DrainCounts, error) {
	var total api.DrainCounts
	for range maxClaimsPerPass {
		var (
			work   func() api.DrainCounts
			settle func(*writer.Tx) error
			res    api.DrainCounts
			took   bool
		)
		err := a.w.Claim(ctx, channel+"/"+userID,
			func(t *writer.Tx) (bool, error) {
				rows, err := a.store.ClaimQueued(ctx, t.SQL(), channel, userID, outboxClaim)
				if err != nil || len(rows) == 0 {
					return false, err
				}
				work, settle, err = send(ctx, t, rows)
				took = err == nil
				return took, err
			},
			func() { res = work() },
			func(t *writer.Tx) error {
				// Cut short (shutdown, a client gone): settle nothing, so no
				// row is failed for it; every row stays queued and goes again,
				// with the same id, at the next pass.
				if err := ctx.Err(); err != nil {
					return err
				}
				return settle(t)
			})
		if err != nil || !took {
			return total, err
		}
		addCounts(&total, res)
	}
	return total, nil
}

// sendEmailRows mails claimed rows to their account's address. It runs
// inside the claim's transaction and returns how to settle them.
func (a *App) sendEmailRows(ctx context.Context, t *writer.Tx, rows []store.Notification) (func() api.DrainCounts, func(*writer.Tx) error, error) {
	acct, err := a.store.AccountIn(ctx, t.SQL(), rows[0].UserID)
	if err != nil {
		return nil, nil, err
	}
	outcome := make([]string, len(rows))
	sentAt := make([]*int64, len(rows))
	work := func() (res api.DrainCounts) {
		for i, r := range rows {
			res.Drained++
			if acct.Email == nil {
				outcome[i] = domain.DeliveryFailed
				res.Failed++
				continue
			}
			if err := a.mail.Send(ctx, noticeEmail(*acct.Email, r)); err != nil {
				a.log.Warn("a notification email was not sent", "notification_id", r.ID, "type", r.Type, "err", err)
				outcome[i] = domain.DeliveryFailed
				res.Failed++
				continue
			}
			at := a.now().UnixMicro()
			outcome[i], sentAt[i] = domain.DeliverySent, &at
			res.Sent++
		}
		return res
	}
	return work, func(t *writer.Tx) error {
		for i, r := range rows {
			if err := a.store.SettleNotification(ctx, t.SQL(), r.ID, outcome[i], sentAt[i], 1); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// noticeEmail is the plain-text email of a notice row: what happened, the
// object it names, and where to look. Never a secret: only ids.
func noticeEmail(to string, r store.Notification) mail.Message {
	var p noticePayload
	_ = json.Unmarshal([]byte(r.Payload), &p) // written by notify; an unreadable payload still mails the type
	nt, _ := domain.LookupNoticeType(r.Type)
	subject := domain.NoticeSubjectLine(nt)
	if p.Title != "" {
		subject = "[auditchain] " + p.Title
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Notice: %s (severity %s)\n", r.Type, cmp.Or(p.Severity, r.Severity))
	fmt.Fprintf(&b, "At: %s\n", domain.FormatTimestamp(time.UnixMicro(r.CreatedAt)))
	if p.Body != "" {
		fmt.Fprintf(&b, "\n%s\n", p.Body)
	}
	if len(p.Subject) > 0 {
		b.WriteString("\n")
		for _, k := range slices.Sorted(maps.Keys(p.Subject)) {
			fmt.Fprintf(&b, "%s: %v\n", k, p.Subject[k])
		}
	}
	fmt.Fprintf(&b, "\nThe record of this notice: GET /v1/notifications (id %s).\n", r.ID)
	b.WriteString("Change which notices you get by email: PUT /v1/notifications/preferences.\n")
	return mail.Message{To: to, Kind: r.Type, Subject: subject, Body: b.String()}
}

// RunDigest rolls userID's email rows held for the digest in the last 24
// hours, not yet digested, into one plain-text email of counts by type
// (CONTRACT.md "Notifications"). A second run in a row sends nothing; a
// digest the mailer could not send leaves its rows for the next run.
func (a *App) RunDigest(ctx context.Context, userID string) (api.DigestRunResult, error) {
	res := api.DigestRunResult{Grouped: map[string]int{}, UserID: userID}
	acct, err := a.store.Account(ctx, userID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return res, domain.NotFound(domain.CodeAccountNotFound, "account")
		}
		return res, err
	}
	if acct.Email == nil {
		return res, nil
	}
	var ids []string
	sent := false
	err = a.w.Claim(ctx, "digest/"+userID,
		func(t *writer.Tx) (bool, error) {
			rows, err := a.store.HeldEmail(ctx, t.SQL(), userID, a.now().Add(-DigestWindow))
			for _, r := range rows {
				res.Grouped[r.Type]++
				ids = append(ids, r.ID)
			}
			return len(rows) > 0, err
		},
		func() {
			if err := a.mail.Send(ctx, digestEmail(*acct.Email, res.Grouped)); err != nil {
				a.log.Warn("a digest was not sent", "user_id", userID, "err", err)
				return
			}
			sent = true
		},
		func(t *writer.Tx) error {
			if !sent {
				return nil
			}
			return a.store.MarkDigested(ctx, t.SQL(), ids, a.now())
		})
	res.DigestSent = sent && err == nil
	return res, err
}

func digestEmail(to string, grouped map[string]int) mail.Message {
	var b strings.Builder
	total := 0
	types := make([]string, 0, len(grouped))
	for t, n := range grouped {
		types = append(types, t)
		total += n
	}
	sort.Strings(types)
	fmt.Fprintf(&b, "Your auditchain digest: %d notices held for it in the last 24 hours.\n\n", total)
	for _, t := range types {
		fmt.Fprintf(&b, "%-28s %d\n", t, grouped[t])
	}
	b.WriteString("\nThe notices themselves: GET /v1/notifications.\n")
	return mail.Message{To: to, Kind: "digest", Subject: "[auditchain] digest", Body: b.String()}
}

// Announce sends a mandatory notice (breaking_change.announce) to every
// account with an email (`auditchain admin announce`; no route reaches it):
// its rows are written account by account, then the queued email is sent.
// Each announcement is charged to the deployment's announcements a day
// (announceBudget: 429 rate_limit_exceeded once spent, before anything is
// written). It reports the accounts notified.
func (a *App) Announce(ctx context.Context, typ, subject, body string) (int, error) {
	nt, ok := domain.LookupNoticeType(typ)
	if !ok || !nt.Mandatory {
		return 0, domain.Validation(domain.FieldError{Field: "type", Message: "must be a mandatory notice type (" + domain.NoticeBreakingChange + ")"})
	}
	if strings.TrimSpace(subject) == "" || strings.ContainsAny(subject, "\r\n") {
		return 0, domain.Validation(domain.FieldError{Field: "subject", Message: "required, one line"})
	}
	if err := a.w.Write(ctx, func(t *writer.Tx) error {
		return a.charge(ctx, t, domain.CodeRateLimited, a.announceBudget())
	}); err != nil {
		return 0, err
	}
	accounts, err := a.store.AccountsWithEmail(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, acct := range accounts {
		err := a.w.Write(ctx, func(t *writer.Tx) error {
			_, err := a.notify(ctx, t, acct.UserID, Notice{Type: typ, Title: subject, Body: body})
			return err
		})
		if err != nil {
			return n, err
		}
		n++
	}
	_, err = a.SendQueuedEmail(ctx)
	return n, err
}

// runMailer sends queued email whenever a commit queued some, and every
// sweep interval (rows a crash left queued, or another replica's), until
// ctx ends (Loops.MailSweep).
func (a *App) runMailer(ctx context.Context, sweep Ticker) {
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.notices.mailerWake:
		case <-sweep.C():
		}
		if _, err := a.SendQueuedEmail(ctx); err != nil && ctx.Err() == nil {
			a.log.Error("sending queued notification email failed", "err", err)
		}
	}
}
