package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
)

// MCP's stdio transport is JSON-RPC 2.0, one message (or, up to protocol
// 2025-03-26, one batch) per line. A wire reads and writes such a stream
// so that nothing the peer sends ends the session (JSON-RPC 2.0 §5, §6):
// a line that is not JSON is answered -32700 with id null, a message that
// is not a valid request or response -32600, and the reading goes on. Ids
// are kept as the bytes the peer sent, so an answer carries exactly the id
// of its request (a number above 2^53 included), and a batch is answered
// as one array once every request in it has its answer.

// maxLine bounds one line (one message or batch), as the SDK's
// DefaultMaxLineLength does; a longer line is answered -32600 and skipped.
const maxLine = 16 << 20

// JSON-RPC 2.0 error codes (§5.1).
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return strconv.Itoa(e.Code) + ": " + e.Message }

// message is one JSON-RPC message as read, its members as the peer wrote
// them.
type message struct {
	id        json.RawMessage // nil when absent
	method    string
	hasMethod bool
	params    json.RawMessage
	result    json.RawMessage
	err       json.RawMessage
	batch     *batch // the batch it came in, if any
	answered  atomic.Bool
}

func (m *message) isRequest() bool      { return m.hasMethod && m.id != nil }
func (m *message) isNotification() bool { return m.hasMethod && m.id == nil }

// idKey is a map key for an id: two ids are the same when they are the same
// string or the same number literal.
func idKey(id json.RawMessage) string {
	if len(id) > 0 && id[0] == '"' {
		var s string
		if json.Unmarshal(id, &s) == nil {
			return "s" + s
		}
	}
	return "n" + string(id)
}

// batch collects the answers to the requests of one incoming batch.
type batch struct {
	mu      sync.Mutex
	pending int
	answers [][]byte
}

// add keeps one answer; when it is the last one awaited, it returns the
// batch's whole answer.
func (b *batch) add(answer []byte, request bool) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers = append(b.answers, answer)
	if request {
		b.pending--
	}
	if b.pending > 0 {
		return nil
	}
	return append(append([]byte{'['}, bytes.Join(b.answers, []byte{','})...), ']')
}

// wire is one side of a stdio JSON-RPC stream. answerInvalid is set on the
// side whose peer is the client (the host): what cannot be read is answered
// there, and only logged on the other side (an upstream server's stray
// output).
type wire struct {
	in            *bufio.Reader
	out           io.Writer
	answerInvalid bool
	log           *slog.Logger

	wmu   sync.Mutex
	queue []*message // the rest of a batch being read

	// noBatches is set once a protocol version without batches (2025-06-18
	// and later) is negotiated; before that, and under 2025-03-26, a batch
	// is answered as one.
	noBatches atomic.Bool
	version   atomic.Pointer[string]
	// unreadable counts what could not be handled: lines and batch members
	// that are not JSON-RPC messages.
	unreadable atomic.Int64
}

func newWire(in io.Reader, out io.Writer, answerInvalid bool, log *slog.Logger) *wire {
	return &wire{in: bufio.NewReaderSize(in, 64<<10), out: out, answerInvalid: answerInvalid, log: log}
}

// negotiated records the protocol version of the session.
func (w *wire) negotiated(version string) {
	w.version.Store(&version)
	w.noBatches.Store(version >= "2025-06-18")
}

// send writes one line.
func (w *wire) send(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.out.Write(append(b, '\n'))
	return err
}

// answer answers request m (result, or else e) once; the answer to a request
// of a batch waits for the others.
func (w *wire) answer(m *message, result json.RawMessage, e *rpcError) error {
	return w.deliver(m, func() []byte { return encodeAnswer(m.id, result, e) })
}

// answerRaw answers request m with the answer's members as another peer
// wrote them (result, or else the error object, raw).
func (w *wire) answerRaw(m *message, result, errObj json.RawMessage) error {
	if errObj == nil {
		return w.answer(m, result, nil)
	}
	return w.deliver(m, func() []byte { return encodeRawAnswer(m.id, result, errObj) })
}

// deliver sends the answer to m once, or keeps it for m's batch.
func (w *wire) deliver(m *message, answer func() []byte) error {
	if !m.answered.CompareAndSwap(false, true) {
		return nil
	}
	b := answer()
	if m.batch != nil {
		if all := m.batch.add(b, true); all != nil {
			return w.send(all)
		}
		return nil
	}
	return w.send(b)
}

// encodeAnswer is the response with id (null when nil) carrying result, or
// else e.
func encodeAnswer(id, result json.RawMessage, e *rpcError) []byte {
	b := appendID([]byte(`{"jsonrpc":"2.0","id":`), id)
	if e != nil {
		eb, _ := json.Marshal(e)
		return appendMember(b, "error", eb)
	}
	if result == nil {
		result = json.RawMessage("{}")
	}
	return appendMember(b, "result", result)
}

// encodeRawAnswer is the response with id carrying a result or (when set)
// an error object as another peer wrote it.
func encodeRawAnswer(id, result, errObj json.RawMessage) []byte {
	if errObj == nil {
		return encodeAnswer(id, result, nil)
	}
	return appendMember(appendID([]byte(`{"jsonrpc":"2.0","id":`), id), "error", errObj)
}

func appendID(b []byte, id json.RawMessage) []byte {
	if id == nil {
		return append(b, "null"...)
	}
	return append(b, id...)
}

func appendMember(b []byte, name string, v json.RawMessage) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	b = append(b, v...)
	return append(b, '}')
}

