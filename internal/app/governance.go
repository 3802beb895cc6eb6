package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Governance use cases (SPEC.md "Governance", "Proposal (status)"). The rules
// are domain.ValidateNewProposal and domain.Transition; this file loads and
// stores proposals and appends exactly one governance.* chain event per change,
// in the same transaction. Decisions: docs/decisions/governance.md.

// CodeProposalNotFound answers an unknown proposal id, and another account's
// id exactly alike (SPEC.md "Authentication" 6).
const CodeProposalNotFound = "proposal_not_found"

var errProposalNotFound = domain.NotFound(CodeProposalNotFound, "proposal")

// actorOf is the caller as an Actor (CONTRACT.md "Credentials": identity is the
// API key id, kind api_key, machine the key's machine label). Only the
// credential decides it: no header or route can change who the caller is.
func actorOf(p Principal) api.Actor {
	return api.Actor{Identity: p.Identity(), Kind: p.Kind, Machine: p.Machine}
}

// stamp is the time a governance change is recorded at: now in UTC, at the
// store's microsecond resolution, so the answer equals what a later read shows.
func (a *App) stamp() time.Time { return a.now().UTC().Truncate(time.Microsecond) }

// CreateProposal stores a new proposal by the caller and appends
// governance.proposed. The subject's tool is subject.tool or its synonym
// subject.scope (nil: the whole sub-agent). The threshold compared and
// recorded is the configured one, never a client-sent evidence.threshold.
// Which keys the body must hold is the HTTP layer's to check; an absent one
// reads as its zero here.
func (a *App) CreateProposal(ctx context.Context, p Principal, req api.CreateProposalRequest) (api.ProposalResponse, error) {
	var blocked int
	if req.Evidence != nil && req.Evidence.BlockedAttempts != nil {
		blocked = *req.Evidence.BlockedAttempts
	}
	var subject api.Subject
	if req.Subject != nil {
		subject = api.Subject{Subagent: deref(req.Subject.Subagent), Tool: cmp.Or(req.Subject.Tool, req.Subject.Scope)}
	}
	kind := deref(req.Kind)
	threshold := a.cfg.GovernanceThreshold
	if err := domain.ValidateNewProposal(kind, blocked, threshold); err != nil {
		return api.ProposalResponse{}, err
	}
	id, err := a.newID("prop-", 16)
	if err != nil {
		return api.ProposalResponse{}, err
	}
	sp := store.Proposal{UserID: p.UserID, Proposal: domain.Proposal{
		ProposalID: id, Status: domain.ProposalProposed, Kind: kind, Note: req.Note,
		Evidence:   api.Evidence{BlockedAttempts: blocked, Threshold: threshold},
		Subject:    subject,
		ProposedAt: a.stamp(), Proposer: actorOf(p),
	}}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		ev, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: domain.EventGovernanceProposed, Raw: proposedRaw(&sp.Proposal)})
		if err != nil {
			return err
		}
		sp.Seq = ev.Sequence
		if err := a.store.InsertProposal(ctx, t.SQL(), &sp); err != nil {
			return err
		}
		_, err = a.notify(ctx, t, p.UserID, Notice{Type: domain.NoticeGovernanceProposed, Subject: proposalSubject(&sp.Proposal)})
		return err
	})
	if err != nil {
		return api.ProposalResponse{}, err
	}
	metrics.ProposalTransitions.Inc("propose")
	return api.ProposalResponse{Proposal: proposalView(sp.Proposal)}, nil
}

// proposalView is SPEC.md's Proposal with timestamps in the spec's form.
func proposalView(p domain.Proposal) api.Proposal {
	return api.Proposal{
		ProposalID: p.ProposalID, Status: p.Status, Kind: p.Kind, Note: p.Note, Evidence: p.Evidence, Subject: p.Subject,
		ProposedAt: domain.FormatTimestamp(p.ProposedAt), Proposer: p.Proposer,
		RatifiedAt: formatOpt(p.RatifiedAt), Ratifier: p.Ratifier,
		EnactedAt: formatOpt(p.EnactedAt), Enactor: p.Enactor,
		RejectedAt: formatOpt(p.RejectedAt), Rejector: p.Rejector,
	}
}

