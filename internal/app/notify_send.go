package app

// Sending notices (CONTRACT.md "Notifications", "Webhooks"): queued email
// rows through the mailer after commit, queued webhook rows by the drain
// (the webhooks job), held email rows by the digest, and the operator's
// announcements. Each outbox is claimed per account through the write
// seam's Claim, so two senders — here or on another replica — never send
// one row in one pass, and a sender that dies leaves its rows queued.

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
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Bounds of one pass over an outbox.
const (
	// outboxAccounts is how many accounts one pass visits, and outboxClaim
	// how many rows one claim takes.
	outboxAccounts = 1000
	outboxClaim    = 100
	// drainParallel is how many accounts the drain serves at once: an
	// account's slow endpoint holds one of them, never the others. On
	// PostgreSQL each holds a connection while it sends.
	drainParallel = 8
	// endpointParallel is how many rows one endpoint is sent at once.
	endpointParallel = 8
	// webhookAttempts is SPEC.md's three attempts within one drain.
	webhookAttempts = 3
	// DigestWindow is how far back a digest looks (SPEC.md: the last 24 hours).
	DigestWindow = 24 * time.Hour
)

// SendResult counts what a pass over an outbox did.
type SendResult struct {
	Drained int `json:"drained"`
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
}

func (r *SendResult) add(o SendResult) {
	r.Drained, r.Sent, r.Failed = r.Drained+o.Drained, r.Sent+o.Sent, r.Failed+o.Failed
}

// SendQueuedEmail sends the queued email rows: each through the mailer
// (which tries up to three times), then sent or failed.
func (a *App) SendQueuedEmail(ctx context.Context) (SendResult, error) {
	return a.passOutbox(ctx, domain.ChannelEmail, 1, a.sendEmailRows)
}

// DrainWebhooks is the webhooks job (POST /v1/internal/cron/webhooks): every
// queued webhook row goes to every endpoint of its account that takes its
// type, up to three attempts each within this drain; the row is sent when
// every endpoint took it and failed otherwise (SPEC.md "Notification
// delivery_status").
func (a *App) DrainWebhooks(ctx context.Context) (SendResult, error) {
	return a.passOutbox(ctx, domain.ChannelWebhook, drainParallel, a.sendWebhookRows)
}

// passOutbox claims and sends channel's queued rows account by account,
// parallel accounts at once, until none is left (rows queued during the
// pass included, up to the pass's bounds).
func (a *App) passOutbox(ctx context.Context, channel string, parallel int,
	send outboxSender,
) (SendResult, error) {
	accounts, err := a.Store.QueuedAccounts(ctx, channel, outboxAccounts)
	if err != nil {
		return SendResult{}, err
	}
	var (
		mu    sync.Mutex
		total SendResult
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, parallel)
	)
	for _, userID := range accounts {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			res, err := a.passAccount(ctx, channel, userID, send)
			mu.Lock()
			defer mu.Unlock()
			total.add(res)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s outbox of %s: %w", channel, userID, err))
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return total, errs[0]
	}
	return total, nil
}

// outboxSender prepares the sending of claimed rows inside the claim's
// transaction (reading what it needs), and returns work, which sends
// outside any database write, and settle, which records the outcome.
type outboxSender func(ctx context.Context, t *writer.Tx, rows []store.Notification) (work func() SendResult, settle func(*writer.Tx) error, err error)

// maxClaimsPerPass bounds one account's claims in one pass.
const maxClaimsPerPass = 100

