package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Version is what the servers report as their implementation version.
const Version = "1"

// Tool is one tool of the server and the capability a key needs to call it
// (the route's scope in internal/httpapi/routes.go).
type Tool struct {
	Name  string
	Scope domain.Scope
	add   func(s *mcp.Server, resolve Resolver, log *slog.Logger)
	// direct answers a plain call of a read-only tool without the SDK
	// (fastcall.go); nil for the others.
	direct directFunc
}

// Tools lists every tool, in the order a host shows them. Ratify, enact and
// reject are deliberately absent: SPEC.md's separation of powers wants a
// person, a different identity from the agent that proposes (docs/mcp.md).
var Tools = []Tool{
	tool("gate_check", domain.ScopeGrants, readOnly,
		"Ask the gate whether a sub-agent may call a tool now. Answers authorized with the matched grant, its uses and remaining budget; when the gate says no, the result is an error whose code is the reason (no_grant, expired, revoked, budget_exhausted, tool_not_allowed, denied_by_governance). Check before delegating or acting; it does not consume budget (use record_use for that).",
		func(ctx context.Context, svc Service, in GateCheckInput) (any, error) {
			st, err := svc.GrantStatus(ctx, api.GrantStatusQuery{Subagent: in.Subagent, Tool: in.Tool, GrantID: in.GrantID})
			if err != nil {
				return nil, err
			}
			if !st.Authorized {
				return nil, &gateRefusal{status: st}
			}
			return st, nil
		}),
	tool("delegate", domain.ScopeGrants, additive,
		"Create a grant for a child sub-agent: which tools it may call (allowed_tools; empty means any tool), how many calls (max_tool_calls) and until when (expires_at, an absolute ISO-8601 timestamp with offset, e.g. 2026-12-01T00:00:00Z). With parent_agent set, the child's grant must fit inside the parent's live grant; a grant reaching beyond it is refused (overreach) and nothing is written. Returns the grant, the gate's status for it and a signed delegation token.",
		func(ctx context.Context, svc Service, in DelegateInput) (any, error) {
			return svc.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new(in.Subagent), ExpiresAt: new(in.ExpiresAt),
				MaxToolCalls: new(in.MaxToolCalls), AllowedTools: in.AllowedTools, GrantID: in.GrantID, ParentAgent: in.ParentAgent})
		}),
	tool("record_use", domain.ScopeGrants, additive,
		"Consume n calls (default 1) of a grant's budget for a sub-agent, atomically: the whole n must fit the remaining budget or nothing is consumed and the result is an error (budget_exhausted). Returns uses and remaining. Record every call the sub-agent makes under the grant.",
		func(ctx context.Context, svc Service, in RecordUseInput) (any, error) {
			n := int64(1)
			if in.N != nil {
				n = *in.N
			}
			return svc.UseGrant(ctx, in.GrantID, api.UseRequest{Subagent: new(in.Subagent), N: &n})
		}),
	tool("revoke_grant", domain.ScopeGrants, destructive,
		"Revoke a sub-agent's grant: from now on the gate refuses the sub-agent under it (and under the grants delegated from it). Returns the gate's answer for the sub-agent afterwards. Revoking an already revoked grant changes nothing.",
		func(ctx context.Context, svc Service, in RevokeInput) (any, error) {
			return svc.RevokeGrant(ctx, in.GrantID, api.RevokeRequest{Subagent: new(in.Subagent)})
		}),
	tool("record_event", domain.ScopeEventsWrite, additive,
		"Append an event to the account's hash-linked record: what an agent was allowed to do and did. Give event_type (e.g. tool_call, tool_result, note), and optionally tool, decision (allow, ask or deny), parent_id (the event this one follows from) and raw, a JSON object of structure and hashes (ids, SHA-256 digests, counts) — never secrets or free text you would not publish. The service keeps the sequence and the hash links: never compute or pass a hash of the chain. Give event_id only to retry an append whose answer you lost.",
		func(ctx context.Context, svc Service, in RecordEventInput) (any, error) {
			ev := client.Event{EventType: in.EventType, Tool: in.Tool, Decision: in.Decision, ParentID: in.ParentID}
			if in.EventID != nil {
				ev.EventID = *in.EventID
			}
			if in.Raw != nil {
				ev.Raw = in.Raw
			}
			return svc.AppendNext(ctx, ev)
		}),
	tool("search_events", domain.ScopeEventsRead, readOnly,
		"Search the account's events, newest first, by event types, tool, decision and a time window (after/before, ISO-8601). limit is 1 to 1000 (default 200); pass next_cursor from a full page as cursor to read on.",
		func(ctx context.Context, svc Service, in SearchInput) (any, error) {
			return svc.Search(ctx, api.SearchRequest{After: in.After, Before: in.Before, Cursor: in.Cursor, Decision: in.Decision,
				EventTypes: in.EventTypes, Limit: in.Limit, Tool: in.Tool})
		}),
	tool("get_event", domain.ScopeEventsRead, readOnly,
		"Read one event by its event_id, with its ancestry: the chain of events behind it (up to 50 links), each with event_id, event_type, sequence and ts.",
		func(ctx context.Context, svc Service, in GetEventInput) (any, error) {
			return svc.Event(ctx, in.EventID)
		}),
	tool("policy_test", domain.ScopeGovernance, readOnly,
		"Probe the dedup policy without writing anything: would this tool call, with this tool_input, repeat a cached earlier one? Answers dedup_status (hit, miss, bypass, uncacheable), would_hit, the semantic key and, on a hit, the earlier event. intent fresh always bypasses the cache.",
		func(ctx context.Context, svc Service, in PolicyTestInput) (any, error) {
			req := api.PolicyTestRequest{Tool: in.Tool, Intent: in.Intent, ParentEventID: in.ParentEventID}
			if in.ToolInput != nil {
				b, err := json.Marshal(in.ToolInput)
				if err != nil {
					return nil, err
				}
				req.ToolInput = b
			}
			return svc.PolicyTest(ctx, req)
		}),
	tool("propose_rule", domain.ScopeGovernance, additive,
		"Propose a governance rule about a sub-agent (and optionally one tool): kind deny_scope, allow_scope or policy_note, with the evidence (blocked_attempts, which must reach the service's threshold) and a note. A proposal takes effect only after a person ratifies and enacts it; agents cannot do that.",
		func(ctx context.Context, svc Service, in ProposeInput) (any, error) {
			p, err := svc.Propose(ctx, api.CreateProposalRequest{Kind: new(in.Kind), Note: in.Note,
				Subject:  &api.ProposalSubject{Subagent: new(in.Subagent), Tool: in.Tool},
				Evidence: &api.ProposalEvidence{BlockedAttempts: new(in.BlockedAttempts)}})
			if err != nil {
				return nil, err
			}
			return api.ProposalResponse{Proposal: *p}, nil
		}),
	tool("list_proposals", domain.ScopeGovernance, readOnly,
		"List governance proposals, newest first, optionally by status (proposed, ratified, enacted, rejected) and sub-agent.",
		func(ctx context.Context, svc Service, in ListProposalsInput) (any, error) {
			q := api.ProposalQuery{}
			if in.Status != nil {
				q.Status = *in.Status
			}
			if in.Subagent != nil {
				q.Subagent = *in.Subagent
			}
			return svc.Proposals(ctx, q)
		}),
	tool("chain_tip", domain.ScopeEventsRead, readOnly,
		"Read the tip of the account's chain: the last sequence, its payload hash and event id, and the event count (nulls for an empty chain).",
		func(ctx context.Context, svc Service, _ struct{}) (any, error) {
			return svc.Tip(ctx)
		}),
	tool("verify_chain", domain.ScopeEventsRead, readOnly,
		"Verify the account's whole chain on the service: every hash link and every signed block. Answers valid, and on a failure the first bad block and why.",
		func(ctx context.Context, svc Service, _ struct{}) (any, error) {
			return svc.VerifyChain(ctx)
		}),
}