// Proposal pages (docs/decisions/strict-input.md "Caps"): GET
// /v1/governance/proposals answers at most MaxProposalPage proposals.
const (
	DefaultProposalPage = 50
	MaxProposalPage     = 200
)

// Proposals answers GET /v1/governance/proposals: the account's proposals,
// newest first, a page at a time, filtered by status and exact sub-agent when
// given; NextCursor is set only when a full page came back.
func (a *App) Proposals(ctx context.Context, p Principal, q api.ProposalQuery) (api.ProposalList, error) {
	if q.Status != "" {
		switch q.Status {
		case domain.ProposalProposed, domain.ProposalRatified, domain.ProposalEnacted, domain.ProposalRejected:
		default:
			return api.ProposalList{}, domain.Validation(domain.FieldError{Field: "status", Message: "must be one of proposed, ratified, enacted, rejected"})
		}
	}
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultProposalPage
	case limit < 1 || limit > MaxProposalPage:
		return api.ProposalList{}, domain.Validation(domain.FieldError{Field: "limit", Message: fmt.Sprintf("must be between 1 and %d", MaxProposalPage)})
	}
	if q.Cursor != nil && *q.Cursor < 0 {
		return api.ProposalList{}, domain.Validation(domain.FieldError{Field: "cursor", Message: "must be the next_cursor of the previous page"})
	}
	sps, err := a.store.Proposals(ctx, store.ProposalFilter{UserID: p.UserID, Status: nonEmpty(q.Status), Subagent: nonEmpty(q.Subagent),
		Before: q.Cursor, Limit: limit})
	if err != nil {
		return api.ProposalList{}, err
	}
	page := api.ProposalList{Count: len(sps), Proposals: make([]api.Proposal, len(sps))}
	for i := range sps {
		page.Proposals[i] = proposalView(sps[i].Proposal)
	}
	if len(sps) == limit {
		next := sps[len(sps)-1].Seq
		page.NextCursor = &next
	}
	return page, nil
}

// nonEmpty is an optional filter: "" is none.
func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// Proposal answers GET /v1/governance/proposals/{proposal_id}.
func (a *App) Proposal(ctx context.Context, p Principal, proposalID string) (api.ProposalResponse, error) {
	sp, err := a.store.ProposalByID(ctx, nil, p.UserID, proposalID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.ProposalResponse{}, errProposalNotFound
	case err != nil:
		return api.ProposalResponse{}, err
	}
	return api.ProposalResponse{Proposal: proposalView(sp.Proposal)}, nil
}

// TransitionProposal applies action (domain.ActionRatify, ActionEnact,
// ActionReject) by the caller to one of the account's proposals. Inside one
// transaction it locks the proposal, applies domain.Transition, stores the
// result with reason, and appends the one chain event domain.EventType names.
// A refused transition rolls back: nothing is stored and no event appended.
// Concurrent transitions of one proposal queue on its lock, so exactly one of
// them moves it out of any state.
func (a *App) TransitionProposal(ctx context.Context, p Principal, proposalID, action string, req api.TransitionRequest) (api.ProposalResponse, error) {
	reason := req.Reason
	var out domain.Proposal
	// An enactment changes the rules the gate obeys; every transition tells
	// the gate's cache, which costs a re-read at most.
	err := a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		sp, err := a.store.ProposalForUpdate(ctx, t.SQL(), p.UserID, proposalID)
		if errors.Is(err, store.ErrNotFound) {
			return errProposalNotFound
		}
		if err != nil {
			return err
		}
		now := a.stamp()
		if action == domain.ActionEnact && sp.Status == domain.ProposalRatified {
			if now, err = a.enactStamp(ctx, t, p.UserID, now); err != nil {
				return err
			}
		}
		from := sp.Status
		next, derr := domain.Transition(sp.Proposal, action, actorOf(p), now)
		if derr != nil {
			return derr
		}
		sp.Proposal = next
		switch action {
		case domain.ActionRatify:
			sp.RatifyReason = reason
		case domain.ActionEnact:
			sp.EnactReason = reason
		case domain.ActionReject:
			sp.RejectReason = reason
		}
		if err := a.store.UpdateProposal(ctx, t.SQL(), &sp); err != nil {
			return err
		}
		raw := transitionRaw(&sp.Proposal, action, from, reason)
		if _, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: domain.EventType(action), Raw: raw}); err != nil {
			return err
		}
		if action == domain.ActionEnact {
			if _, err := a.notify(ctx, t, p.UserID, Notice{Type: domain.NoticeGovernanceEnacted, Subject: proposalSubject(&sp.Proposal)}); err != nil {
				return err
			}
		}
		out = sp.Proposal
		return nil
	})
	if err != nil {
		return api.ProposalResponse{}, err
	}
	metrics.ProposalTransitions.Inc(action)
	return api.ProposalResponse{Proposal: proposalView(out)}, nil
}

