package mcpserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
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

	// results are tool_result events not yet sent: each goes with the next
	// call's request (one commit for both), or after ResultDelay without a
	// call, on its own.
	resultsMu sync.Mutex
	results   []api.ToolResult
	flushing  *time.Timer // armed while results wait
	sending   sync.Mutex  // held while results are sent alone
	closed    bool        // Close began: results are sent at once
	// retryIn is the wait before the next lone send: ResultDelay, doubled
	// after each failure up to maxRetryDelay while the service is away.
	retryIn time.Duration
}

const maxRetryDelay = 5 * time.Second

// maxWaitingResults bounds the results kept while the service cannot take
// them; beyond it the oldest are dropped, and logged.
const maxWaitingResults = 4096

// ResultDelay is how long a tool_result waits for the next call to carry
// it before the proxy sends it alone.
const ResultDelay = 50 * time.Millisecond

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

// Flush sends every tool_result waiting (or logs why one could not be
// sent) before it returns.
func (p *Proxy) Flush() {
	p.resultsMu.Lock()
	if p.flushing != nil {
		p.flushing.Stop()
		p.flushing = nil
	}
	p.resultsMu.Unlock()
	p.sendResults(false)
}

// queueResult keeps r for the next call and makes sure it is sent after
// ResultDelay if no call comes.
func (p *Proxy) queueResult(r api.ToolResult) {
	p.resultsMu.Lock()
	p.results = append(p.results, r)
	if !p.closed {
		p.armLocked()
		p.resultsMu.Unlock()
		return
	}
	p.resultsMu.Unlock()
	p.sendResults(false)
}

// armLocked arms the timer that sends the waiting results alone, unless it
// is armed (p.resultsMu held).
func (p *Proxy) armLocked() {
	if p.flushing != nil || len(p.results) == 0 {
		return
	}
	if over := len(p.results) - maxWaitingResults; over > 0 {
		p.log.Error("mcp proxy: tool_results dropped: the service has not taken them", "dropped", over)
		p.results = slices.Delete(p.results, 0, over)
	}
	p.flushing = time.AfterFunc(cmp.Or(p.retryIn, ResultDelay), func() {
		p.resultsMu.Lock()
		p.flushing = nil
		p.resultsMu.Unlock()
		p.sendResults(true)
	})
}

// takeResults hands the waiting results (at most the service's bound) to a
// call.
func (p *Proxy) takeResults() []api.ToolResult {
	p.resultsMu.Lock()
	defer p.resultsMu.Unlock()
	n := min(len(p.results), api.MaxToolCallResults)
	out := p.results[:n:n]
	p.results = p.results[n:]
	return out
}

// requeueResults puts back results a call could not deliver, ahead of the
// others, and arms the timer: the timer that was armed for them may have
// fired while the call was under way.
func (p *Proxy) requeueResults(rs []api.ToolResult) {
	p.resultsMu.Lock()
	defer p.resultsMu.Unlock()
	p.results = append(slices.Clone(rs), p.results...)
	p.armLocked()
}

// sendResults appends the waiting results one by one, in order. A result
// the service could not take is kept, and with retry set tried again after
// retryIn, which doubles with each failure up to maxRetryDelay (Flush, at
// exit, only logs it).
func (p *Proxy) sendResults(retry bool) {
	p.sending.Lock()
	defer p.sending.Unlock()
	rs := p.takeAllResults()
	defer func() {
		p.resultsMu.Lock()
		if len(p.results) == 0 || p.flushing == nil {
			p.retryIn = 0
		}
		p.resultsMu.Unlock()
	}()
	for i, r := range rs {
		_, err := p.opts.Service.Append(context.Background(), client.Event{EventID: r.EventID, EventType: api.EventToolResult,
			Tool: r.Tool, ParentID: r.ParentID, Raw: r.Raw})
		switch {
		case client.IsCode(err, "event_id_conflict"):
			// A call that failed to answer carried it after all: it is on
			// the record, stamped with that call's time.
			p.log.Info("mcp proxy: a tool_result was on the record already", "event_id", r.EventID)
		case err != nil && retry:
			p.log.Warn("mcp proxy: recording a tool_result failed; it is tried again", "event_id", r.EventID, "err", err)
			p.resultsMu.Lock()
			p.retryIn = min(2*cmp.Or(p.retryIn, ResultDelay), maxRetryDelay)
			p.resultsMu.Unlock()
			p.requeueResults(rs[i:])
			return
		case err != nil:
			p.log.Warn("mcp proxy: recording a tool_result failed", "event_id", r.EventID, "err", err)
		}
	}
}

