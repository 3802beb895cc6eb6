package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// Event types and decisions the proxy writes (SPEC.md: decision is one of
// allow, ask, deny).
const (
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	DecisionAllow   = "allow"
	DecisionDeny    = "deny"
)

// ProxyOptions configure a Proxy.
type ProxyOptions struct {
	// Subagent is the sub-agent the gate checks every call for.
	Subagent string
	// FailOpen lets calls through (recorded when possible) while the
	// service cannot be reached; the default refuses them (fail closed).
	FailOpen bool
	// Service is the gate and the record.
	Service Service
	Log     *slog.Logger
}

// Proxy serves an upstream MCP server's tools unchanged, except that every
// tools/call is checked at the gate, metered, and recorded on the chain as a
// tool_call event and a tool_result event carrying SHA-256 hashes of the
// canonical arguments and result — never their text.
type Proxy struct {
	opts     ProxyOptions
	log      *slog.Logger
	server   *mcp.Server
	upstream *mcp.ClientSession

	mu    sync.Mutex
	tools map[string]bool // the upstream tools the server offers

	pending sync.WaitGroup // tool_result appends under way
}

// NewProxy connects to the upstream server over transport (for example an
// mcp.CommandTransport) and mirrors its tools. Serve the returned Proxy's
// Server to the host; Close ends the upstream session.
func NewProxy(ctx context.Context, upstream mcp.Transport, opts ProxyOptions) (*Proxy, error) {
	if opts.Subagent == "" {
		return nil, errors.New("mcp proxy: a sub-agent name is needed")
	}
	p := &Proxy{opts: opts, log: opts.Log, tools: map[string]bool{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.server = mcp.NewServer(&mcp.Implementation{Name: "auditchain-proxy", Version: Version}, &mcp.ServerOptions{
		Logger:       p.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "auditchain-proxy", Version: Version}, &mcp.ClientOptions{
		Logger: p.log,
		// Upstream list changes and notifications pass through to the host.
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			if err := p.syncTools(ctx); err != nil {
				p.log.Warn("mcp proxy: re-reading the upstream tools failed", "err", err)
			}
		},
		LoggingMessageHandler: func(ctx context.Context, r *mcp.LoggingMessageRequest) {
			for ss := range p.server.Sessions() {
				_ = ss.Log(ctx, r.Params)
			}
		},
		ProgressNotificationHandler: func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
			for ss := range p.server.Sessions() {
				_ = ss.NotifyProgress(ctx, r.Params)
			}
		},
	})
	cs, err := c.Connect(ctx, upstream, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp proxy: connect to the upstream server: %w", err)
	}
	p.upstream = cs
	if err := p.syncTools(ctx); err != nil {
		cs.Close()
		return nil, fmt.Errorf("mcp proxy: list the upstream tools: %w", err)
	}
	return p, nil
}

// Server is the MCP server to serve to the host.
func (p *Proxy) Server() *mcp.Server { return p.server }

// Flush waits until every tool_result of the calls answered so far is
// recorded (or its failure logged).
func (p *Proxy) Flush() { p.pending.Wait() }

// Close waits for the pending records, then ends the upstream session (and,
// for a command, the process).
func (p *Proxy) Close() error {
	p.Flush()
	return p.upstream.Close()
}

// syncTools makes the served tools the upstream's; the SDK tells the host
// when the list changed.
func (p *Proxy) syncTools(ctx context.Context) error {
	seen := map[string]bool{}
	for t, err := range p.upstream.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		seen[t.Name] = true
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
		if err := p.addTool(t); err != nil {
			p.log.Warn("mcp proxy: an upstream tool is not served", "tool", t.Name, "err", err)
			delete(seen, t.Name)
		}
	}
	p.mu.Lock()
	var gone []string
	for name := range p.tools {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	p.tools = seen
	p.mu.Unlock()
	if len(gone) > 0 {
		p.server.RemoveTools(gone...)
	}
	return nil
}

// addTool serves an upstream tool; the SDK panics on a schema it cannot
// serve, which must not take the proxy down.
func (p *Proxy) addTool(t *mcp.Tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	p.server.AddTool(t, p.call)
	return nil
}

// verdict is the gate's answer for one call.
type verdict struct {
	allow   bool
	code    string // the gate's status or the problem's code
	reason  string
	grantID string
}

