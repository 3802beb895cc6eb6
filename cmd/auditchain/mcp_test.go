package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// childUpstreamEnv, when set, makes the test binary a small MCP server on
// stdio (one tool, echo) instead of running the tests.
const childUpstreamEnv = "AUDITCHAIN_TEST_CHILD_UPSTREAM"

func runTestUpstream() {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes msg"},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Msg string `json:"msg"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Msg}}}, nil, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
}

// mcpChild runs `auditchain <args>` as a real process and connects to it as
// an agent host does, over its stdin and stdout.
func mcpChild(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	argv, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childServeEnv+"="+string(argv))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to `auditchain %s`: %v; stderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return out, res.IsError
}

// `auditchain mcp` as a real subprocess on stdio, reading the service's URL
// and key from the environment: its tools reach the service and what it
// records carries surface mcp_stdio.
func TestMCPStdioSubprocess(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{})
		_, token := s.Account(t, "stdio@example.com")
		t.Setenv("AUDITCHAIN_URL", s.URL)
		t.Setenv("AUDITCHAIN_API_KEY", token)
		cs := mcpChild(t, "mcp")
		n := 0
		for _, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != 12 {
			t.Fatalf("%d tools, want 12", n)
		}
		out, isErr := callTool(t, cs, "record_event", map[string]any{"event_type": "note", "raw": map[string]any{"k": "v"}})
		if isErr || out["event"].(map[string]any)["surface"] != "mcp_stdio" {
			t.Fatalf("record_event: %v %v", isErr, out)
		}
		// A client's batch row takes the tip to 2^52, the highest sequence a
		// client may choose: record_event goes on above it, linked, since
		// the service numbers what it records (POST /v1/events/append).
		top := pushTipTo2To52(t, s.URL, token)
		out, isErr = callTool(t, cs, "record_event", map[string]any{"event_type": "note", "raw": map[string]any{"k": "above"}})
		if ev, _ := out["event"].(map[string]any); isErr || ev["sequence"] != float64(domain.MaxClientSequence+1) || ev["prev_hash"] != *top.PayloadHash {
			t.Fatalf("record_event above 2^52: %v %v, want sequence %d after %s", isErr, out, domain.MaxClientSequence+1, *top.PayloadHash)
		}
		if out, isErr := callTool(t, cs, "gate_check", map[string]any{"subagent": "nobody"}); !isErr || out["code"] != "no_grant" {
			t.Fatalf("gate_check: %v %v", isErr, out)
		}
	})
}

// `auditchain mcp proxy -- COMMAND` as a real subprocess in front of a real
// upstream process: an allowed call goes through and is recorded, a refused
// one is a tool error with the gate's code.
func TestMCPProxySubprocess(t *testing.T) {
	s := httpapitest.Start(t, storetest.DSN(t, storetest.SQLite), apptest.Options{})
	_, token := s.Account(t, "proxy@example.com")
	c, err := client.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateGrant(ctx, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(1)), AllowedTools: []string{"echo"},
		ExpiresAt: new(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))}); err != nil {
		t.Fatal(err)
	}
	cs := mcpChild(t, "mcp", "proxy", "--url", s.URL, "--api-key", token, "--subagent", "worker", "--",
		"env", childUpstreamEnv+"=1", os.Args[0], "-test.run=^$")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Fatalf("allowed call: %+v %v", res, err)
	}
	// A refusal is text only (valid under any output schema), its code in
	// _meta.
	over, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "again"}})
	if err != nil || !over.IsError || over.StructuredContent != nil ||
		!strings.HasPrefix(over.Content[0].(*mcp.TextContent).Text, "refused: budget_exhausted: ") ||
		over.Meta[mcpserver.RefusalMetaKey].(map[string]any)["code"] != "budget_exhausted" {
		t.Fatalf("call over budget: %+v %v", over, err)
	}
	// Ending the session ends the proxy, which records what is pending first.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	found, err := c.Search(ctx, api.SearchRequest{EventTypes: []string{"tool_call", "tool_result"}})
	if err != nil {
		t.Fatal(err)
	}
	if found.Count != 3 {
		t.Fatalf("%d tool_call/tool_result events, want 3 (allowed call, its result, refused call)", found.Count)
	}
}

// pushTipTo2To52 stores one client batch row at 2^52 (the highest sequence a
// client may choose, CONTRACT.md "Batch") on the account of token and
// returns the tip it made.
func pushTipTo2To52(t *testing.T, url, token string) api.ChainTip {
	t.Helper()
	c, err := client.New(url, token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.AppendBatch(ctx, api.BatchRequest{Events: []api.EventInput{{EventID: new("evt-client-top"), EventType: new("note"),
		Sequence: new(int64(domain.MaxClientSequence))}}})
	if err != nil || res.Ingested != 1 {
		t.Fatalf("a batch row at 2^52: %+v, %v", res, err)
	}
	tip, err := c.Tip(ctx)
	if err != nil || tip.Sequence == nil || *tip.Sequence != domain.MaxClientSequence {
		t.Fatalf("the tip after a row at 2^52: %+v, %v", tip, err)
	}
	return *tip
}
