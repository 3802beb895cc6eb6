package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
)

// mcp serves the MCP tools over streamable HTTP to an authenticated caller
// (internal/mcpserver, docs/mcp.md): the tool list follows the key's scopes,
// and each tool call comes back into this server as a request carrying the
// caller's key and surface mcp. The SDK's own refusals (plain text) are
// answered as problems, like every other error of the API.
func (s *Server) mcp(w http.ResponseWriter, r *http.Request) error {
	// The one body reader first: a JSON-RPC message is an object of these
	// members, read under the text rule like every body (params, id,
	// result and error are the client's own JSON).
	body, err := readJSONBody(r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	if _, err := decodeBody[jsonRPCMessage](body, nil); err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	pw := &sdkProblemWriter{ResponseWriter: w}
	s.agents.ServeHTTP(pw, r)
	if pw.status == 0 {
		return nil
	}
	code := map[int]string{
		http.StatusRequestEntityTooLarge: domain.CodeBodyTooLarge,
		http.StatusUnsupportedMediaType:  domain.CodeUnsupportedMedia,
		http.StatusMethodNotAllowed:      domain.CodeMethodNotAllowed,
		http.StatusNotFound:              domain.CodeNotFound,
	}[pw.status]
	switch {
	case code != "":
	case pw.status < 500:
		code = domain.CodeMalformedJSON // a JSON-RPC message the SDK cannot take
	default:
		code = domain.CodeInternal
	}
	return &domain.Error{Code: code, Detail: strings.TrimSpace(pw.body.String())}
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
