package domain

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is a capability a limited key may hold (SPEC.md "Authentication" 2).
type Scope string

const (
	ScopeGovernance    Scope = "governance"
	ScopeGrants        Scope = "grants"
	ScopeNotifications Scope = "notifications"
	ScopeEventsWrite   Scope = "events:write"
	ScopeEventsRead    Scope = "events:read"
	ScopeOrgs          Scope = "orgs"
	// ScopeApprovals approves and denies per-call approvals (CONTRACT.md
	// "Approvals"); an unscoped key and a session hold it.
	ScopeApprovals Scope = "approvals"
)

// AllScopes lists every scope a key can be limited to.
var AllScopes = []Scope{ScopeGovernance, ScopeGrants, ScopeNotifications, ScopeEventsWrite, ScopeEventsRead, ScopeOrgs, ScopeApprovals}

// ParseScopes validates a list of scope names; an empty list is an unscoped key.
// Duplicates are folded so a stored key never lists a scope twice.
func ParseScopes(names []string) ([]Scope, error) {
	out := make([]Scope, 0, len(names))
	for _, n := range names {
		n = strings.TrimSpace(n)
		s := Scope(n)
		if !slices.Contains(AllScopes, s) {
			return nil, fmt.Errorf("unknown scope %q (known: governance, grants, notifications, events:write, events:read, orgs, approvals)", n)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Allows reports whether a key holding scopes may use capability c.
// A key with no scopes is unscoped and holds every capability (CONTRACT.md "Credentials").
func Allows(scopes []Scope, c Scope) bool {
	return len(scopes) == 0 || slices.Contains(scopes, c)
}
