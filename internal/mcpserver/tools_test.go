package mcpserver_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/client"
)

// eachServer runs fn against the real API on every store.
func eachServer(t *testing.T, fn func(t *testing.T, s *httpapitest.Server)) {
	storetest.Each(t, func(t *testing.T, dsn string) { fn(t, httpapitest.Start(t, dsn, apptest.Options{})) })
}

// connect serves srv to a client over the SDK's in-memory transports.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// toolsOf serves the tools over a network client of s with token.
func toolsOf(t *testing.T, s *httpapitest.Server, token string) *mcp.ClientSession {
	t.Helper()
	c, err := client.New(s.URL, token, client.WithSurface(client.SurfaceMCPStdio))
	if err != nil {
		t.Fatal(err)
	}
	return connect(t, mcpserver.New(mcpserver.Static(c), mcpserver.Options{}))
}

// call calls a tool and decodes its structured content into a map.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	if len(res.Content) == 0 {
		t.Fatalf("%s: no text content", name)
	}
	return out, res.IsError
}

// ok calls a tool that must succeed.
func ok(t *testing.T, cs *mcp.ClientSession, name string, args any) map[string]any {
	t.Helper()
	out, isErr := call(t, cs, name, args)
	if isErr {
		t.Fatalf("%s refused: %v", name, out)
	}
	return out
}

// refused calls a tool that must be refused with code.
func refused(t *testing.T, cs *mcp.ClientSession, name string, args any, code string) map[string]any {
	t.Helper()
	out, isErr := call(t, cs, name, args)
	if !isErr || out["code"] != code {
		t.Fatalf("%s: isError %v, %v; want a refusal %s", name, isErr, out, code)
	}
	if r, _ := out["reason"].(string); r == "" {
		t.Fatalf("%s: refusal without a reason: %v", name, out)
	}
	return out
}

var allTools = []string{"gate_check", "delegate", "record_use", "revoke_grant", "record_event", "search_events",
	"get_event", "policy_test", "propose_rule", "list_proposals", "chain_tip", "verify_chain"}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// Every tool through the in-memory transports against a real API: the gate,
