package httpapi

// Operator cron routes (SPEC.md "Operator cron", "Authentication" 4). The
// shared part — X-Cron-Secret compared in constant time, 503
// cron_secret_unconfigured when no secret is configured, 401 unauthorized —
// is checkCronSecret in server.go, applied by the cron access rule of
// routes.go before any handler here runs.

import (
	"context"
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

// noBody accepts an absent, empty or null body, or {}, for a route that
// takes none; anything else is refused by the body reader (an unknown key).
func noBody(r *http.Request, max int64) error {
	_, err := decode[struct{}](r, max, true)
	return err
}

// cronJob answers a cron route that runs one job and answers what it did
// (SPEC.md "Operator cron"). Whatever the job reports, a misconfigured
// anchor provider included, is a 200 (docs/decisions/anchor.md).
func cronJob[T any](s *Server, run func(context.Context) (T, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
			return err
		}
		res, err := run(r.Context())
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, res)
	}
}

// swept is a sweep job whose answer names its counts "swept".
func swept[T any](run func(context.Context) (T, error)) func(context.Context) (api.Swept[T], error) {
	return func(ctx context.Context) (api.Swept[T], error) {
		res, err := run(ctx)
		return api.Swept[T]{Swept: res}, err
	}
}

// drained is the webhooks job, whose answer names its counts "webhooks".
func drained(run func(context.Context) (api.DrainCounts, error)) func(context.Context) (api.WebhookDrain, error) {
	return func(ctx context.Context) (api.WebhookDrain, error) {
		res, err := run(ctx)
		return api.WebhookDrain{Webhooks: res}, err
	}
}

// jobs answers GET /v1/internal/jobs: each job's cadence, its newest period
// on any replica, and this replica's next and last run.
func (s *Server) jobs(w http.ResponseWriter, r *http.Request) error {
	st, err := s.app.JobsStatus(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}
