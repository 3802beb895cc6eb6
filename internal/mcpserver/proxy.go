package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/api"
)

// ProxyOptions configure a Proxy.
type ProxyOptions struct {
	// Subagent is the sub-agent the gate checks every call for.
	Subagent string
	// FailOpen lets calls through (recorded when the service is back)
	// while the service cannot be reached; the default refuses them (fail
	// closed).
	FailOpen bool
	// Service is the gate and the record.
	Service Service
	Log     *slog.Logger
	// Now is the clock of the proxy's own records (time.Now when nil).
	Now func() time.Time
	// ApprovalWait is how long a call held for a person's approval waits
	// for the decision before it is refused (proxy_approval.go); 0 refuses
	// it at once, naming the approval.
	ApprovalWait time.Duration
	// Approver, when set, decides a held call on the host's user's answer
	// to an elicitation/create, when the host declared form elicitation
	// (proxy_elicit.go); within ApprovalWait. Its credential must be
	// another identity than Service's.
	Approver Approver
	// SendArgsText sends the call's arguments as text (their RFC 8785
	// form, api.CutArgsText) with each call it asks the gate about, for a
	// person approving a call a rule holds; off by default, since the
	// record keeps hashes, not text (docs/approvals.md).
	SendArgsText bool
}

// Proxy relays MCP between a host and an upstream MCP server, both over
// stdio, and puts every tools/call through the gate and onto the chain: a
// tool_call event and a tool_result event carrying SHA-256 hashes of the
// canonical arguments and result — never their text.
//
// It relays the JSON-RPC messages themselves rather than serving the tools
// again through an SDK: the tools reach the host exactly as the upstream
// lists them (execution, annotations, icons, _meta, pagination), the
// upstream sees exactly the capabilities the host declared, ids and
// progress tokens keep their bytes, and no ordering of the upstream's
// messages meets a half-built proxy. The proxy speaks for itself only in
// initialize (the capabilities it relays), ping, and the calls it refuses.
type Proxy struct {
	opts   ProxyOptions
	log    *slog.Logger
	now    func() time.Time
	up     *wire
	closer io.Closer
	upDone chan struct{} // closed when the upstream's output ends
	rec    *recordQueue

	mu        sync.Mutex
	host      *wire    // nil until Serve
	hostReady bool     // the host's initialize is answered
	toHost    [][]byte // upstream messages held until then
	upClosed  bool
	nextUp    int64
	upCalls   map[string]chan *message // the proxy's requests upstream, by idKey
	nextHost  int64
	relayed   map[string]*message        // the upstream's requests relayed to the host, by the host-facing idKey
	hostIDOf  map[string]json.RawMessage // the host-facing id of each, by the upstream's idKey
	inflight  map[string]*hostCall       // the host's requests being served, by idKey
	ownCalls  map[string]chan *message   // the proxy's own requests to the host, by idKey
	// hostElicit: the host declared form elicitation; hostClient: its
	// clientInfo (name and version), for the note of a decision it made.
	hostElicit bool
	hostClient string
	calls      sync.WaitGroup
	// approvals are the approvals of held calls, by tool and arguments
	// digest, for the model's retry of the same call (proxy_approval.go).
	approvals heldApprovals
}

// hostCall is a request of the host being served.
type hostCall struct {
	m        *message
	mu       sync.Mutex
	canceled chan struct{} // closed when the host cancels it
	upID     json.RawMessage
}

// proxyVersions are the protocol versions the proxy relays, newest first: a
// host asking for a later one is offered the newest of these.
var proxyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// maxHeldMessages bounds the upstream messages held until the host's
// initialize is answered.
const maxHeldMessages = 1024

var errCanceled = errors.New("the host cancelled the request")

