package app

// Metering a grant (SPEC.md "POST /v1/grants/{grant_id}/use"): a use records
// n tool calls against a grant the gate authorizes, all of n or nothing, and
// the refusals that name the gate's answer.

import (
	"context"
	"fmt"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// MalformedUse is the 422 malformed_use answer.
func MalformedUse(field, reason string) *domain.Error {
	return malformed(domain.CodeMalformedUse, field, reason)
}

// UseGrant records n tool calls against grantID of subagent: all of n or
// nothing. The gate (governance included) must authorize the grant, and n must
// fit its remaining budget at the moment of the write: the store's conditional
// UPDATE decides, so concurrent uses on any replica never overspend. A use
// appends no chain event (docs/decisions/gate.md: the meter is not the record).
func (a *App) UseGrant(ctx context.Context, p Principal, grantID string, req api.UseRequest) (api.UseResult, error) {
	if req.Subagent == nil {
		return api.UseResult{}, required(MalformedUse, "subagent", "the sub-agent's exact name")
	}
	if req.N == nil {
		return api.UseResult{}, required(MalformedUse, "n", "the number of tool calls to record, a positive integer")
	}
	subagent, n := *req.Subagent, *req.N
	if err := checkName("subagent", subagent, MalformedUse); err != nil {
		return api.UseResult{}, err
	}
	if n < 1 {
		return api.UseResult{}, MalformedUse("n", "must be a positive integer")
	}
	now := a.now()
	ans, rows, err := a.gate(ctx, nil, p.UserID, subagent, nil, &grantID, now)
	if err != nil {
		return api.UseResult{}, err
	}
	if ans.Status == domain.GateBudgetExhausted {
		return api.UseResult{}, budgetExhausted(*ans.Grant, n)
	}
	if !ans.Authorized {
		return api.UseResult{}, notAuthorized(ans)
	}
	g := *ans.Grant
	if n > g.Remaining() {
		return api.UseResult{}, budgetExhausted(g, n)
	}
	row, ok := rowOf(rows, g)
	if !ok {
		return api.UseResult{}, fmt.Errorf("use: matched grant %s not among its rows", g.GrantID)
	}
	var uses int64
	var consumed bool
	err = a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		// Re-check the gate inside the write, holding the account's head: an
		// enactment (which takes the same lock) or a newer grant committed since
		// the check above must be obeyed by this use, not only by the next one.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		again, _, err := a.gate(ctx, t.SQL(), p.UserID, subagent, nil, &grantID, now)
		if err != nil {
			return err
		}
		if !again.Authorized && again.Status != domain.GateBudgetExhausted {
			return notAuthorized(again)
		}
		uses, consumed, err = a.store.ConsumeGrantUses(ctx, t.SQL(), p.UserID, row.GrantID, row.Generation, n, now)
		return err
	})
	if err != nil {
		return api.UseResult{}, err
	}
	if consumed {
		a.countUses(p.UserID, n)
		g.Uses = uses
		return useResult(g), nil
	}
	// The grant changed between the check and the write: say what it is now.
	fresh, err := a.store.GrantRow(ctx, nil, p.UserID, row.GrantID, row.Generation)
	if err != nil {
		return api.UseResult{}, err
	}
	d, err := domainGrant(fresh)
	if err != nil {
		return api.UseResult{}, err
	}
	switch st, reason := domain.GrantState(d, now, nil); st {
	case domain.GateAuthorized, domain.GateBudgetExhausted:
		return api.UseResult{}, budgetExhausted(d, n)
	default:
		return api.UseResult{}, notAuthorized(domain.GateAnswer{Status: st, Reason: reason, Subagent: subagent})
	}
}

func budgetExhausted(g domain.Grant, n int64) error {
	return (&domain.Error{Code: domain.CodeBudgetExhausted,
		Detail: fmt.Sprintf("grant %s has %d of %d tool calls remaining; a use of %d does not fit, so none was recorded",
			g.GrantID, g.Remaining(), g.MaxToolCalls, n)}).
		With("uses", g.Uses).With("remaining", g.Remaining()).With("max_tool_calls", g.MaxToolCalls).With("n", n)
}

// NoGrantToUse is the answer of a use naming a grant id that names nothing
// (one the text rule refuses before the store is asked): what the gate
// answers for any unknown id.
func NoGrantToUse() error {
	return notAuthorized(domain.GateAnswer{Status: domain.GateNoGrant, Reason: "no grant with that grant_id"})
}

func notAuthorized(ans domain.GateAnswer) error {
	e := (&domain.Error{Code: domain.CodeNotAuthorized,
		Detail: "the gate does not authorize this grant (" + ans.Status + "): " + ans.Reason}).
		With("gate_status", ans.Status).With("gate_reason", ans.Reason)
	if ans.ProposalID != "" {
		e = e.With("proposal_id", ans.ProposalID)
	}
	return e
}

// useResult is the answer of a use: the grant after it.
func useResult(g domain.Grant) api.UseResult {
	var parent *string
	if g.ParentAgent != "" {
		parent = &g.ParentAgent
	}
	return api.UseResult{GrantID: g.GrantID, Outcome: OutcomeConsumed, ParentAgent: parent,
		Remaining: g.Remaining(), Subagent: g.Subagent, Uses: g.Uses}
}
