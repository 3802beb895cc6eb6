package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/client"
)

// inProcessBase is the base URL of the in-process client; the host is never
// dialled.
const inProcessBase = "http://auditchain.in-process"

// HTTPHandler serves the tools over streamable HTTP (POST /v1/mcp) to
// callers the API has already authenticated. Each tool call is a request of
// pkg/client into api itself, in process, carrying the caller's key and
// surface mcp: capability checks, refusals and metering are the API's.
type HTTPHandler struct {
	api    http.Handler
	scopes func(*http.Request) []domain.Scope
	log    *slog.Logger
	sdk    http.Handler

	// directAnswers counts the requests the direct path answered.
	directAnswers atomic.Int64

	mu      sync.Mutex
	servers map[string]*mcp.Server // by the caller's scope set
}

// NewHTTPHandler returns the handler. scopes gives the authenticated
// caller's scopes (empty: an unscoped key); the tool list a caller sees is
// built from them.
func NewHTTPHandler(api http.Handler, scopes func(*http.Request) []domain.Scope, log *slog.Logger) *HTTPHandler {
	h := &HTTPHandler{api: api, scopes: scopes, log: log, servers: map[string]*mcp.Server{}}
	// Stateless with JSON answers: every POST is whole in itself, so no
	// session outlives its request (abandoned sessions would leak), and
	// replicas need not share anything. The DNS-rebinding guard is off
	// because every request carries an API key, which a browser tricked into
	// a rebinding does not have, and a reverse proxy on loopback would
	// otherwise be refused.
	h.sdk = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: log, DisableLocalhostProtection: true})
	return h
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.serveDirect(w, r) {
		h.directAnswers.Add(1)
		return
	}
	h.serveSDK(w, r)
}

// serveSDK has the SDK answer r with the request ids replaced by small
// integers of its own, and puts the caller's ids back into the answer: the
// SDK reads an id through a float64, so an integer above 2^53 (or an id
// written 1e3) would come back changed. Stateless, each POST is a session
// of its own, so its ids number from 1.
func (h *HTTPHandler) serveSDK(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	renamed, ids := renameIDs(body)
	r.Body = io.NopCloser(bytes.NewReader(renamed))
	r.ContentLength = int64(len(renamed))
	if len(ids) == 0 {
		h.sdk.ServeHTTP(w, r)
		return
	}
	iw := &idWriter{ResponseWriter: w, ids: ids}
	h.sdk.ServeHTTP(iw, r)
	iw.finish()
}

// renameIDs numbers the requests of a message or batch from 1 and returns
// the body so renamed with the ids it replaced (by the new number's
// idKey); nothing is renamed in a body it cannot read (the SDK refuses it).
func renameIDs(body []byte) ([]byte, map[string]json.RawMessage) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return body, nil
	}
	batch := b[0] == '['
	var raws []json.RawMessage
	if !batch {
		raws = []json.RawMessage{b}
	} else if json.Unmarshal(b, &raws) != nil {
		return body, nil
	}
	ids := map[string]json.RawMessage{}
	for i, raw := range raws {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m["method"] == nil || m["id"] == nil || string(m["id"]) == "null" {
			continue
		}
		n := json.RawMessage(strconv.Itoa(len(ids) + 1))
		ids[idKey(n)] = m["id"]
		m["id"] = n
		raws[i], _ = json.Marshal(m)
	}
	if len(ids) == 0 {
		return body, nil
	}
	if !batch {
		return raws[0], ids
	}
	out, _ := json.Marshal(raws)
	return out, ids
}

// idWriter holds the SDK's JSON answer and writes it with the caller's ids.
type idWriter struct {
	http.ResponseWriter
	ids    map[string]json.RawMessage
	status int
	held   bool
	body   bytes.Buffer
}

func (w *idWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); mt == "application/json" {
		w.held = true
		w.Header().Del("Content-Length")
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *idWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a stream's events on (the ids of an event stream are the
// SDK's: the handler answers JSON, never a stream).
func (w *idWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.held {
		f.Flush()
	}
}

// finish writes the held answer with each id put back.
func (w *idWriter) finish() {
	if !w.held {
		return
	}
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(restoreIDs(w.body.Bytes(), w.ids))
}

// restoreIDs puts the caller's ids back into an answer (a response or an
// array of them); what it cannot read it leaves as it is.
func restoreIDs(answer []byte, ids map[string]json.RawMessage) []byte {
	restore := func(raw json.RawMessage) json.RawMessage {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(raw, &r) != nil || r.ID == nil {
			return raw
		}
		id, ok := ids[idKey(r.ID)]
		if !ok {
			return raw
		}
		return encodeRawAnswer(id, r.Result, r.Error)
	}
	b := bytes.TrimSpace(answer)
	if len(b) == 0 || b[0] != '[' {
		return restore(b)
	}
	var raws []json.RawMessage
	if json.Unmarshal(b, &raws) != nil {
		return answer
	}
	out := []byte{'['}
	for i, raw := range raws {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, restore(raw)...)
	}
	return append(out, ']')
}

// SDKOnly is the handler without the direct path (fastcall.go): every
// request answered by the SDK. Tests compare the two.
func (h *HTTPHandler) SDKOnly() http.Handler { return h.sdk }

// DirectAnswers is how many requests the direct path has answered.
func (h *HTTPHandler) DirectAnswers() int64 { return h.directAnswers.Load() }

// server returns the MCP server of the caller's scope set.
func (h *HTTPHandler) server(r *http.Request) *mcp.Server {
	scopes := slices.Clone(h.scopes(r))
	slices.Sort(scopes)
	var b strings.Builder
	for _, s := range scopes {
		b.WriteString(string(s))
		b.WriteByte(' ')
	}
	key := b.String()
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.servers[key]; ok {
		return s
	}
	s := New(h.resolve, Options{Log: h.log, Allowed: func(want domain.Scope) bool { return domain.Allows(scopes, want) }})
	h.servers[key] = s
	return s
}

// resolve returns the caller's client: the key of the request the tool
// call came in. A client is made per call: none keeps anything a later call
// needs (record_event sends no place, so no chain tip is kept), and no key
// stays in memory after its request.
func (h *HTTPHandler) resolve(_ context.Context, extra Extra) (Service, error) {
	key := APIKey(extra.Header)
	if key == "" {
		return nil, errors.New("the request carries no API key")
	}
	c, err := client.New(inProcessBase, key, client.WithSurface(client.SurfaceMCP),
		client.WithHTTPClient(&http.Client{Transport: inProcess{h.api}}), client.WithRetries(0, 0))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// APIKey is the API key of a request: X-API-Key, or else a bearer token.
func APIKey(header http.Header) string {
	if k := header.Get("X-API-Key"); k != "" {
		return k
	}
	scheme, token, ok := strings.Cut(header.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return ""
}

// inProcess is an http.RoundTripper that serves each request with a handler
// in this process.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.RemoteAddr = "127.0.0.1:0"
	req.RequestURI = req.URL.RequestURI()
	if req.Body == nil {
		req.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(rec, req)
	return &http.Response{StatusCode: rec.status, Status: http.StatusText(rec.status), Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: rec.header, Body: io.NopCloser(&rec.body),
		ContentLength: int64(rec.body.Len()), Request: req}, nil
}

// recorder is the ResponseWriter of an in-process request.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
