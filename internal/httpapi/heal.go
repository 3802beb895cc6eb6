package httpapi

// Chain heal routes (SPEC.md "Chain heal", docs/decisions/heal.md).

import (
	"net/http"

	"github.com/auditchain/auditchain/internal/app"
)

// healScanRequest is the body of POST /v1/heal/scan; the body may be absent.
type healScanRequest struct {
	MachineID *string `json:"machine_id" max:"name"`
}

// healRunRequest is the body of POST /v1/heal/run; dry_run defaults to true.
type healRunRequest struct {
	DryRun    *bool   `json:"dry_run"`
	MachineID *string `json:"machine_id" max:"name"`
}

// healAutoStartRequest is the body of POST /v1/heal/auto/start.
type healAutoStartRequest struct {
	PeriodSeconds *int `json:"period_seconds"`
}

func (s *Server) healScan(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[healScanRequest](r, s.app.Cfg.MaxBodyBytes, true)
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
	req, err := decode[healRunRequest](r, s.app.Cfg.MaxBodyBytes, true)
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
	req, err := decode[healAutoStartRequest](r, s.app.Cfg.MaxBodyBytes, true)
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
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.app.HealAutoStop(principal(r)))
}
