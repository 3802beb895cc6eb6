// Package hook is `auditchain hook`: it puts every tool call an agent host
// (Claude Code, Codex CLI, Gemini CLI, Cursor) reports through its hook
// command under the gate and on the record (docs/hooks.md).
//
// A host adapter (hosts.go) turns the host's stdin into a host-neutral Call
// and a Verdict back into the host's answer; the Runner asks the gate,
// meters one use, and records tool_call and tool_result events through a
// Service (pkg/client in production), each numbered by the service at the
// chain's tip; events that cannot be sent go to the Spool and reach the
// service later the same way.
//
// The package must stay cheap to start: it imports pkg/client and pkg/api,
// never the server's packages.
package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Phase is where in a tool call's life the host runs the hook.
type Phase int

const (
	// PhaseOther is an event the hook answers without gating or recording
	// (SessionStart, Stop, …).
	PhaseOther Phase = iota
	// PhasePre runs before the tool: gate, meter, record tool_call.
	PhasePre
	// PhasePost runs after the tool: record tool_result.
	PhasePost
)

// Call is one hook invocation in host-neutral form.
type Call struct {
	Host  string // claude-code, codex, gemini, cursor
	Event string // the host's event name, as sent
	Phase Phase
	// SessionID and ToolUseID are the host's ids (ToolUseID may be empty:
	// Gemini and some Cursor events send none).
	SessionID string
	ToolUseID string
	// Stamp is what the host sends alike to every hook it runs for one
	// event, which tells two identical calls apart when there is no
	// tool-use id (Gemini's timestamp, Cursor's generation_id).
	Stamp string
	Tool  string
	// Input is the tool's input as the host sent it (nil: none).
	Input json.RawMessage
	// Response is the tool's output (post only; nil: none).
	Response json.RawMessage
	// Failed: the host reported the tool call as an error instead of a
	// result (post only; docs/hooks.md "failed"). FailureUnknown: the host
	// reports no errors at all (Codex), so the record says nothing either
	// way.
	Failed         bool
	FailureUnknown bool
	// AgentID and AgentType are set when the call comes from a sub-agent.
	AgentID   string
	AgentType string

	// derived: the host sent no tool-use id and ToolUseID was derived
	// (DeriveToolUseID).
	derived bool
	// noParent: a result whose call could not be paired (no tool-use id and
	// nothing remembered): its tool_result names no parent.
	noParent bool

	inputSHA   string // inputDigest's, once computed
	inputCanon bool
}

// Verdict is the hook's answer to one call.
type Verdict struct {
	// Decision is allow, ask or deny. Allow passes the call on to the
	// host's own permission rules: the hook never loosens them.
	Decision string
	Reason   string
}

// Policy decides a main-agent call that no grant covers (gate status
// no_grant).
type Policy string

const (
	PolicyRecord Policy = "record" // allow and record (default)
	PolicyAsk    Policy = "ask"    // ask the user (hosts without ask: deny)
	PolicyDeny   Policy = "deny"   // refuse
)

// ParsePolicy reads a --policy value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyRecord, PolicyAsk, PolicyDeny:
		return p, nil
	}
	return "", fmt.Errorf("policy %q: want record, ask or deny", s)
}

// Service is what the hook needs from auditchain. ClientService implements
// it with pkg/client. Neither method takes a place on the chain: the
// service numbers what the hook records, so no tip is read or kept, and a
// tip a client's own events took to 2^52 (the highest sequence a client may
// choose) stops nothing the hook records.
type Service interface {
	// GateCall checks the gate, meters one use when it authorizes and
	// records the tool_call, in one commit (POST /v1/tool-calls).
	GateCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error)
	// AppendNext records one event at the chain's tip (POST
	// /v1/events/append). The same event sent again is answered with the
	// one stored, at the place it took.
	AppendNext(ctx context.Context, ev *api.EventInput) error
	// Approval reads an approval, waiting up to wait while it is pending
	// (GET /v1/approvals/{id}?wait=).
	Approval(ctx context.Context, id string, wait time.Duration) (*api.Approval, error)
}

// Runner handles calls for one configuration.
type Runner struct {
	Service Service
	// MainAgent is the sub-agent name the main agent's calls are gated as.
	MainAgent string
	Policy    Policy
	// Spool receives the events that could not be sent (nil: they are lost,
	// and said so on Log).
	Spool *Spool
	Now   func() time.Time
	// Log receives diagnostics (stderr); never the answer.
	Log io.Writer
	// ApprovalWait is how long a call held for a person's approval waits
	// for the decision (approval.go), within the hook's deadline; 0 refuses
	// it at once, naming the approval.
	ApprovalWait time.Duration
	// SendArgsText sends the tool's input as text with each call it asks
	// about, for a person approving a call a rule holds (ArgsText); off by
	// default, since the record keeps hashes, not text.
	SendArgsText bool
}

// Subagent is the name the gate knows the caller by: the host's sub-agent
// type, else its id, else the configured main agent.
func (r *Runner) Subagent(c *Call) string {
	switch {
	case c.AgentType != "":
		return c.AgentType
	case c.AgentID != "":
		return c.AgentID
	}
	return r.MainAgent
}

