package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

// Sign-in, sessions, the operator's cron routes and the API document.

// RequestOTP mails a one-time sign-in code (POST /v1/auth/otp/request;
// public). A new account's first request carries the acceptances of every
// required legal document. Not resent: each request mails a code.
func (c *Client) RequestOTP(ctx context.Context, req api.OTPRequest) (*api.OTPSent, error) {
	return call[api.OTPSent](ctx, c, request{method: http.MethodPost, path: "/v1/auth/otp/request", body: &req})
}

// VerifyOTP exchanges the code for a session (POST /v1/auth/otp/verify) and
// returns the session's token from its cookie: pass it to WithSession. A
// code is used once, so this is not resent.
func (c *Client) VerifyOTP(ctx context.Context, req api.OTPVerify) (*api.SignedIn, string, error) {
	resp, err := c.open(ctx, request{method: http.MethodPost, path: "/v1/auth/otp/verify", body: &req})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out api.SignedIn
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return nil, "", err
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == api.SessionCookie {
			return &out, ck.Value, nil
		}
	}
	return &out, "", nil
}

// Session reads the signed-in session (GET /v1/auth/session; WithSession).
func (c *Client) Session(ctx context.Context) (*api.Session, error) {
	return get[api.Session](ctx, c, "/v1/auth/session", nil)
}

// Logout ends the signed-in session (POST /v1/auth/logout; WithSession).
func (c *Client) Logout(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodPost, path: "/v1/auth/logout", idempotent: true}, nil)
}

// RunCron runs one operator job (POST /v1/internal/cron/{job}: admin-digest,
// anchor, digest, grant-expiry, key-expiry, webhooks; WithCronSecret) and
// returns its answer as sent: the jobs' reports are operator figures whose
// members SPEC.md lists per job. A lost answer is resent, except for
// admin-digest, which mails the operator at every run: the others do their
// work once per period, grant, key or change.
func (c *Client) RunCron(ctx context.Context, job string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/internal/cron/" + escape(job), idempotent: job != "admin-digest"}, &out)
	return out, err
}

// Jobs reads the scheduler's view of the jobs (GET /v1/internal/jobs;
// WithCronSecret), as sent.
func (c *Client) Jobs(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/internal/jobs", idempotent: true}, &out)
	return out, err
}

// OpenAPI reads the service's OpenAPI document (GET /v1/openapi.json).
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/openapi.json", idempotent: true}, &out)
	return out, err
}
