package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/realprog"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// These tests drive auditchain's MCP surfaces with the real programs from npm
// (internal/realprog): the official TypeScript SDK's client as the host, the
// reference servers server-everything and server-filesystem as upstreams, and the
// MCP Inspector's CLI over /v1/mcp. What those programs do and say decides.

// hostRun is what testdata/mcp-host.mjs printed.
type hostRun struct {
	Fatal        string           `json:"fatal"`
	ServerInfo   map[string]any   `json:"serverInfo"`
	Capabilities map[string]any   `json:"capabilities"`
	Tools        []map[string]any `json:"tools"`
	Results      []struct {
		Result *struct {
			Content           []map[string]any `json:"content"`
			StructuredContent map[string]any   `json:"structuredContent"`
			IsError           bool             `json:"isError"`
			Meta              map[string]any   `json:"_meta"`
		} `json:"result"`
		Error *struct {
			Code    any    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
	Elicitations []struct {
		Message string `json:"message"`
	} `json:"elicitations"`
	Sessions int      `json:"sessions"`
	Failures []string `json:"failures"`
}

type hostCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	// Pause: the host waits for the test's pause function before the call.
	Pause bool `json:"pause,omitempty"`
}

// hostPlan is what the host script runs.
type hostPlan struct {
	Command  string            `json:"command"`
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Calls    []hostCall        `json:"calls"`
	Sessions int               `json:"sessions,omitempty"`
	Parallel int               `json:"parallel,omitempty"`
	// Elicit makes the client declare elicitation and answer each
	// elicitation/create with the next of these.
	Elicit []map[string]any `json:"elicit,omitempty"`
}

// runHost runs the TypeScript SDK host on plan.
func runHost(t *testing.T, plan hostPlan) hostRun {
	t.Helper()
	return runHostPausing(t, plan, nil)
}

// runHostPausing runs the TypeScript SDK host on plan, calling pause(i)
// before each call i marked Pause, while the host waits.
func runHostPausing(t *testing.T, plan hostPlan, pause func(i int)) hostRun {
	t.Helper()
	nm := realprog.NodeModules(t)
	dir := t.TempDir()
	script, err := os.ReadFile("testdata/mcp-host.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// The script imports the SDK the way a package does: node finds it in
	// the node_modules beside it.
	if err := os.WriteFile(filepath.Join(dir, "host.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if plan.Env == nil {
		plan.Env = map[string]string{}
	}
	plan.Env["PATH"] = os.Getenv("PATH")
	argv, _ := json.Marshal(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "host.mjs"), string(argv))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if pause == nil {
		err = cmd.Run()
	} else {
		err = runPausing(t, cmd, &stderr, pause)
	}
	var out hostRun
	if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr != nil || err != nil || out.Fatal != "" {
		t.Fatalf("the SDK host: %v; output %s\nfatal: %s\nstderr:\n%s", err, stdout.Bytes(), out.Fatal, stderr.Bytes())
	}
	return out
}

// runPausing runs cmd, the host script, reading its stderr into errs and
// answering each of its pauses on its stdin after pause(i).
func runPausing(t *testing.T, cmd *exec.Cmd, errs *bytes.Buffer, pause func(i int)) error {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = nil
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		errs.Write(append(sc.Bytes(), '\n'))
		if _, after, ok := strings.Cut(sc.Text(), "auditchain-test-host: paused before call "); ok {
			i, _ := strconv.Atoi(after)
			pause(i)
			io.WriteString(in, "go\n")
		}
	}
	in.Close()
	return cmd.Wait()
}

// proxyPlan runs `auditchain mcp proxy` (this test binary as the command, see
// TestMain) in front of upstream for subagent.
func proxyPlan(s *httpapitest.Server, token, subagent string, upstream ...string) hostPlan {
	argv, _ := json.Marshal(append([]string{"mcp", "proxy", "--url", s.URL, "--api-key", token, "--subagent", subagent, "--"}, upstream...))
	return hostPlan{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{childServeEnv: string(argv)}}
}

// realProxyService starts a service with an account whose sub-agent may call
// tools.
func realProxyService(t *testing.T, subagent string, tools ...string) (*httpapitest.Server, string, *client.Client) {
	t.Helper()
	s := httpapitest.Start(t, storetest.DSN(t, storetest.SQLite), apptest.Options{})
	_, token := s.Account(t, subagent+"@example.com")
	c, err := client.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGrant(context.Background(), api.CreateGrantRequest{Subagent: new(subagent), MaxToolCalls: new(int64(100)), AllowedTools: tools,
		ExpiresAt: new(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))}); err != nil {
		t.Fatal(err)
	}
	return s, token, c
}

