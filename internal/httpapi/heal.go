package httpapi

// Chain heal routes (SPEC.md "Chain heal", docs/decisions/heal.md): the
// bodies are pkg/api's (each may be absent; dry_run defaults to true).

import (
	"net/http"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/pkg/api"
)

func (s *Server) healScan(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.HealScanRequest](r, s.cfg.MaxBodyBytes, true)
	if err != nil {
		return err
	}
	res, err := s.app.HealScan(r.Context(), principal(r), req.MachineID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) healRun(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.HealRunRequest](r, s.cfg.MaxBodyBytes, true)
	if err != nil {
		return err
	}
	dry := req.DryRun == nil || *req.DryRun
	res, err := s.app.HealRun(r.Context(), principal(r), dry, req.MachineID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) healStatus(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.app.HealStatus(principal(r)))
}

func (s *Server) healAutoStart(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.HealAutoStartRequest](r, s.cfg.MaxBodyBytes, true)
	if err != nil {
		return err
	}
	period := app.DefaultHealPeriod
	if req.PeriodSeconds != nil {
		period = *req.PeriodSeconds
	}
	task, err := s.app.HealAutoStart(r.Context(), principal(r), period)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, task)
}

func (s *Server) healAutoStop(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.app.HealAutoStop(principal(r)))
}
