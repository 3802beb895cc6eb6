package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// Governance routes (SPEC.md "Governance"): proposals, and their ratify, enact
// and reject transitions. The rules live in domain and app; these handlers
// decode, call one use case and answer.

func (s *Server) listProposals(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	query := api.ProposalQuery{Status: q.Get("status"), Subagent: q.Get("subagent")}
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
	return writeJSON(w, http.StatusOK, page)
}

// proposalBody is POST /v1/governance/proposals' body, whose route checks
// its keys (422 validation_error naming each).
type proposalBody api.CreateProposalRequest

func (b *proposalBody) validate() []domain.FieldError {
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
	req, err := decode[proposalBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	p, err := s.app.CreateProposal(r.Context(), principal(r), api.CreateProposalRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, p)
}

func (s *Server) getProposal(w http.ResponseWriter, r *http.Request) error {
	p, err := s.app.Proposal(r.Context(), principal(r), r.PathValue("proposal_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

// transitionProposal makes the handler of one transition route.
func (s *Server) transitionProposal(action string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := decode[api.TransitionRequest](r, s.cfg.MaxBodyBytes, true)
		if err != nil {
			return err
		}
		p, err := s.app.TransitionProposal(r.Context(), principal(r), r.PathValue("proposal_id"), action, body)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, p)
	}
}
