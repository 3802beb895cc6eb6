// Package mcpserver is auditchain's Model Context Protocol surface
// (CONTRACT.md "Agent surfaces"): the service's tools for agents, served over
// stdio by `auditchain mcp` and over streamable HTTP at /v1/mcp, and a proxy
// that puts every tools/call of an upstream MCP server through the gate and
// onto the chain. Every tool is a call of pkg/client, so the capability
// checks, metering and refusals are the HTTP API's own.
package mcpserver

import (
	"context"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Service is what the tools and the proxy need of the service; a
// *client.Client is one.
type Service interface {
	GrantStatus(ctx context.Context, q api.GrantStatusQuery) (*api.GrantStatus, error)
	CreateGrant(ctx context.Context, req api.CreateGrantRequest) (*api.GrantCreated, error)
	UseGrant(ctx context.Context, grantID string, req api.UseRequest) (*api.UseResult, error)
	GateToolCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error)
	RevokeGrant(ctx context.Context, grantID string, req api.RevokeRequest) (*api.RevokeResult, error)
	// AppendNext records ev at the tip as the service numbers it (POST
	// /v1/events/append): what the tools and the proxy record chooses no
	// place, so it goes on whatever sequence a client pushed the tip to.
	AppendNext(ctx context.Context, ev client.Event) (*api.AppendResponse, error)
	Search(ctx context.Context, req api.SearchRequest) (*api.SearchResponse, error)
	Event(ctx context.Context, eventID string) (*api.EventRead, error)
	Tip(ctx context.Context) (*api.ChainTip, error)
	VerifyChain(ctx context.Context) (*api.ChainVerification, error)
	PolicyTest(ctx context.Context, req api.PolicyTestRequest) (*api.PolicyDecision, error)
	Proposals(ctx context.Context, q api.ProposalQuery) (*api.ProposalList, error)
	Propose(ctx context.Context, req api.CreateProposalRequest) (*api.Proposal, error)
	// Approval reads an approval, waiting up to wait while it is pending
	// (GET /v1/approvals/{id}?wait=): the proxy's wait for a held call.
	Approval(ctx context.Context, approvalID string, wait time.Duration) (*api.Approval, error)
}

var _ Service = (*client.Client)(nil)

// Resolver finds the Service a tool call speaks to: over stdio there is one;
// over HTTP it is the caller's, from the request's credential.
type Resolver func(ctx context.Context, extra Extra) (Service, error)

// Extra is what a tool call carries besides its arguments: the HTTP headers
// of a streamable HTTP request (nil over stdio and in memory).
type Extra struct {
	Header map[string][]string
}

// Static resolves every call to svc.
func Static(svc Service) Resolver {
	return func(context.Context, Extra) (Service, error) { return svc, nil }
}