// checkRecorded: each allowed tool has one tool_call (allow) and a tool_result
// whose parent it is; each refused tool one tool_call (deny) and no result.
func checkRecorded(t *testing.T, c *client.Client, allowed, refused []string) {
	t.Helper()
	found, err := c.Search(context.Background(), api.SearchRequest{EventTypes: []string{"tool_call", "tool_result"}})
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]api.Event{}
	var results []api.Event
	for _, e := range found.Results {
		if e.EventType == "tool_call" {
			calls[*e.Tool] = e
		} else {
			results = append(results, e)
		}
	}
	if len(calls) != len(allowed)+len(refused) || len(results) != len(allowed) {
		t.Fatalf("recorded %d tool_calls and %d tool_results, want %d and %d", len(calls), len(results), len(allowed)+len(refused), len(allowed))
	}
	for _, tool := range refused {
		if e, ok := calls[tool]; !ok || *e.Decision != "deny" {
			t.Fatalf("the refused %s is recorded as %+v", tool, e)
		}
	}
	for _, tool := range allowed {
		call, ok := calls[tool]
		if !ok || *call.Decision != "allow" {
			t.Fatalf("the allowed %s is recorded as %+v", tool, call)
		}
		n := 0
		for _, r := range results {
			if r.ParentID != nil && *r.ParentID == call.EventID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the allowed %s has %d tool_results", tool, n)
		}
	}
}

// refusalText is the text of a refused call's result, which the SDK client
// accepted: isError, text content only (no structured content to validate
// against the tool's output schema).
func refusalText(t *testing.T, run hostRun, i int) string {
	t.Helper()
	r := run.Results[i]
	if r.Error != nil {
		t.Fatalf("call %d: the SDK client raised %v %q (a refusal must validate against the tool's output schema)", i, r.Error.Code, r.Error.Message)
	}
	if !r.Result.IsError || r.Result.StructuredContent != nil || len(r.Result.Content) != 1 {
		t.Fatalf("call %d: %+v, want a refusal", i, r.Result)
	}
	text, _ := r.Result.Content[0]["text"].(string)
	return text
}

// The TypeScript SDK's client through `auditchain mcp proxy` in front of
// server-filesystem, whose every tool declares an output schema: the tools are
// listed as the server lists them; an allowed read runs and is recorded; a
// refused write does not run (no file) and its refusal is a result the client
// accepts.
func TestRealProxyServerFilesystem(t *testing.T) {
	t.Parallel()
	fs := realprog.Bin(t, "mcp-server-filesystem")
	s, token, c := realProxyService(t, "files", "read_text_file")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "note.txt"), []byte("hello from the note"), 0o644); err != nil {
		t.Fatal(err)
	}
	direct := runHost(t, hostPlan{Command: fs, Args: []string{root}})
	plan := proxyPlan(s, token, "files", fs, root)
	plan.Calls = []hostCall{
		{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, "note.txt")}},
		{Name: "write_file", Arguments: map[string]any{"path": filepath.Join(root, "new.txt"), "content": "written"}},
	}
	proxied := runHost(t, plan)

	if len(direct.Tools) == 0 || !reflect.DeepEqual(proxied.Tools, direct.Tools) {
		t.Fatalf("through the proxy the tools are\n%v\ndirectly\n%v", proxied.Tools, direct.Tools)
	}
	for _, tool := range proxied.Tools {
		if tool["outputSchema"] == nil {
			t.Fatalf("server-filesystem's %s has no output schema: the test no longer covers refusals against one", tool["name"])
		}
	}
	read := proxied.Results[0]
	if read.Error != nil || read.Result.IsError || !strings.Contains(read.Result.Content[0]["text"].(string), "hello from the note") {
		t.Fatalf("the allowed read: %+v %+v", read.Result, read.Error)
	}
	if text := refusalText(t, proxied, 1); !strings.HasPrefix(text, "refused: tool_not_allowed: ") {
		t.Fatalf("the refused write: %q", text)
	}
	if _, err := os.Stat(filepath.Join(root, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused write ran: %v", err)
	}
	checkRecorded(t, c, []string{"read_text_file"}, []string{"write_file"})
}

