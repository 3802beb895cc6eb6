package api

import "encoding/json"

// The gate (SPEC.md "Grant record", "Grant status (gate answer)", the Grants
// routes; CONTRACT.md "Delegation tokens").

// GrantRecord is a grant as every response, the chain event and the
// delegation token show it.
type GrantRecord struct {
	GrantID      string     `json:"grant_id"`
	Subagent     string     `json:"subagent"`
	ParentAgent  *string    `json:"parent_agent"`
	AllowedTools []string   `json:"allowed_tools"`
	MaxToolCalls int64      `json:"max_tool_calls"`
	ExpiresAt    string     `json:"expires_at"`
	CreatedAt    string     `json:"created_at"`
	Action       string     `json:"action"` // granted
	Epoch        EpochStamp `json:"epoch"`
}

// GrantStatus is the gate's answer (GET /v1/grants/status): Status is
// authorized, or why not (no_grant, expired, revoked, budget_exhausted,
// tool_not_allowed, denied_by_governance, …). The matched grant's record
// fields are present only when a grant matched; ProposalID names the
// enacted rule behind denied_by_governance.
type GrantStatus struct {
	Status     string `json:"status"`
	Authorized bool   `json:"authorized"`
	Reason     string `json:"reason"`
	Subagent   string `json:"subagent"`
	*GrantRecord
	Uses       int64  `json:"uses"`
	Remaining  int64  `json:"remaining"`
	ProposalID string `json:"proposal_id,omitempty"`
}

// GrantStatusQuery is the query of GET /v1/grants/status.
type GrantStatusQuery struct {
	Subagent string  // required, exact
	Tool     *string // nil: any tool
	GrantID  *string // nil: the most recent live grant of the sub-agent
}

// CreateGrantRequest is the body of POST /v1/grants: Subagent, ExpiresAt
// and MaxToolCalls are required (nil is absent; 0 is a budget), names and
// tools are capped by the gate's rules.
type CreateGrantRequest struct {
	Subagent     *string  `json:"subagent"`
	ExpiresAt    *string  `json:"expires_at" max:"name"` // ISO-8601 with a UTC offset
	MaxToolCalls *int64   `json:"max_tool_calls"`
	AllowedTools []string `json:"allowed_tools"`
	GrantID      *string  `json:"grant_id,omitempty" max:"name"`
	ParentAgent  *string  `json:"parent_agent,omitempty"`
}

// GrantCreated answers POST /v1/grants (201): the record, the gate's answer
// for it, and the delegation token (verifiable offline with pkg/verify).
type GrantCreated struct {
	Grant      GrantRecord     `json:"grant"`
	Status     GrantStatus     `json:"status"`
	Delegation json.RawMessage `json:"delegation"`
}

// ListedGrant is one grant of GET /v1/grants.
type ListedGrant struct {
	GrantRecord
	State       string  `json:"state"`
	StateReason string  `json:"state_reason"`
	Uses        int64   `json:"uses"`
	Remaining   int64   `json:"remaining"`
	RevokedAt   *string `json:"revoked_at"`
}

// GrantList answers GET /v1/grants.
type GrantList struct {
	Count  int           `json:"count"`
	Grants []ListedGrant `json:"grants"`
}

// UseRequest is the body of POST /v1/grants/{grant_id}/use: both are
// required, and the whole N must fit the remaining budget.
type UseRequest struct {
	Subagent *string `json:"subagent" max:"name"`
	N        *int64  `json:"n"`
}

// UseResult answers POST /v1/grants/{grant_id}/use.
type UseResult struct {
	GrantID     string  `json:"grant_id"`
	Outcome     string  `json:"outcome"` // consumed
	ParentAgent *string `json:"parent_agent"`
	Remaining   int64   `json:"remaining"`
	Subagent    string  `json:"subagent"`
	Uses        int64   `json:"uses"`
}

// RevokeRequest is the body of POST /v1/grants/{grant_id}/revoke; Subagent
// is required.
type RevokeRequest struct {
	Subagent *string `json:"subagent" max:"name"`
}

// RevokeResult answers POST /v1/grants/{grant_id}/revoke: Outcome is revoked
// or already_revoked.
type RevokeResult struct {
	GrantID     string          `json:"grant_id"`
	Outcome     string          `json:"outcome"`
	Subagent    string          `json:"subagent"`
	RevokedAt   string          `json:"revoked_at"`
	StatusAfter RevokeGateState `json:"status_after"`
}

// RevokeGateState is the gate's answer for the sub-agent after a revoke.
type RevokeGateState struct {
	Authorized bool   `json:"authorized"`
	Reason     string `json:"reason"`
	Status     string `json:"status"`
	Subagent   string `json:"subagent"`
}

// DelegationPublicKey answers GET /v1/delegation/public-key: the service
// identity that signs delegation tokens' bindings.
type DelegationPublicKey struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"` // ed25519
	PublicKey string `json:"public_key"`
}
