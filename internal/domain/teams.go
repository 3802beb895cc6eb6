package domain

// Teams (SPEC.md "Teams", "Team member status"; CONTRACT.md "Teams";
// docs/decisions/teams.md): who may do what in a team, and what a removal
// may not leave behind. Pure: the app reads the team under its lock and asks
// these rules.

import (
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Team roles (SPEC.md "Team member").
const (
	RoleOwner  = "owner"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// Team member statuses (SPEC.md "Team member status").
const (
	MemberInvited = "invited"
	MemberActive  = "active"
)

// Team rules where SPEC.md is silent (docs/decisions/teams.md).
const (
	// InvitationLifetime is how long an invitation can be accepted.
	InvitationLifetime = 7 * 24 * time.Hour
	// MaxPendingInvitations bounds a team's live invitations, and with them
	// the mail one owner can make the service send.
	MaxPendingInvitations = 100
	// MaxOwnedTeams bounds the teams one account owns when it creates one.
	MaxOwnedTeams = 100
	// MaxTeamNameBytes bounds a team's name.
	MaxTeamNameBytes = 200
)

// Codes of the team routes (SPEC.md "Errors" gives their statuses; the
// codes are ours).
const (
	CodeFeatureDisabled    = "feature_disabled"
	CodeOrgNotFound        = "org_not_found"
	CodeInvitationNotFound = "invitation_not_found"
	CodeMemberNotFound     = "member_not_found"
	CodeOwnerRequired      = "owner_required"
	CodeAlreadyMember      = "already_member"
	CodeAlreadyInvited     = "already_invited"
	CodeLastOwner          = "last_owner"
	CodeTooManyInvitations = "too_many_invitations"
	CodeTooManyOrgs        = "too_many_orgs"
)

// OrgIDPrefix and OrgIDBytes make an org id: org-<hex> (SPEC.md) of 128
// random bits, so ids are not guessable.
const (
	OrgIDPrefix = "org-"
	OrgIDBytes  = 16
)

// Compiled on first use (package initialisation is paid by every process start).
var orgIDForm = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^org-[0-9a-f]{32}$`) })

// ValidOrgID reports whether id has the form of an org id; an id that
// cannot exist is answered like a missing one without asking the store.
func ValidOrgID(id string) bool { return orgIDForm().MatchString(id) }

// ValidRole reports whether role is one a member can hold.
func ValidRole(role string) bool {
	return role == RoleOwner || role == RoleMember || role == RoleViewer
}

// CanInvite reports whether a member of role may invite (CONTRACT.md: the
// owner invites; member and viewer read).
func CanInvite(role string) bool { return role == RoleOwner }

// CanRemove reports whether a member of role may remove the member row of
// target: an owner removes anyone (an invitation included: that is its
// withdrawal), and anyone may leave.
func CanRemove(role string, self bool) bool { return role == RoleOwner || self }

// RemovalLeavesOwner reports whether removing a member of targetRole and
// targetStatus leaves the team an owner, given its active owners now: a
// team never loses its last owner.
func RemovalLeavesOwner(targetRole, targetStatus string, activeOwners int) bool {
	if targetRole != RoleOwner || targetStatus != MemberActive {
		return true
	}
	return activeOwners > 1
}

// CheckTeamName returns why name cannot name a team, or "" when it can.
func CheckTeamName(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "required, not blank"
	case len(name) > MaxTeamNameBytes:
		return "at most 200 bytes"
	case !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\r\n"):
		return "one line of UTF-8 text"
	}
	return ""
}