// encodeRequest is a request (id set) or a notification (id nil).
func encodeRequest(id json.RawMessage, method string, params json.RawMessage) []byte {
	b := []byte(`{"jsonrpc":"2.0"`)
	if id != nil {
		b = append(append(b, `,"id":`...), id...)
	}
	mb, _ := json.Marshal(method)
	b = append(append(b, `,"method":`...), mb...)
	if params != nil {
		b = append(append(b, `,"params":`...), params...)
	}
	return append(b, '}')
}

// read returns the next message to handle. What cannot be handled (not
// JSON, not a JSON-RPC message, a batch where none is allowed, a line too
// long) is answered or logged here and skipped. The error is the stream's
// (io.EOF at its end).
func (w *wire) read() (*message, error) {
	for {
		if len(w.queue) > 0 {
			m := w.queue[0]
			w.queue = w.queue[1:]
			return m, nil
		}
		line, err := w.line()
		if line == nil {
			if err == nil {
				continue
			}
			return nil, err
		}
		w.take(line)
		if err != nil && len(w.queue) == 0 {
			return nil, err
		}
	}
}

// errLineTooLong marks a line beyond maxLine (its bytes are skipped).
var errLineTooLong = errors.New("line too long")

// line reads one line without its end; nil for a blank line. A line longer
// than maxLine is answered and skipped.
func (w *wire) line() ([]byte, error) {
	var long []byte
	tooLong := false
	for {
		frag, err := w.in.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(frag) > maxLine {
				tooLong, long = true, nil
			} else if !tooLong {
				long = append(long, frag...)
			}
			continue
		}
		switch {
		case tooLong || len(long)+len(frag) > maxLine:
			w.invalid(nil, codeInvalidRequest, "the message is longer than "+strconv.Itoa(maxLine)+" bytes")
			if err != nil {
				return nil, err
			}
			return nil, nil
		case long != nil:
			frag = append(long, frag...)
		}
		frag = bytes.TrimSpace(frag)
		if len(frag) == 0 {
			return nil, err
		}
		return frag, err
	}
}

// take parses one line into the read queue.
func (w *wire) take(line []byte) {
	if !json.Valid(line) {
		w.invalid(nil, codeParseError, "Parse error: the line is not JSON")
		return
	}
	if line[0] != '[' {
		m, id, e := parseMessage(line)
		if e != nil {
			w.invalid(id, codeInvalidRequest, e.Error())
			return
		}
		w.queue = append(w.queue, m)
		return
	}
	if w.noBatches.Load() {
		v := ""
		if p := w.version.Load(); p != nil {
			v = *p
		}
		w.invalid(nil, codeInvalidRequest, "Invalid Request: JSON-RPC batches are not part of MCP protocol version "+v)
		return
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil || len(raws) == 0 {
		w.invalid(nil, codeInvalidRequest, "Invalid Request: an empty batch")
		return
	}
	b := &batch{}
	var refusals [][]byte
	for _, raw := range raws {
		m, id, e := parseMessage(raw)
		if e != nil {
			w.unreadable.Add(1)
			w.log.Warn("mcp: a message of a batch cannot be read", "err", e)
			if w.answerInvalid {
				refusals = append(refusals, encodeAnswer(id, nil, &rpcError{Code: codeInvalidRequest, Message: "Invalid Request: " + e.Error()}))
			}
			continue
		}
		if m.isRequest() {
			m.batch = b
			b.pending++
		}
		w.queue = append(w.queue, m)
	}
	// Answers to unreadable members go with the batch's; a batch of
	// notifications and unreadable members is answered at once.
	var all []byte
	for _, r := range refusals {
		all = b.add(r, false)
	}
	if all != nil && b.pending == 0 {
		_ = w.send(all)
	}
}

// invalid answers (or, from a server, logs) what cannot be handled.
func (w *wire) invalid(id json.RawMessage, code int, msg string) {
	w.unreadable.Add(1)
	w.log.Warn("mcp: a message cannot be read", "code", code, "err", msg)
	if w.answerInvalid {
		_ = w.send(encodeAnswer(id, nil, &rpcError{Code: code, Message: msg}))
	}
}

// parseMessage reads one JSON-RPC 2.0 message. On failure it returns the
// message's id when that id is itself valid (for the answer), and why.
func parseMessage(raw []byte) (m *message, id json.RawMessage, err error) {
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		return nil, nil, errors.New("a JSON-RPC message is a JSON object")
	}
	m = &message{params: f["params"], result: f["result"], err: f["error"]}
	if rawID, ok := f["id"]; ok {
		switch c := rawID[0]; {
		case c == '"' || c == '-' || (c >= '0' && c <= '9'):
			m.id = rawID
		case c == 'n' && !hasKey(f, "method"):
			// A response to a message whose id could not be read.
		default:
			return nil, nil, errors.New("the id is not a string or a number")
		}
	}
	if string(f["jsonrpc"]) != `"2.0"` {
		return nil, m.id, errors.New(`jsonrpc must be "2.0"`)
	}
	if rawMethod, ok := f["method"]; ok {
		if json.Unmarshal(rawMethod, &m.method) != nil {
			return nil, m.id, errors.New("the method is not a string")
		}
		m.hasMethod = true
		if p := m.params; p != nil && p[0] != '{' && p[0] != '[' {
			return nil, m.id, errors.New("params must be an object or an array")
		}
		return m, nil, nil
	}
	if (m.result == nil) == (m.err == nil) {
		return nil, m.id, errors.New("a response has a result or an error, and not both")
	}
	return m, nil, nil
}

func hasKey(f map[string]json.RawMessage, k string) bool {
	_, ok := f[k]
	return ok
}
