package client

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md).

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// CreateApprovalRule holds sub-agent's authorized calls of tool for a
// person's approval (POST /v1/approval-rules). Not resent after a lost
// answer, which would make a second rule.
func (c *Client) CreateApprovalRule(ctx context.Context, req api.ApprovalRuleRequest) (*api.ApprovalRule, error) {
	return call[api.ApprovalRule](ctx, c, request{method: http.MethodPost, path: "/v1/approval-rules", body: &req})
}

// ApprovalRules lists the account's rules, oldest first.
func (c *Client) ApprovalRules(ctx context.Context) (*api.ApprovalRuleList, error) {
	return get[api.ApprovalRuleList](ctx, c, "/v1/approval-rules", nil)
}

// DeleteApprovalRule deletes a rule (DELETE /v1/approval-rules/{rule_id}).
func (c *Client) DeleteApprovalRule(ctx context.Context, ruleID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/approval-rules/" + escape(ruleID)}, nil)
}

// Approvals lists the account's approvals newest first, of one status
// ("" for every one), at most limit (0: the service's default).
func (c *Client) Approvals(ctx context.Context, status string, limit int) (*api.ApprovalList, error) {
	v := url.Values{}
	if status != "" {
		v.Set("status", status)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return get[api.ApprovalList](ctx, c, "/v1/approvals", v)
}

// Approval reads one approval. With wait > 0 (whole seconds, at most
// api.MaxApprovalWait) the service answers as soon as it is no longer
// pending, or once wait has passed.
func (c *Client) Approval(ctx context.Context, approvalID string, wait time.Duration) (*api.Approval, error) {
	var v url.Values
	if s := int(wait / time.Second); s > 0 {
		v = url.Values{"wait": {strconv.Itoa(min(s, api.MaxApprovalWait))}}
	}
	return get[api.Approval](ctx, c, "/v1/approvals/"+escape(approvalID), v)
}

// Approve approves a pending approval (POST
// /v1/approvals/{approval_id}/approve); 409 separation_of_powers when this
// client's credential made the call, 409 approval_not_pending once it is
// not pending. Not resent after a lost answer: read the approval instead.
func (c *Client) Approve(ctx context.Context, approvalID string, note *string) (*api.Approval, error) {
	return c.decide(ctx, approvalID, "approve", note)
}

// Deny denies a pending approval (POST /v1/approvals/{approval_id}/deny),
// with Approve's refusals.
func (c *Client) Deny(ctx context.Context, approvalID string, note *string) (*api.Approval, error) {
	return c.decide(ctx, approvalID, "deny", note)
}

func (c *Client) decide(ctx context.Context, approvalID, verb string, note *string) (*api.Approval, error) {
	return call[api.Approval](ctx, c, request{method: http.MethodPost, path: "/v1/approvals/" + escape(approvalID) + "/" + verb,
		body: &api.ApprovalDecisionRequest{Note: note}})
}
