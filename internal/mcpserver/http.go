package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
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

// maxCachedClients bounds the per-key clients kept between calls (each keeps
// its key's chain tip, saving a tip read per append).
const maxCachedClients = 4096

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
	clients map[string]*client.Client
}

// NewHTTPHandler returns the handler. scopes gives the authenticated
// caller's scopes (empty: an unscoped key); the tool list a caller sees is
// built from them.
func NewHTTPHandler(api http.Handler, scopes func(*http.Request) []domain.Scope, log *slog.Logger) *HTTPHandler {
	h := &HTTPHandler{api: api, scopes: scopes, log: log,
		servers: map[string]*mcp.Server{}, clients: map[string]*client.Client{}}
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
	h.sdk.ServeHTTP(w, r)
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
// call came in.
func (h *HTTPHandler) resolve(_ context.Context, extra Extra) (Service, error) {
	key := APIKey(extra.Header)
	if key == "" {
		return nil, errors.New("the request carries no API key")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.clients[key]; ok {
		return c, nil
	}
	c, err := client.New(inProcessBase, key, client.WithSurface(client.SurfaceMCP),
		client.WithHTTPClient(&http.Client{Transport: inProcess{h.api}}), client.WithRetries(0, 0))
	if err != nil {
		return nil, err
	}
	if len(h.clients) >= maxCachedClients {
		clear(h.clients)
	}
	h.clients[key] = c
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
