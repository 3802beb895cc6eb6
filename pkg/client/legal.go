package client

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

// Legal agreements and teams.

// LegalDocuments lists the served documents (public).
func (c *Client) LegalDocuments(ctx context.Context) (*api.LegalDocuments, error) {
	return get[api.LegalDocuments](ctx, c, "/v1/legal/documents", nil)
}

// LegalText reads a document's text with its version and content hash.
func (c *Client) LegalText(ctx context.Context, documentID string) (*api.LegalText, error) {
	resp, err := c.open(ctx, request{method: http.MethodGet, path: "/v1/legal/documents/" + escape(documentID) + "/text", idempotent: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("client: legal text: %w", err)
	}
	return &api.LegalText{Text: string(b), Version: resp.Header.Get("X-Document-Version"),
		ContentHash: resp.Header.Get("X-Document-Content-Hash")}, nil
}

// AcceptLegal records the caller's acceptance of a document's current
// version (POST /v1/legal/accept); accepting again answers the first record.
// It needs a signed-in session (WithSession): an API key gets 403
// session_required.
func (c *Client) AcceptLegal(ctx context.Context, req api.AcceptRequest) (*api.AcceptResult, error) {
	return call[api.AcceptResult](ctx, c, request{method: http.MethodPost, path: "/v1/legal/accept", body: &req, idempotent: true})
}

// Acceptances reads the caller's acceptances.
func (c *Client) Acceptances(ctx context.Context) (*api.Acceptances, error) {
	return get[api.Acceptances](ctx, c, "/v1/legal/acceptances", nil)
}

// Teams lists the caller's teams (GET /v1/orgs; the service needs --teams).
func (c *Client) Teams(ctx context.Context) (*api.TeamList, error) {
	return get[api.TeamList](ctx, c, "/v1/orgs", nil)
}

// CreateTeam creates a team owned by the caller (POST /v1/orgs).
func (c *Client) CreateTeam(ctx context.Context, name string) (*api.Team, error) {
	out, err := call[api.TeamCreated](ctx, c, request{method: http.MethodPost, path: "/v1/orgs", body: api.CreateTeamRequest{Name: &name}})
	if err != nil {
		return nil, err
	}
	return &out.Org, nil
}

// Team reads a team the caller belongs to.
func (c *Client) Team(ctx context.Context, orgID string) (*api.TeamDetail, error) {
	return get[api.TeamDetail](ctx, c, "/v1/orgs/"+escape(orgID), nil)
}

// Invite invites email to the team with role (owner, member, viewer).
func (c *Client) Invite(ctx context.Context, orgID, email, role string) (*api.TeamMember, error) {
	out, err := call[api.TeamMemberResponse](ctx, c, request{method: http.MethodPost, path: "/v1/orgs/" + escape(orgID) + "/invite",
		body: api.InviteRequest{Email: &email, Role: &role}})
	if err != nil {
		return nil, err
	}
	return &out.Member, nil
}

// AcceptInvitation accepts the caller's invitation to the team.
func (c *Client) AcceptInvitation(ctx context.Context, orgID string) (*api.TeamMember, error) {
	out, err := call[api.TeamMemberResponse](ctx, c, request{method: http.MethodPost, path: "/v1/orgs/" + escape(orgID) + "/accept"})
	if err != nil {
		return nil, err
	}
	return &out.Member, nil
}

// TeamMembers lists the team's members and invitations.
func (c *Client) TeamMembers(ctx context.Context, orgID string) (*api.TeamMembers, error) {
	return get[api.TeamMembers](ctx, c, "/v1/orgs/"+escape(orgID)+"/members", nil)
}

// TeamKeys lists the metadata of the team members' keys.
func (c *Client) TeamKeys(ctx context.Context, orgID string) (*api.TeamKeys, error) {
	return get[api.TeamKeys](ctx, c, "/v1/orgs/"+escape(orgID)+"/keys", nil)
}

// RemoveTeamMember withdraws an invitation, removes a member, or (the
// caller's own email) leaves the team.
func (c *Client) RemoveTeamMember(ctx context.Context, orgID, email string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/orgs/" + escape(orgID) + "/members/" + escape(email)}, nil)
}
