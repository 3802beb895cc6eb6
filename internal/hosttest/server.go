package hosttest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// API names the wire protocol a request spoke.
type API string

const (
	Anthropic API = "anthropic" // Messages API (Claude Code)
	OpenAI    API = "openai"    // Responses API (Codex CLI)
	Gemini    API = "gemini"    // generateContent (Gemini CLI)
	Proxy     API = "proxy"     // a request meant for another host, refused
	Unknown   API = "unknown"   // anything else, answered 404
)

// Request is one request the server received: the raw exchange and, for a
// model call, the conversation normalized across the three APIs.
type Request struct {
	API    API
	Method string
	Path   string // path and query as sent (for Proxy: the target)
	Header http.Header
	Body   []byte
	Status int           // the status the server answered
	At     time.Duration // when it arrived, counted from the server's start

	Model    string
	Stream   bool
	Tools    []Tool    // the tools the host offered; none on a side request
	Messages []Message // the conversation, oldest first, system prompt left out

	// Reply is what the server answered a model call, with the ids it gave
	// the calls; nil for anything else.
	Reply *Reply
}

// Tool is one tool the host offered the model.
type Tool struct {
	Name string
	// Freeform is an OpenAI custom tool whose input is text, not a JSON
	// object (Codex's apply_patch).
	Freeform bool
}

// Message is one turn of the conversation a host sent. Role is "user" or
// "assistant"; tool results are carried on the user turn that follows the
// calls, as the Messages API does.
type Message struct {
	Role    string
	Text    string // the text parts joined by newlines
	Calls   []Call
	Results []Result
}

// Call is a tool call by the model. Input is the tool's JSON input; for a
// freeform tool it is a JSON string holding the text.
type Call struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Result is what the host sent back for a call: the tool's output, or the
// reason it did not run (a hook's refusal, a permission denial).
type Result struct {
	CallID  string
	Name    string // Gemini names the tool; the others leave it empty
	Output  string
	IsError bool
}

// Reply is the model's answer to one request: calls, text, or both.
type Reply struct {
	Text  string
	Calls []Call
}

// Text is a reply that ends the turn with the given text.
func Text(s string) Reply { return Reply{Text: s} }

// ToolCall builds a call of the named tool with input marshalled to JSON
// (a string input makes a freeform call's text). The server gives it an id
// unless id is set on the result.
func ToolCall(name string, input any) Call {
	b, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("hosttest: tool input for %s: %v", name, err))
	}
	return Call{Name: name, Input: b}
}

// Calls is a reply that asks for the given tool calls, in parallel.
func Calls(calls ...Call) Reply { return Reply{Calls: calls} }

// Responder chooses the model's reply to a request that offered tools.
type Responder interface {
	Respond(Request) Reply
}

// Script is one conversation's model side: each reply in turn, the next one
// chosen by how many calls the conversation already holds (a reply with two
// calls is passed when both are in the history). Counting calls rather than
// assistant messages holds when a host merges or repeats turns: Claude Code
// sends its history with the assistant turns after a tool result merged into
// one message. A reply without calls ends the host's turn, so it comes last;
// past the end the script answers Text("done").
type Script []Reply

// Respond implements Responder.
func (s Script) Respond(r Request) Reply {
	n := r.CallsMade()
	for _, rep := range s {
		if len(rep.Calls) == 0 || n < len(rep.Calls) {
			return rep
		}
		n -= len(rep.Calls)
	}
	return Text("done")
}

// ByPrompt picks a Script by a marker in the conversation's first user turn
// that holds one: a sub-agent's conversation starts with the prompt its
// parent gave it, so the parent and each sub-agent can follow their own
// scripts. A conversation with no marker gets Text("done").
type ByPrompt map[string]Script

// Respond implements Responder.
func (b ByPrompt) Respond(r Request) Reply {
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for marker, s := range b {
			if strings.Contains(m.Text, marker) {
				return s.Respond(r)
			}
		}
	}
	return Text("done")
}

// CallsMade counts the tool calls already in the conversation.
func (r Request) CallsMade() int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Calls)
	}
	return n
}

// Results lists every tool result in the conversation, oldest first.
func (r Request) Results() []Result {
	var out []Result
	for _, m := range r.Messages {
		out = append(out, m.Results...)
	}
	return out
}

// Offers reports whether the host offered the named tool.
func (r Request) Offers(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Server is a scripted model server on 127.0.0.1 speaking the Messages,
// Responses and generateContent APIs at once; each host finds its own paths.
type Server struct {
	URL string

	srv       *httptest.Server
	responder Responder
	start     time.Time

	mu       sync.Mutex
	requests []Request
	nextID   int
	turns    int
}

// MaxTurns bounds the model turns one server answers from its responder;
// later turns get TurnLimitText, which ends the host's turn.
const (
	MaxTurns      = 50
	TurnLimitText = "hosttest: turn limit reached"
)

// NewServer starts a server answering model turns from responder; it is
// closed when the test ends.
func NewServer(tb testing.TB, responder Responder) *Server {
	tb.Helper()
	s := &Server{responder: responder, start: time.Now()}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	tb.Cleanup(s.srv.Close)
	return s
}

// Requests answers every request received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Turns answers the model calls that offered tools: the host's own turns,
// without side requests (titles, routing, counting).
func (s *Server) Turns() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Reply != nil && len(r.Tools) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// Calls answers every call the server asked for, with the ids it gave them,
// in order.
func (s *Server) Calls() []Call {
	var out []Call
	for _, r := range s.Requests() {
		if r.Reply != nil {
			out = append(out, r.Reply.Calls...)
		}
	}
	return out
}

// Result answers the result the host sent back for the call with this id,
// from the latest request that carries one.
func (s *Server) Result(callID string) (Result, bool) {
	reqs := s.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		for _, res := range reqs[i].Results() {
			if res.CallID == callID {
				return res, true
			}
		}
	}
	return Result{}, false
}

