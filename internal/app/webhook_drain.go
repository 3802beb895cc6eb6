package app

// The webhook drain (CONTRACT.md "Webhooks"): every queued webhook row goes
// to every endpoint of its account that takes its type, up to three
// attempts within the drain, a 10 s timeout each, only 2xx counts, and the
// row is settled sent or failed within that drain.
//
// Fair across accounts (docs/decisions/notifications.md "Fairness"): a
// drain starts a sender for each account with queued rows that has none in
// this process and does not wait for other accounts' senders, so a row
// queued while other accounts' receivers hang is sent by the next kick's
// drain; and the attempts in flight are bounded by slots that an account
// with none in flight always finds (attemptGate), so hanging receivers
// cannot take the slot of another account's first attempt.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Bounds of the drain, per process.
const (
	// maxWebhookSenders bounds the accounts served at once (one goroutine
	// each, and no connection while it waits).
	maxWebhookSenders = outboxAccounts
	// attemptSlots bounds the attempts in flight, each one connection to a
	// receiver for at most the 10 s timeout. The last reservedSlots free
	// slots go only to an account with no attempt in flight, so a first
	// attempt waits for a slot only while reservedSlots other accounts have
	// attempts in flight; accountAttempts and endpointParallel bound one
	// account's and one endpoint's attempts in flight.
	attemptSlots     = 512
	reservedSlots    = 128
	accountAttempts  = 32
	endpointParallel = 8
	// webhookAttempts is CONTRACT.md's three attempts within one drain.
	webhookAttempts = 3
	// senderTimeout bounds one sender, as the scheduler bounds a job's run:
	// a claim it cuts short settles nothing, and its rows go again.
	senderTimeout = 10 * time.Minute
)

// webhookDrain is this process's webhook senders.
type webhookDrain struct {
	gate attemptGate

	mu sync.Mutex
	// serving holds the accounts with a sender here; true when a drain
	// found rows queued since the sender began its last pass.
	serving map[string]bool
	// skipped: a drain found every sender slot taken and left accounts out.
	skipped bool
	// background is the scheduler's context (startJobs): the senders of
	// its drains run on it, and wg waits for them (waitJobs).
	background context.Context
	wg         sync.WaitGroup
}

// begin reports whether the caller is to start userID's sender: false when
// it has one (which is told to look again when it ends its pass) or when
// every sender slot is taken.
func (d *webhookDrain) begin(userID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.serving == nil {
		d.serving = map[string]bool{}
	}
	if _, ok := d.serving[userID]; ok {
		d.serving[userID] = true
		return false
	}
	if len(d.serving) >= maxWebhookSenders {
		d.skipped = true
		return false
	}
	d.serving[userID] = false
	return true
}

// end is called by userID's sender after each pass; it reports whether the
// sender is done (false: a drain found rows queued meanwhile, and the sender
// makes another pass unless stop), and whether accounts were left out for
// want of a sender slot, which a new drain now has.
func (d *webhookDrain) end(userID string, stop bool) (done, leftOut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if again := d.serving[userID]; again && !stop {
		d.serving[userID] = false
		return false, false
	}
	delete(d.serving, userID)
	leftOut, d.skipped = d.skipped, false
	return true, leftOut
}

// DrainWebhooks is the webhooks job as POST /v1/internal/cron/webhooks runs
// it: it serves every account with queued webhook rows that no sender of
// this process serves yet, and answers what those senders did once they
// are done (rows of an account another sender is serving are that sender's).
func (a *App) DrainWebhooks(ctx context.Context) (api.DrainCounts, error) {
	return a.drainWebhooks(ctx, ctx, true)
}

// dispatchWebhooks is the webhooks job as the scheduler runs it (every two
// minutes, and a second after a row is queued): it starts the senders on
// the scheduler's context and returns without waiting for them, so a run
// never holds back the next one, which a row queued meanwhile asked for.
func (a *App) dispatchWebhooks(ctx context.Context) error {
	a.hooks.mu.Lock()
	bg := a.hooks.background
	a.hooks.mu.Unlock()
	if bg == nil { // a runner nobody started
		_, err := a.DrainWebhooks(ctx)
		return err
	}
	_, err := a.drainWebhooks(ctx, bg, false)
	return err
}

