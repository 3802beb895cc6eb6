package api

// Governance (SPEC.md "Proposal", the Governance routes).

// Actor is who made a proposal's transition (SPEC.md "Actor"; CONTRACT.md
// "Credentials": identity is the API key id or the session id, kind is
// api_key or session, machine is the key's machine label).
type Actor struct {
	Identity string `json:"identity"`
	Kind     string `json:"kind"`
	Machine  string `json:"machine"`
}

// Evidence is why a proposal was made; Threshold is the configured one.
type Evidence struct {
	BlockedAttempts int `json:"blocked_attempts"`
	Threshold       int `json:"threshold"`
}

// Subject is what a proposal governs; Tool nil means the whole sub-agent.
type Subject struct {
	Subagent string  `json:"subagent"`
	Tool     *string `json:"tool"`
}

// Proposal is SPEC.md's Proposal: proposed → ratified (never by the
// proposer) → enacted, or rejected.
type Proposal struct {
	ProposalID string   `json:"proposal_id"`
	Status     string   `json:"status"`
	Kind       string   `json:"kind"`
	Note       *string  `json:"note"`
	Evidence   Evidence `json:"evidence"`
	Subject    Subject  `json:"subject"`
	ProposedAt string   `json:"proposed_at"`
	Proposer   Actor    `json:"proposer"`
	RatifiedAt *string  `json:"ratified_at"`
	Ratifier   *Actor   `json:"ratifier"`
	EnactedAt  *string  `json:"enacted_at"`
	Enactor    *Actor   `json:"enactor"`
	RejectedAt *string  `json:"rejected_at"`
	Rejector   *Actor   `json:"rejector"`
}

// ProposalResponse answers the create, read and transition routes.
type ProposalResponse struct {
	Proposal Proposal `json:"proposal"`
}

// ProposalList answers GET /v1/governance/proposals (newest first);
// NextCursor continues the listing when the page was full.
type ProposalList struct {
	Count      int        `json:"count"`
	Proposals  []Proposal `json:"proposals"`
	NextCursor *int64     `json:"next_cursor"`
}

// ProposalQuery filters GET /v1/governance/proposals.
type ProposalQuery struct {
	Status   string // "" for any
	Subagent string // "" for any
	Limit    int    // 0: the service's default
	Cursor   *int64 // nil for the first page; then the previous page's NextCursor
}

// CreateProposalRequest is the body of POST /v1/governance/proposals: Kind,
// Subject (with its subagent) and Evidence (with blocked_attempts) are
// required.
type CreateProposalRequest struct {
	Kind     *string           `json:"kind" max:"name"` // deny_scope, allow_scope or policy_note
	Subject  *ProposalSubject  `json:"subject"`
	Note     *string           `json:"note,omitempty" max:"note"`
	Evidence *ProposalEvidence `json:"evidence"`
}

// ProposalSubject is the subject as a proposal is created with it: Tool nil
// means the whole sub-agent.
type ProposalSubject struct {
	Subagent *string `json:"subagent" max:"name"`
	Tool     *string `json:"tool,omitempty" max:"name"`
	// Scope is a synonym of Tool (SPEC.md), stored as tool; when both are
	// given they must be equal.
	Scope *string `json:"scope,omitempty" max:"name"`
}

// ProposalEvidence is the evidence a proposal is created with.
type ProposalEvidence struct {
	BlockedAttempts *int `json:"blocked_attempts"`
	// Threshold is accepted and ignored: the configured threshold decides
	// and is what the proposal records.
	Threshold *int `json:"threshold,omitempty"`
}

// TransitionRequest is the body of the ratify, enact and reject routes; the
// whole body may be absent or null.
type TransitionRequest struct {
	Reason *string `json:"reason,omitempty" max:"reason"`
}
