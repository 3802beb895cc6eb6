package app

// The gate's reader (SPEC.md "Grant status (gate answer)"): the candidate
// grants of a sub-agent and the enacted governance rules, read through the
// gate cache or a transaction, decided by domain.DecideGate; and the
// conversion of stored grant rows into what the gate decides over.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// GrantStatus is the gate's reader (GET /v1/grants/status): the sub-agent's
// candidate grants and the enacted governance rules, decided by DecideGate.
// Every status the service shows (status route, grant response, revoke's
// status_after, use's refusal) comes from here.
func (a *App) GrantStatus(ctx context.Context, p Principal, q api.GrantStatusQuery, now time.Time) (api.GrantStatus, error) {
	ans, _, err := a.gate(ctx, nil, p.UserID, q.Subagent, q.Tool, q.GrantID, now)
	if err != nil {
		return api.GrantStatus{}, err
	}
	a.countGate(p.UserID, ans.Status)
	return gateView(ans), nil
}

// gateView is a gate answer as the API shows it (SPEC.md "Grant status (gate
// answer)"): the matched grant's record fields are present only when a grant
// matched. The embedded record's subagent is the same as the answer's
// (matching is exact), so the outer field wins harmlessly.
func gateView(a domain.GateAnswer) api.GrantStatus {
	v := api.GrantStatus{Status: a.Status, Authorized: a.Authorized, Reason: a.Reason, Subagent: a.Subagent,
		Uses: a.Uses, Remaining: a.Remaining, ProposalID: a.ProposalID}
	if a.Grant != nil {
		rec := recordOf(*a.Grant)
		v.GrantRecord = &rec
	}
	return v
}

// gate answers for subagent and returns the candidate rows it decided over.
//
// Outside a transaction (q nil) the inputs may come from a.gateCache, which
// holds exactly what the database would answer (readcache.go); inside one they
// are always read from the transaction.
func (a *App) gate(ctx context.Context, q store.Querier, userID, subagent string, tool, grantID *string, now time.Time) (domain.GateAnswer, []store.Grant, error) {
	in, err := a.gateInputs(ctx, q, userID, subagent, grantID, now)
	if err != nil {
		return domain.GateAnswer{}, nil, err
	}
	return domain.DecideGate(in.grants, in.rules, now, subagent, tool, grantID), in.rows, nil
}

// writeGate is a write that changes what the gate reads for userID (grants,
// uses, enacted rules): readers of a.gateCache bypass it from before the
// commit until the write ended, whatever happened.
func (a *App) writeGate(ctx context.Context, userID string, fn func(t *writer.Tx) error) error {
	return a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.gateCache, userID)
		return fn(t)
	})
}

// gateKey names one cached gate read of an account: the candidates of a
// sub-agent, optionally restricted to one grant id, or (rules) the account's
// enacted rules, which every sub-agent's reads share. The tool is not part of
// it: the candidates do not depend on it, only the decision does.
type gateKey struct {
	subagent string
	grantID  string
	oneID    bool
	rules    bool
}

// gateRead is what the gate decides over. Its slices are shared by every
// reader of the cache entry, so nothing may modify them.
type gateRead struct {
	rows   []store.Grant
	grants []domain.Grant
	rules  []domain.GovernanceRule
	// atMicros is the wall-clock time (Unix µs, as the query compared it) the
	// candidates were selected for: grants expired at that time were left out,
	// which stays right for any later time but not for an earlier one (a clock
	// stepped back), so such a reader reads afresh.
	atMicros int64
}

// maxCachedCandidates keeps the cache's memory bounded by entries: a
// sub-agent with more live grants than this is read from the database.
const maxCachedCandidates = 64

func (a *App) gateInputs(ctx context.Context, q store.Querier, userID, subagent string, grantID *string, now time.Time) (gateRead, error) {
	if q != nil {
		return a.readGateInputs(ctx, q, userID, subagent, grantID, now)
	}
	key := gateKey{subagent: subagent}
	if grantID != nil {
		key.grantID, key.oneID = *grantID, true
	}
	candidates, ticket, hit := a.gateCache.Get(userID, key)
	if !hit || now.UnixMicro() < candidates.atMicros {
		var err error
		if candidates, err = a.readCandidates(ctx, nil, userID, subagent, grantID, now); err != nil {
			return gateRead{}, err
		}
		if len(candidates.rows) <= maxCachedCandidates {
			a.gateCache.Put(userID, ticket, key, candidates)
		}
	}
	rules, ticket, hit := a.gateCache.Get(userID, gateKey{rules: true})
	if !hit {
		var err error
		if rules.rules, err = a.EnactedRules(ctx, nil, userID); err != nil {
			return gateRead{}, err
		}
		a.gateCache.Put(userID, ticket, gateKey{rules: true}, rules)
	}
	candidates.rules = rules.rules
	return candidates, nil
}

// readGateInputs reads the gate's inputs through q, bypassing the cache.
func (a *App) readGateInputs(ctx context.Context, q store.Querier, userID, subagent string, grantID *string, now time.Time) (gateRead, error) {
	in, err := a.readCandidates(ctx, q, userID, subagent, grantID, now)
	if err != nil {
		return gateRead{}, err
	}
	in.rules, err = a.EnactedRules(ctx, q, userID)
	return in, err
}

func (a *App) readCandidates(ctx context.Context, q store.Querier, userID, subagent string, grantID *string, now time.Time) (gateRead, error) {
	rows, err := a.store.GateCandidates(ctx, q, userID, subagent, grantID, now)
	if err != nil {
		return gateRead{}, err
	}
	grants, err := domainGrants(rows)
	if err != nil {
		return gateRead{}, err
	}
	return gateRead{rows: rows, grants: grants, atMicros: now.UnixMicro()}, nil
}

// domainGrant converts a stored row into what the gate decides over.
func domainGrant(r store.Grant) (domain.Grant, error) {
	g := domain.Grant{GrantID: r.GrantID, Subagent: r.Subagent, AllowedTools: r.AllowedTools, MaxToolCalls: r.MaxToolCalls,
		ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt, Uses: r.Uses}
	if r.ParentAgent != nil {
		g.ParentAgent = *r.ParentAgent
	}
	var err error
	if g.Epoch, err = parseEpoch(r.Epoch); err != nil {
		return g, fmt.Errorf("grant %s: stored epoch: %w", r.GrantID, err)
	}
	return g, nil
}

// epochs caches decoded epoch stamps by their stored JSON. Every grant written
// on one UTC day carries the same stamp, so the cache holds about one entry per
// day and spares the status check a JSON decode per candidate grant.
var epochs sync.Map // string → api.EpochStamp

func parseEpoch(raw []byte) (api.EpochStamp, error) {
	if e, ok := epochs.Load(string(raw)); ok {
		return e.(api.EpochStamp), nil
	}
	var e api.EpochStamp
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, err
	}
	epochs.Store(string(raw), e)
	return e, nil
}

func domainGrants(rows []store.Grant) ([]domain.Grant, error) {
	out := make([]domain.Grant, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = domainGrant(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rowOf finds the stored row a decided grant came from. Rows sharing an id
// differ in generation, which the gate does not see; two rows identical in
// every field the gate sees answer alike, so the latest generation stands for
// them.
func rowOf(rows []store.Grant, g domain.Grant) (store.Grant, bool) {
	var found *store.Grant
	for i := range rows {
		d, err := domainGrant(rows[i])
		if err == nil && reflect.DeepEqual(d, g) && (found == nil || rows[i].Generation > found.Generation) {
			found = &rows[i]
		}
	}
	if found == nil {
		return store.Grant{}, false
	}
	return *found, true
}