// delegation (overreach refused), metering, revocation, the record (the
// agent never passes a hash), search, ancestry, the dedup probe,
// proposals, the tip and verification. Ratify, enact and reject are absent.
func TestEveryTool(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "agent@example.com")
		cs := toolsOf(t, s, token)

		want := slices.Clone(allTools)
		slices.Sort(want)
		if got := toolNames(t, cs); !slices.Equal(got, want) {
			t.Fatalf("tools %v, want %v", got, want)
		}
		for tl, err := range cs.Tools(context.Background(), nil) {
			if err != nil || tl.Description == "" || tl.Annotations == nil || tl.InputSchema == nil {
				t.Fatalf("tool %+v lacks a description, annotations or an input schema (%v)", tl, err)
			}
		}

		expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		g := ok(t, cs, "delegate", map[string]any{"subagent": "worker", "expires_at": expires, "max_tool_calls": 3,
			"allowed_tools": []string{"web_search"}})
		grantID := g["grant"].(map[string]any)["grant_id"].(string)

		if st := ok(t, cs, "gate_check", map[string]any{"subagent": "worker", "tool": "web_search"}); st["authorized"] != true {
			t.Fatalf("gate_check: %v", st)
		}
		refused(t, cs, "gate_check", map[string]any{"subagent": "worker", "tool": "shell"}, "tool_not_allowed")
		refused(t, cs, "gate_check", map[string]any{"subagent": "nobody"}, "no_grant")

		refused(t, cs, "delegate", map[string]any{"subagent": "child", "expires_at": expires, "max_tool_calls": 10,
			"allowed_tools": []string{"web_search"}, "parent_agent": "worker"}, "grant_overreach")

		if u := ok(t, cs, "record_use", map[string]any{"grant_id": grantID, "subagent": "worker"}); u["remaining"] != 2.0 {
			t.Fatalf("record_use: %v, want remaining 2", u)
		}
		refused(t, cs, "record_use", map[string]any{"grant_id": grantID, "subagent": "worker", "n": 5}, "budget_exhausted")

		first := ok(t, cs, "record_event", map[string]any{"event_type": "tool_call", "tool": "web_search", "decision": "allow",
			"raw": map[string]any{"arguments_sha256": "00ff"}})
		firstEv := first["event"].(map[string]any)
		firstID := firstEv["event_id"].(string)
		second := ok(t, cs, "record_event", map[string]any{"event_type": "tool_result", "tool": "web_search", "parent_id": firstID})
		secondEv := second["event"].(map[string]any)
		if secondEv["prev_hash"] != firstEv["payload_hash"] || secondEv["sequence"].(float64) != firstEv["sequence"].(float64)+1 {
			t.Fatalf("record_event did not link: %v after %v", secondEv, firstEv)
		}
		refused(t, cs, "record_event", map[string]any{"event_type": "note", "decision": "maybe"}, "validation_error")

		if res := ok(t, cs, "search_events", map[string]any{"event_types": []string{"tool_result"}}); res["count"] != 1.0 {
			t.Fatalf("search_events: %v", res)
		}
		read := ok(t, cs, "get_event", map[string]any{"event_id": secondEv["event_id"]})
		if anc, _ := read["ancestry"].([]any); len(anc) == 0 {
			t.Fatalf("get_event: no ancestry in %v", read)
		}
		refused(t, cs, "get_event", map[string]any{"event_id": "evt-missing"}, "event_not_found")

		if p := ok(t, cs, "policy_test", map[string]any{"tool": "web_search", "tool_input": map[string]any{"q": "x"}, "intent": "fresh"}); p["dedup_status"] != "bypass" {
			t.Fatalf("policy_test: %v", p)
		}

		prop := ok(t, cs, "propose_rule", map[string]any{"kind": "deny_scope", "subagent": "worker", "tool": "web_search",
			"blocked_attempts": 5, "note": "too many blocked searches"})
		if prop["proposal"].(map[string]any)["status"] != "proposed" {
			t.Fatalf("propose_rule: %v", prop)
		}
		if l := ok(t, cs, "list_proposals", map[string]any{"status": "proposed"}); l["count"] != 1.0 {
			t.Fatalf("list_proposals: %v", l)
		}

		tip := ok(t, cs, "chain_tip", map[string]any{})
		if tip["event_id"] == nil {
			t.Fatalf("chain_tip: %v", tip)
		}
		if v := ok(t, cs, "verify_chain", map[string]any{}); v["valid"] != true {
			t.Fatalf("verify_chain: %v", v)
		}

		rv := ok(t, cs, "revoke_grant", map[string]any{"grant_id": grantID, "subagent": "worker"})
		if rv["outcome"] != "revoked" {
			t.Fatalf("revoke_grant: %v", rv)
		}
		refused(t, cs, "gate_check", map[string]any{"subagent": "worker", "tool": "web_search"}, "revoked")

		// A schema violation is a tool error too, never a protocol error.
		if _, isErr := call(t, cs, "record_event", map[string]any{}); !isErr {
			t.Fatal("record_event without event_type was not refused")
		}
	})
}

// panicking is a Service whose every method panics (nil embedded interface).
type panicking struct{ mcpserver.Service }

// A panic in a tool is an error result; the server goes on answering.
func TestToolPanicIsAnErrorResult(t *testing.T) {
	cs := connect(t, mcpserver.New(mcpserver.Static(panicking{}), mcpserver.Options{}))
	for range 2 {
		refused(t, cs, "chain_tip", map[string]any{}, "internal")
	}
}

// An unreachable service is a refusal (service_unreachable), not a hang or
// a protocol error.
func TestUnreachableServiceIsARefusal(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", "ak_none", client.WithRetries(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcpserver.New(mcpserver.Static(c), mcpserver.Options{}))
	refused(t, cs, "gate_check", map[string]any{"subagent": "worker"}, mcpserver.CodeUnreachable)
}
