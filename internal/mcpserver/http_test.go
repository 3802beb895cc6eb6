package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/pkg/api"
)

// withHeader adds one header to every request.
type withHeader struct{ name, value string }

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// overHTTP connects to POST /v1/mcp of s sending header name: value.
func overHTTP(t *testing.T, s *httpapitest.Server, name, value string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: s.URL + "/v1/mcp", DisableStandaloneSSE: true, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: withHeader{name, value}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// Streamable HTTP at /v1/mcp: a key limited to events:read sees only the
// reading tools and cannot call the others; a full key as a bearer token
// sees every tool and its calls are metered under surface mcp; a request
// without a key is 401 like any route.
func TestStreamableHTTP(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		ctx := context.Background()
		userID, token := s.Account(t, "http@example.com")
		readOnly := s.Key(t, userID, api.CreateKeyRequest{Scopes: []string{"events:read"}})

		cs, err := overHTTP(t, s, "X-API-Key", readOnly)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := toolNames(t, cs), []string{"chain_tip", "get_event", "search_events", "verify_chain"}; !slices.Equal(got, want) {
			t.Fatalf("an events:read key sees %v, want %v", got, want)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gate_check", Arguments: map[string]any{"subagent": "w"}}); err == nil && !res.IsError {
			t.Fatal("an events:read key called gate_check")
		}
		ok(t, cs, "chain_tip", map[string]any{})

		full, err := overHTTP(t, s, "Authorization", "Bearer "+token)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(allTools)
		slices.Sort(want)
		if got := toolNames(t, full); !slices.Equal(got, want) {
			t.Fatalf("an unscoped key sees %v, want %v", got, want)
		}
		ok(t, full, "delegate", map[string]any{"subagent": "worker", "max_tool_calls": 2,
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		ok(t, full, "gate_check", map[string]any{"subagent": "worker"})
		refused(t, full, "gate_check", map[string]any{"subagent": "other"}, "no_grant")
		ev := ok(t, full, "record_event", map[string]any{"event_type": "note", "raw": map[string]any{"n": 1}})
		if ev["event"].(map[string]any)["surface"] != "mcp" {
			t.Fatalf("an event recorded over /v1/mcp has surface %v", ev["event"].(map[string]any)["surface"])
		}

		var usage struct {
			CallsToday struct {
				BySurface map[string]int `json:"by_surface"`
			} `json:"calls_today"`
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/v1/dashboard/usage", nil)
		req.Header.Set("X-API-Key", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&usage)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if usage.CallsToday.BySurface["mcp"] < 5 {
			t.Fatalf("calls by surface %v: the tool calls were not metered under mcp", usage.CallsToday.BySurface)
		}

		// The SDK's own refusal (no Accept naming both media types) is a
		// problem like every error of the API: 406 not_acceptable.
		req, _ = http.NewRequest("POST", s.URL+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("X-API-Key", token)
		req.Header.Set("Content-Type", "application/json")
		if resp, err = http.DefaultClient.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotAcceptable || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("POST /v1/mcp without Accept: %d %s, want a 406 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
		}

		for _, h := range []http.Header{{}, {"Authorization": {"Basic " + token}}, {"X-API-Key": {"ak_wrong"}}} {
			req, _ := http.NewRequest("POST", s.URL+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header = h
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("POST /v1/mcp with %v: %d %s, want a 401 problem", h, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
	})
}
