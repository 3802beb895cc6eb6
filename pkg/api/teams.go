package api

// Teams (SPEC.md "Team (org)", "Team member", "Team key metadata" and the
// Teams routes).

// Team is an org as one of its members sees it.
type Team struct {
	OrgID       string `json:"org_id"`
	Name        string `json:"name"`
	OwnerUserID string `json:"owner_user_id"`
	CreatedAt   string `json:"created_at"`
	// Role is the caller's: owner, member or viewer.
	Role string `json:"role"`
}

// TeamMember is an active member or an invitation (status invited, UserID
// null until accepted).
type TeamMember struct {
	OrgID     string  `json:"org_id"`
	UserID    *string `json:"user_id"`
	Email     string  `json:"email"`
	Role      string  `json:"role"`
	Status    string  `json:"status"`
	CreatedAt string  `json:"created_at"`
}

// TeamKey is the metadata of a member's API key, as GET /v1/keys shows
// its own; the token never appears.
type TeamKey = Key

// CreateTeamRequest is the body of POST /v1/orgs.
type CreateTeamRequest struct {
	Name *string `json:"name"` // at most 200 bytes (the team rules)
}

// InviteRequest is the body of POST /v1/orgs/{org_id}/invite.
type InviteRequest struct {
	Email *string `json:"email" max:"name"`
	Role  *string `json:"role" max:"name"`
}

// TeamList answers GET /v1/orgs.
type TeamList struct {
	Orgs []Team `json:"orgs"`
}

// TeamCreated answers POST /v1/orgs.
type TeamCreated struct {
	Org Team `json:"org"`
}

// TeamDetail answers GET /v1/orgs/{org_id}: member_count counts active
// members, invited_count live invitations.
type TeamDetail struct {
	Org          Team `json:"org"`
	MemberCount  int  `json:"member_count"`
	InvitedCount int  `json:"invited_count"`
}

// TeamMemberResponse answers invite (status invited) and accept (status
// active).
type TeamMemberResponse struct {
	Member TeamMember `json:"member"`
}

// TeamMembers answers GET /v1/orgs/{org_id}/members.
type TeamMembers struct {
	OrgID   string       `json:"org_id"`
	Members []TeamMember `json:"members"`
}

// TeamKeys answers GET /v1/orgs/{org_id}/keys.
type TeamKeys struct {
	OrgID string    `json:"org_id"`
	Keys  []TeamKey `json:"keys"`
}
