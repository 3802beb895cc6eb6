package app

import (
	"context"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// EnactedRules returns the account's enacted governance rules, which the gate
// obeys (SPEC.md "Proposal (status)": enacted deny_scope answers
// denied_by_governance). q may be a transaction or nil for the read pool.
// Governance storage fills this in; until then no rule is in force.
func (a *App) EnactedRules(ctx context.Context, q store.Querier, userID string) ([]domain.GovernanceRule, error) {
	return nil, nil
}