// The tools' inputs: field names are the API's, descriptions are for a model.
type (
	GateCheckInput struct {
		Subagent string  `json:"subagent" jsonschema:"the sub-agent's exact name"`
		Tool     *string `json:"tool,omitempty" jsonschema:"the tool it wants to call; omit to ask about any tool"`
		GrantID  *string `json:"grant_id,omitempty" jsonschema:"restrict the check to this grant"`
	}
	DelegateInput struct {
		Subagent     string   `json:"subagent" jsonschema:"the child sub-agent's name"`
		ExpiresAt    string   `json:"expires_at" jsonschema:"absolute ISO-8601 timestamp with offset when the grant ends"`
		MaxToolCalls int64    `json:"max_tool_calls" jsonschema:"how many tool calls the grant allows in all"`
		AllowedTools []string `json:"allowed_tools,omitempty" jsonschema:"tool names the child may call; empty or omitted: any tool"`
		ParentAgent  *string  `json:"parent_agent,omitempty" jsonschema:"the delegating sub-agent; the child's grant must fit inside its live grant"`
		GrantID      *string  `json:"grant_id,omitempty" jsonschema:"an id of your choice for the grant; makes a retry safe"`
	}
	RecordUseInput struct {
		GrantID  string `json:"grant_id" jsonschema:"the grant whose budget is used"`
		Subagent string `json:"subagent" jsonschema:"the sub-agent holding the grant"`
		N        *int64 `json:"n,omitempty" jsonschema:"how many calls to consume (default 1)"`
	}
	RevokeInput struct {
		GrantID  string `json:"grant_id" jsonschema:"the grant to revoke"`
		Subagent string `json:"subagent" jsonschema:"the sub-agent holding the grant"`
	}
	RecordEventInput struct {
		EventType string         `json:"event_type" jsonschema:"what happened, e.g. tool_call, tool_result, note"`
		Tool      *string        `json:"tool,omitempty" jsonschema:"the tool concerned"`
		Decision  *string        `json:"decision,omitempty" jsonschema:"allow, ask or deny"`
		ParentID  *string        `json:"parent_id,omitempty" jsonschema:"the event_id this event follows from"`
		Raw       map[string]any `json:"raw,omitempty" jsonschema:"a JSON object of structure and hashes (ids, SHA-256 digests, counts), not text"`
		EventID   *string        `json:"event_id,omitempty" jsonschema:"only to retry an append whose answer was lost: the event_id of the first attempt"`
	}
	SearchInput struct {
		EventTypes []string `json:"event_types,omitempty" jsonschema:"only these event types"`
		Tool       *string  `json:"tool,omitempty" jsonschema:"only events of this tool"`
		Decision   *string  `json:"decision,omitempty" jsonschema:"only events with this decision (allow, ask, deny)"`
		After      *string  `json:"after,omitempty" jsonschema:"only events after this ISO-8601 time"`
		Before     *string  `json:"before,omitempty" jsonschema:"only events before this ISO-8601 time"`
		Limit      *int     `json:"limit,omitempty" jsonschema:"page size, 1 to 1000 (default 200)"`
		Cursor     *int64   `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page"`
	}
	GetEventInput struct {
		EventID string `json:"event_id" jsonschema:"the event to read"`
	}
	PolicyTestInput struct {
		Tool          string         `json:"tool" jsonschema:"the tool to be called"`
		ToolInput     map[string]any `json:"tool_input,omitempty" jsonschema:"the call's arguments, as a JSON object"`
		Intent        *string        `json:"intent,omitempty" jsonschema:"fresh (never reuse) or cached_ok"`
		ParentEventID *string        `json:"parent_event_id,omitempty" jsonschema:"the event the call follows from"`
	}
	ProposeInput struct {
		Kind            string  `json:"kind" jsonschema:"deny_scope, allow_scope or policy_note"`
		Subagent        string  `json:"subagent" jsonschema:"the sub-agent the rule is about"`
		Tool            *string `json:"tool,omitempty" jsonschema:"the tool the rule is about; omit for the whole sub-agent"`
		Note            *string `json:"note,omitempty" jsonschema:"why, for the person who will ratify"`
		BlockedAttempts int     `json:"blocked_attempts" jsonschema:"the evidence: how many blocked attempts were seen"`
	}
	ListProposalsInput struct {
		Status   *string `json:"status,omitempty" jsonschema:"proposed, ratified, enacted or rejected"`
		Subagent *string `json:"subagent,omitempty" jsonschema:"only proposals about this sub-agent"`
	}
)