// call gates, meters, forwards and records one tools/call.
func (p *Proxy) call(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("mcp proxy: a call panicked", "tool", req.Params.Name, "panic", r)
			res, err = refusal("internal", "the proxy failed on this call; the failure has been logged"), nil
		}
	}()
	name := req.Params.Name
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	argsHash, err := ArgumentsHash(args)
	if err != nil {
		return refusal("invalid_arguments", "the arguments are not a JSON value: "+err.Error()), nil
	}
	v := p.authorize(ctx, name)
	callID := newEventID()
	raw := map[string]any{"upstream_tool": name, "subagent": p.opts.Subagent, "arguments_sha256": argsHash,
		"gate": v.code}
	if v.grantID != "" {
		raw["grant_id"] = v.grantID
	}
	decision := DecisionDeny
	if v.allow {
		decision = DecisionAllow
	}
	if _, err := p.opts.Service.Append(ctx, client.Event{EventID: callID, EventType: EventToolCall, Tool: &name,
		Decision: &decision, Raw: raw}); err != nil && v.allow && !p.opts.FailOpen {
		// Nothing runs unrecorded unless the operator chose to fail open.
		r := refusalOf(err).StructuredContent.(Refusal)
		return refusal(r.Code, "the call could not be recorded: "+r.Reason), nil
	} else if err != nil {
		p.log.Warn("mcp proxy: recording a tool_call failed", "tool", name, "err", err)
	}
	if !v.allow {
		return refusalResult(Refusal{Code: v.code, Reason: v.reason}), nil
	}

	res, err = p.upstream.CallTool(ctx, &mcp.CallToolParams{Meta: req.Params.Meta, Name: name, Arguments: args})
	result := map[string]any{"upstream_tool": name}
	if err != nil {
		result["protocol_error"] = true
	} else {
		resHash, herr := ResultHash(res)
		if herr != nil {
			return nil, herr
		}
		result["result_sha256"], result["is_error"] = resHash, res.IsError
	}
	// The result is recorded after the host has it: the call has happened
	// either way, and the host does not wait for one more append. Close
	// (and Flush) wait for these appends.
	p.pending.Add(1)
	go func() {
		defer p.pending.Done()
		parent := callID
		if _, err := p.opts.Service.Append(context.WithoutCancel(ctx), client.Event{EventID: ResultEventID(callID),
			EventType: EventToolResult, Tool: &name, Decision: &decision, ParentID: &parent, Raw: result}); err != nil {
			p.log.Warn("mcp proxy: recording a tool_result failed", "tool", name, "err", err)
		}
	}()
	if err != nil {
		return nil, err // a protocol error of the upstream reaches the host as one
	}
	return res, nil
}

// authorize asks the gate about tool for the sub-agent and, when it says
// yes, consumes one call of the grant's budget. The use route's answer is
// the authority: it is atomic, so concurrent calls never overspend, and a
// use it refuses is a refusal even after an authorized status.
func (p *Proxy) authorize(ctx context.Context, tool string) verdict {
	st, err := p.opts.Service.GrantStatus(ctx, api.GrantStatusQuery{Subagent: p.opts.Subagent, Tool: &tool})
	if err != nil {
		return p.unreachable(err)
	}
	if !st.Authorized {
		return verdict{code: st.Status, reason: st.Reason}
	}
	if st.GrantRecord == nil {
		return verdict{code: st.Status, reason: "the gate named no grant to meter"}
	}
	gid := st.GrantID
	if _, err := p.opts.Service.UseGrant(ctx, gid, api.UseRequest{Subagent: p.opts.Subagent, N: 1}); err != nil {
		var pe *client.Error
		if errors.As(err, &pe) {
			return verdict{code: pe.Code, reason: pe.Detail, grantID: gid}
		}
		return p.unreachable(err)
	}
	return verdict{allow: true, code: st.Status, reason: st.Reason, grantID: gid}
}

// unreachable is the verdict when the service could not answer: refuse,
// unless the operator chose to fail open. A problem the service answered
// (a 4xx) is never a reason to fail open.
func (p *Proxy) unreachable(err error) verdict {
	var pe *client.Error
	if errors.As(err, &pe) {
		return verdict{code: pe.Code, reason: pe.Detail}
	}
	if p.opts.FailOpen {
		return verdict{allow: true, code: "fail_open", reason: "the service could not be reached (" + err.Error() + "); --fail-open lets the call through"}
	}
	return verdict{code: CodeUnreachable, reason: "the service could not be reached, so the call is refused (fail closed): " + err.Error()}
}

// canonicalHash is the SHA-256 (hex) of the RFC 8785 form of JSON b.
func canonicalHash(b []byte) (string, error) {
	c, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// ResultHash is what the proxy records as result_sha256: the canonical hash
// of the tool result as JSON (its content, structuredContent and isError
// members), which a verifier holding the result recomputes.
func ResultHash(res *mcp.CallToolResult) (string, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return "", err
	}
	return canonicalHash(b)
}

// ArgumentsHash is what the proxy records as arguments_sha256: the
// canonical hash of the call's arguments ({} when absent).
func ArgumentsHash(args json.RawMessage) (string, error) { return canonicalHash(args) }

// ResultEventID is the event_id of the tool_result of the call callID:
// derived, so a retried append of the result is the same event.
func ResultEventID(callID string) string {
	sum := sha256.Sum256([]byte("tool_result:" + callID))
	return "evt-" + hex.EncodeToString(sum[:16])
}

func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt-" + hex.EncodeToString(b[:])
}
