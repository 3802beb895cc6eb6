package client

import (
	"context"
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

// Credentials, machines, the dedup probe and health.

// Health reads GET /v1/health (no key needed).
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	return get[api.Health](ctx, c, "/v1/health", nil)
}

// CreateKey creates an API key (POST /v1/keys; an unscoped key only). The
// token is in the answer's APIKey and never shown again. It is not resent
// after a lost answer, which could make two keys.
func (c *Client) CreateKey(ctx context.Context, req api.CreateKeyRequest) (*api.KeyCreated, error) {
	return call[api.KeyCreated](ctx, c, request{method: http.MethodPost, path: "/v1/keys", body: &req})
}

// Keys lists the account's keys, newest first (GET /v1/keys).
func (c *Client) Keys(ctx context.Context) (*api.KeyList, error) {
	return get[api.KeyList](ctx, c, "/v1/keys", nil)
}

// RevokeKey revokes a key (POST /v1/keys/{key_id}/revoke); revoking again
// keeps the first time, so it is safe to resend.
func (c *Client) RevokeKey(ctx context.Context, keyID string) (*api.Key, error) {
	out, err := call[api.KeyRevoked](ctx, c, request{method: http.MethodPost, path: "/v1/keys/" + escape(keyID) + "/revoke", idempotent: true})
	if err != nil {
		return nil, err
	}
	return &out.Key, nil
}

// Machines lists the account's machines and their keys' fingerprints (GET
// /v1/machines).
func (c *Client) Machines(ctx context.Context) (*api.MachineList, error) {
	return get[api.MachineList](ctx, c, "/v1/machines", nil)
}

// PolicyTest asks what the dedup gate would decide for a call, writing
// nothing (POST /v1/policy/test).
func (c *Client) PolicyTest(ctx context.Context, req api.PolicyTestRequest) (*api.PolicyDecision, error) {
	return call[api.PolicyDecision](ctx, c, request{method: http.MethodPost, path: "/v1/policy/test", body: &req, idempotent: true})
}
