package app

import (
	"context"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// EnactedRules returns the account's enacted governance rules, which the gate
// obeys (SPEC.md "Proposal (status)": enacted deny_scope answers
// denied_by_governance). q may be a transaction or nil for the read pool.
//
// Only enacted proposals are rules, oldest enactment first: proposed and
// ratified ones are not yet in force, and a rejected one is never a reason.
// How rules combine (the latest applicable deny_scope or allow_scope decides,
// so an allow lifts an earlier deny of the subject; policy_note has no gate
// effect) is domain.GovernanceDenial. enacted_at strictly increases in chain
// order within an account (App.enactStamp), so "latest" is never a tie.
func (a *App) EnactedRules(ctx context.Context, q store.Querier, userID string) ([]domain.GovernanceRule, error) {
	sps, err := a.store.EnactedProposals(ctx, q, userID)
	if err != nil {
		return nil, err
	}
	ps := make([]domain.Proposal, len(sps))
	for i := range sps {
		ps[i] = sps[i].Proposal
	}
	return domain.ActiveRules(ps), nil
}