// NewProxy starts relaying for the upstream server behind upstream (its
// stdout to read, its stdin to write; CommandUpstream starts a command).
// Serve the host with Serve; Close ends the upstream.
func NewProxy(upstream io.ReadWriteCloser, opts ProxyOptions) (*Proxy, error) {
	if opts.Subagent == "" {
		return nil, errors.New("mcp proxy: a sub-agent name is needed")
	}
	p := &Proxy{opts: opts, log: opts.Log, now: opts.Now, closer: upstream, upDone: make(chan struct{}),
		upCalls: map[string]chan *message{}, relayed: map[string]*message{}, hostIDOf: map[string]json.RawMessage{},
		inflight: map[string]*hostCall{}, ownCalls: map[string]chan *message{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.rec = &recordQueue{svc: opts.Service, log: p.log}
	p.up = newWire(upstream, upstream, false, p.log)
	go p.readUpstream()
	return p, nil
}

// Serve relays between the host (its requests on in, the answers to out)
// and the upstream until the host closes in (nil), the upstream ends (an
// error) or ctx ends. Requests under way are answered before it returns.
func (p *Proxy) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	p.mu.Lock()
	if p.host != nil {
		p.mu.Unlock()
		return errors.New("mcp proxy: one host only")
	}
	p.host = newWire(in, out, true, p.log)
	p.mu.Unlock()
	hostErr := make(chan error, 1)
	go func() {
		for {
			m, err := p.host.read()
			if err != nil {
				hostErr <- err
				return
			}
			p.fromHost(ctx, m)
		}
	}()
	var err error
	select {
	case err = <-hostErr:
		if errors.Is(err, io.EOF) {
			err = nil
		}
	case <-p.upDone:
		err = errors.New("mcp proxy: the upstream server closed its output")
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.calls.Wait()
	return err
}

// Flush sends every record waiting (or logs why one could not be sent)
// before it returns.
func (p *Proxy) Flush() { p.rec.flush(false) }

// Close sends the waiting records, then ends the upstream (for a command:
// its stdin closed, then SIGTERM, then SIGKILL). A call that ends after
// Close records its result at once.
func (p *Proxy) Close() error {
	p.rec.flush(true)
	return p.closer.Close()
}

// readUpstream handles the upstream's messages until its output ends.
func (p *Proxy) readUpstream() {
	defer func() {
		p.mu.Lock()
		p.upClosed = true
		for k, ch := range p.upCalls {
			ch <- nil
			delete(p.upCalls, k)
		}
		p.mu.Unlock()
		close(p.upDone)
	}()
	for {
		m, err := p.up.read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.log.Warn("mcp proxy: reading the upstream failed", "err", err)
			}
			return
		}
		p.safely("upstream "+m.method, nil, func() { p.fromUpstream(m) })
	}
}

// safely runs f; a panic is logged and, for a request of the host, answered
// as an internal error: the session goes on.
func (p *Proxy) safely(what string, req *message, f func()) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("mcp proxy: a handler panicked", "what", what, "panic", r, "stack", string(debug.Stack()))
			if req != nil {
				_ = p.host.answer(req, nil, &rpcError{Code: codeInternalError, Message: "internal error in the proxy; it has been logged"})
			}
		}
	}()
	f()
}

// fromUpstream relays one message of the upstream.
func (p *Proxy) fromUpstream(m *message) {
	switch {
	case m.isRequest() && m.method == "ping":
		// Not from this loop: the upstream may be busy writing to us.
		go p.up.answer(m, nil, nil)
	case m.isRequest():
		// roots/list, sampling, elicitation…: the host answers (the upstream
		// asks only for what the host declared).
		p.mu.Lock()
		p.nextHost++
		id := json.RawMessage(strconv.AppendInt(nil, p.nextHost, 10))
		p.relayed[idKey(id)] = m
		p.hostIDOf[idKey(m.id)] = id
		p.mu.Unlock()
		p.toHostOrHold(encodeRequest(id, m.method, m.params))
	case m.isNotification():
		switch {
		case m.method == "notifications/cancelled":
			p.upstreamCancelled(m)
		case offeredNotification(m.method):
			p.toHostOrHold(encodeRequest(nil, m.method, m.params))
		}
	default:
		p.mu.Lock()
		ch := p.upCalls[idKey(m.id)]
		delete(p.upCalls, idKey(m.id))
		p.mu.Unlock()
		if ch == nil {
			p.log.Warn("mcp proxy: an answer of the upstream matches no request", "id", string(m.id))
			return
		}
		ch <- m
	}
}

