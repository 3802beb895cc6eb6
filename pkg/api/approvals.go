package api

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md): a rule
// holds a sub-agent's authorized calls of a tool until a person approves the
// exact call, once.

import (
	"strings"
	"unicode/utf8"
)

// Service events of approvals, written on the account's chain.
const (
	EventApprovalRuleCreated = "approval_rule.created"
	EventApprovalRuleDeleted = "approval_rule.deleted"
	EventApprovalGranted     = "approval.granted"
	EventApprovalDenied      = "approval.denied"
)

// Approval statuses (GET /v1/approvals?status=).
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalUsed     = "used"
)

// The gate statuses of a call sent again with an approval_id that does not
// run (CONTRACT.md "Approvals"): they appear only in POST /v1/tool-calls
// answers and their events, never in GET /v1/grants/status.
const (
	GateApprovalPending  = "approval_pending"
	GateApprovalDenied   = "approval_denied"
	GateApprovalExpired  = "approval_expired"
	GateApprovalUsed     = "approval_used"
	GateApprovalMismatch = "approval_mismatch"
)

// Bounds of an approval rule's ttl_seconds, and its default.
const (
	MinApprovalTTL     = 30
	MaxApprovalTTL     = 86400
	DefaultApprovalTTL = 600
)

// MaxApprovalArgsText bounds approval_args_text, in bytes (the body
// reader's cap "args"): enough to read a command or a short file, never a
// store of tool inputs.
const MaxApprovalArgsText = 16384

// MaxApprovalWait is the longest ?wait= of GET /v1/approvals/{id}, in seconds.
const MaxApprovalWait = 30

// ApprovalRuleRequest is the body of POST /v1/approval-rules: subagent and
// tool are exact names or "*".
type ApprovalRuleRequest struct {
	Subagent   *string `json:"subagent" max:"name"`
	Tool       *string `json:"tool" max:"name"`
	TTLSeconds *int64  `json:"ttl_seconds,omitempty"`
}

// ApprovalRule is a rule as stored (201 of POST /v1/approval-rules, a row of
// the list, and the raw of approval_rule.* events).
type ApprovalRule struct {
	RuleID     string `json:"rule_id"`
	Subagent   string `json:"subagent"`
	Tool       string `json:"tool"`
	TTLSeconds int64  `json:"ttl_seconds"`
	CreatedAt  string `json:"created_at"`
}

// ApprovalRuleList answers GET /v1/approval-rules, oldest first.
type ApprovalRuleList struct {
	Rules []ApprovalRule `json:"rules"`
}

// ApprovalTicket is what a held call's answer carries: the approval to wait
// for, and the argument digest it is bound to.
type ApprovalTicket struct {
	ApprovalID string `json:"approval_id"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
	ArgsSHA256 string `json:"args_sha256"`
}

// Approval is one approval as GET /v1/approvals shows it. Its status is
// the one it reads as now: a pending or approved approval past expires_at
// reads expired.
type Approval struct {
	ApprovalID  string `json:"approval_id"`
	Status      string `json:"status"`
	RuleID      string `json:"rule_id"`
	Subagent    string `json:"subagent"`
	Tool        string `json:"tool"`
	ArgsSHA256  string `json:"args_sha256"`
	CallEventID string `json:"call_event_id"`
	// RequestedBy is the identity that made the call.
	RequestedBy Identity `json:"requested_by"`
	CreatedAt   string   `json:"created_at"`
	ExpiresAt   string   `json:"expires_at"`
	DecidedAt   *string  `json:"decided_at"`
	// DecidedBy is the approver's (or denier's) identity; null while undecided.
	DecidedBy   *Identity `json:"decided_by"`
	Note        *string   `json:"note"`
	UsedAt      *string   `json:"used_at"`
	UsedEventID *string   `json:"used_event_id"`
	// ArgsText is the arguments' text the call sent with
	// approval_args_text, shown only by GET /v1/approvals/{id} and only
	// while the approval is pending (absent otherwise); ArgsTextMatches
	// says whether its SHA-256 is ArgsSHA256, that is whether it is
	// exactly the input the approval binds (false when a surface cut it or
	// sent another form). The text is the surface's word; the digest is
	// what is approved.
	ArgsText        *string `json:"args_text,omitempty"`
	ArgsTextMatches *bool   `json:"args_text_matches,omitempty"`
}

// Identity names a credential: a key's or a session's id, and which.
type Identity struct {
	Identity string `json:"identity"`
	Kind     string `json:"kind"` // api_key or session
}

// ApprovalList answers GET /v1/approvals, newest first.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalDecisionRequest is the body of POST
// /v1/approvals/{approval_id}/approve and /deny.
type ApprovalDecisionRequest struct {
	Note *string `json:"note,omitempty" max:"note"`
}

// ApprovalEvent is the raw of approval.granted and approval.denied: the call
// it answers, the digest it binds, who made the call and who decided.
type ApprovalEvent struct {
	ApprovalID  string   `json:"approval_id"`
	Subagent    string   `json:"subagent"`
	Tool        string   `json:"tool"`
	ArgsSHA256  string   `json:"args_sha256"`
	CallEventID string   `json:"call_event_id"`
	RequestedBy Identity `json:"requested_by"`
	Approver    Identity `json:"approver"`
	ExpiresAt   string   `json:"expires_at"`
	Note        *string  `json:"note,omitempty"`
}

// ApprovalExpiry answers the approval-expiry job: how many it marked.
type ApprovalExpiry struct {
	Expired int64 `json:"expired"`
}

// CutArgsText is canonical (a tool's input in its RFC 8785 form) as a
// surface sends it in approval_args_text: held to the text rule (invalid
// UTF-8 replaced, NUL dropped) and cut at a character boundary to
// MaxApprovalArgsText bytes. Uncut, its SHA-256 is the call's
// tool_input_sha256, which GET /v1/approvals/{id} reports as
// args_text_matches.
func CutArgsText(canonical []byte) string {
	s := strings.ToValidUTF8(string(canonical), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= MaxApprovalArgsText {
		return s
	}
	n := MaxApprovalArgsText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