// drainWebhooks lists the accounts with queued rows (oldest row first) and
// starts a sender on senderCtx for each that has none; with wait it waits
// for them and adds up what they did, else their failures are logged.
func (a *App) drainWebhooks(ctx, senderCtx context.Context, wait bool) (api.DrainCounts, error) {
	accounts, err := a.store.QueuedAccounts(ctx, domain.ChannelWebhook, outboxAccounts)
	if err != nil {
		return api.DrainCounts{}, err
	}
	var (
		mu    sync.Mutex
		total api.DrainCounts
		errs  []error
		mine  sync.WaitGroup
	)
	senders := &mine
	if !wait {
		senders = &a.hooks.wg
	}
	for _, userID := range accounts {
		if !a.hooks.begin(userID) {
			continue
		}
		senders.Go(func() {
			res, err := a.serveWebhooks(senderCtx, userID)
			if err != nil {
				err = fmt.Errorf("webhook outbox of %s: %w", userID, err)
				if !wait && senderCtx.Err() == nil {
					a.log.Error("a webhook sender failed", "user_id", userID, "err", err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			addCounts(&total, res)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	if !wait {
		return api.DrainCounts{}, nil
	}
	mine.Wait()
	if len(errs) > 0 {
		return total, errs[0]
	}
	return total, nil
}

// serveWebhooks is userID's sender: passes over its outbox until a pass
// ends with nothing found queued meanwhile.
func (a *App) serveWebhooks(ctx context.Context, userID string) (api.DrainCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, senderTimeout)
	defer cancel()
	var total api.DrainCounts
	for {
		res, err := a.passAccount(ctx, domain.ChannelWebhook, userID, a.sendWebhookRows)
		addCounts(&total, res)
		done, leftOut := a.hooks.end(userID, err != nil || ctx.Err() != nil)
		if leftOut {
			a.kickWebhooks()
		}
		if done {
			return total, err
		}
	}
}

// attemptGate hands out the attempt slots of this process: a slot to an
// account with no attempt in flight whenever one is free, and to an
// account with attempts in flight (fewer than accountAttempts) only while
// more than reservedSlots are free. Every release wakes the waiters.
type attemptGate struct {
	mu        sync.Mutex
	inFlight  int
	byAccount map[string]int
	freed     chan struct{} // closed at the next release
}

// acquire takes a slot for account, or reports false with a channel closed
// at the next release.
func (g *attemptGate) acquire(account string) (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byAccount == nil {
		g.byAccount = map[string]int{}
	}
	n, free := g.byAccount[account], attemptSlots-g.inFlight
	if free > 0 && (n == 0 || n < accountAttempts && free > reservedSlots) {
		g.inFlight++
		g.byAccount[account] = n + 1
		return true, nil
	}
	if g.freed == nil {
		g.freed = make(chan struct{})
	}
	return false, g.freed
}

func (g *attemptGate) release(account string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	if g.byAccount[account]--; g.byAccount[account] == 0 {
		delete(g.byAccount, account)
	}
	if g.freed != nil {
		close(g.freed)
		g.freed = nil
	}
}

// webhookPush is the push of a row (api.WebhookPayload).
func webhookPush(r store.Notification) ([]byte, error) {
	var p noticePayload
	if err := json.Unmarshal([]byte(r.Payload), &p); err != nil {
		return nil, fmt.Errorf("notification %s: payload: %w", r.ID, err)
	}
	if p.Subject == nil {
		p.Subject = map[string]any{}
	}
	return json.Marshal(api.WebhookPayload{Type: r.Type, Timestamp: domain.FormatTimestamp(time.UnixMicro(r.CreatedAt)),
		Data: api.WebhookPayloadData{NotificationID: r.ID, UserID: r.UserID, Severity: cmp.Or(p.Severity, r.Severity), Subject: p.Subject}})
}

// sendWebhookRows delivers claimed rows to the account's endpoints (outside
// any transaction) and returns how to settle them.
func (a *App) sendWebhookRows(ctx context.Context, t *writer.Tx, rows []store.Notification) (func() api.DrainCounts, func(*writer.Tx) error, error) {
	userID := rows[0].UserID
	hooks, err := a.store.Webhooks(ctx, t.SQL(), userID, "")
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
	work := func() api.DrainCounts {
		return a.deliverRows(ctx, userID, hooks, rows, bodies, outcome, sentAt, &deliveries)
	}
	return work, func(t *writer.Tx) error {
		if err := a.store.InsertDeliveries(ctx, t.SQL(), deliveries); err != nil {
			return err
		}
		sent := 0
		for i, r := range rows {
			if err := a.store.SettleNotification(ctx, t.SQL(), r.ID, outcome[i], sentAt[i], 0); err != nil {
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

// webhookTry is one row to one endpoint: its next attempt (from 0), and
// for a retry the time it may start.
type webhookTry struct {
	hook, row, attempt int
	due                time.Time
}

type webhookTried struct {
	webhookTry
	ok bool
	d  store.Delivery
}

// deliverRows sends userID's claimed rows to the endpoints that take their
// types, filling outcome, sentAt and the attempts made. The endpoints take
// turns, each with at most endpointParallel attempts in flight; every
// attempt holds a slot of the gate; a failed attempt goes again after the
// backoff, up to webhookAttempts in all. Cut short (ctx), it starts nothing
// more and returns once its attempts in flight have ended.
func (a *App) deliverRows(ctx context.Context, userID string, hooks []store.Webhook, rows []store.Notification, bodies [][]byte,
	outcome []string, sentAt []*int64, deliveries *[]store.Delivery) api.DrainCounts {
	queues := make([][]webhookTry, len(hooks)) // per endpoint: first attempts in row order, then retries
	left := 0                                  // tries queued or in flight
	for h, hook := range hooks {
		for i, r := range rows {
			if slices.Contains(hook.Types, r.Type) {
				queues[h] = append(queues[h], webhookTry{hook: h, row: i})
				left++
			}
		}
	}
	// failed[i] counts endpoints that did not take row i; took[i] those that did.
	failed, took := make([]int, len(rows)), make([]int, len(rows))
	inFlight := make([]int, len(hooks))
	// Room for every attempt that can be in flight: none waits to report.
	done := make(chan webhookTried, len(hooks)*endpointParallel)
	cancelled := ctx.Done()
	next := 0 // the endpoint whose turn it is
	for left > 0 {
		var freed <-chan struct{}
		var wake time.Time
		for started := true; started && freed == nil && ctx.Err() == nil; {
			started = false
			for k := range hooks {
				h := (next + k) % len(hooks)
				if len(queues[h]) == 0 || inFlight[h] >= endpointParallel {
					continue
				}
				try := queues[h][0]
				if try.due.After(time.Now()) {
					if wake.IsZero() || try.due.Before(wake) {
						wake = try.due
					}
					continue
				}
				var ok bool
				if ok, freed = a.hooks.gate.acquire(userID); !ok {
					break
				}
				queues[h] = queues[h][1:]
				inFlight[h]++
				next, started = h+1, true
				go func() {
					ok, d := a.attemptDelivery(ctx, hooks[try.hook], rows[try.row], bodies[try.row], try.attempt)
					a.hooks.gate.release(userID)
					done <- webhookTried{webhookTry: try, ok: ok, d: d}
				}()
			}
		}
		if ctx.Err() != nil {
			// Cut short: the claim settles nothing (passAccount), so the
			// tries not started are dropped.
			for h := range queues {
				left -= len(queues[h])
				queues[h] = nil
			}
			wake, freed = time.Time{}, nil
			if left == 0 {
				break
			}
		}
		var due <-chan time.Time
		if !wake.IsZero() {
			due = time.After(time.Until(wake))
		}
		select {
		case r := <-done:
			inFlight[r.hook]--
			*deliveries = append(*deliveries, r.d)
			switch {
			case r.ok:
				took[r.row]++
				left--
			case r.attempt+1 < webhookAttempts && ctx.Err() == nil:
				r.attempt++
				r.due = time.Now().Add(a.webhookBackoff(r.attempt - 1))
				queues[r.hook] = append(queues[r.hook], r.webhookTry)
			default:
				failed[r.row]++
				left--
			}
		case <-freed:
		case <-due:
		case <-cancelled:
			cancelled = nil // from here the loop only collects what is in flight
		}
	}
	var res api.DrainCounts
	now := a.now().UnixMicro()
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

// attemptDelivery makes attempt n (from 0) of row r to endpoint h and
// reports whether it was taken, with the attempt as recorded.
func (a *App) attemptDelivery(ctx context.Context, h store.Webhook, r store.Notification, body []byte, n int) (bool, store.Delivery) {
	started := a.now()
	at := a.egress.Deliver(ctx, webhook.Delivery{URL: h.URL, MsgID: r.ID, Timestamp: started, Body: body, Secret: h.Secret})
	d := store.Delivery{WebhookID: h.ID, NotificationID: r.ID, Attempt: n + 1, Duration: at.Duration, CreatedAt: started}
	if at.StatusCode != 0 {
		code := at.StatusCode
		d.StatusCode = &code
	}
	if at.Err != "" {
		e := at.Err
		d.Error = &e
	}
	if at.OK {
		a.notices.attemptsOK.Add(1)
	} else {
		a.notices.attemptsFailed.Add(1)
	}
	return at.OK, d
}

// defaultWebhookBackoff is the wait before attempt n+2 within a drain
// (Deps.WebhookBackoff).
func defaultWebhookBackoff(n int) time.Duration { return 250 * time.Millisecond << n }