func (p *Proxy) takeAllResults() []api.ToolResult {
	p.resultsMu.Lock()
	defer p.resultsMu.Unlock()
	out := p.results
	p.results = nil
	return out
}

// Close sends the waiting results, then ends the upstream session (and, for
// a command, the process). A call that ends after Close records its result
// at once.
func (p *Proxy) Close() error {
	p.resultsMu.Lock()
	p.closed = true
	p.resultsMu.Unlock()
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
	callID := newEventID()
	if refused := p.gate(ctx, name, callID, argsHash); refused != nil {
		return refused, nil
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
	// The result is recorded after the host has it (the call has happened
	// either way): with the next call, or after ResultDelay on its own.
	raw, merr := json.Marshal(result)
	if merr != nil {
		return nil, merr
	}
	parent := callID
	p.queueResult(api.ToolResult{EventID: ResultEventID(callID), ParentID: &parent, Tool: &name, Raw: raw})
	if err != nil {
		return nil, err // a protocol error of the upstream reaches the host as one
	}
	return res, nil
}

// gate puts the call through the gate in one request (POST /v1/tool-calls):
// the check, one use of the budget when it authorizes, and the tool_call
// event recording the decision are one commit, so nothing runs unrecorded
// or unmetered. It returns nil when the call may go upstream, else the
// refusal for the host: the gate's no, or a problem the service answered
// (never a reason to fail open), or the service unreachable (refused unless
// the operator chose --fail-open).
func (p *Proxy) gate(ctx context.Context, tool, callID, argsHash string) *mcp.CallToolResult {
	raw, _ := json.Marshal(map[string]any{"upstream_tool": tool, "arguments_sha256": argsHash})
	results := p.takeResults()
	res, err := p.opts.Service.GateToolCall(ctx, api.ToolCallRequest{Subagent: p.opts.Subagent, Tool: tool, EventID: callID, Raw: raw,
		Results: results})
	if err != nil && len(results) > 0 {
		// They may or may not be on the record: sent again, a result
		// already stored is left out by the service.
		p.requeueResults(results)
	}
	var pe *client.Error
	switch {
	case err == nil && res.Decision == api.DecisionAllow:
		return nil
	case err == nil:
		r := Refusal{Code: res.GateStatus, Reason: res.Reason, Status: 200}
		if res.ProposalID != nil {
			r.Reason += " (proposal " + *res.ProposalID + ")"
		}
		return refusalResult(r)
	case errors.As(err, &pe):
		return refusalOf(err)
	case !p.opts.FailOpen:
		return refusal(CodeUnreachable, "the service could not be reached, so the call is refused (fail closed): "+err.Error())
	}
	// Failing open: the call goes through, and the record is tried (the
	// service is likely down, so this usually fails and is logged).
	reason := "the service could not be reached (" + err.Error() + "); --fail-open lets the call through"
	decision := api.DecisionAllow
	if _, aerr := p.opts.Service.Append(ctx, client.Event{EventID: callID, EventType: api.EventToolCall, Tool: &tool, Decision: &decision,
		Raw: map[string]any{"upstream_tool": tool, "arguments_sha256": argsHash, "subagent": p.opts.Subagent,
			"fail_open": true, "proxy_error": reason}}); aerr != nil {
		p.log.Warn("mcp proxy: recording a tool_call failed", "tool", tool, "err", aerr)
	}
	return nil
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
