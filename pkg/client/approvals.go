package client

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md).

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/auditchain/auditchain/pkg/api"
)

// CreateApprovalRule makes calls of a sub-agent and tool (exact names or
// "*") wait for a person's approval (POST /v1/approval-rules).
func (c *Client) CreateApprovalRule(ctx context.Context, req api.CreateApprovalRuleRequest) (*api.ApprovalRule, error) {
	return call[api.ApprovalRule](ctx, c, request{method: http.MethodPost, path: "/v1/approval-rules", body: &req})
}

// ApprovalRules lists the account's rules (GET /v1/approval-rules).
func (c *Client) ApprovalRules(ctx context.Context) (*api.ApprovalRuleList, error) {
	return get[api.ApprovalRuleList](ctx, c, "/v1/approval-rules", nil)
}

// DeleteApprovalRule deletes a rule (DELETE /v1/approval-rules/{rule_id}).
func (c *Client) DeleteApprovalRule(ctx context.Context, ruleID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/approval-rules/" + escape(ruleID)}, nil)
}

// Approvals lists the account's approvals newest first, of one status when
// status is not "" (GET /v1/approvals).
func (c *Client) Approvals(ctx context.Context, status string) (*api.ApprovalList, error) {
	var q url.Values
	if status != "" {
		q = url.Values{"status": {status}}
	}
	return get[api.ApprovalList](ctx, c, "/v1/approvals", q)
}

// Approval reads one approval (GET /v1/approvals/{approval_id}). With
// waitSeconds (1..30) the answer comes once it is no longer pending, or
// after that long.
func (c *Client) Approval(ctx context.Context, approvalID string, waitSeconds int) (*api.Approval, error) {
	var q url.Values
	if waitSeconds > 0 {
		q = url.Values{"wait": {strconv.Itoa(waitSeconds)}}
	}
	return get[api.Approval](ctx, c, "/v1/approvals/"+escape(approvalID), q)
}

// Approve approves a pending call (POST /v1/approvals/{approval_id}/approve).
func (c *Client) Approve(ctx context.Context, approvalID string, note *string) (*api.Approval, error) {
	return call[api.Approval](ctx, c, request{method: http.MethodPost, path: "/v1/approvals/" + escape(approvalID) + "/approve",
		body: &api.ApprovalDecision{Note: note}})
}

// Deny denies a pending call (POST /v1/approvals/{approval_id}/deny).
func (c *Client) Deny(ctx context.Context, approvalID string, note *string) (*api.Approval, error) {
	return call[api.Approval](ctx, c, request{method: http.MethodPost, path: "/v1/approvals/" + escape(approvalID) + "/deny",
		body: &api.ApprovalDecision{Note: note}})
}
