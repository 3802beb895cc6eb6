package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// formatTimestamp is the service's timestamp form: UTC, microseconds, an
// explicit +00:00 offset.
func formatTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000-07:00") }

// FormatTimestamp formats t as the service writes timestamps.
func FormatTimestamp(t time.Time) string { return formatTimestamp(t) }

// GrantStatus asks the gate (GET /v1/grants/status). A refusal is an answer,
// not an error: check Authorized and Status.
func (c *Client) GrantStatus(ctx context.Context, q api.GrantStatusQuery) (*api.GrantStatus, error) {
	v := url.Values{"subagent": {q.Subagent}}
	if q.Tool != nil {
		v.Set("tool", *q.Tool)
	}
	if q.GrantID != nil {
		v.Set("grant_id", *q.GrantID)
	}
	return call[api.GrantStatus](ctx, c, request{method: "GET", path: "/v1/grants/status", query: v, idempotent: true})
}

// CreateGrant creates a grant (POST /v1/grants). A 403 overreach or a 409
// grant_id_exists is an *Error; a grant_id_exists after a lost answer is
// ErrAnswerLost (the grant was most likely created by the lost attempt).
func (c *Client) CreateGrant(ctx context.Context, req api.CreateGrantRequest) (*api.GrantCreated, error) {
	if req.AllowedTools == nil {
		req.AllowedTools = []string{}
	}
	var out api.GrantCreated
	// Not resent after a lost answer without a grant_id: a resend would make
	// a second grant. With one, a resend the lost attempt had carried out
	// answers 409 grant_id_exists, returned as ErrAnswerLost.
	if err := c.do(ctx, request{method: "POST", path: "/v1/grants", body: &req, idempotent: req.GrantID != nil,
		duplicate: "grant_id_exists"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Grants lists the account's grants, of one sub-agent when subagent is not
// empty (GET /v1/grants).
func (c *Client) Grants(ctx context.Context, subagent string) (*api.GrantList, error) {
	var v url.Values
	if subagent != "" {
		v = url.Values{"subagent": {subagent}}
	}
	return call[api.GrantList](ctx, c, request{method: "GET", path: "/v1/grants", query: v, idempotent: true})
}

// UseGrant meters n tool calls against the grant (POST
// /v1/grants/{grant_id}/use): all of n or nothing (409 budget_exhausted).
// It is not resent after a lost answer, which could meter twice.
func (c *Client) UseGrant(ctx context.Context, grantID string, req api.UseRequest) (*api.UseResult, error) {
	return call[api.UseResult](ctx, c, request{method: "POST", path: "/v1/grants/" + escape(grantID) + "/use", body: &req})
}

// RevokeGrant revokes the grant (POST /v1/grants/{grant_id}/revoke);
// revoking again answers outcome already_revoked, so it is safe to resend.
func (c *Client) RevokeGrant(ctx context.Context, grantID string, req api.RevokeRequest) (*api.RevokeResult, error) {
	return call[api.RevokeResult](ctx, c, request{method: "POST", path: "/v1/grants/" + escape(grantID) + "/revoke", body: &req, idempotent: true})
}

// DelegationPublicKey reads the service identity that signs delegation
// tokens (GET /v1/delegation/public-key; no key needed).
func (c *Client) DelegationPublicKey(ctx context.Context) (*api.DelegationPublicKey, error) {
	return call[api.DelegationPublicKey](ctx, c, request{method: "GET", path: "/v1/delegation/public-key", idempotent: true})
}

// Proposals lists proposals, newest first (GET /v1/governance/proposals).
func (c *Client) Proposals(ctx context.Context, q api.ProposalQuery) (*api.ProposalList, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Subagent != "" {
		v.Set("subagent", q.Subagent)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != nil {
		v.Set("cursor", strconv.FormatInt(*q.Cursor, 10))
	}
	return call[api.ProposalList](ctx, c, request{method: "GET", path: "/v1/governance/proposals", query: v, idempotent: true})
}

// Proposal reads one proposal.
func (c *Client) Proposal(ctx context.Context, id string) (*api.Proposal, error) {
	out, err := call[api.ProposalResponse](ctx, c, request{method: "GET", path: "/v1/governance/proposals/" + escape(id), idempotent: true})
	if err != nil {
		return nil, err
	}
	return &out.Proposal, nil
}

// Propose creates a proposal (POST /v1/governance/proposals); it is not
// resent after a lost answer, which could make two.
func (c *Client) Propose(ctx context.Context, req api.CreateProposalRequest) (*api.Proposal, error) {
	out, err := call[api.ProposalResponse](ctx, c, request{method: "POST", path: "/v1/governance/proposals", body: &req})
	if err != nil {
		return nil, err
	}
	return &out.Proposal, nil
}

// Ratify, Enact and Reject move a proposal on (SPEC.md "Proposal status");
// reason may be nil. The service refuses a ratify by the proposer (409
// separation_of_powers).
func (c *Client) Ratify(ctx context.Context, id string, reason *string) (*api.Proposal, error) {
	return c.transition(ctx, id, "ratify", reason)
}

// Enact enacts a ratified proposal.
func (c *Client) Enact(ctx context.Context, id string, reason *string) (*api.Proposal, error) {
	return c.transition(ctx, id, "enact", reason)
}

// Reject rejects a proposal.
func (c *Client) Reject(ctx context.Context, id string, reason *string) (*api.Proposal, error) {
	return c.transition(ctx, id, "reject", reason)
}

func (c *Client) transition(ctx context.Context, id, action string, reason *string) (*api.Proposal, error) {
	var body any
	if reason != nil {
		body = api.TransitionRequest{Reason: reason}
	}
	out, err := call[api.ProposalResponse](ctx, c, request{method: "POST", path: "/v1/governance/proposals/" + escape(id) + "/" + action, body: body})
	if err != nil {
		return nil, err
	}
	return &out.Proposal, nil
}

// GateToolCall puts one tool call through the gate (POST /v1/tool-calls):
// the gate's check, one use of the matched grant when it authorizes, and a
// tool_call event recording the decision, in one commit. A refusal by the
// gate is a decision in the answer, not an error. The call is resent when
// its answer is lost: the service answers a resent event_id with the stored
// call and meters it once (a nil or empty EventID is given a random one
// first).
// The recorded event becomes the client's chain tip when it is newer, so a
// following Append needs no tip read.
func (c *Client) GateToolCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	if req.EventID == nil || *req.EventID == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		req.EventID = new("evt-" + hex.EncodeToString(b[:]))
	}
	out, err := call[api.ToolCallResponse](ctx, c, request{method: "POST", path: "/v1/tool-calls", body: &req, idempotent: true})
	if err != nil {
		return nil, err
	}
	c.keepTip(out.Event.Event, 1+int64(len(req.Results)))
	return out, nil
}
