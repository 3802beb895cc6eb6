package mcpserver

// The proxy's gate: one POST /v1/tool-calls per tools/call, and the refusal
// the host sees when it says no.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// gate puts the call through the gate in one request (POST /v1/tool-calls):
// the check, one use of the budget when it authorizes, and the tool_call
// event recording the decision are one commit, so nothing runs unrecorded
// or unmetered. It returns nil when the call may go upstream, else the
// refusal for the host: the gate's no, or a problem the service answered
// (never a reason to fail open), or the service unreachable (refused unless
// the operator chose --fail-open). A call an approval rule holds waits for
// its approval (proxy_approval.go); the id returned is the allowed call's
// event, which its result names.
//
// tool_input_sha256 repeats arguments_sha256 (the same RFC 8785 digest of
// the arguments, the tool's input): an approval binds that member
// (docs/approvals.md). argsText, when the operator asked for it
// (--send-args-text), goes with a call that may create an approval.
func (p *Proxy) gate(ctx context.Context, tool, callID, argsHash string, args json.RawMessage, argsText *string, canceled <-chan struct{}) (json.RawMessage, string) {
	raw, _ := json.Marshal(map[string]any{"upstream_tool": tool, "arguments_sha256": argsHash, "tool_input_sha256": argsHash})
	results := p.rec.takeResults()
	send := func(eventID string, approvalID *string, results []api.ToolResult) (*api.ToolCallResponse, error) {
		req := api.ToolCallRequest{Subagent: &p.opts.Subagent, Tool: &tool, EventID: &eventID, Raw: raw,
			Results: results, ApprovalID: approvalID}
		if approvalID == nil { // a call sent again creates no approval
			req.ApprovalArgsText = argsText
		}
		return p.opts.Service.GateToolCall(ctx, req)
	}
	res, approvalID, callID, err := p.throughApproval(ctx, heldCall{tool: tool, argsHash: argsHash, args: args, canceled: canceled}, callID, results, send)
	if err != nil && len(results) > 0 {
		// They may or may not be on the record: sent again, a result
		// already stored is left out by the service.
		p.rec.requeueResults(results)
	}
	var pe *client.Error
	switch {
	case err == nil && res.Decision == api.DecisionAllow:
		return nil, callID
	case err == nil && approvalID != "" && (res.Decision == api.DecisionAsk || res.GateStatus == api.GateApprovalPending):
		return proxyRefusal(Refusal{Code: api.GateApprovalPending, Status: 200, Reason: fmt.Sprintf(
			"this call waits for a person's approval (approval %s) and did not run; someone other than this agent must approve it "+
				"(auditchain approvals approve %s); you may try the same call again later", approvalID, approvalID)}), callID
	case err == nil:
		r := Refusal{Code: res.GateStatus, Reason: res.Reason, Status: 200}
		if res.ProposalID != nil {
			r.Reason += " (proposal " + *res.ProposalID + ")"
		}
		return proxyRefusal(r), callID
	case errors.As(err, &pe):
		return proxyRefusal(refusalFrom(err)), callID
	case !p.opts.FailOpen:
		return proxyRefusal(Refusal{Code: CodeUnreachable, Reason: "the service could not be reached, so the call is refused (fail closed): " + err.Error()}), callID
	}
	// Failing open: the call goes through, and its tool_call waits for the
	// service with the records, ahead of its tool_result, marked fail_open
	// with the proxy's time of the call (the service stamps its own when it
	// takes the record).
	callRaw, _ := json.Marshal(map[string]any{"upstream_tool": tool, "arguments_sha256": argsHash, "subagent": p.opts.Subagent,
		"fail_open": true, "called_at": p.now().UTC().Format(time.RFC3339Nano),
		"proxy_error": "the service could not be reached (" + err.Error() + "); --fail-open let the call through"})
	p.rec.add(record{ToolResult: api.ToolResult{EventID: &callID, Tool: &tool, Raw: callRaw}, call: true})
	return nil, callID
}

// RefusalMetaKey names the refusal in the _meta of a result the proxy
// refuses.
const RefusalMetaKey = "auditchain/refusal"

// proxyRefusal is a refused call's result: isError with the reason as text
// only, which every output schema admits (structured content would have to
// validate against the upstream tool's schema, MCP "Tools": output schema);
// the code and reason for programs are in _meta under RefusalMetaKey.
func proxyRefusal(r Refusal) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"content": []map[string]string{{"type": "text", "text": r.text()}},
		"isError": true,
		"_meta":   map[string]any{RefusalMetaKey: r},
	})
	return b
}
