package app

import (
	"context"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/store"
)

// Which approval rule holds an authorized call is asked by every tool call
// the gate authorizes, inside its write. Reading approval_rules there cost
// every plain allowed call a query (issue #38: a plain allowed call must not
// pay for approvals). The head row the call locks anyway carries the
// account's rules generation (store.LockHeadRules): 0 while the account has
// never had a rule, then moved on by every change of its rules in the
// change's transaction, under the same lock. So:
//
//   - generation 0: no rule, nothing read;
//   - a generation this replica read the rules at before: those rules, from
//     memory — exact on any replica, because a generation names one set of
//     rules and the call holds the head, so no change can commit before the
//     call's own commit;
//   - otherwise the account's rules are read in the transaction and kept at
//     that generation once it committed (a copy from a transaction that
//     rolled back might name a generation that never committed, which
//     another change could later commit with other rules).
//
// Reading the rules before taking the head would shorten the lock but not
// the work, and a rule committed between that read and the lock would not
// hold a call decided after it.

// Bounds of the rules cache: accounts kept, and rules per account (an
// account with more is read from the database each time).
const (
	ruleCacheAccounts = 4096
	ruleCacheRules    = 64
)

// matchingApprovalRule is store.MatchingApprovalRule for a transaction that
// holds userID's head, from the head's rules generation and the cache when
// it can (above).
func (a *App) matchingApprovalRule(ctx context.Context, t *writer.Tx, userID, subagent, tool string) (store.ApprovalRule, bool, error) {
	gen, locked := t.ApprovalRulesGen(userID)
	if !locked {
		return a.store.MatchingApprovalRule(ctx, t.SQL(), userID, subagent, tool)
	}
	if gen == 0 {
		return store.ApprovalRule{}, false, nil
	}
	rules, keptGen, ok := a.rules.get(userID)
	if !ok || keptGen != gen {
		var err error
		if rules, err = a.store.ApprovalRules(ctx, t.SQL(), userID); err != nil {
			return store.ApprovalRule{}, false, err
		}
		if len(rules) <= ruleCacheRules {
			t.AfterCommit(func() { a.rules.put(userID, gen, rules) })
		}
	}
	r, ok := matchRule(rules, subagent, tool)
	return r, ok, nil
}

// matchRule is the rule of rules (in store.ApprovalRules' order: oldest
// first, ties by rule id) that holds subagent's call of tool, as
// store.MatchingApprovalRule chooses it: of those naming them exactly or by
// "*", the shortest ttl, ties to the first in that order.
func matchRule(rules []store.ApprovalRule, subagent, tool string) (store.ApprovalRule, bool) {
	var best store.ApprovalRule
	found := false
	for _, r := range rules {
		if (r.Subagent != subagent && r.Subagent != anyName) || (r.Tool != tool && r.Tool != anyName) {
			continue
		}
		if !found || r.TTLSeconds < best.TTLSeconds {
			best, found = r, true
		}
	}
	return best, found
}