// offeredNotification reports whether a notification of the upstream goes
// to the host: not those of the features the proxy does not relay.
func offeredNotification(method string) bool {
	for _, prefix := range []string{"notifications/resources/", "notifications/prompts/", "notifications/tasks/"} {
		if len(method) >= len(prefix) && method[:len(prefix)] == prefix {
			return false
		}
	}
	return true
}

// upstreamCancelled relays the upstream's cancellation of a request it
// relayed to the host, under the host-facing id.
func (p *Proxy) upstreamCancelled(m *message) {
	var params map[string]json.RawMessage
	if json.Unmarshal(m.params, &params) != nil || params["requestId"] == nil {
		return
	}
	p.mu.Lock()
	id, ok := p.hostIDOf[idKey(params["requestId"])]
	if ok {
		delete(p.hostIDOf, idKey(params["requestId"]))
		delete(p.relayed, idKey(id))
	}
	p.mu.Unlock()
	if !ok {
		return
	}
	params["requestId"] = id
	b, _ := json.Marshal(params)
	p.toHostOrHold(encodeRequest(nil, m.method, b))
}

// toHostOrHold writes a message of the upstream to the host, or holds it
// until the host's initialize is answered: the host meets nothing of the
// upstream before it.
func (p *Proxy) toHostOrHold(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.hostReady {
		if len(p.toHost) >= maxHeldMessages {
			p.log.Warn("mcp proxy: a message of the upstream sent before initialize is dropped")
			return
		}
		p.toHost = append(p.toHost, b)
		return
	}
	_ = p.host.send(b)
}

// fromHost handles one message of the host: a request is served on its own
// goroutine; a notification or an answer is relayed at once, in order.
func (p *Proxy) fromHost(ctx context.Context, m *message) {
	switch {
	case m.isRequest():
		hc := &hostCall{m: m, canceled: make(chan struct{})}
		p.mu.Lock()
		p.inflight[idKey(m.id)] = hc
		p.mu.Unlock()
		p.calls.Add(1)
		go func() {
			defer p.calls.Done()
			defer func() {
				p.mu.Lock()
				if p.inflight[idKey(m.id)] == hc {
					delete(p.inflight, idKey(m.id))
				}
				p.mu.Unlock()
			}()
			p.safely(m.method, m, func() { p.serve(ctx, hc) })
		}()
	case m.isNotification():
		p.safely(m.method, nil, func() { p.hostNotification(m) })
	case m.id != nil:
		if p.ownAnswer(m) {
			return
		}
		p.mu.Lock()
		um := p.relayed[idKey(m.id)]
		delete(p.relayed, idKey(m.id))
		if um != nil {
			delete(p.hostIDOf, idKey(um.id))
		}
		p.mu.Unlock()
		if um == nil {
			p.log.Warn("mcp proxy: an answer of the host matches no request", "id", string(m.id))
			return
		}
		_ = p.up.answerRaw(um, m.result, m.err)
	}
}

