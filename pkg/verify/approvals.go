package verify

// Per-call approvals on the chain (CONTRACT.md "Approvals"; docs/approvals.md):
// an allowed tool_call that carries an approval_id ran on a person's
// approval, and the record alone must show it — the approval.granted event
// earlier on the chain, naming an approver other than the identity that
// made the call, binding the same sub-agent, tool and digest of the tool's
// input, and used by one allow only.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The event types and members the approval checks read (pkg/api's, which
// this package does not import).
const (
	approvalGrantedType = "approval.granted"
	toolCallType        = "tool_call"
)

// approvalIDMember is how every event that names an approval spells it.
var approvalIDMember = []byte(`"approval_id"`)

// approvalGrant is an approval.granted event as the checks remember it.
type approvalGrant struct {
	seq                    int64
	subagent, tool, digest string
}

// approvalCall is the member set of a tool_call's raw the checks read.
type approvalCall struct {
	ApprovalID string `json:"approval_id"`
	Subagent   string `json:"subagent"`
	Digest     string `json:"tool_input_sha256"`
}

// approvalEvent is the raw of approval.granted the checks read.
type approvalEvent struct {
	ApprovalID  string `json:"approval_id"`
	Subagent    string `json:"subagent"`
	Tool        string `json:"tool"`
	ArgsSHA256  string `json:"args_sha256"`
	RequestedBy struct {
		Identity string `json:"identity"`
	} `json:"requested_by"`
	Approver struct {
		Identity string `json:"identity"`
	} `json:"approver"`
}

// approvalChecks holds, in line order, the approvals granted and used so far.
type approvalChecks struct {
	granted map[string]approvalGrant
	usedBy  map[string]int64 // approval id → the sequence of the allow that used it
}

// see checks e (at line; fragment: the export starts after leaf 0) and
// counts what it proved in rep. It returns the failure, naming the approval.
func (c *approvalChecks) see(e *ExportEvent, line int64, fragment bool, rep *Report) error {
	if !bytes.Contains(e.Raw, approvalIDMember) {
		return nil
	}
	fail := func(format string, a ...any) error {
		return &Error{Kind: KindApproval, Sequence: e.Sequence, Block: -1, Line: line, Err: fmt.Errorf(format, a...)}
	}
	switch {
	case e.EventType == approvalGrantedType:
		var g approvalEvent
		if err := json.Unmarshal(e.Raw, &g); err != nil || g.ApprovalID == "" {
			return fail("approval.granted without a readable approval_id")
		}
		if g.Approver.Identity == "" || g.Approver.Identity == g.RequestedBy.Identity {
			return fail("approval %s is granted by %q, the identity that made the call: an approval needs another identity",
				g.ApprovalID, g.Approver.Identity)
		}
		if c.granted == nil {
			c.granted = map[string]approvalGrant{}
		}
		c.granted[g.ApprovalID] = approvalGrant{seq: e.Sequence, subagent: g.Subagent, tool: g.Tool, digest: g.ArgsSHA256}
	case e.EventType == toolCallType && e.Decision != nil && *e.Decision == "allow":
		var call approvalCall
		if err := json.Unmarshal(e.Raw, &call); err != nil || call.ApprovalID == "" {
			return nil // the member is not the service's (a client event's raw)
		}
		g, ok := c.granted[call.ApprovalID]
		if !ok {
			if fragment {
				rep.ApprovalsUnchecked++ // granted, if at all, before the fragment
				return nil
			}
			return fail("allowed call names approval %s, which no approval.granted event earlier on the chain grants", call.ApprovalID)
		}
		tool := ""
		if e.Tool != nil {
			tool = *e.Tool
		}
		if g.digest != call.Digest || g.subagent != call.Subagent || g.tool != tool {
			return fail("allowed call under approval %s is not the approved call: it is %s/%s with input digest %q, the approval (sequence %d) binds %s/%s with %q",
				call.ApprovalID, call.Subagent, tool, call.Digest, g.seq, g.subagent, g.tool, g.digest)
		}
		if first, used := c.usedBy[call.ApprovalID]; used {
			return fail("approval %s is used a second time (first by the call at sequence %d): an approval runs one call", call.ApprovalID, first)
		}
		if c.usedBy == nil {
			c.usedBy = map[string]int64{}
		}
		c.usedBy[call.ApprovalID] = e.Sequence
		rep.ApprovedCalls++
	}
	return nil
}
