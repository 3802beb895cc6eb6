package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// The direct path answers exactly as the SDK does: every request below is
// sent to the handler and to the SDK alone, and the two answers must have
// the same status, content type and JSON. The requests cover what the
// direct path takes (read-only tools, known protocol versions) and what it
// must leave to the SDK (null, unknown, missing or mistyped arguments, write
// tools, other methods, ids and versions).
func TestDirectCallsAnswerAsTheSDKDoes(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "direct@example.com")
		ctx := context.Background()
		c, err := client.New(s.URL, token)
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(3)), AllowedTools: []string{"bash"},
			ExpiresAt: new(client.FormatTimestamp(time.Now().Add(time.Hour)))})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := c.Append(ctx, client.Event{EventType: "note", Raw: map[string]any{"k": 1}})
		if err != nil {
			t.Fatal(err)
		}
		h := mcpserver.NewHTTPHandler(s.Handler, func(*http.Request) []domain.Scope { return nil }, slog.New(slog.DiscardHandler))

		call := func(name, args string) string {
			return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
		}
		bodies := map[string]string{
			"gate authorized":        call("gate_check", `{"subagent":"worker","tool":"bash"}`),
			"gate any tool":          call("gate_check", `{"subagent":"worker"}`),
			"gate tool not allowed":  call("gate_check", `{"subagent":"worker","tool":"curl"}`),
			"gate no grant":          call("gate_check", `{"subagent":"nobody"}`),
			"gate by grant id":       call("gate_check", `{"subagent":"worker","grant_id":"`+g.Grant.GrantID+`"}`),
			"gate unknown grant":     call("gate_check", `{"subagent":"worker","grant_id":"grt-missing"}`),
			"gate blank subagent":    call("gate_check", `{"subagent":" "}`),
			"gate null tool":         call("gate_check", `{"subagent":"worker","tool":null}`),
			"gate missing subagent":  call("gate_check", `{"tool":"bash"}`),
			"gate unknown argument":  call("gate_check", `{"subagent":"worker","tools":"bash"}`),
			"gate mistyped":          call("gate_check", `{"subagent":5}`),
			"gate unicode":           call("gate_check", `{"subagent":"w\u00f6rker <&>"}`),
			"chain tip":              call("chain_tip", `{}`),
			"search":                 call("search_events", `{"limit":2,"event_types":["note"]}`),
			"search bad limit":       call("search_events", `{"limit":0}`),
			"get event":              call("get_event", `{"event_id":"`+ev.Event.EventID+`"}`),
			"get missing event":      call("get_event", `{"event_id":"evt-missing"}`),
			"list proposals":         call("list_proposals", `{"status":"proposed"}`),
			"verify chain":           call("verify_chain", `{}`),
			"unknown tool":           call("no_such_tool", `{}`),
			"write tool":             call("record_use", `{"grant_id":"grt-x","subagent":"worker"}`),
			"no arguments":           `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"chain_tip"}}`,
			"string id":              `{"jsonrpc":"2.0","id":"req-1","method":"tools/call","params":{"name":"chain_tip","arguments":{}}}`,
			"negative id":            `{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"chain_tip","arguments":{}}}`,
			"meta":                   `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"chain_tip","arguments":{},"_meta":{"progressToken":1}}}`,
			"tools list":             `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`,
			"notification":           `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			"escaped id":             `{"jsonrpc":"2.0","id":"a\u0041","method":"tools/call","params":{"name":"chain_tip","arguments":{}}}`,
			"gate for another token": call("gate_check", `{"subagent":"worker"}`),
		}
		for _, version := range []string{"", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
			for name, body := range bodies {
				key := token
				if name == "gate for another token" {
					key = "ac_not_a_key"
				}
				send := func(handler http.Handler) *httptest.ResponseRecorder {
					r := httptest.NewRequest("POST", "/v1/mcp", bytes.NewReader([]byte(body)))
					r.Header.Set("Content-Type", "application/json")
					r.Header.Set("Accept", "application/json, text/event-stream")
					r.Header.Set("X-API-Key", key)
					if version != "" {
						r.Header.Set("Mcp-Protocol-Version", version)
					}
					w := httptest.NewRecorder()
					handler.ServeHTTP(w, r)
					return w
				}
				before := h.DirectAnswers()
				got, want := send(h), send(h.SDKOnly())
				if direct := h.DirectAnswers() > before; direct != takesDirect(name, version) {
					t.Errorf("%s (version %q): answered on the direct path %v, want %v", name, version, direct, !direct)
				}
				if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") || !sameJSON(got.Body.Bytes(), want.Body.Bytes()) {
					t.Errorf("%s (version %q):\n direct %d %s %s\n    SDK %d %s %s", name, version,
						got.Code, got.Header().Get("Content-Type"), got.Body, want.Code, want.Header().Get("Content-Type"), want.Body)
				}
			}
		}
	})
}

// takesDirect: the requests of TestDirectCallsAnswerAsTheSDKDoes the direct
// path answers: plain calls of read-only tools under a known version.
func takesDirect(name, version string) bool {
	if version == "" || version == "2026-07-28" {
		return false
	}
	switch name {
	case "gate authorized", "gate any tool", "gate tool not allowed", "gate no grant", "gate by grant id",
		"gate unknown grant", "gate blank subagent", "gate unicode", "chain tip", "search", "search bad limit",
		"get event", "get missing event", "list proposals", "verify chain", "string id", "negative id",
		"gate for another token":
		return true
	}
	return false
}

// sameJSON: a and b are the same JSON value, or the same bytes when either
// is not JSON.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// FuzzDirectCall holds the direct path to the SDK on any body: whenever the
// direct path answers a request, the SDK's answer to it is the same.
func FuzzDirectCall(f *testing.F) {
	s := httpapitest.Start(f, storetest.DSN(f, storetest.SQLite), apptest.Options{})
	_, token := s.Account(f, "fuzz@example.com")
	c, err := client.New(s.URL, token)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := c.CreateGrant(context.Background(), api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(3)),
		AllowedTools: []string{"bash"}, ExpiresAt: new(client.FormatTimestamp(time.Now().Add(24 * time.Hour)))}); err != nil {
		f.Fatal(err)
	}
	h := mcpserver.NewHTTPHandler(s.Handler, func(*http.Request) []domain.Scope { return nil }, slog.New(slog.DiscardHandler))
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gate_check","arguments":{"subagent":"worker","tool":"bash"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"search_events","arguments":{"limit":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chain_tip","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_event","arguments":{"event_id":"evt-1"}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		send := func(handler http.Handler) *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", "/v1/mcp", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("X-API-Key", token)
			r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, r)
			return w
		}
		before := h.DirectAnswers()
		got := send(h)
		if h.DirectAnswers() == before {
			return // the SDK answered: nothing to compare
		}
		want := send(h.SDKOnly())
		if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") || !sameJSON(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("%s:\n direct %d %s\n    SDK %d %s", body, got.Code, got.Body, want.Code, want.Body)
		}
	})
}
