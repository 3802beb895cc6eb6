package domain

import (
	"strings"
	"testing"
)

func TestTeamRules(t *testing.T) {
	for _, tc := range []struct {
		role            string
		invite, removes bool // removes: may remove another's row
	}{
		{RoleOwner, true, true},
		{RoleMember, false, false},
		{RoleViewer, false, false},
	} {
		if got := CanInvite(tc.role); got != tc.invite {
			t.Errorf("CanInvite(%s) = %v", tc.role, got)
		}
		if got := CanRemove(tc.role, false); got != tc.removes {
			t.Errorf("CanRemove(%s, other) = %v", tc.role, got)
		}
		if !CanRemove(tc.role, true) {
			t.Errorf("a %s cannot leave", tc.role)
		}
		if !ValidRole(tc.role) {
			t.Errorf("ValidRole(%s) = false", tc.role)
		}
	}
	for _, r := range []string{"", "admin", "Owner", "owners"} {
		if ValidRole(r) {
			t.Errorf("ValidRole(%q) = true", r)
		}
	}
}

// A team never loses its last owner: only an active owner's removal counts.
func TestRemovalLeavesOwner(t *testing.T) {
	for _, tc := range []struct {
		role, status string
		owners       int
		want         bool
	}{
		{RoleOwner, MemberActive, 1, false},
		{RoleOwner, MemberActive, 2, true},
		{RoleOwner, MemberInvited, 1, true}, // withdrawing an owner's invitation
		{RoleMember, MemberActive, 1, true},
		{RoleViewer, MemberActive, 1, true},
	} {
		if got := RemovalLeavesOwner(tc.role, tc.status, tc.owners); got != tc.want {
			t.Errorf("RemovalLeavesOwner(%s, %s, %d) = %v", tc.role, tc.status, tc.owners, got)
		}
	}
}

func TestOrgIDsAndTeamNames(t *testing.T) {
	for id, want := range map[string]bool{
		"org-0123456789abcdef0123456789abcdef":  true,
		"org-0123456789ABCDEF0123456789abcdef":  false,
		"org-0123456789abcdef0123456789abcde":   false,
		"org-0123456789abcdef0123456789abcdef0": false,
		"0123456789abcdef0123456789abcdef":      false,
		"org-\x00":                              false,
	} {
		if ValidOrgID(id) != want {
			t.Errorf("ValidOrgID(%q) = %v", id, !want)
		}
	}
	for name, ok := range map[string]bool{
		"Platform":               true,
		"Équipe données":         true,
		"":                       false,
		" \t":                    false,
		strings.Repeat("n", 200): true,
		strings.Repeat("n", 201): false,
		"two\nlines":             false,
		"nul\x00":                false,
		"bad \xff utf-8":         false,
	} {
		if (CheckTeamName(name) == "") != ok {
			t.Errorf("CheckTeamName(%q) = %q", name, CheckTeamName(name))
		}
	}
}