var (
	no, yes = new(bool), func() *bool { b := true; return &b }()
	// readOnly tools change nothing; additive ones append to the record;
	// destructive ones take something away (a grant).
	readOnly    = mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no}
	additive    = mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no}
	destructive = mcp.ToolAnnotations{DestructiveHint: yes, IdempotentHint: true, OpenWorldHint: no}
)

// tool defines a typed tool over the Service.
func tool[In any](name string, scope domain.Scope, ann mcp.ToolAnnotations, description string,
	run func(ctx context.Context, svc Service, in In) (any, error)) Tool {
	call := func(ctx context.Context, resolve Resolver, log *slog.Logger, header http.Header, in In) (res *mcp.CallToolResult, out any) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("mcp tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
				res, out = refusal("internal", "the tool failed; the failure has been logged"), nil
			}
		}()
		svc, err := resolve(ctx, Extra{Header: header})
		if err != nil {
			return refusalOf(err), nil
		}
		v, err := run(ctx, svc, in)
		if err != nil {
			return refusalOf(err), nil
		}
		return nil, v
	}
	add := func(s *mcp.Server, resolve Resolver, log *slog.Logger) {
		a := ann
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: description, Annotations: &a},
			func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
				var header http.Header
				if req != nil && req.Extra != nil {
					header = req.Extra.Header
				}
				res, out := call(ctx, resolve, log, header, in)
				return res, out, nil
			})
	}
	t := Tool{Name: name, Scope: scope, add: add}
	if ann.ReadOnlyHint {
		t.direct = directCall(call)
	}
	return t
}