func (a *App) passAccount(ctx context.Context, channel, userID string, send outboxSender) (SendResult, error) {
	var total SendResult
	for range maxClaimsPerPass {
		var (
			work   func() SendResult
			settle func(*writer.Tx) error
			res    SendResult
			took   bool
		)
		err := a.w.Claim(ctx, channel+"/"+userID,
			func(t *writer.Tx) (bool, error) {
				rows, err := a.Store.ClaimQueued(ctx, t.SQL(), channel, userID, outboxClaim)
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
		total.add(res)
	}
	return total, nil
}

// sendEmailRows mails claimed rows to their account's address. It runs
// inside the claim (on PostgreSQL, inside its transaction) and returns how
// to settle them.
func (a *App) sendEmailRows(ctx context.Context, t *writer.Tx, rows []store.Notification) (func() SendResult, func(*writer.Tx) error, error) {
	acct, err := a.Store.AccountIn(ctx, t.SQL(), rows[0].UserID)
	if err != nil {
		return nil, nil, err
	}
	outcome := make([]string, len(rows))
	sentAt := make([]*int64, len(rows))
	work := func() (res SendResult) {
		for i, r := range rows {
			res.Drained++
			if acct.Email == nil {
				outcome[i] = domain.DeliveryFailed
				res.Failed++
				continue
			}
			if err := a.Mail.Send(ctx, noticeEmail(*acct.Email, r)); err != nil {
				a.Log.Warn("a notification email was not sent", "notification_id", r.ID, "type", r.Type, "err", err)
				outcome[i] = domain.DeliveryFailed
				res.Failed++
				continue
			}
			at := a.Now().UnixMicro()
			outcome[i], sentAt[i] = domain.DeliverySent, &at
			res.Sent++
		}
		return res
	}
	return work, func(t *writer.Tx) error {
		for i, r := range rows {
			if err := a.Store.SettleNotification(ctx, t.SQL(), r.ID, outcome[i], sentAt[i], 1); err != nil {
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

// webhookBody is the push of a row (CONTRACT.md "Webhooks"): thin, a prompt
// to poll, never the fact.
type webhookBody struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      webhookData `json:"data"`
}

type webhookData struct {
	NotificationID string         `json:"notification_id"`
	UserID         string         `json:"user_id"`
	Severity       string         `json:"severity"`
	Subject        map[string]any `json:"subject"`
}

func webhookPush(r store.Notification) ([]byte, error) {
	var p noticePayload
	if err := json.Unmarshal([]byte(r.Payload), &p); err != nil {
		return nil, fmt.Errorf("notification %s: payload: %w", r.ID, err)
	}
	if p.Subject == nil {
		p.Subject = map[string]any{}
	}
	return json.Marshal(webhookBody{Type: r.Type, Timestamp: domain.FormatTimestamp(time.UnixMicro(r.CreatedAt)),
		Data: webhookData{NotificationID: r.ID, UserID: r.UserID, Severity: cmp.Or(p.Severity, r.Severity), Subject: p.Subject}})
}

// sendWebhookRows delivers claimed rows to the account's endpoints: each
// endpoint on its own goroutine (a slow one delays only itself), a few rows
// at a time, up to three attempts each.
func (a *App) sendWebhookRows(ctx context.Context, t *writer.Tx, rows []store.Notification) (func() SendResult, func(*writer.Tx) error, error) {
	hooks, err := a.Store.Webhooks(ctx, t.SQL(), rows[0].UserID, "")
	if err != nil {
		return nil, nil, err
	}
	bodies := make([][]byte, len(rows))
	for i, r := range rows {
		if bodies[i], err = webhookPush(r); err != nil {
			return nil, nil, err
		}
	}
	outcome := make([]string, len(rows))
	sentAt := make([]*int64, len(rows))
	var deliveries []store.Delivery
	work := func() SendResult {
		return a.deliverRows(ctx, hooks, rows, bodies, outcome, sentAt, &deliveries)
	}
	return work, func(t *writer.Tx) error {
		if err := a.Store.InsertDeliveries(ctx, t.SQL(), deliveries); err != nil {
			return err
		}
		sent := 0
		for i, r := range rows {
			if err := a.Store.SettleNotification(ctx, t.SQL(), r.ID, outcome[i], sentAt[i], 0); err != nil {
				return err
			}
			if outcome[i] == domain.DeliverySent {
				sent++
			}
		}
		t.AfterCommit(func() {
			a.notices.webhookSent.Add(int64(sent))
			a.notices.webhookFailed.Add(int64(len(rows) - sent))
		})
		return nil
	}, nil
}

// deliverRows sends rows to the endpoints that take their types, filling
// outcome, sentAt and the attempts made.
func (a *App) deliverRows(ctx context.Context, hooks []store.Webhook, rows []store.Notification, bodies [][]byte,
	outcome []string, sentAt []*int64, deliveries *[]store.Delivery) SendResult {
	// failed[i] counts endpoints that did not take row i; took[i] those that did.
	var (
		mu     sync.Mutex
		failed = make([]int, len(rows))
		took   = make([]int, len(rows))
		wg     sync.WaitGroup
	)
	for _, h := range hooks {
		wg.Go(func() {
			slots := make(chan struct{}, endpointParallel)
			var ewg sync.WaitGroup
			for i, r := range rows {
				if !slices.Contains(h.Types, r.Type) {
					continue
				}
				slots <- struct{}{}
				ewg.Go(func() {
					defer func() { <-slots }()
					ok, ds := a.deliverRow(ctx, h, r, bodies[i])
					mu.Lock()
					defer mu.Unlock()
					*deliveries = append(*deliveries, ds...)
					if ok {
						took[i]++
					} else {
						failed[i]++
					}
				})
			}
			ewg.Wait()
		})
	}
	wg.Wait()
	var res SendResult
	now := a.Now().UnixMicro()
	for i := range rows {
		res.Drained++
		// Sent when every endpoint taking the type took it; a row no
		// endpoint takes any more (deleted meanwhile) has failed.
		if failed[i] == 0 && took[i] > 0 {
			outcome[i], sentAt[i] = domain.DeliverySent, &now
			res.Sent++
		} else {
			outcome[i] = domain.DeliveryFailed
			res.Failed++
		}
	}
	return res
}

// deliverRow sends one row to one endpoint, up to three attempts, and
// reports whether it was taken with the attempts made.
func (a *App) deliverRow(ctx context.Context, h store.Webhook, r store.Notification, body []byte) (bool, []store.Delivery) {
	var ds []store.Delivery
	for n := range webhookAttempts {
		if n > 0 {
			if err := sleepCtx(ctx, a.webhookBackoff(n-1)); err != nil {
				break
			}
		}
		started := a.Now()
		at := a.Egress.Deliver(ctx, webhook.Delivery{URL: h.URL, MsgID: r.ID, Timestamp: started, Body: body, Secret: h.Secret})
		d := store.Delivery{WebhookID: h.ID, NotificationID: r.ID, Attempt: n + 1, Duration: at.Duration, CreatedAt: started}
		if at.StatusCode != 0 {
			code := at.StatusCode
			d.StatusCode = &code
		}
		if at.Err != "" {
			e := at.Err
			d.Error = &e
		}
		ds = append(ds, d)
		if at.OK {
			a.notices.attemptsOK.Add(1)
			return true, ds
		}
		a.notices.attemptsFailed.Add(1)
	}
	return false, ds
}

func (a *App) webhookBackoff(n int) time.Duration {
	if a.WebhookBackoff != nil {
		return a.WebhookBackoff(n)
	}
	return 250 * time.Millisecond << n
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DigestResult is POST /v1/notifications/digest/run.
type DigestResult = api.DigestRunResult

// RunDigest rolls userID's email rows held for the digest in the last 24
// hours, not yet digested, into one plain-text email of counts by type
// (CONTRACT.md "Notifications"). A second run in a row sends nothing; a
// digest the mailer could not send leaves its rows for the next run.
func (a *App) RunDigest(ctx context.Context, userID string) (DigestResult, error) {
	res := DigestResult{Grouped: map[string]int{}, UserID: userID}
	acct, err := a.Store.Account(ctx, userID)
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
			rows, err := a.Store.HeldEmail(ctx, t.SQL(), userID, a.Now().Add(-DigestWindow))
			for _, r := range rows {
				res.Grouped[r.Type]++
				ids = append(ids, r.ID)
			}
			return len(rows) > 0, err
		},
		func() {
			if err := a.Mail.Send(ctx, digestEmail(*acct.Email, res.Grouped)); err != nil {
				a.Log.Warn("a digest was not sent", "user_id", userID, "err", err)
				return
			}
			sent = true
		},
		func(t *writer.Tx) error {
			if !sent {
				return nil
			}
			return a.Store.MarkDigested(ctx, t.SQL(), ids, a.Now())
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
// account with an email (`auditchain admin announce`): its rows are written
// account by account, then the queued email is sent. It reports the
// accounts notified.
func (a *App) Announce(ctx context.Context, typ, subject, body string) (int, error) {
	nt, ok := domain.LookupNoticeType(typ)
	if !ok || !nt.Mandatory {
		return 0, domain.Validation(domain.FieldError{Field: "type", Message: "must be a mandatory notice type (" + domain.NoticeBreakingChange + ")"})
	}
	if strings.TrimSpace(subject) == "" || strings.ContainsAny(subject, "\r\n") {
		return 0, domain.Validation(domain.FieldError{Field: "subject", Message: "required, one line"})
	}
	accounts, err := a.Store.AccountsWithEmail(ctx)
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

// RunMailer sends queued email whenever a commit queued some, and every
// sweep interval (rows a crash left queued, or another replica's), until
// ctx ends. serve runs it.
func (a *App) RunMailer(ctx context.Context, sweep Ticker) {
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.notices.mailerWake:
		case <-sweep.C():
		}
		if _, err := a.SendQueuedEmail(ctx); err != nil && ctx.Err() == nil {
			a.Log.Error("sending queued notification email failed", "err", err)
		}
	}
}
