package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport serves an MCP server (the SDK's) over a stdio stream read
// by a wire (wire.go): the SDK's own stdio connection ends the session on
// a line that is not JSON and reads ids through a float64. The SDK sees
// each request under an id of this connection's own, and its answer goes
// back under the id the host sent.
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	Log *slog.Logger

	mu   sync.Mutex
	conn *stdioConn // the last Connect's
}

// Session reports what the last connection saw, for a command that must
// tell a session that ended normally (the host closed stdin after
// initialize, MCP's stdio shutdown) from input that never was one:
// whether a protocol version was negotiated (initialize, or
// server/discover, answered with success), and how many lines or batch
// members could not be read as JSON-RPC messages.
func (t *StdioTransport) Session() (negotiated bool, unreadable int64) {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		return false, 0
	}
	return c.w.version.Load() != nil, c.w.unreadable.Load()
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	log := t.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &stdioConn{w: newWire(t.In, t.Out, true, log), incoming: make(chan readOne), closed: make(chan struct{}),
		requests: map[int64]pendingRequest{}, byHostID: map[string]int64{}, answered: make(chan struct{})}
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	go c.readLoop()
	return c, nil
}

type readOne struct {
	m   *message
	err error
}

type pendingRequest struct {
	m      *message
	method string
}

type stdioConn struct {
	w        *wire
	incoming chan readOne
	closed   chan struct{}
	once     sync.Once

	mu       sync.Mutex
	next     int64
	requests map[int64]pendingRequest // the host's requests the SDK has not answered
	byHostID map[string]int64         // their ids as the host sent them (idKey)
	answered chan struct{}            // closed (and replaced) each time one of requests is answered
}

func (c *stdioConn) readLoop() {
	for {
		m, err := c.w.read()
		select {
		case c.incoming <- readOne{m, err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read implements mcp.Connection.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var r readOne
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case r = <-c.incoming:
		}
		if r.err != nil {
			// The end of stdin ends the session, but only once what was
			// read has been answered: a host that writes its requests
			// and closes stdin (a pipe) still reads every answer.
			c.awaitAnswers(ctx)
			return nil, r.err
		}
		if msg := c.toSDK(r.m); msg != nil {
			return msg, nil
		}
	}
}

// awaitAnswers returns once every request read has been answered, or ctx
// ends, or the connection is closed.
func (c *stdioConn) awaitAnswers(ctx context.Context) {
	for {
		c.mu.Lock()
		n, answered := len(c.requests), c.answered
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-answered:
		case <-ctx.Done():
			return
		case <-c.closed:
			return
		}
	}
}

// toSDK is m as the SDK reads it, or nil when m is not for the SDK.
func (c *stdioConn) toSDK(m *message) jsonrpc.Message {
	switch {
	case m.isRequest():
		c.mu.Lock()
		c.next++
		n := c.next
		c.requests[n] = pendingRequest{m: m, method: m.method}
		c.byHostID[idKey(m.id)] = n
		c.mu.Unlock()
		id, _ := jsonrpc.MakeID(float64(n)) // exact: n stays far below 2^53
		return &jsonrpc.Request{ID: id, Method: m.method, Params: m.params}
	case m.isNotification():
		params := m.params
		if m.method == "notifications/cancelled" {
			params = c.cancelled(params)
		}
		return &jsonrpc.Request{Method: m.method, Params: params}
	case m.id == nil:
		return nil // an answer to something unreadable the SDK never sent
	}
	// An answer to a request of the SDK: its ids are the SDK's own.
	msg, err := jsonrpc.DecodeMessage(encodeRawAnswer(m.id, m.result, m.err))
	if err != nil {
		c.w.log.Warn("mcp: an answer of the host cannot be read", "err", err)
		return nil
	}
	return msg
}

// cancelled rewrites a cancellation's requestId to the SDK's id of that
// request.
func (c *stdioConn) cancelled(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p["requestId"] == nil {
		return params
	}
	c.mu.Lock()
	n, ok := c.byHostID[idKey(p["requestId"])]
	c.mu.Unlock()
	if !ok {
		return params
	}
	b, _ := json.Marshal(n)
	p["requestId"] = b
	out, _ := json.Marshal(p)
	return out
}

// Write implements mcp.Connection.
func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		return c.w.send(b)
	}
	n, _ := resp.ID.Raw().(int64)
	c.mu.Lock()
	p, found := c.requests[n]
	if found {
		delete(c.requests, n)
		if c.byHostID[idKey(p.m.id)] == n {
			delete(c.byHostID, idKey(p.m.id))
		}
	}
	c.mu.Unlock()
	if found {
		// After the answer is written: the end of stdin waits for it.
		defer c.signalAnswered()
	}
	if !found {
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		return c.w.send(b)
	}
	if resp.Error != nil {
		return c.w.answer(p.m, nil, wireError(resp.Error))
	}
	switch p.method {
	case "initialize":
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &r) == nil && r.ProtocolVersion != "" {
			c.w.negotiated(r.ProtocolVersion)
		}
	case "server/discover":
		c.w.negotiated("2026-07-28") // the stateless revision: no batches
	}
	return c.w.answer(p.m, resp.Result, nil)
}

func (c *stdioConn) signalAnswered() {
	c.mu.Lock()
	close(c.answered)
	c.answered = make(chan struct{})
	c.mu.Unlock()
}

// wireError is the JSON-RPC error object of an SDK error, as the SDK would
// write it.
func wireError(err error) *rpcError {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		msg := we.Message
		if err != error(we) {
			msg = err.Error()
		}
		return &rpcError{Code: int(we.Code), Message: msg, Data: we.Data}
	}
	return &rpcError{Code: codeInternalError, Message: err.Error()}
}

// Close implements mcp.Connection.
func (c *stdioConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// SessionID implements mcp.Connection: stdio has no session id.
func (c *stdioConn) SessionID() string { return "" }
