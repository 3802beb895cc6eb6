package domain

import "time"

// Proposal kinds (SPEC.md "Proposal").
const (
	KindDenyScope  = "deny_scope"
	KindAllowScope = "allow_scope"
	KindPolicyNote = "policy_note"
)

// GovernanceRule is an enacted proposal as the gate sees it. Only enacted
// proposals become rules; a rejected one never reaches the gate, so it can never
// be named as a reason (SPEC.md "Proposal (status)").
type GovernanceRule struct {
	ProposalID string
	Kind       string
	Subagent   string
	Tool       *string // nil: the whole sub-agent
	EnactedAt  time.Time
}

// GovernanceDenial decides whether enacted rules deny a call by subagent naming
// tool (nil: no tool named). Decision (docs/decisions.md):
//   - a rule applies when its sub-agent matches exactly and its tool is nil (every
//     tool) or equals the named tool; a tool-specific rule never applies to a call
//     that names no tool;
//   - among applicable deny_scope and allow_scope rules the most recently enacted
//     decides: deny answers denied_by_governance naming its proposal, allow lifts
//     earlier denies it covers; policy_note has no gate effect;
//   - an enacted rule is only superseded by a newer enacted proposal.
func GovernanceDenial(rules []GovernanceRule, subagent string, tool *string) (proposalID string, denied bool) {
	var latest *GovernanceRule
	for i := range rules {
		r := &rules[i]
		if r.Kind != KindDenyScope && r.Kind != KindAllowScope {
			continue
		}
		if r.Subagent != subagent {
			continue
		}
		if r.Tool != nil && (tool == nil || *r.Tool != *tool) {
			continue
		}
		if latest == nil || r.EnactedAt.After(latest.EnactedAt) ||
			(r.EnactedAt.Equal(latest.EnactedAt) && r.ProposalID > latest.ProposalID) {
			latest = r
		}
	}
	if latest == nil || latest.Kind != KindDenyScope {
		return "", false
	}
	return latest.ProposalID, true
}
