package api

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md).

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalUsed     = "used"
)

// CreateApprovalRuleRequest is the body of POST /v1/approval-rules.
// Subagent and Tool are exact names or "*"; TTLSeconds (30..86400, default
// 600) is how long an approval the rule asks for lives.
type CreateApprovalRuleRequest struct {
	Subagent   *string `json:"subagent" max:"name"`
	Tool       *string `json:"tool" max:"name"`
	TTLSeconds *int64  `json:"ttl_seconds,omitempty"`
}

// ApprovalRule is a rule as POST and GET /v1/approval-rules answer it.
type ApprovalRule struct {
	RuleID     string `json:"rule_id"`
	Subagent   string `json:"subagent"`
	Tool       string `json:"tool"`
	TTLSeconds int64  `json:"ttl_seconds"`
	CreatedAt  string `json:"created_at"`
}

// ApprovalRuleList answers GET /v1/approval-rules.
type ApprovalRuleList struct {
	Rules []ApprovalRule `json:"rules"`
}

// ApprovalRef is the approval a POST /v1/tool-calls answer names: on ask,
// the pending approval created; on a call sent again with approval_id, the
// approval as it stands after the call.
type ApprovalRef struct {
	ApprovalID string `json:"approval_id"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
	ArgsSHA256 string `json:"args_sha256"`
}

// ApprovalDecider is who approved or denied: the identity (key or session
// id) and its kind (api_key or session).
type ApprovalDecider struct {
	Identity string `json:"identity"`
	Kind     string `json:"kind"`
}

// Approval is one approval as GET /v1/approvals and the decision routes
// answer it.
type Approval struct {
	ApprovalID  string           `json:"approval_id"`
	Status      string           `json:"status"`
	Subagent    string           `json:"subagent"`
	Tool        string           `json:"tool"`
	ArgsSHA256  string           `json:"args_sha256"`
	RuleID      string           `json:"rule_id"`
	CallEventID string           `json:"call_event_id"`
	RequestedBy ApprovalDecider  `json:"requested_by"`
	CreatedAt   string           `json:"created_at"`
	ExpiresAt   string           `json:"expires_at"`
	DecidedAt   *string          `json:"decided_at"`
	DecidedBy   *ApprovalDecider `json:"decided_by"`
	Note        *string          `json:"note"`
	UsedAt      *string          `json:"used_at"`
	UsedEventID *string          `json:"used_event_id"`
}

// ApprovalList answers GET /v1/approvals, newest first.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalDecision is the body of POST /v1/approvals/{approval_id}/approve
// and /deny.
type ApprovalDecision struct {
	Note *string `json:"note,omitempty" max:"note"`
}

// ApprovalExpiry is what the approval-expiry job did.
type ApprovalExpiry struct {
	Expired int64 `json:"expired"`
}
