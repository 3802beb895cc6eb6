package domain

// Governance proposals and their state machine (SPEC.md "Proposal",
// "Proposal (status)"). Everything here is pure: the app layer loads a proposal,
// calls Transition with the caller and the clock, then stores the result and
// appends the chain event EventType names, in one transaction.
// Decisions beyond SPEC.md are in docs/decisions/governance.md.

import (
	"github.com/auditchain/auditchain/pkg/api"
	"time"
)

// Proposal is SPEC.md's Proposal resource as the rules see it (the API's
// form, timestamps as text, is api.Proposal, made in app). The *_at and
// actor pairs are set together by the transition that names them and are
// nil until then.
type Proposal struct {
	ProposalID string
	Status     string
	Kind       string
	Note       *string
	Evidence   api.Evidence
	Subject    api.Subject
	ProposedAt time.Time
	Proposer   api.Actor
	RatifiedAt *time.Time
	Ratifier   *api.Actor
	EnactedAt  *time.Time
	Enactor    *api.Actor
	RejectedAt *time.Time
	Rejector   *api.Actor
}

// Proposal statuses (SPEC.md "Proposal (status)").
const (
	ProposalProposed = "proposed"
	ProposalRatified = "ratified"
	ProposalEnacted  = "enacted"
	ProposalRejected = "rejected"
)

// Transition actions, one per route POST /v1/governance/proposals/{id}/{action}.
const (
	ActionRatify = "ratify"
	ActionEnact  = "enact"
	ActionReject = "reject"
)

// Chain event types written for each proposal transition (SPEC.md "Chain events
// emitted by governance").
const (
	EventGovernanceProposed = "governance.proposed"
	EventGovernanceRatified = "governance.ratified"
	EventGovernanceEnacted  = "governance.enacted"
	EventGovernanceRejected = "governance.rejected"
)

// Governance error codes (SPEC.md "Errors", governance rows).
const (
	CodeThresholdNotMet    = "threshold_not_met"
	CodeSeparationOfPowers = "separation_of_powers"
	CodeNotRatified        = "not_ratified"
	CodeInvalidTransition  = "invalid_transition"
)

// EventType is the chain event a successful action appends, or "" for an
// unknown action.
func EventType(action string) string {
	switch action {
	case ActionRatify:
		return EventGovernanceRatified
	case ActionEnact:
		return EventGovernanceEnacted
	case ActionReject:
		return EventGovernanceRejected
	}
	return ""
}

// Transition applies action by caller at now to p, exactly as SPEC.md's
// "Proposal (status)" table says. On success it returns the proposal with the
// new status and the matching *_at/actor pair set (now in UTC). On failure it
// returns p unchanged and a 409 naming the rule, so a refused call writes
// nothing.
//
// The current status is checked before the caller's identity: ratify by the
// proposer of a proposal that is no longer proposed answers invalid_transition,
// not separation_of_powers. Nothing can be ratified at all, so the stronger
// statement wins, and the answer does not depend on who asks
// (docs/decisions/governance.md).
//
// An unknown action is a programming error in the caller and answers 500.
func Transition(p Proposal, action string, caller api.Actor, now time.Time) (Proposal, *Error) {
	at := now.UTC()
	who := caller
	switch action {
	case ActionRatify:
		// "ratified, enacted, rejected | ratify | already past proposed | 409 invalid_transition"
		if p.Status != ProposalProposed {
			return p, invalidTransition(p, action)
		}
		// "proposed | ratify | caller is the proposer | 409 separation_of_powers"
		// (SPEC.md "Authentication" 7). Only identity counts: another key on the
		// proposer's machine is a different identity.
		if caller.Identity == p.Proposer.Identity {
			return p, Errorf(CodeSeparationOfPowers,
				"proposal %s cannot be ratified by the identity that proposed it", p.ProposalID)
		}
		p.Status, p.RatifiedAt, p.Ratifier = ProposalRatified, &at, &who
		return p, nil
	case ActionEnact:
		switch p.Status {
		case ProposalRatified: // "any permitted caller"
			p.Status, p.EnactedAt, p.Enactor = ProposalEnacted, &at, &who
			return p, nil
		case ProposalProposed:
			return p, Errorf(CodeNotRatified,
				"proposal %s must be ratified before it is enacted", p.ProposalID)
		}
		// Enact of enacted or rejected: SPEC.md "not shown"; we answer
		// invalid_transition, like every other move out of a terminal state.
		return p, invalidTransition(p, action)
	case ActionReject:
		// "proposed | reject" and "ratified | reject" → rejected; from enacted or
		// rejected 409 invalid_transition ("an enacted rule is only superseded by
		// a new proposal").
		if p.Status != ProposalProposed && p.Status != ProposalRatified {
			return p, invalidTransition(p, action)
		}
		p.Status, p.RejectedAt, p.Rejector = ProposalRejected, &at, &who
		return p, nil
	}
	return p, Errorf(CodeInternal, "unknown governance action %q", action)
}

func invalidTransition(p Proposal, action string) *Error {
	return Errorf(CodeInvalidTransition,
		"proposal %s is %s; %s is not allowed from %s", p.ProposalID, p.Status, action, p.Status)
}

// ValidateNewProposal checks POST /v1/governance/proposals against SPEC.md's
// rules: kind must be deny_scope, allow_scope or policy_note (422
// validation_error naming kind), and blocked_attempts must reach threshold, the
// configured threshold (422 threshold_not_met). A client-sent
// evidence.threshold is not the threshold: the operator's configuration is.
// Kind is checked first, because a request of unknown kind is malformed whatever
// its evidence.
func ValidateNewProposal(kind string, blockedAttempts, threshold int) *Error {
	switch kind {
	case KindDenyScope, KindAllowScope, KindPolicyNote:
	default:
		return Validation(FieldError{Field: "kind", Message: "must be one of deny_scope, allow_scope, policy_note"})
	}
	if blockedAttempts < threshold {
		e := Errorf(CodeThresholdNotMet,
			"blocked_attempts %d is below the governance threshold %d", blockedAttempts, threshold)
		return e.With("blocked_attempts", blockedAttempts).With("threshold", threshold)
	}
	return nil
}

// ActiveRules returns the enacted proposals of ps as the rules the gate obeys, in
// the order given. Proposed, ratified and rejected proposals are not rules: a
// ratified rule is "not yet in force" and a rejected proposal "never appears as a
// reason in the gate's answers" (SPEC.md "Proposal (status)").
func ActiveRules(ps []Proposal) []GovernanceRule {
	var rules []GovernanceRule
	for _, p := range ps {
		if p.Status != ProposalEnacted {
			continue
		}
		r := GovernanceRule{ProposalID: p.ProposalID, Kind: p.Kind, Subagent: p.Subject.Subagent}
		if p.Subject.Tool != nil {
			t := *p.Subject.Tool
			r.Tool = &t
		}
		if p.EnactedAt != nil {
			r.EnactedAt = *p.EnactedAt
		}
		rules = append(rules, r)
	}
	return rules
}
