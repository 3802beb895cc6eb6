package app

// The dedup gate: whether a tool call repeats one within the window
// (docs/decisions/dedup.md), for the append advisory and the policy probe.

import (
	"context"
	"errors"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// dedupAdvisory decides whether an appended tool call repeats one within the
// window, with the same code as the policy probe.
func (a *App) dedupAdvisory(ctx context.Context, q store.Querier, userID, tool, key string, intent domain.Intent, tip int64) (*api.DedupAdvisory, error) {
	d, err := a.decideDedup(ctx, q, userID, tool, key, intent, tip)
	if err != nil {
		return nil, err
	}
	if adv, ok := d.Advisory(); ok {
		return &adv, nil
	}
	return nil, nil
}

func (a *App) decideDedup(ctx context.Context, q store.Querier, userID, tool, key string, intent domain.Intent, tip int64) (domain.DedupDecision, error) {
	policy := a.dedup
	var candidates []domain.PriorCall
	if intent != domain.IntentFresh && policy.Cacheable(tool) && tip >= 0 {
		prior, err := a.store.LatestSemanticMatch(ctx, q, userID, key, tip-int64(policy.WindowEvents)+1)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return domain.DedupDecision{}, err
		default:
			c := domain.PriorCall{EventID: prior.EventID, Sequence: prior.Sequence, SemanticKey: key}
			if ts, err := domain.ParseTimestamp(prior.TS); err == nil {
				c.TS = ts
			}
			candidates = append(candidates, c)
		}
	}
	return domain.DecideDedup(policy, tool, key, intent, candidates, tip, a.now()), nil
}

// PolicyTest predicts what the dedup gate would decide, writing nothing
// (POST /v1/policy/test; req's intent is checked by the HTTP body).
func (a *App) PolicyTest(ctx context.Context, p Principal, req api.PolicyTestRequest) (domain.DedupDecision, error) {
	key, err := domain.SemanticKey(req.Tool, req.ToolInput)
	if err != nil {
		return domain.DedupDecision{}, domain.Validation(domain.FieldError{Field: "tool_input", Message: "must be a JSON object"})
	}
	head, err := a.store.Head(ctx, p.UserID)
	if err != nil {
		return domain.DedupDecision{}, err
	}
	var intent domain.Intent
	if req.Intent != nil {
		intent = domain.Intent(*req.Intent)
	}
	return a.decideDedup(ctx, nil, p.UserID, req.Tool, key, intent, head.LastSequence)
}
