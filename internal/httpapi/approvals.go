package httpapi

// Per-call approvals (CONTRACT.md "Approvals"; app/approvals.go).

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// approvalRuleBody is the body of POST /v1/approval-rules.
type approvalRuleBody api.CreateApprovalRuleRequest

func (b *approvalRuleBody) validate() []domain.FieldError {
	var errs []domain.FieldError
	if b.Subagent == nil {
		errs = append(errs, domain.FieldError{Field: "subagent", Message: `required: the sub-agent's exact name, or "*"`})
	}
	if b.Tool == nil {
		errs = append(errs, domain.FieldError{Field: "tool", Message: `required: the tool's exact name, or "*"`})
	}
	return errs
}

func (s *Server) createApprovalRule(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[approvalRuleBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	rule, err := s.app.CreateApprovalRule(r.Context(), principal(r), api.CreateApprovalRuleRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, rule)
}

func (s *Server) listApprovalRules(w http.ResponseWriter, r *http.Request) error {
	rules, err := s.app.ApprovalRules(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rules)
}

func (s *Server) deleteApprovalRule(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	if err := s.app.DeleteApprovalRule(r.Context(), principal(r), r.PathValue("rule_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	var status string
	if v := optionalQuery(r, "status"); v != nil {
		status = *v
	}
	list, err := s.app.ListApprovals(r.Context(), principal(r), status)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, list)
}

// getApproval is GET /v1/approvals/{approval_id}, with ?wait=1..30 a
// long-poll that holds no database connection while it waits.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) error {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" || r.URL.Query().Has("wait") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > app.MaxApprovalWait {
			return malformedQuery("wait", "must be a whole number of seconds, 1..30")
		}
		wait = time.Duration(n) * time.Second
	}
	// The route is not cut at --request-timeout (unboundedRoutes): the wait
	// holds no database connection, and each read is short.
	ctx, cancel := context.WithTimeout(r.Context(), wait+s.cfg.RequestTimeout)
	defer cancel()
	ap, err := s.app.GetApproval(ctx, principal(r), r.PathValue("approval_id"), wait)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ap)
}

// decideApproval is POST /v1/approvals/{approval_id}/approve (approve) or
// /deny.
func (s *Server) decideApproval(approve bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, err := decode[api.ApprovalDecision](r, s.cfg.MaxBodyBytes, true)
		if err != nil {
			return err
		}
		ap, err := s.app.DecideApproval(r.Context(), principal(r), r.PathValue("approval_id"), approve, req.Note)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, ap)
	}
}
