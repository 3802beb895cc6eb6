package app

// The operator jobs (SPEC.md "Operator cron", CONTRACT.md "Operator jobs"):
// each is one method, called by its cron route and by the built-in scheduler
// alike. Each is safe to run again: what it writes is once-only (dedup keys,
// digested rows), and a run cut short leaves nothing half-written.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Windows of the jobs (SPEC.md "Limits").
const (
	GrantExpiryWindow   = 24 * time.Hour
	KeyExpiryWindow7d   = 7 * 24 * time.Hour
	KeyExpiryWindow24h  = 24 * time.Hour
	OperatorDigestHours = 48
)

// GrantExpirySweep dispatches grant.expiring_24h for each live grant that
// expires within a day, once per grant and expires_at (the dedup key): a
// second run notifies nobody. Notices are written account by account, each
// account's in one transaction, while the next accounts' grants are read
// and checked against the notices written before.
func (a *App) GrantExpirySweep(ctx context.Context) (api.GrantExpiry, error) {
	now := a.now().UTC()
	type account struct {
		userID   string
		expiring int
		ns       []Notice
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan account, 16)
	readErr := make(chan error, 1)
	go func() {
		defer close(next)
		readErr <- a.store.GrantsExpiringByAccount(ctx, now, now.Add(GrantExpiryWindow), func(userID string, gs []store.ExpiringGrant) error {
			ns, err := a.unnotifiedExpiring(ctx, userID, gs)
			if err != nil {
				return err
			}
			select {
			case next <- account{userID, len(gs), ns}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	var res api.GrantExpiry
	open := true // next, until the reader is done
	for {
		// Accounts are written a few thousand notices to a transaction: a
		// commit per account would make the run wait on a disk flush per
		// account.
		var batch []account
		size := 0
		take := func(acct account) {
			res.Expiring += acct.expiring
			if len(acct.ns) > 0 {
				batch = append(batch, acct)
				size += len(acct.ns)
			}
		}
		// Wait for one account with notices, then take what else is ready:
		// the writer starts as soon as there is something to write.
		for len(batch) == 0 && open {
			var acct account
			if acct, open = <-next; open {
				take(acct)
			}
		}
	drain:
		for open && size < cmp.Or(a.expiryNoticesPerWrite, expiryNoticesPerWrite) {
			select {
			case acct, ok := <-next:
				if open = ok; ok {
					take(acct)
				}
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			break
		}
		notified := make([]int, len(batch))
		err := a.w.Write(ctx, func(t *writer.Tx) (err error) {
			for i, acct := range batch {
				if notified[i], err = a.notifyEach(ctx, t, acct.userID, domain.NoticeGrantExpiring24h, acct.ns); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return res, err // the deferred cancel stops the reader
		}
		for _, n := range notified {
			res.Notified += n
			if n > 0 {
				res.Users++
			}
		}
	}
	return res, <-readErr
}

// expiryNoticesPerWrite is about how many notices an expiry job writes in
// one transaction (three rows each).
const expiryNoticesPerWrite = 5000

// unnotifiedExpiring is the grant.expiring_24h notices of userID's grants
// gs not written before, their payloads marshalled. Most grants of a run
// after the first were notified before: they are skipped here, without a
// write (the write skips any written since).
func (a *App) unnotifiedExpiring(ctx context.Context, userID string, gs []store.ExpiringGrant) ([]Notice, error) {
	keys := make([]string, len(gs))
	for i, g := range gs {
		keys[i] = g.GrantID + "@" + domain.FormatTimestamp(g.ExpiresAt)
	}
	done, err := a.store.DedupKeysWritten(ctx, nil, userID, domain.NoticeGrantExpiring24h, keys)
	if err != nil {
		return nil, err
	}
	nt, _ := domain.LookupNoticeType(domain.NoticeGrantExpiring24h)
	ns := make([]Notice, 0, len(gs)-len(done))
	for i, g := range gs {
		if done[keys[i]] {
			continue
		}
		n, err := expiringNotice(nt, g, keys[i])
		if err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// expiringNotice is g's grant.expiring_24h notice (of type nt), its payload
// marshalled.
func expiringNotice(nt domain.NoticeType, g store.ExpiringGrant, dedupKey string) (Notice, error) {
	var p expiringPayload
	p.Subject.ExpiresAt, p.Subject.GrantID, p.Subject.Subagent = domain.FormatTimestamp(g.ExpiresAt), g.GrantID, g.Subagent
	p.Severity = nt.Severity
	b, err := json.Marshal(p)
	return Notice{Type: nt.Name, DedupKey: dedupKey, encoded: string(b)}, err
}

// expiringPayload is a grant.expiring_24h notice's payload, the JSON
// Notice.payload writes for its subject (grant_id, subagent, expires_at;
// the keys in the order a map's are marshalled), from a struct: the job
// marshals one per grant, and a map costs several times a struct.
type expiringPayload struct {
	Subject struct {
		ExpiresAt string `json:"expires_at"`
		GrantID   string `json:"grant_id"`
		Subagent  string `json:"subagent"`
	} `json:"subject"`
	Severity string `json:"severity"`
}

// KeyExpirySweep warns each account whose key expires within 7 days
// (key.expiring_7d) or 24 hours (key.expiring_24h), once per key and
// window. A key first seen inside the last day gets the 24-hour warning
// only.
func (a *App) KeyExpirySweep(ctx context.Context) (api.KeyExpiry, error) {
	now := a.now().UTC()
	keys, err := a.store.KeysExpiring(ctx, now, now.Add(KeyExpiryWindow7d))
	if err != nil {
		return api.KeyExpiry{}, err
	}
	res := api.KeyExpiry{Scanned: len(keys)}
	for _, k := range keys {
		typ, window := domain.NoticeKeyExpiring7d, "7d"
		if !k.ExpiresAt.After(now.Add(KeyExpiryWindow24h)) {
			typ, window = domain.NoticeKeyExpiring24h, "24h"
		}
		subject := map[string]any{"key_id": k.KeyID, "prefix": k.Prefix, "expires_at": domain.FormatTimestamp(k.ExpiresAt)}
		if k.Label != "" {
			subject["label"] = k.Label
		}
		var rows []store.Notification
		err := a.w.Write(ctx, func(t *writer.Tx) (err error) {
			rows, err = a.notify(ctx, t, k.UserID, Notice{Type: typ, Subject: subject,
				DedupKey: k.KeyID + "@" + window + "@" + domain.FormatTimestamp(k.ExpiresAt)})
			return err
		})
		if err != nil {
			return res, err
		}
		if len(rows) == 0 {
			continue
		}
		if window == "24h" {
			res.Warned24h++
		} else {
			res.Warned7d++
		}
	}
	return res, nil
}

// DigestAll runs each account's digest (as digest/run does) for the accounts
// holding email for it; grouped sums the digests sent by type.
func (a *App) DigestAll(ctx context.Context) (api.DigestSweep, error) {
	res := api.DigestSweep{Grouped: map[string]int{}}
	accounts, err := a.store.AccountsHoldingDigest(ctx, a.now().Add(-DigestWindow))
	if err != nil {
		return res, err
	}
	res.Users = len(accounts)
	for _, userID := range accounts {
		d, err := a.RunDigest(ctx, userID)
		if err != nil {
			return res, err
		}
		if !d.DigestSent {
			continue
		}
		res.DigestsSent++
		for t, n := range d.Grouped {
			res.Grouped[t] += n
		}
	}
	return res, nil
}

// NotRecorded is the status of a figure the service does not record
// (SPEC.md: reported as null with a status of 'not recorded', not zero).
const NotRecorded = "not recorded"

// Delivery statuses of the operator digest.
const (
	OperatorDigestSent          = "sent"
	OperatorDigestFailed        = "failed"
	OperatorDigestNotConfigured = "not_configured"
)

// AdminDigest sends the operator (--operator-email) a plain-text summary of
// the last 48 hours through the mailer. Call counts are kept per UTC day, so
// the window starts at the midnight on or before 48 hours ago and since and
// until name it; every count is over that window. errors, mcp_calls and
// webhook failures are not recorded: null with status 'not recorded'.
// Without an operator email nothing is sent (not_configured).
func (a *App) AdminDigest(ctx context.Context) (api.OperatorDigest, error) {
	until := a.now().UTC().Truncate(time.Microsecond)
	since := until.Add(-OperatorDigestHours * time.Hour).Truncate(24 * time.Hour)
	if err := a.FlushUsage(ctx); err != nil {
		return api.OperatorDigest{}, err
	}
	f, err := a.store.OperatorFigures(ctx, since, until)
	if err != nil {
		return api.OperatorDigest{}, err
	}
	calls, err := a.store.Usage(ctx, "", UsageCapability, domain.QuotaDay(since), domain.QuotaDay(until))
	if err != nil {
		return api.OperatorDigest{}, err
	}
	c := api.OperatorCounts{AccountsNew: f.AccountsNew, AccountsTotal: f.AccountsTotal, CallsByCapability: calls,
		ErrorsStatus: NotRecorded, MCPCallsStatus: NotRecorded, GrantsCreated: f.GrantsCreated, GrantsRevoked: f.GrantsRevoked,
		KeysCreated: f.KeysCreated, NotificationsTotal: f.NotificationsTotal, Since: domain.FormatTimestamp(since),
		Until: domain.FormatTimestamp(until), WebhookQueuePendingNow: f.WebhookQueuePendingNow, WindowHours: OperatorDigestHours}
	for _, n := range calls {
		c.CallsTotal += n
	}
	res := api.OperatorDigest{Counts: c, DeliveryStatus: OperatorDigestNotConfigured, Provider: mailProvider(a.mail)}
	if a.cfg.OperatorEmail == "" {
		return res, nil
	}
	to := a.cfg.OperatorEmail
	res.Recipient = &to
	if err := a.mail.Send(ctx, operatorDigestEmail(to, c)); err != nil {
		a.log.Warn("the operator digest was not sent", "err", err)
		res.DeliveryStatus = OperatorDigestFailed
		return res, nil
	}
	res.DeliveryStatus = OperatorDigestSent
	return res, nil
}

func mailProvider(m Mailer) string {
	if p, ok := m.(interface{ Provider() string }); ok {
		return p.Provider()
	}
	return "custom"
}

func operatorDigestEmail(to string, c api.OperatorCounts) mail.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "auditchain operator summary, %s to %s (%d-hour window, from midnight UTC)\n\n", c.Since, c.Until, c.WindowHours)
	line := func(name string, v any) { fmt.Fprintf(&b, "%-28s %v\n", name, v) }
	line("accounts new", c.AccountsNew)
	line("accounts total", c.AccountsTotal)
	line("keys created", c.KeysCreated)
	line("grants created", c.GrantsCreated)
	line("grants revoked", c.GrantsRevoked)
	line("notifications", c.NotificationsTotal)
	line("webhook rows queued now", c.WebhookQueuePendingNow)
	line("calls total", c.CallsTotal)
	for _, k := range slices.Sorted(maps.Keys(c.CallsByCapability)) {
		line("  calls "+k, c.CallsByCapability[k])
	}
	line("errors", NotRecorded)
	line("MCP calls", NotRecorded)
	line("webhook deliveries failed", NotRecorded)
	return mail.Message{To: to, Kind: "operator_summary", Subject: "[auditchain] operator summary " + c.Until[:10], Body: b.String()}
}