// hostNotification relays a notification of the host; a cancellation
// follows its request upstream under the id the proxy gave it there.
func (p *Proxy) hostNotification(m *message) {
	if m.method != "notifications/cancelled" {
		_ = p.up.send(encodeRequest(nil, m.method, m.params))
		return
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(m.params, &params) != nil || params["requestId"] == nil {
		return
	}
	p.mu.Lock()
	hc := p.inflight[idKey(params["requestId"])]
	p.mu.Unlock()
	if hc == nil {
		return
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	select {
	case <-hc.canceled:
		return
	default:
		close(hc.canceled)
	}
	if hc.upID != nil {
		params["requestId"] = hc.upID
		b, _ := json.Marshal(params)
		_ = p.up.send(encodeRequest(nil, m.method, b))
	}
}

// serve answers one request of the host.
func (p *Proxy) serve(ctx context.Context, hc *hostCall) {
	m := hc.m
	switch m.method {
	case "initialize":
		p.initialize(ctx, hc)
	case "ping":
		_ = p.host.answer(m, nil, nil)
	case "tools/list", "logging/setLevel":
		a, err := p.forward(ctx, hc, m.method, m.params)
		p.answerForwarded(hc, a, err)
	case "tools/call":
		p.toolCall(ctx, hc)
	default:
		// Resources, prompts, completions and tasks are not relayed: the
		// gate is about tool calls, and reading them would go around it.
		_ = p.host.answer(m, nil, &rpcError{Code: codeMethodNotFound,
			Message: "Method not found: " + m.method + " (auditchain mcp proxy relays tools and logging only)"})
	}
}

// forward sends a request upstream under an id of the proxy's and waits
// for its answer.
func (p *Proxy) forward(ctx context.Context, hc *hostCall, method string, params json.RawMessage) (*message, error) {
	p.mu.Lock()
	if p.upClosed {
		p.mu.Unlock()
		return nil, errors.New("the upstream server has closed its output")
	}
	p.nextUp++
	id := json.RawMessage(strconv.AppendInt(nil, p.nextUp, 10))
	ch := make(chan *message, 1)
	p.upCalls[idKey(id)] = ch
	p.mu.Unlock()
	drop := func() {
		p.mu.Lock()
		delete(p.upCalls, idKey(id))
		p.mu.Unlock()
	}
	hc.mu.Lock()
	select {
	case <-hc.canceled:
		hc.mu.Unlock()
		drop()
		return nil, errCanceled
	default:
	}
	hc.upID = id
	err := p.up.send(encodeRequest(id, method, params))
	hc.mu.Unlock()
	if err != nil {
		drop()
		return nil, fmt.Errorf("writing to the upstream server: %w", err)
	}
	select {
	case a := <-ch:
		if a == nil {
			return nil, errors.New("the upstream server closed its output before answering")
		}
		return a, nil
	case <-hc.canceled:
		drop()
		return nil, errCanceled
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}

// answerForwarded answers the host with the upstream's answer as it came,
// or an error of the proxy's; a cancelled request is not answered (MCP:
// cancellation).
func (p *Proxy) answerForwarded(hc *hostCall, a *message, err error) {
	switch {
	case errors.Is(err, errCanceled):
	case err != nil:
		_ = p.host.answer(hc.m, nil, &rpcError{Code: codeInternalError, Message: "auditchain mcp proxy: " + err.Error()})
	default:
		_ = p.host.answerRaw(hc.m, a.result, a.err)
	}
}

// initialize relays the host's initialize: the upstream sees the host's
// own capabilities and client information (nothing declared on the host's
// behalf) and a protocol version the proxy relays; the host sees the
// upstream's answer with the capabilities the proxy relays (tools,
// logging).
func (p *Proxy) initialize(ctx context.Context, hc *hostCall) {
	m := hc.m
	var params map[string]json.RawMessage
	if json.Unmarshal(m.params, &params) != nil {
		_ = p.host.answer(m, nil, &rpcError{Code: codeInvalidParams, Message: "initialize needs params"})
		return
	}
	var asked string
	_ = json.Unmarshal(params["protocolVersion"], &asked)
	var info struct{ Name, Version string }
	_ = json.Unmarshal(params["clientInfo"], &info)
	p.mu.Lock()
	p.hostElicit = hostElicitsForms(params["capabilities"])
	p.hostClient = strings.TrimSpace(info.Name + " " + info.Version)
	elicit := p.hostElicit
	p.mu.Unlock()
	if p.opts.Approver != nil && !elicit {
		p.log.Warn("mcp proxy: the host declared no form elicitation, so a held call waits for a decision through the API only")
	}
	if asked > proxyVersions[0] {
		params["protocolVersion"], _ = json.Marshal(proxyVersions[0])
	}
	out, _ := json.Marshal(params)
	a, err := p.forward(ctx, hc, m.method, out)
	if err != nil || a.err != nil {
		p.answerForwarded(hc, a, err)
		return
	}
	var res map[string]json.RawMessage
	var version string
	if json.Unmarshal(a.result, &res) != nil || json.Unmarshal(res["protocolVersion"], &version) != nil {
		_ = p.host.answer(m, nil, &rpcError{Code: codeInternalError, Message: "auditchain mcp proxy: the upstream's initialize result cannot be read"})
		return
	}
	if !slices.Contains(proxyVersions, version) {
		_ = p.host.answer(m, nil, &rpcError{Code: codeInternalError,
			Message: "auditchain mcp proxy: the upstream server speaks protocol version " + version + ", which the proxy does not relay"})
		return
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(res["capabilities"], &caps)
	relayed := map[string]json.RawMessage{}
	for _, k := range []string{"tools", "logging"} {
		if v, ok := caps[k]; ok {
			relayed[k] = v
		}
	}
	res["capabilities"], _ = json.Marshal(relayed)
	result, _ := json.Marshal(res)
	p.host.negotiated(version)
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.host.answer(m, result, nil)
	p.hostReady = true
	for _, b := range p.toHost {
		_ = p.host.send(b)
	}
	p.toHost = nil
}

// toolCall gates, meters, forwards and records one tools/call.
func (p *Proxy) toolCall(ctx context.Context, hc *hostCall) {
	m := hc.m
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      json.RawMessage `json:"task"`
	}
	if json.Unmarshal(m.params, &params) != nil || params.Name == "" {
		_ = p.host.answer(m, nil, &rpcError{Code: codeInvalidParams, Message: "tools/call needs params with a name"})
		return
	}
	if params.Task != nil {
		_ = p.host.answer(m, nil, &rpcError{Code: codeInvalidParams,
			Message: "auditchain mcp proxy does not relay task-augmented calls (it declares no tasks capability)"})
		return
	}
	name, args := params.Name, params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	argsHash, err := ArgumentsHash(args)
	if err != nil {
		_ = p.host.answer(m, proxyRefusal(Refusal{Code: "invalid_arguments", Reason: "the arguments cannot be hashed: " + err.Error()}), nil)
		return
	}
	callID := newEventID()
	var argsText *string
	if p.opts.SendArgsText {
		if c, err := jcs.Transform(args); err == nil { // ArgumentsHash canonicalised it already
			t := api.CutArgsText(c)
			argsText = &t
		}
	}
	refused, callID := p.gate(ctx, name, callID, argsHash, args, argsText, hc.canceled)
	if refused != nil {
		select {
		case <-hc.canceled: // a cancelled request is not answered (MCP: cancellation)
		default:
			_ = p.host.answer(m, refused, nil)
		}
		return
	}

	a, err := p.forward(ctx, hc, m.method, m.params)
	result := map[string]any{"upstream_tool": name}
	switch {
	case errors.Is(err, errCanceled):
		result["cancelled"] = true
	case err != nil || a.err != nil:
		result["protocol_error"] = true
	default:
		var r struct {
			IsError bool `json:"isError"`
		}
		h, herr := ResultHash(a.result)
		if herr != nil || json.Unmarshal(a.result, &r) != nil {
			result["protocol_error"] = true
			break
		}
		result["result_sha256"], result["is_error"] = h, r.IsError
	}
	// The result is recorded after the call (it has happened either way),
	// with the host's next call, or after ResultDelay on its own; it waits
	// before the host has the answer, so that the next call carries it.
	raw, _ := json.Marshal(result)
	p.rec.add(record{ToolResult: api.ToolResult{EventID: new(ResultEventID(callID)), ParentID: &callID, Tool: &name, Raw: raw}})
	p.answerForwarded(hc, a, err)
}