// Options configure a server of the tools.
type Options struct {
	// Allowed reports whether the caller's key holds scope; nil: every
	// tool is listed (stdio, where the service answers scope_missing).
	Allowed func(scope domain.Scope) bool
	Log     *slog.Logger
}

// New returns an MCP server offering the tools the caller may call.
func New(resolve Resolver, opts Options) *mcp.Server {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "auditchain", Version: Version}, &mcp.ServerOptions{
		Instructions: "auditchain records what agents were allowed to do and did, and gates sub-agents' tool calls. " +
			"Check the gate (gate_check) before a sub-agent acts, record_use for each call it makes, and record_event what happened. " +
			"A refusal is a tool error carrying the service's code and reason.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Logger:       log,
	})
	s.AddReceivingMiddleware(recoverPanics(log))
	for _, t := range Tools {
		if opts.Allowed == nil || opts.Allowed(t.Scope) {
			t.add(s, resolve, log)
		}
	}
	return s
}

// recoverPanics turns a panic in any handler of a request into an internal
// error answer, logged with its stack: the SDK recovers none, and a handler
// runs on a goroutine of its own, so one panic would end the process — over
// HTTP, the whole service.
func recoverPanics(log *slog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if p := recover(); p != nil {
					log.Error("mcp: a handler panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
					res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error; it has been logged"}
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// Refusal is the structured content of a tool error: the service's code
// (a problem's code, or the gate's status) and reason.
type Refusal struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
	// Status is the HTTP status of the service's answer (0 when none came).
	Status int `json:"status,omitempty"`
	// Gate is the gate's whole answer when the gate said no.
	Gate *api.GrantStatus `json:"gate,omitempty"`
}

// gateRefusal is a gate's no, carried as an error to refusalOf.
type gateRefusal struct{ status *api.GrantStatus }

func (g *gateRefusal) Error() string { return g.status.Status + ": " + g.status.Reason }

// CodeUnreachable is the code of a refusal when the service could not be
// asked (network, timeout): the call fails closed.
const CodeUnreachable = "service_unreachable"

// refusalOf turns an error of the service into a tool error result.
func refusalOf(err error) *mcp.CallToolResult { return refusalResult(refusalFrom(err)) }

// refusalFrom is the refusal an error of the service stands for.
func refusalFrom(err error) Refusal {
	var pe *client.Error
	var gr *gateRefusal
	switch {
	case errors.As(err, &gr):
		return Refusal{Code: gr.status.Status, Reason: gr.status.Reason, Status: 200, Gate: gr.status}
	case errors.As(err, &pe):
		reason := pe.Detail
		if reason == "" {
			reason = pe.Title
		}
		for _, f := range pe.Errors {
			reason += "; " + f.Field + ": " + f.Message
		}
		return Refusal{Code: pe.Code, Reason: reason, Status: pe.Status}
	default:
		return Refusal{Code: CodeUnreachable, Reason: err.Error()}
	}
}

func refusal(code, reason string) *mcp.CallToolResult {
	return refusalResult(Refusal{Code: code, Reason: reason})
}

func refusalResult(r Refusal) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, StructuredContent: r,
		Content: []mcp.Content{&mcp.TextContent{Text: r.text()}}}
}

// text is the refusal as a model reads it.
func (r Refusal) text() string { return fmt.Sprintf("refused: %s: %s", r.Code, r.Reason) }