// Handle gates and records one call. An error means the hook could not
// decide (the service was unreachable or answered an unexpected error): the
// caller answers it by its --on-error rule and calls Refused. Recording
// failures are not errors: the event is spooled.
func (r *Runner) Handle(ctx context.Context, c *Call) (Verdict, error) {
	switch c.Phase {
	case PhasePre:
		if c.ToolUseID == "" {
			c.ToolUseID, c.derived = DeriveToolUseID(c, r.now()), true
		}
		v, err := r.pre(ctx, c)
		if err == nil {
			r.remember(c, v.Decision)
		}
		return v, err
	case PhasePost:
		if c.ToolUseID == "" {
			r.pairResult(c)
		}
		r.record(ctx, resultEvent(c, r.now()))
	}
	return Verdict{Decision: api.DecisionAllow}, nil
}

// Refused records a tool_call the hook could not decide (err), answered
// decision by the --on-error rule, so that the record shows the attempt.
func (r *Runner) Refused(ctx context.Context, c *Call, decision string, err error) {
	if c.Phase != PhasePre {
		return
	}
	if c.ToolUseID == "" {
		c.ToolUseID, c.derived = DeriveToolUseID(c, r.now()), true
	}
	ev := callEvent(c, r.now(), decision, callFacts{subagent: r.Subagent(c), hookError: err.Error()})
	r.record(ctx, ev)
	r.remember(c, decision)
}

// remember keeps a derived tool-use id in the spool directory for the
// result to name its call (docs/hooks.md "Event ids"), only when the tool
// may run: a refused call has no result (Gemini runs no AfterTool for a
// blocked call), so it leaves nothing behind.
func (r *Runner) remember(c *Call, decision string) {
	if !c.derived || decision == api.DecisionDeny || r.Spool == nil {
		return
	}
	if err := r.Spool.RememberCall(c); err != nil {
		r.logf("remember the call for its result: %v", err)
	}
}

// pairResult names the call of a result without a host tool-use id: the id
// its before-tool run remembered, else (nothing remembered) one derived from
// the result's own stdin, with no parent.
func (r *Runner) pairResult(c *Call) {
	if r.Spool != nil {
		c.ToolUseID = r.Spool.TakeCall(c, r.now())
	}
	if c.ToolUseID == "" {
		c.ToolUseID, c.noParent = DeriveToolUseID(c, r.now()), true
	}
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, "auditchain hook: "+format+"\n", args...)
	}
}

func (r *Runner) pre(ctx context.Context, c *Call) (Verdict, error) {
	sub := r.Subagent(c)
	// The main agent's calls that no grant covers are decided by the
	// policy; a sub-agent without a grant is always refused.
	noGrant := api.DecisionDeny
	if sub == r.MainAgent {
		switch r.Policy {
		case PolicyRecord:
			noGrant = api.DecisionAllow
		case PolicyAsk:
			noGrant = api.DecisionAsk
		}
	}
	// One request: the gate's check, the use and the tool_call event are
	// one commit on the service (POST /v1/tool-calls), which writes the
	// gate's answer into the event's raw.
	ev := callEvent(c, r.now(), "", callFacts{})
	digest, _ := c.inputDigest()
	var argsText *string
	if r.SendArgsText {
		t := ArgsText(c.Input)
		argsText = &t
	}
	res, approvalID, err := r.throughApproval(ctx, approvalKey(sub, c.Tool, digest), *ev.EventID,
		func(eventID string, approvalID *string) (*api.ToolCallResponse, error) {
			req := api.ToolCallRequest{Subagent: &sub, Tool: &c.Tool, EventID: &eventID, Raw: ev.Raw,
				TS: ev.TS, NoGrant: &noGrant, ApprovalID: approvalID}
			if approvalID == nil { // a call sent again creates no approval
				req.ApprovalArgsText = argsText
			}
			return r.Service.GateCall(ctx, req)
		})
	if err != nil {
		return Verdict{}, fmt.Errorf("ask the gate: %w", err)
	}
	if reason, ok := approvalRefusal(res, approvalID); ok && res.Decision != api.DecisionAllow {
		return Verdict{Decision: api.DecisionDeny, Reason: reason}, nil
	}
	switch res.Decision {
	case api.DecisionAllow:
		return Verdict{Decision: api.DecisionAllow}, nil
	case api.DecisionAsk:
		return Verdict{Decision: api.DecisionAsk, Reason: refusal(res.GateStatus, res.Reason, "") + "; policy: ask"}, nil
	}
	var proposal string
	if res.ProposalID != nil {
		proposal = *res.ProposalID
	}
	return Verdict{Decision: api.DecisionDeny, Reason: refusal(res.GateStatus, res.Reason, proposal)}, nil
}

// refusal is the reason a refused call gives the host: the gate's status and
// reason, and the enacted proposal for denied_by_governance.
func refusal(status, reason, proposalID string) string {
	s := "auditchain gate: " + status
	if reason != "" {
		s += ": " + reason
	}
	if proposalID != "" {
		s += " (proposal " + proposalID + ")"
	}
	return s
}

// record appends ev, or spools it when that fails.
func (r *Runner) record(ctx context.Context, ev *api.EventInput) {
	err := r.Service.AppendNext(ctx, ev)
	if err == nil || client.IsCode(err, "event_id_conflict") {
		// A conflict: this event id (derived from the host's ids) is on the
		// record already, from an earlier run of the same hook.
		return
	}
	r.logf("record %s %s: %v", *ev.EventType, *ev.EventID, err)
	if r.Spool == nil {
		r.logf("no spool: event %s is lost", *ev.EventID)
		return
	}
	if serr := r.Spool.Put(ev); serr != nil {
		r.logf("spool %s: %v (the event is lost)", *ev.EventID, serr)
		return
	}
	r.logf("spooled %s; `auditchain hook flush` or the next hook run sends it", *ev.EventID)
}