// proposalSubject names a proposal in its notices: ids and the rule's
// subject, never the note.
func proposalSubject(pr *domain.Proposal) map[string]any {
	s := map[string]any{"proposal_id": pr.ProposalID, "kind": pr.Kind}
	if pr.Subject.Subagent != "" {
		s["subagent"] = pr.Subject.Subagent
	}
	if pr.Subject.Tool != nil {
		s["tool"] = *pr.Subject.Tool
	}
	return s
}

// enactStamp makes enacted_at strictly increase within an account in chain
// order. The gate lets the most recently enacted applicable rule decide
// (domain.GovernanceDenial), so two enactments must never tie nor, with clocks
// of replicas apart, run backwards: an enactment later in the chain is later
// in enacted_at. The account's chain head is locked first (after the proposal,
// the order every governance transition takes), which serialises enactments
// of one account.
func (a *App) enactStamp(ctx context.Context, t *writer.Tx, userID string, now time.Time) (time.Time, error) {
	if _, err := t.Lock(ctx, userID); err != nil {
		return now, err
	}
	last, err := a.store.LastEnactedAt(ctx, t.SQL(), userID)
	if err != nil {
		return now, err
	}
	if last != nil && !now.After(*last) {
		now = last.Add(time.Microsecond)
	}
	return now, nil
}

// proposedRaw is the raw of governance.proposed: the whole new proposal, so the
// chain alone tells what was proposed, by whom, on what evidence.
func proposedRaw(p *domain.Proposal) map[string]any {
	return map[string]any{
		"proposal_id": p.ProposalID,
		"status":      p.Status,
		"kind":        p.Kind,
		"note":        p.Note,
		"evidence":    p.Evidence,
		"subject":     p.Subject,
		"actor":       p.Proposer,
		"at":          domain.FormatTimestamp(p.ProposedAt),
	}
}

// transitionRaw is the raw of governance.ratified, .enacted and .rejected: the
// move, who made it, when and why, and what the proposal governs, so enacted
// rules can be rebuilt from the chain alone.
func transitionRaw(p *domain.Proposal, action, from string, reason *string) map[string]any {
	var actor *api.Actor
	var at *time.Time
	switch action {
	case domain.ActionRatify:
		actor, at = p.Ratifier, p.RatifiedAt
	case domain.ActionEnact:
		actor, at = p.Enactor, p.EnactedAt
	case domain.ActionReject:
		actor, at = p.Rejector, p.RejectedAt
	}
	m := map[string]any{
		"proposal_id": p.ProposalID,
		"action":      action,
		"from":        from,
		"status":      p.Status,
		"kind":        p.Kind,
		"subject":     p.Subject,
		"actor":       actor,
		"reason":      reason,
	}
	if at != nil {
		m["at"] = domain.FormatTimestamp(*at)
	}
	return m
}
