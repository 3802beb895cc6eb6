package httpapi

import (
	"fmt"
	"github.com/auditchain/auditchain/pkg/api"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
)

// Governance routes (SPEC.md "Governance"): proposals, and their ratify, enact
// and reject transitions. The rules live in domain and app; these handlers
// decode, call one use case and answer.

// toProposalJSON is SPEC.md's Proposal with timestamps in the spec's form.
func toProposalJSON(p domain.Proposal) api.Proposal {
	return api.Proposal{
		ProposalID: p.ProposalID, Status: p.Status, Kind: p.Kind, Note: p.Note, Evidence: p.Evidence, Subject: p.Subject,
		ProposedAt: domain.FormatTimestamp(p.ProposedAt), Proposer: p.Proposer,
		RatifiedAt: formatOpt(p.RatifiedAt), Ratifier: p.Ratifier,
		EnactedAt: formatOpt(p.EnactedAt), Enactor: p.Enactor,
		RejectedAt: formatOpt(p.RejectedAt), Rejector: p.Rejector,
	}
}

func (s *Server) listProposals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	query := app.ProposalQuery{Status: nonEmpty(q.Get("status")), Subagent: nonEmpty(q.Get("subagent"))}
	for _, p := range []struct {
		name string
		set  func(int64)
	}{
		{"limit", func(n int64) { query.Limit = int(min(n, app.MaxProposalPage+1)) }},
		{"cursor", func(n int64) { query.Cursor = &n }},
	} {
		if !q.Has(p.name) {
			continue
		}
		n, err := strconv.ParseInt(q.Get(p.name), 10, 64)
		if err != nil || n < 0 {
			return domain.Validation(domain.FieldError{Field: p.name, Message: "must be a non-negative integer"})
		}
		if p.name == "limit" && n == 0 {
			return domain.Validation(domain.FieldError{Field: "limit", Message: fmt.Sprintf("must be between 1 and %d", app.MaxProposalPage)})
		}
		p.set(n)
	}
	page, err := s.app.Proposals(r.Context(), principal(r), query)
	if err != nil {
		return err
	}
	out := make([]api.Proposal, len(page.Proposals))
	for i, p := range page.Proposals {
		out[i] = toProposalJSON(p)
	}
	return writeJSON(w, http.StatusOK, api.ProposalList{Count: len(out), Proposals: out, NextCursor: page.NextCursor})
}

// createProposalRequest is the body of POST /v1/governance/proposals.
type createProposalRequest struct {
	Evidence *struct {
		BlockedAttempts *int `json:"blocked_attempts"`
		// Threshold is accepted and ignored: the configured threshold decides
		// and is what the proposal records.
		Threshold *int `json:"threshold"`
	} `json:"evidence"`
	Kind    *string `json:"kind" max:"name"`
	Note    *string `json:"note" max:"note"`
	Subject *struct {
		Subagent *string `json:"subagent" max:"name"`
		Tool     *string `json:"tool" max:"name"`
		// Scope is a synonym of tool (SPEC.md), stored as tool.
		Scope *string `json:"scope" max:"name"`
	} `json:"subject"`
}

func (b *createProposalRequest) validate() []domain.FieldError {
	var errs []domain.FieldError
	if b.Evidence == nil {
		errs = append(errs, domain.FieldError{Field: "evidence", Message: "required: an object with blocked_attempts"})
	} else if b.Evidence.BlockedAttempts == nil {
		errs = append(errs, domain.FieldError{Field: "evidence.blocked_attempts", Message: "required: an integer"})
	}
	if b.Kind == nil {
		errs = append(errs, domain.FieldError{Field: "kind", Message: "required: one of deny_scope, allow_scope, policy_note"})
	}
	if b.Subject == nil {
		errs = append(errs, domain.FieldError{Field: "subject", Message: "required: an object with subagent"})
		return errs
	}
	if b.Subject.Subagent == nil || strings.TrimSpace(*b.Subject.Subagent) == "" {
		errs = append(errs, domain.FieldError{Field: "subject.subagent", Message: "required: the exact sub-agent name, not blank"})
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"subject.tool", b.Subject.Tool}, {"subject.scope", b.Subject.Scope}} {
		if f.v != nil && strings.TrimSpace(*f.v) == "" {
			errs = append(errs, domain.FieldError{Field: f.name, Message: "must not be blank; null means the whole sub-agent"})
		}
	}
	if b.Subject.Tool != nil && b.Subject.Scope != nil && *b.Subject.Tool != *b.Subject.Scope {
		errs = append(errs, domain.FieldError{Field: "subject.scope", Message: "is a synonym of subject.tool; when both are given they must be equal"})
	}
	return errs
}

func (s *Server) createProposal(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[createProposalRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	tool := req.Subject.Tool
	if tool == nil {
		tool = req.Subject.Scope
	}
	p, err := s.app.CreateProposal(r.Context(), principal(r), app.NewProposal{
		Kind: *req.Kind, Note: req.Note, BlockedAttempts: *req.Evidence.BlockedAttempts,
		Subagent: *req.Subject.Subagent, Tool: tool,
	})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.ProposalResponse{Proposal: toProposalJSON(p)})
}

func (s *Server) getProposal(w http.ResponseWriter, r *http.Request) error {
	p, err := s.app.Proposal(r.Context(), principal(r), r.PathValue("proposal_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.ProposalResponse{Proposal: toProposalJSON(p)})
}

// transitionBody is SPEC.md's TransitionBody; the whole body may be absent or null.
type transitionBody struct {
	Reason *string `json:"reason" max:"reason"`
}

// transitionProposal makes the handler of one transition route.
func (s *Server) transitionProposal(action string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := decode[transitionBody](r, s.app.Cfg.MaxBodyBytes, true)
		if err != nil {
			return err
		}
		p, err := s.app.TransitionProposal(r.Context(), principal(r), r.PathValue("proposal_id"), action, body.Reason)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, api.ProposalResponse{Proposal: toProposalJSON(p)})
	}
}

func formatOpt(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := domain.FormatTimestamp(*t)
	return &s
}

// nonEmpty is a query parameter as an optional filter: absent or empty is no filter.
func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
