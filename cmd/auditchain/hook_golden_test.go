package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

var updateHookGolden = flag.Bool("update-hook", false, "rewrite testdata/hook/*.golden")

// goldenNow is the server's clock in the golden tests, so that the gate's
// reasons (which name instants) are the same on every run.
var goldenNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// hookStdin is each host's stdin for the three kinds of call: before a tool,
// after it, and an event the hook only answers.
var hookStdin = map[string]map[string]string{
	"claude-code": {
		"pre":   `{"session_id":"sess-golden","transcript_path":"/home/dev/.claude/projects/p/sess-golden.jsonl","cwd":"/work/project","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls -la","description":"List files"},"tool_use_id":"toolu_CASE"}`,
		"post":  `{"session_id":"sess-golden","transcript_path":"/home/dev/.claude/projects/p/sess-golden.jsonl","cwd":"/work/project","permission_mode":"default","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls -la","description":"List files"},"tool_response":{"stdout":"total 0","stderr":"","interrupted":false},"tool_use_id":"toolu_CASE"}`,
		"other": `{"session_id":"sess-golden","transcript_path":"/home/dev/.claude/projects/p/sess-golden.jsonl","cwd":"/work/project","hook_event_name":"SessionStart","source":"startup"}`,
		"sub":   `{"session_id":"sess-golden","transcript_path":"/home/dev/.claude/projects/p/sess-golden.jsonl","cwd":"/work/project","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls -la"},"tool_use_id":"toolu_CASE","agent_id":"agent-7","agent_type":"reviewer"}`,
	},
	"codex": {
		"pre":   `{"session_id":"sess-golden","turn_id":"turn-1","transcript_path":null,"cwd":"/work/project","hook_event_name":"PreToolUse","model":"gpt-5","tool_name":"Bash","tool_input":{"command":"ls -la"},"tool_use_id":"call_CASE"}`,
		"post":  `{"session_id":"sess-golden","turn_id":"turn-1","transcript_path":null,"cwd":"/work/project","hook_event_name":"PostToolUse","model":"gpt-5","tool_name":"Bash","tool_input":{"command":"ls -la"},"tool_response":"total 0","tool_use_id":"call_CASE"}`,
		"other": `{"session_id":"sess-golden","turn_id":"turn-1","cwd":"/work/project","hook_event_name":"Stop","stop_hook_active":false}`,
	},
	"gemini": {
		"pre":   `{"session_id":"sess-golden","transcript_path":"/home/dev/.gemini/tmp/chats/sess-golden.json","cwd":"/work/project","hook_event_name":"BeforeTool","timestamp":"2026-11-26T12:00:00.CASEZ","tool_name":"run_shell_command","tool_input":{"command":"ls -la"},"mcp_context":null}`,
		"post":  `{"session_id":"sess-golden","transcript_path":"/home/dev/.gemini/tmp/chats/sess-golden.json","cwd":"/work/project","hook_event_name":"AfterTool","timestamp":"2026-11-26T12:00:01.CASEZ","tool_name":"run_shell_command","tool_input":{"command":"ls -la"},"tool_response":{"llmContent":"total 0","returnDisplay":"total 0"}}`,
		"other": `{"session_id":"sess-golden","cwd":"/work/project","hook_event_name":"SessionStart","timestamp":"2026-11-26T12:00:00.000Z","source":"startup"}`,
	},
	"cursor": {
		"pre":   `{"hook_event_name":"beforeShellExecution","conversation_id":"conv-golden","generation_id":"gen-CASE","workspace_roots":["/work/project"],"command":"ls -la","cwd":"/work/project"}`,
		"post":  `{"hook_event_name":"afterShellExecution","conversation_id":"conv-golden","generation_id":"gen-CASE","workspace_roots":["/work/project"],"command":"ls -la","cwd":"/work/project","output":"total 0","duration":12}`,
		"other": `{"hook_event_name":"stop","conversation_id":"conv-golden","generation_id":"gen-CASE","status":"completed","loop_count":1}`,
	},
}

// goldenCase is one hook invocation: the stdin kind and the flags.
type goldenCase struct {
	name  string
	stdin string // pre, post, other, sub
	args  []string
	down  bool // the service is unreachable
}

var goldenCases = []goldenCase{
	{name: "allow (authorized, one use metered)", stdin: "pre", args: []string{"--agent", "worker"}},
	{name: "no_grant, policy record", stdin: "pre", args: []string{"--agent", "stranger"}},
	{name: "no_grant, policy ask", stdin: "pre", args: []string{"--agent", "stranger", "--policy", "ask"}},
	{name: "no_grant, policy deny", stdin: "pre", args: []string{"--agent", "stranger", "--policy", "deny"}},
	{name: "expired", stdin: "pre", args: []string{"--agent", "expired"}},
	{name: "revoked", stdin: "pre", args: []string{"--agent", "revoked"}},
	{name: "budget_exhausted", stdin: "pre", args: []string{"--agent", "spent"}},
	{name: "tool_not_allowed", stdin: "pre", args: []string{"--agent", "narrow"}},
	{name: "invalid_expiry", stdin: "pre", args: []string{"--agent", "too-long"}},
	{name: "invalid_limit", stdin: "pre", args: []string{"--agent", "zero"}},
	{name: "denied_by_governance", stdin: "pre", args: []string{"--agent", "governed"}},
	{name: "error: service unreachable, fails closed", stdin: "pre", args: []string{"--agent", "worker"}, down: true},
	{name: "error: service unreachable, --on-error allow", stdin: "pre", args: []string{"--agent", "worker", "--on-error", "allow"}, down: true},
	{name: "after the tool", stdin: "post", args: []string{"--agent", "worker"}},
	{name: "another event", stdin: "other", args: []string{"--agent", "worker"}},
	{name: "sub-agent without a grant", stdin: "sub", args: []string{"--agent", "worker"}},
}

