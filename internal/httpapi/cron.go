package httpapi

// Operator cron routes (SPEC.md "Operator cron", "Authentication" 4). The
// shared part — X-Cron-Secret compared in constant time, 503
// cron_secret_unconfigured when no secret is configured, 401 unauthorized —
// is checkCronSecret in server.go, applied by the cron access rule of
// routes.go before any handler here runs.

import (
	"context"
	"net/http"
)

// cronAnchor answers POST /v1/internal/cron/anchor. A misconfigured provider
// is reported in the body with 200, like every other outcome of the sweep
// (docs/decisions/anchor.md).
func (s *Server) cronAnchor(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	res, err := s.app.AnchorSweep(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"swept": res})
}

// noBody accepts an absent, empty or null body, or {}, for a route that
// takes none; anything else is refused by the body reader (an unknown key).
func noBody(r *http.Request, max int64) error {
	_, err := decode[struct{}](r, max, true)
	return err
}

// cronJob answers a cron route that runs one job and names its answer
// member (SPEC.md "Operator cron").
func cronJob[T any](s *Server, member string, run func(context.Context) (T, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
			return err
		}
		res, err := run(r.Context())
		if err != nil {
			return err
		}
		if member == "" {
			return writeJSON(w, http.StatusOK, res)
		}
		return writeJSON(w, http.StatusOK, map[string]any{member: res})
	}
}

// jobs answers GET /v1/internal/jobs: each job's cadence, its newest period
// on any replica, and this replica's next and last run.
func (s *Server) jobs(w http.ResponseWriter, r *http.Request) error {
	scheduler, replica, jobs, err := s.app.JobsStatus(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"scheduler": scheduler, "replica": replica, "jobs": jobs})
}
