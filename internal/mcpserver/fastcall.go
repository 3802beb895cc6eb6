package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/domain"
)

// The direct path of POST /v1/mcp. A stateless tools/call of a read-only
// tool (gate_check above all: agents ask it before every delegation) costs
// the SDK a new session, its JSON-RPC machinery, a JSON schema pass over the
// arguments and a second JSON decoder: most of the call's CPU. The direct
// path answers the plainest such calls itself, with the same tool code and
// the same result the SDK would build (TestDirectCallsAnswerAsTheSDKDoes
// compares them, status, headers and body). Anything else — another method,
// a write tool, an argument that is null, unknown or missing, another
// protocol version, _meta, a batch — goes to the SDK, which stays the
// authority on the protocol.

// directFunc answers a call with arguments args; ok is false when the call
// is not plain enough (the SDK answers it).
type directFunc func(ctx context.Context, resolve Resolver, log *slog.Logger, header http.Header, args json.RawMessage) (res *mcp.CallToolResult, ok bool)

// directVersions are the protocol versions whose stateless tools/call the
// direct path answers (MCP-Protocol-Version header); requests of any other,
// or without the header, go to the SDK.
var directVersions = []string{"2025-03-26", "2025-06-18", "2025-11-25"}

// directCall makes the directFunc of a tool whose typed call is call.
func directCall[In any](call func(ctx context.Context, resolve Resolver, log *slog.Logger, header http.Header, in In) (*mcp.CallToolResult, any)) directFunc {
	fields, required := jsonFields(reflect.TypeFor[In]())
	return func(ctx context.Context, resolve Resolver, log *slog.Logger, header http.Header, args json.RawMessage) (*mcp.CallToolResult, bool) {
		// null anywhere (even inside a string) is left to the SDK, whose
		// schema refuses nulls where encoding/json would take them as zero.
		if len(args) == 0 || bytes.Contains(args, []byte("null")) {
			return nil, false
		}
		if !exactMembers(args, fields...) {
			return nil, false
		}
		var present map[string]json.RawMessage
		if json.Unmarshal(args, &present) != nil {
			return nil, false
		}
		for _, k := range required {
			if _, ok := present[k]; !ok {
				return nil, false
			}
		}
		var in In
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if dec.Decode(&in) != nil || dec.More() {
			return nil, false
		}
		res, out := call(ctx, resolve, log, header, in)
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		if out != nil {
			// As the SDK's typed handler does: the output as structured
			// content, and as text for clients that read only content.
			b, err := json.Marshal(out)
			if err != nil {
				return nil, false
			}
			res.StructuredContent = json.RawMessage(b)
			if res.Content == nil {
				res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
			}
		}
		return res, true
	}
}

// jsonFields are the JSON names of t's fields, and of those the SDK's
// schema requires: the ones without omitempty.
func jsonFields(t reflect.Type) (names, required []string) {
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		name = cmp.Or(name, f.Name)
		names = append(names, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	return names, required
}

// exactMembers reports whether raw is a JSON object whose members are all
// named among names, spelled exactly so, each once. encoding/json matches a
// struct's fields whatever their case and keeps the last of a repeated
// member; the SDK does neither, and answers such a message itself
// (FuzzDirectCall found "jsonrPc" answered here and refused by the SDK).
func exactMembers(raw []byte, names ...string) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	seen := make([]bool, len(names))
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := t.(string)
		i := slices.Index(names, key)
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		var value json.RawMessage
		if dec.Decode(&value) != nil {
			return false
		}
	}
	t, err := dec.Token()
	return err == nil && t == json.Delim('}')
}

// serveDirect answers r on the direct path and reports whether it did.
func (h *HTTPHandler) serveDirect(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || !slices.Contains(directVersions, r.Header.Get("Mcp-Protocol-Version")) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	accept := strings.Join(r.Header.Values("Accept"), ",")
	if !strings.Contains(accept, "application/json") || !strings.Contains(accept, "text/event-stream") {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body)) // for the SDK, if it answers
	if err != nil {
		return false
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&msg) != nil || dec.More() || msg.JSONRPC != "2.0" || msg.Method != "tools/call" || !plainID(msg.ID) ||
		!exactMembers(body, "jsonrpc", "id", "method", "params") || !exactMembers(msg.Params, "name", "arguments") {
		return false
	}
	pdec := json.NewDecoder(bytes.NewReader(msg.Params))
	pdec.DisallowUnknownFields()
	if pdec.Decode(&params) != nil || pdec.More() {
		return false
	}
	direct := h.directTool(r, params.Name)
	if direct == nil {
		return false
	}
	res, ok := direct(r.Context(), h.resolve, h.log, r.Header, params.Arguments)
	if !ok {
		return false
	}
	out, err := json.Marshal(struct {
		JSONRPC string              `json:"jsonrpc"`
		ID      json.RawMessage     `json:"id"`
		Result  *mcp.CallToolResult `json:"result"`
	}{"2.0", msg.ID, res})
	if err != nil {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return true
}

// plainID: a JSON-RPC request id the SDK writes back byte for byte: an
// integer, or a string without escapes.
func plainID(id json.RawMessage) bool {
	switch {
	case len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"':
		return !bytes.ContainsAny(id[1:len(id)-1], "\\\"")
	case len(id) > 0 && len(id) <= 15:
		for i, c := range id {
			if (c < '0' || c > '9') && !(i == 0 && c == '-' && len(id) > 1) {
				return false
			}
		}
		return true
	}
	return false
}

// directTool is the direct path of the tool name when the caller's key may
// call it, or nil.
func (h *HTTPHandler) directTool(r *http.Request, name string) directFunc {
	for _, t := range Tools {
		if t.Name == name && t.direct != nil && domain.Allows(h.scopes(r), t.Scope) {
			return t.direct
		}
	}
	return nil
}
