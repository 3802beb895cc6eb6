package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
)

// The refusals of the MCP transport (docs/mcp.md "Streamable HTTP"): the
// SDK answers them in plain text; they are answered as problems here, each
// under its own code.
const (
	// codeNotAcceptable: Accept does not name both application/json and
	// text/event-stream, as the streamable HTTP transport requires.
	codeNotAcceptable = "not_acceptable"
	// codeUnsupportedProtocol: MCP-Protocol-Version names a version the
	// server does not speak.
	codeUnsupportedProtocol = "unsupported_protocol_version"
	// codeBatchNotSupported: a JSON-RPC batch under a protocol version
	// without batches (2025-06-18 and later).
	codeBatchNotSupported = "batch_not_supported"
	// codeInvalidJSONRPC: JSON, but not a message the transport takes (an
	// empty batch, a response to nothing…).
	codeInvalidJSONRPC = "invalid_jsonrpc"
)

// mcp serves the MCP tools over streamable HTTP to an authenticated caller
// (internal/mcpserver, docs/mcp.md): the tool list follows the key's scopes,
// and each tool call comes back into this server as a request carrying the
// caller's key and surface mcp. The SDK's own refusals (plain text) are
// answered as problems, like every other error of the API.
func (s *Server) mcp(w http.ResponseWriter, r *http.Request) error {
	// The one body reader first: a JSON-RPC message is an object of these
	// members, read under the text rule like every body (params, id,
	// result and error are the client's own JSON); a batch is an array of
	// them, which the SDK answers where the protocol version has batches.
	body, err := readJSONBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	if b := bytes.TrimSpace(body); b[0] == '[' {
		_, err = decodeBody[[]jsonRPCMessage](body, nil)
	} else {
		_, err = decodeBody[jsonRPCMessage](body, nil)
	}
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	pw := &sdkProblemWriter{ResponseWriter: w}
	s.agents.ServeHTTP(pw, r)
	if pw.status == 0 {
		return nil
	}
	return sdkRefusal(pw.status, strings.TrimSpace(pw.body.String()))
}

// sdkRefusal is the problem for a refusal the SDK wrote as status and text.
// The SDK's texts are its own (an upgrade may change them):
// TestMCPTransportRefusals holds each of these to its code.
func sdkRefusal(status int, text string) error {
	code := map[int]string{
		http.StatusRequestEntityTooLarge: domain.CodeBodyTooLarge,
		http.StatusUnsupportedMediaType:  domain.CodeUnsupportedMedia,
		http.StatusMethodNotAllowed:      domain.CodeMethodNotAllowed,
		http.StatusNotFound:              domain.CodeNotFound,
		http.StatusForbidden:             domain.CodeCrossOrigin,
	}[status]
	switch {
	case code != "":
	case status >= 500:
		code = domain.CodeInternal
	case strings.HasPrefix(text, "Accept must contain"):
		code = codeNotAcceptable
	case strings.Contains(text, "Unsupported protocol version"):
		code = codeUnsupportedProtocol
	case strings.Contains(text, "batching is not supported"):
		code = codeBatchNotSupported
	default:
		code = codeInvalidJSONRPC
	}
	return &domain.Error{Code: code, Detail: text}
}

// jsonRPCMessage is the shape of a JSON-RPC 2.0 message (a request, a
// notification or a response to a request of the server).
type jsonRPCMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// errAgentMissingKey is missing_token on the agent route, naming both ways
// to send the key.
var errAgentMissingKey = &domain.Error{Code: domain.CodeMissingToken,
	Detail: "send an API key in the X-API-Key header or as a bearer token (Authorization: Bearer <key>)"}

// challenge adds to a 401 of the agent route the challenge RFC 9110 §11.6.1
// requires of every 401: Bearer, as the key may be sent (RFC 6750 §3;
// invalid_token when one was sent). Without a challenge, MCP clients take
// the 401 for an OAuth server's and start an authorization flow.
func challenge(w http.ResponseWriter, r *http.Request, err error) {
	var de *domain.Error
	if !errors.As(err, &de) || statusOf[de.Code] != http.StatusUnauthorized {
		return
	}
	c := `Bearer realm="auditchain"`
	if de.Code != domain.CodeMissingToken {
		c += `, error="invalid_token", error_description="the API key is unknown, revoked or expired"`
	}
	w.Header().Set("WWW-Authenticate", c)
}

// checkAgentOrigin refuses a browser's request from another origin (MCP,
// streamable HTTP transport, "Security Warning": servers must validate
// Origin against DNS rebinding, and answer 403 when it is present and
// invalid). A request without Origin (every host that is not a browser)
// passes. The service's own origin is the request's Host; on a loopback
// listener, where a rebinding page names its own host in both Host and
// Origin, only a loopback origin is.
func checkAgentOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	refuse := &domain.Error{Code: domain.CodeCrossOrigin,
		Detail: "a request from the browser origin " + origin + " may not call this route (MCP: Origin validation)"}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !sameHost(u, r.Host) {
		return refuse
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(local.String()) && !isLoopback(u.Host) {
		return refuse
	}
	return nil
}

// sameHost reports whether origin names host (a Host header), default
// ports included.
func sameHost(origin *url.URL, host string) bool {
	port := origin.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[origin.Scheme]
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = strings.Trim(host, "[]"), port
	}
	return strings.EqualFold(origin.Hostname(), h) && p == port
}

// isLoopback reports whether hostport (or a bare host) is localhost or a
// loopback address.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// sdkProblemWriter holds back an error answer the SDK writes as plain text;
// everything else passes through.
type sdkProblemWriter struct {
	http.ResponseWriter
	status int // the held-back error status; 0 when none
	body   bytes.Buffer
}

func (w *sdkProblemWriter) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = status
		w.Header().Del("Content-Type")
		w.Header().Del("X-Content-Type-Options")
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *sdkProblemWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets the SDK stream when it answers with events.
func (w *sdkProblemWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}
