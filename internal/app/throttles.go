package app

// Throttles on everything that makes the service send mail
// (docs/decisions/throttles.md): a sign-in code, a team invitation, a test
// notification, an announcement. Each request is charged one unit of every
// budget it falls under (per caller, per recipient, global) inside its own
// write, or refused with 429 and Retry-After without anything written. A
// budget is a GCRA state in the store (rate_state, the batch rate's
// mechanism), so every replica spends the same one; mail that could not go
// out is given back.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
)

// budget is one throttle a request is charged against.
type budget struct {
	key  string // its rate_state row
	name string // the 429's `throttle` member (domain.Throttle*)
	what string // what it counts, for the 429's detail: "sign-in codes … per hour"
	rate domain.Rate
}

// charge takes one unit of every budget inside t, or none: when one is
// spent, the request is refused with code (429), and Retry-After and
// `throttle` name the spent budget with the longest wait. Rows
// are locked in key order, so that writes charging several budgets never
// wait on each other in a cycle; a write takes them after its own locks
// (an email's, a team's) and before any account's.
func (a *App) charge(ctx context.Context, t *writer.Tx, code string, budgets ...budget) error {
	budgets = slices.SortedFunc(slices.Values(budgets), func(x, y budget) int { return cmp.Compare(x.key, y.key) })
	now := a.now()
	next := make([]time.Time, len(budgets))
	var refused *budget
	wait := 0
	for i, b := range budgets {
		tat, err := a.store.RateState(ctx, t.SQL(), b.key)
		if err != nil {
			return err
		}
		d := domain.DecideRate(time.UnixMicro(tat), now, 1, b.rate)
		if !d.Allowed && (refused == nil || d.RetryAfter > wait) {
			refused, wait = &budgets[i], d.RetryAfter
		}
		next[i] = d.NewTAT
	}
	if refused != nil {
		return throttled(code, refused.name, fmt.Sprintf("at most %d %s; retry in %d s", refused.rate.Limit, refused.what, wait), wait)
	}
	for i, b := range budgets {
		if err := a.store.SetRateState(ctx, t.SQL(), b.key, next[i].UnixMicro()); err != nil {
			return err
		}
	}
	return a.pruneThrottles(ctx, t, now)
}

// refund gives back inside t the unit charge took from each budget: mail
// that did not go out is not charged (docs/decisions/throttles.md).
func (a *App) refund(ctx context.Context, t *writer.Tx, budgets ...budget) error {
	for _, b := range budgets {
		if err := a.store.RefundRate(ctx, t.SQL(), b.key, b.rate.Interval()); err != nil {
			return err
		}
	}
	return nil
}

// throttled is the 429 of a spent throttle: code (otp_rate_limited or
// rate_limit_exceeded), Retry-After, and which throttle.
func throttled(code, name, detail string, retryAfter int) error {
	return (&domain.Error{Code: code, RetryAfter: max(1, retryAfter), Detail: detail}).With("throttle", name)
}

// otpBudgets are what a sign-in code request is charged, besides its
// email's hourly count (CONTRACT.md): its client address's, unless the
// request came from within the service (client ""), and everyone's.
func (a *App) otpBudgets(client string) []budget {
	out := []budget{{key: "otp:global", name: domain.ThrottleGlobal, what: "sign-in codes are mailed an hour, to every client together",
		rate: hourly(a.cfg.OTPLimitGlobal, config.DefaultOTPLimitGlobal)}}
	if client != "" {
		out = append(out, budget{key: "otp:client:" + client, name: domain.ThrottlePerClient, what: "sign-in codes are mailed an hour for one client address",
			rate: hourly(a.cfg.OTPLimitPerClient, config.DefaultOTPLimitPerClient)})
	}
	return out
}

// inviteBudgets are what an invitation of email into a team is charged:
// the inviting account's, the team's, the address's (every team's
// invitations to it) and everyone's. A withdrawal gives nothing back:
// invite, withdraw and invite again is two invitations mailed.
func (a *App) inviteBudgets(userID, orgID, email string) []budget {
	return []budget{
		{key: "invite:account:" + userID, name: domain.ThrottlePerAccount, what: "team invitations a day from one account",
			rate: daily(a.cfg.InviteLimitPerAccount, config.DefaultInviteLimitPerAccount)},
		{key: "invite:org:" + orgID, name: domain.ThrottlePerOrg, what: "invitations a day from one team",
			rate: daily(a.cfg.InviteLimitPerOrg, config.DefaultInviteLimitPerOrg)},
		{key: "invite:to:" + email, name: domain.ThrottlePerRecipient, what: "team invitations a day to one address",
			rate: daily(a.cfg.InviteLimitPerRecipient, config.DefaultInviteLimitPerRecipient)},
		{key: "invite:global", name: domain.ThrottleGlobal, what: "team invitations an hour, from every team together",
			rate: hourly(a.cfg.InviteLimitGlobal, config.DefaultInviteLimitGlobal)},
	}
}

// testBudgets are what a test notification is charged: its account's (the
// account is also its only recipient) and everyone's, in development as in
// production.
func (a *App) testBudgets(userID string) []budget {
	return []budget{
		{key: "test:account:" + userID, name: domain.ThrottlePerAccount, what: "test notifications an hour for one account",
			rate: hourly(a.cfg.TestNotifyLimitPerAccount, config.DefaultTestNotifyLimitPerAccount)},
		{key: "test:global", name: domain.ThrottleGlobal, what: "test notifications an hour, for every account together",
			rate: hourly(a.cfg.TestNotifyLimitGlobal, config.DefaultTestNotifyLimitGlobal)},
	}
}

// DefaultAnnounceLimitPerDay is `admin announce --limit-per-day`'s default.
const DefaultAnnounceLimitPerDay = 3

// announceBudget is what an announcement is charged: the deployment's
// announcements a day. Each one mails every account once, so this bounds
// the mail a repeated or looping operator command sends.
func (a *App) announceBudget() budget {
	return budget{key: "announce:global", name: domain.ThrottleGlobal, what: "announcements a day (admin announce --limit-per-day)",
		rate: daily(a.cfg.AnnounceLimitPerDay, DefaultAnnounceLimitPerDay)}
}

// hourly and daily are a flag's budget; def when the Config was built
// without Parse (zero).
func hourly(limit, def int) domain.Rate {
	return domain.Rate{Limit: cmp.Or(limit, def), Per: time.Hour}
}

func daily(limit, def int) domain.Rate {
	return domain.Rate{Limit: cmp.Or(limit, def), Per: 24 * time.Hour}
}

// throttleState is this process's pruning of idle budgets.
type throttleState struct {
	mu        sync.Mutex
	nextPrune time.Time
}

// pruneEvery is how often a process deletes idle budgets; pruneSlack keeps
// a state a while after it went idle, so that a replica whose clock runs a
// little behind never finds its debt forgiven.
const (
	pruneEvery = time.Hour
	pruneSlack = time.Minute
)

// pruneThrottles deletes idle budgets inside t, at most once per pruneEvery
// in this process. It runs after charge took its own rows, and skips rows
// others hold, so it never waits.
func (a *App) pruneThrottles(ctx context.Context, t *writer.Tx, now time.Time) error {
	s := &a.throttles
	s.mu.Lock()
	due := !now.Before(s.nextPrune)
	if due {
		s.nextPrune = now.Add(pruneEvery)
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	_, err := a.store.PruneRateStates(ctx, t.SQL(), now.Add(-pruneSlack))
	return err
}