// Proxied answers the requests that were meant for another host: what the
// host tried to reach beyond loopback (HTTP_PROXY and HTTPS_PROXY point here).
func (s *Server) Proxied() []string {
	var out []string
	for _, r := range s.Requests() {
		if r.API == Proxy {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// Log answers a one-line summary per request, for test failure messages.
func (s *Server) Log() string {
	var b strings.Builder
	for i, r := range s.Requests() {
		fmt.Fprintf(&b, "%d. +%s %s %s %s -> %d", i+1, r.At.Round(time.Millisecond), r.API, r.Method, r.Path, r.Status)
		if r.Reply != nil {
			fmt.Fprintf(&b, " (tools %d, history %d, reply %d calls %q)", len(r.Tools), len(r.Messages), len(r.Reply.Calls), r.Reply.Text)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

// reply asks the responder for a request that offered tools, or answers a
// side request (no tools) with side, and gives every call an id.
func (s *Server) reply(req *Request, prefix, side string) Reply {
	rep := Text(side)
	if len(req.Tools) > 0 {
		rep = s.responder.Respond(*req)
	}
	calls := make([]Call, len(rep.Calls))
	s.mu.Lock()
	if s.turns++; s.turns > MaxTurns {
		// A script that never ends the turn would keep the host going until
		// the run times out; past the limit every turn ends.
		rep, calls = Text(TurnLimitText), nil
	}
	for i, c := range rep.Calls {
		if c.ID == "" {
			s.nextID++
			c.ID = fmt.Sprintf("%s%d", prefix, s.nextID)
		}
		if len(c.Input) == 0 {
			c.Input = json.RawMessage("{}")
		}
		calls[i] = c
	}
	s.mu.Unlock()
	rep.Calls = calls
	req.Reply = &rep
	return rep
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), At: time.Since(s.start)}
	if r.Method == http.MethodConnect || r.URL.IsAbs() {
		// The server is also every host's HTTP(S)_PROXY: anything a host
		// tries to reach beyond loopback lands here and is refused fast.
		req.API, req.Path, req.Status = Proxy, r.Host+r.URL.Path, http.StatusForbidden
		s.record(req)
		http.Error(w, "hosttest: no network beyond loopback", req.Status)
		return
	}
	body, err := readBody(r)
	req.Body = body
	if err != nil {
		req.API, req.Status = Unknown, http.StatusUnsupportedMediaType
		s.record(req)
		http.Error(w, err.Error(), req.Status)
		return
	}
	var h func(http.ResponseWriter, *Request) int
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/messages"), r.URL.Path == "/v1/models" && r.Header.Get("anthropic-version") != "":
		req.API, h = Anthropic, s.anthropic
	case r.URL.Path == "/v1/responses":
		req.API, h = OpenAI, s.openai
	case strings.HasPrefix(r.URL.Path, "/v1beta/models/"), strings.HasPrefix(r.URL.Path, "/v1/models/") && strings.Contains(r.URL.Path, ":"):
		req.API, h = Gemini, s.gemini
	default:
		req.API, h = Unknown, notFound
	}
	req.Status = h(w, &req)
	s.record(req)
}

func notFound(w http.ResponseWriter, _ *Request) int {
	writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"type": "not_found_error", "message": "hosttest: not scripted"}})
	return http.StatusNotFound
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		rd = zr
	default:
		b, _ := io.ReadAll(r.Body)
		return b, fmt.Errorf("hosttest: request body in %s encoding", enc)
	}
	return io.ReadAll(rd)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

// event writes one event; name may be empty (Gemini sends data lines only).
func (e sse) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	fmt.Fprintf(&buf, "data: %s\n\n", b)
	_, _ = e.w.Write(buf.Bytes())
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// decode unmarshals a request body, answering 400 when it is not JSON.
func decode(w http.ResponseWriter, req *Request, v any) bool {
	if err := json.Unmarshal(req.Body, v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "hosttest: " + err.Error()}})
		return false
	}
	return true
}

// textOf answers a JSON value that is either a string or a list of parts with
// "text" members, as the three APIs write content.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return string(raw)
}

// addTurn appends content to the conversation, merging it into the last
// message when the role is the same, so turns alternate as in the Messages API.
func addTurn(msgs []Message, m Message) []Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == m.Role {
		last := &msgs[n-1]
		if m.Text != "" {
			if last.Text != "" {
				last.Text += "\n"
			}
			last.Text += m.Text
		}
		last.Calls = append(last.Calls, m.Calls...)
		last.Results = append(last.Results, m.Results...)
		return msgs
	}
	return append(msgs, m)
}

// ResponderFunc is a function that answers model turns.
type ResponderFunc func(Request) Reply

// Respond implements Responder.
func (f ResponderFunc) Respond(r Request) Reply { return f(r) }