// The same host in front of server-everything, whose tools carry execution
// (taskSupport), annotations and output schemas and which announces a tool list
// change while the host connects: the tools are listed as the server lists them;
// echo runs and is recorded; a refused call of a tool with an output schema is a
// result the client accepts.
func TestRealProxyServerEverything(t *testing.T) {
	t.Parallel()
	everything := realprog.Bin(t, "mcp-server-everything")
	s, token, c := realProxyService(t, "everything", "echo")
	direct := runHost(t, hostPlan{Command: everything})
	plan := proxyPlan(s, token, "everything", everything)
	plan.Calls = []hostCall{
		{Name: "echo", Arguments: map[string]any{"message": "through the proxy"}},
		{Name: "get-structured-content", Arguments: map[string]any{"location": "New York"}},
	}
	proxied := runHost(t, plan)

	if len(direct.Tools) == 0 || !reflect.DeepEqual(proxied.Tools, direct.Tools) {
		t.Fatalf("through the proxy the tools are\n%v\ndirectly\n%v", proxied.Tools, direct.Tools)
	}
	withExecution := 0
	for _, tool := range proxied.Tools {
		if tool["execution"] != nil {
			withExecution++
		}
	}
	if withExecution == 0 {
		t.Fatal("no tool has execution: the test no longer covers it")
	}
	echo := proxied.Results[0]
	if echo.Error != nil || echo.Result.IsError || echo.Result.Content[0]["text"] != "Echo: through the proxy" {
		t.Fatalf("the allowed echo: %+v %+v", echo.Result, echo.Error)
	}
	if text := refusalText(t, proxied, 1); !strings.HasPrefix(text, "refused: tool_not_allowed: ") {
		t.Fatalf("the refused get-structured-content: %q", text)
	}
	checkRecorded(t, c, []string{"echo"}, []string{"get-structured-content"})
}

// The proxy started many times in front of server-everything, which sends
// notifications/tools/list_changed while the host is still connecting: every
// session connects and lists the tools.
func TestRealProxyStartsRepeatedly(t *testing.T) {
	t.Parallel()
	everything := realprog.Bin(t, "mcp-server-everything")
	s, token, _ := realProxyService(t, "restarts")
	plan := proxyPlan(s, token, "restarts", everything)
	plan.Sessions, plan.Parallel = 8, 4
	run := runHost(t, plan)
	if run.Sessions != 8 || len(run.Failures) > 0 {
		t.Fatalf("%d sessions, failures: %v", run.Sessions, run.Failures)
	}
}

// inspector runs the MCP Inspector's CLI against POST /v1/mcp.
func inspector(t *testing.T, s *httpapitest.Server, args ...string) (map[string]any, int) {
	t.Helper()
	bin := realprog.Bin(t, "inspector")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--cli", s.URL + "/v1/mcp", "--transport", "http", "--stored-auth-only"}, args...)...)
	// Its catalog and secret store stay in the test's directory.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "MCP_CATALOG_PATH="+filepath.Join(home, "mcp.json"), "MCP_INSPECTOR_SECRET_STORE=memory")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	// The answer is on stdout; a failure is a JSON line at the end of
	// stderr.
	answer := bytes.TrimSpace(stdout.Bytes())
	if len(answer) == 0 {
		lines := bytes.Split(bytes.TrimSpace(stderr.Bytes()), []byte("\n"))
		answer = lines[len(lines)-1]
	}
	var out map[string]any
	if err := json.Unmarshal(answer, &out); err != nil {
		t.Fatalf("inspector %v: exit %d, output %s\nstderr: %s", args, code, stdout.Bytes(), stderr.Bytes())
	}
	return out, code
}

// The Inspector CLI's exit codes (its EXIT_CODES).
const (
	inspectorAuthRequired = 3
	inspectorToolError    = 5
)

// The MCP Inspector's CLI over POST /v1/mcp: without a key it reports that
// authentication is needed, with the service's message naming both ways to
// send the key; with the key as a bearer token or as X-API-Key it lists the
// tools and calls them, a refusal reaching it as a tool error.
func TestRealInspectorOverHTTP(t *testing.T) {
	t.Parallel()
	realprog.Bin(t, "inspector")
	s := httpapitest.Start(t, storetest.DSN(t, storetest.SQLite), apptest.Options{})
	_, token := s.Account(t, "inspector@example.com")
	t.Run("no key", func(t *testing.T) {
		t.Parallel()
		out, code := inspector(t, s, "--method", "tools/list")
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if code != inspectorAuthRequired || e["code"] != "auth_required" || !strings.Contains(msg, "X-API-Key") || !strings.Contains(msg, "Bearer") {
			t.Fatalf("without a key: exit %d, %v", code, out)
		}
	})
	t.Run("bearer token", func(t *testing.T) {
		t.Parallel()
		out, code := inspector(t, s, "--method", "tools/list", "--header", "Authorization: Bearer "+token)
		tools, _ := out["tools"].([]any)
		if code != 0 || len(tools) != 12 {
			t.Fatalf("tools/list: exit %d, %v", code, out)
		}
	})
	t.Run("X-API-Key", func(t *testing.T) {
		t.Parallel()
		out, code := inspector(t, s, "--method", "tools/call", "--tool-name", "gate_check", "--tool-arg", "subagent=nobody",
			"--header", "X-API-Key: "+token)
		content, _ := out["content"].([]any)
		if code != inspectorToolError || out["isError"] != true || len(content) != 1 ||
			!strings.HasPrefix(content[0].(map[string]any)["text"].(string), "refused: no_grant: ") {
			t.Fatalf("tools/call gate_check: exit %d, %v", code, out)
		}
	})
}
