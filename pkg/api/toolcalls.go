package api

import "encoding/json"

// The event types of a gated tool call and of its result, as the service,
// the MCP proxy and the hooks record them.
const (
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
)

// The decisions a tool call records (SPEC.md "Event": decision).
const (
	DecisionAllow = "allow"
	DecisionAsk   = "ask"
	DecisionDeny  = "deny"
)

// ToolCallRequest is the body of POST /v1/tool-calls: a tool call through
// the gate, checked, metered and recorded as one tool_call event in one
// commit (docs/decisions/tool-calls.md). Subagent, Tool and EventID are
// required; the server decodes into this type, so an absent field is told
// from an empty one.
type ToolCallRequest struct {
	Subagent *string `json:"subagent" max:"name"`
	Tool     *string `json:"tool" max:"name"`
	// EventID names the tool_call event; a retry with the same id is
	// answered with the stored call and metered no more.
	EventID *string `json:"event_id"`
	// Raw is the caller's structure and hashes (never a tool's text); the
	// service adds subagent, gate_status, grant_id, proposal_id and
	// no_grant, which the caller may not send.
	Raw      json.RawMessage `json:"raw,omitempty"`
	TS       *string         `json:"ts,omitempty"`
	ParentID *string         `json:"parent_id,omitempty"`
	// NoGrant is the decision recorded when the gate finds no grant for the
	// sub-agent: allow, ask or deny (nil: deny; "" is refused).
	NoGrant *string `json:"no_grant,omitempty"`
	// Results are tool_result events of earlier calls (at most
	// MaxToolCallResults), recorded in the same commit before this call: a
	// caller that sends each result with its next call pays one commit per
	// call. A result already on the record with the same content is left
	// out.
	Results []ToolResult `json:"results,omitempty"`
	// ApprovalID sends again a call an approval rule held (CONTRACT.md
	// "Approvals"): with the same sub-agent, tool and raw.tool_input_sha256
	// as the held call, once it is approved, it runs once.
	ApprovalID *string `json:"approval_id,omitempty" max:"name"`
	// ApprovalArgsText is the tool's input as text, for the person who
	// approves the call (docs/approvals.md "The arguments' text"): sent only
	// where the operator told the hook or the proxy to (off by default),
	// kept only with a pending approval this call creates (ignored
	// otherwise), never part of the event, its hash or an export. The
	// surfaces send the RFC 8785 form, cut to MaxApprovalArgsText bytes.
	ApprovalArgsText *string `json:"approval_args_text,omitempty" max:"args"`
}

// MaxToolCallResults bounds the results one tool call carries: a call and
// its results stay a handful of events, never a bulk ingest (that is the
// batch route's, with its rate limit).
const MaxToolCallResults = 16

// ToolResult is a tool_result event sent with a tool call; the service
// numbers it at the tip.
type ToolResult struct {
	EventID  *string         `json:"event_id"` // required
	ParentID *string         `json:"parent_id,omitempty"`
	Tool     *string         `json:"tool,omitempty"`
	Raw      json.RawMessage `json:"raw,omitempty"`
	TS       *string         `json:"ts,omitempty"`
}

// ToolCallResponse answers POST /v1/tool-calls.
type ToolCallResponse struct {
	// Decision is allow (the gate authorized the call and one use was
	// metered), deny, or for no_grant the request's no_grant; ask when an
	// approval rule holds the authorized call (Approval says which).
	Decision   string  `json:"decision"`
	GateStatus string  `json:"gate_status"`
	Reason     string  `json:"reason"`
	Subagent   string  `json:"subagent"`
	GrantID    *string `json:"grant_id"`
	ProposalID *string `json:"proposal_id"`
	// Metered is true when the call spent one use of GrantID's budget.
	Metered bool `json:"metered"`
	// Uses and Remaining are the matched grant's after this call (null on
	// a replay, or when no grant matched).
	Uses      *int64      `json:"uses"`
	Remaining *int64      `json:"remaining"`
	Event     StoredEvent `json:"event"`
	Epoch     EpochStamp  `json:"epoch"`
	Quota     Quota       `json:"quota"`
	// Approval is the approval a rule created for this call (decision
	// ask): null otherwise.
	Approval *ApprovalTicket `json:"approval"`
}
