package client

import (
	"context"
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

// Chain heal (SPEC.md "Chain heal"). A real heal run appends chain_repair
// events at the tip; the next Append follows them (it is refused once with
// the new tip and retried).

// HealScan scans the account's chain for breaks, gaps and signature
// failures, changing nothing (POST /v1/heal/scan).
func (c *Client) HealScan(ctx context.Context, req api.HealScanRequest) (*api.HealScan, error) {
	return call[api.HealScan](ctx, c, request{method: http.MethodPost, path: "/v1/heal/scan", body: &req, idempotent: true})
}

// HealRun answers each finding with a chain_repair event, or only counts
// them when DryRun is nil or true (POST /v1/heal/run). A finding already
// answered is skipped, so a run whose answer was lost is resent safely.
func (c *Client) HealRun(ctx context.Context, req api.HealRunRequest) (*api.HealRun, error) {
	return call[api.HealRun](ctx, c, request{method: http.MethodPost, path: "/v1/heal/run", body: &req, idempotent: true})
}

// HealStatus reads this service process's last scan and repair (GET
// /v1/heal/status).
func (c *Client) HealStatus(ctx context.Context) (*api.HealStatus, error) {
	return get[api.HealStatus](ctx, c, "/v1/heal/status", nil)
}

// HealAutoStart starts (or keeps) the periodic scan (POST
// /v1/heal/auto/start); the same period again is the same task.
func (c *Client) HealAutoStart(ctx context.Context, req api.HealAutoStartRequest) (*api.HealAutoTask, error) {
	return call[api.HealAutoTask](ctx, c, request{method: http.MethodPost, path: "/v1/heal/auto/start", body: &req, idempotent: true})
}

// HealAutoStop stops the periodic scan (POST /v1/heal/auto/stop); Stopped
// is false when none ran.
func (c *Client) HealAutoStop(ctx context.Context) (*api.HealAutoStop, error) {
	return call[api.HealAutoStop](ctx, c, request{method: http.MethodPost, path: "/v1/heal/auto/stop", idempotent: true})
}