// goldenTools are the tool names the golden stdins use, one per host.
var goldenTools = []string{"Bash", "run_shell_command", "Shell"}

// setUpGate writes, on a server whose clock is goldenNow, one sub-agent per
// gate status the golden cases meet.
func setUpGate(t *testing.T, s *httpapitest.Server) (token string) {
	t.Helper()
	ctx := context.Background()
	userID, token := s.Account(t, "hooks@example.com")
	other := s.Key(t, userID, api.CreateKeyRequest{Label: new("ratifier")})
	c, err := client.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := client.New(s.URL, other)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(id, sub string, expires time.Time, max int64, tools []string) {
		t.Helper()
		if _, err := c.CreateGrant(ctx, api.CreateGrantRequest{GrantID: &id, Subagent: new(sub), ExpiresAt: new(client.FormatTimestamp(expires)),
			MaxToolCalls: new(max), AllowedTools: tools}); err != nil {
			t.Fatalf("grant %s: %v", id, err)
		}
	}
	day := 24 * time.Hour
	grant("g-0001", "worker", goldenNow.Add(day), 1000, goldenTools)
	grant("g-0002", "expired", goldenNow.Add(-time.Hour), 10, goldenTools)
	grant("g-0003", "revoked", goldenNow.Add(day), 10, goldenTools)
	if _, err := c.RevokeGrant(ctx, "g-0003", api.RevokeRequest{Subagent: new("revoked")}); err != nil {
		t.Fatal(err)
	}
	grant("g-0004", "spent", goldenNow.Add(day), 1, goldenTools)
	if _, err := c.UseGrant(ctx, "g-0004", api.UseRequest{Subagent: new("spent"), N: new(int64(1))}); err != nil {
		t.Fatal(err)
	}
	grant("g-0005", "narrow", goldenNow.Add(day), 10, []string{"Read"})
	grant("g-0006", "too-long", goldenNow.Add(400*day), 10, goldenTools)
	grant("g-0007", "zero", goldenNow.Add(day), 0, goldenTools)
	grant("g-0008", "governed", goldenNow.Add(day), 10, goldenTools)
	p, err := c.Propose(ctx, api.CreateProposalRequest{Kind: new("deny_scope"), Subject: &api.ProposalSubject{Subagent: new("governed")},
		Evidence: &api.ProposalEvidence{BlockedAttempts: new(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Ratify(ctx, p.ProposalID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Enact(ctx, p.ProposalID, nil); err != nil {
		t.Fatal(err)
	}
	return token
}

var proposalID = regexp.MustCompile(`prop-[0-9a-f]+`)

// runHook runs `auditchain hook` in-process (what run dispatches to, with
// the process's stdin) with stdin and the environment
// env, and returns its stdout, stderr and exit status.
func runHook(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := hookCmd(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	var ee *exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		exit = ee.code
	default:
		t.Fatalf("hook %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String(), exit
}

// The golden stdin → stdout/exit pairs of every host: allow, deny by each
// gate status, ask, the policy for the main agent, errors (fail closed, or
// open when asked), the after-tool call and an event the hook only answers.
func TestHookGolden(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := httpapitest.Start(t, dsn, apptest.Options{Now: func() time.Time { return goldenNow }})
		token := setUpGate(t, s)
		for _, host := range []string{"claude-code", "codex", "gemini", "cursor"} {
			t.Run(host, func(t *testing.T) {
				var doc bytes.Buffer
				fmt.Fprintf(&doc, "# auditchain hook --host %s: stdin, then stdout, stderr and exit status (go test ./cmd/auditchain -run TestHookGolden -update-hook)\n", host)
				for i, gc := range goldenCases {
					tmpl, ok := hookStdin[host][gc.stdin]
					if !ok {
						continue
					}
					env := map[string]string{"AUDITCHAIN_URL": s.URL, "AUDITCHAIN_API_KEY": token,
						"AUDITCHAIN_HOOK_SPOOL": t.TempDir()}
					if gc.down {
						env["AUDITCHAIN_URL"] = "http://127.0.0.1:1"
					}
					stdin := strings.ReplaceAll(tmpl, "CASE", fmt.Sprint(i))
					out, errOut, exit := runHook(t, env, stdin, append([]string{"--host", host}, gc.args...)...)
					// stderr is the reason a blocked call shows (Codex) or
					// nothing: diagnostics go to the spool's hook.log.
					if errOut == "" {
						errOut = "(none)\n"
					}
					fmt.Fprintf(&doc, "\n## %s: %s\nstdin: %s\nstdout: %sstderr: %sexit: %d\n", gc.name, strings.Join(gc.args, " "), stdin,
						proposalID.ReplaceAllString(out, "prop-…"), proposalID.ReplaceAllString(errOut, "prop-…"), exit)
				}
				path := filepath.Join("testdata", "hook", host+".golden")
				if *updateHookGolden {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, doc.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if got := doc.String(); got != string(want) {
					t.Errorf("%s differs from the golden file (-update-hook rewrites it), -want +got:\n%s", path, cmp.Diff(string(want), got))
				}
			})
		}
	})
}
