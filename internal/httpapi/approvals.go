package httpapi

// Per-call approvals (CONTRACT.md "Approvals"; app/approvals.go).

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

func (s *Server) createApprovalRule(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.ApprovalRuleRequest](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	rule, err := s.app.CreateApprovalRule(r.Context(), principal(r), req)
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

// queryBounded reads an optional integer query parameter in lo..hi (0 when
// absent), or answers 422 naming it.
func queryBounded(r *http.Request, name string, lo, hi int) (int, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return 0, nil
	}
	n, err := strconv.Atoi(q.Get(name))
	if err != nil || n < lo || n > hi {
		return 0, domain.Validation(domain.FieldError{Field: name, Message: fmt.Sprintf("must be an integer between %d and %d", lo, hi)})
	}
	return n, nil
}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryBounded(r, "limit", 1, app.MaxApprovalList)
	if err != nil {
		return err
	}
	list, err := s.app.Approvals(r.Context(), principal(r), r.URL.Query().Get("status"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, list)
}

// getApproval is GET /v1/approvals/{approval_id}; with ?wait=N (1..30) a
// pending approval is answered as soon as it is not, or after N seconds.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) error {
	wait, err := queryBounded(r, "wait", 1, api.MaxApprovalWait)
	if err != nil {
		return err
	}
	ap, err := s.app.Approval(r.Context(), principal(r), r.PathValue("approval_id"), time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ap)
}

// decideApproval is POST /v1/approvals/{approval_id}/approve and /deny.
func (s *Server) decideApproval(approve bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := decode[api.ApprovalDecisionRequest](r, s.cfg.MaxBodyBytes, true)
		if err != nil {
			return err
		}
		ap, err := s.app.DecideApproval(r.Context(), principal(r), r.PathValue("approval_id"), approve, body.Note)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, ap)
	}
}
