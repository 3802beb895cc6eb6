package hosttest

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/hook-stdin from the hosts' runs")

// Each host, pointed at the scripted server, runs the shell command the
// model asks for once a plain hook allows it, and does not run the one the
// hook refuses: the files in the project and the tool results the host sent
// back decide, not our reading of the hook's input.

func TestClaudeRunsAllowedToolAndNotRefusedOne(t *testing.T) {
	t.Parallel()
	proveGate(t, Claude, func(s *Session, hook string) {
		// The project's settings, as docs/hooks.md installs them; -p does not
		// ask to trust the folder. The hook never loosens the host's rules,
		// so Bash must be allowed by the host too.
		writeJSONFile(t, filepath.Join(s.Dir, ".claude", "settings.json"), hooksConfig("PreToolUse", "PostToolUse", "*", hook))
	}, "--allowedTools", "Bash")
}

func TestCodexRunsAllowedToolAndNotRefusedOne(t *testing.T) {
	t.Parallel()
	proveGate(t, CodexCLI, func(s *Session, hook string) {
		// User hooks in $CODEX_HOME/hooks.json. Codex 0.169 runs only hooks
		// it trusts; this proof of the harness bypasses the trust check
		// instead of computing trust entries.
		writeJSONFile(t, filepath.Join(s.Config, "hooks.json"), hooksConfig("PreToolUse", "PostToolUse", "*", hook))
	}, "--sandbox", "danger-full-access", "--dangerously-bypass-hook-trust")
}

func TestGeminiRunsAllowedToolAndNotRefusedOne(t *testing.T) {
	t.Parallel()
	proveGate(t, GeminiCLI, func(s *Session, hook string) {
		// Project hooks load only in a trusted folder.
		writeJSONFile(t, filepath.Join(s.Dir, ".gemini", "settings.json"), hooksConfig("BeforeTool", "AfterTool", ".*", hook))
		s.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
	}, "--approval-mode", "yolo")
}

const refusal = "refused by the test hook"

// gateSession answers a session of h whose model asks for a command the
// hook probe allows, then one it refuses, and the probe, not yet installed.
func gateSession(t *testing.T, h Host) (*Server, *Session, hookProbe) {
	srv := NewServer(t, Script{Calls(h.Shell("touch ran")), Calls(h.Shell("touch blocked")), Text("finished")})
	return srv, NewSession(t, h, srv), newHookProbe(t)
}

// checkUngated fails unless both of gateSession's commands ran and the hook
// never did: the host did not load it.
func checkUngated(t *testing.T, s *Session, probe hookProbe) {
	for _, f := range []string{"ran", "blocked"} {
		if _, err := os.Stat(filepath.Join(s.Dir, f)); err != nil {
			t.Errorf("%s: %v, want both commands run, ungated", f, err)
		}
	}
	if in := probe.inputs(t); len(in) != 0 {
		t.Errorf("the hook ran %d times, want 0: the host should not have loaded it", len(in))
	}
}

func proveGate(t *testing.T, host Host, install func(s *Session, hook string), flags ...string) {
	srv, s, probe := gateSession(t, host)
	install(s, probe.command)

	out := s.Run(t, "Create the two files.", flags...)
	if out.ExitCode != 0 || !strings.Contains(out.Stdout, "finished") {
		t.Fatalf("exit %d, want 0 and the script's last text\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", out.ExitCode, out.Stdout, out.Stderr, srv.Log())
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "ran")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "blocked")); err == nil {
		t.Errorf("the refused command ran")
	}
	calls := srv.Calls()
	if len(calls) != 2 {
		t.Fatalf("the server asked for %d calls, want 2\n%s", len(calls), srv.Log())
	}
	if res, ok := srv.Result(calls[0].ID); !ok || res.IsError || strings.Contains(res.Output, refusal) {
		t.Errorf("result of the allowed call = %+v (found %v), want its output", res, ok)
	}
	if res, ok := srv.Result(calls[1].ID); !ok || !strings.Contains(res.Output, refusal) {
		t.Errorf("result of the refused call = %+v (found %v), want the hook's reason", res, ok)
	}
	if p := srv.Proxied(); len(p) > 0 {
		t.Errorf("%s tried to reach beyond loopback: %v", host, p)
	}

	inputs := probe.inputs(t)
	var seen []string
	for _, in := range inputs {
		seen = append(seen, in.event+" "+in.command)
	}
	pre, post := "PreToolUse", "PostToolUse"
	if host == GeminiCLI {
		pre, post = "BeforeTool", "AfterTool"
	}
	for _, want := range []string{pre + " touch ran", post + " touch ran", pre + " touch blocked"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the hook did not see %q; it saw %q", want, seen)
		}
	}
	if slices.Contains(seen, post+" touch blocked") {
		t.Errorf("the hook saw %s for the refused call", post)
	}
	checkSample(t, host, s, inputs)
}

// hookProbe is a hook command that saves each input it gets in its own file
// and refuses, before it runs, any call whose input mentions "blocked" (exit
// 2 with the reason on stderr: the convention all three hosts share).
type hookProbe struct {
	command, dir string
}

func newHookProbe(t *testing.T) hookProbe {
	dir := t.TempDir()
	p := hookProbe{command: filepath.Join(dir, "hook.sh"), dir: filepath.Join(dir, "inputs")}
	if err := os.Mkdir(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
in=$(cat)
printf '%s' "$in" > "$(mktemp "` + p.dir + `/input.XXXXXX")"
case "$in" in *blocked*)
	case "$in" in *'"PreToolUse"'*|*'"BeforeTool"'*) echo "` + refusal + `" >&2; exit 2 ;; esac
esac
exit 0
`
	if err := os.WriteFile(p.command, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type hookInput struct {
	event, command string
	raw            map[string]any
}

// inputs answers what the hook was given, ordered by command and event.
func (p hookProbe) inputs(t *testing.T) []hookInput {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []hookInput
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(p.dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var in hookInput
		if err := json.Unmarshal(b, &in.raw); err != nil {
			t.Fatalf("hook input %s is not a JSON object: %v\n%s", e.Name(), err, b)
		}
		in.event, _ = in.raw["hook_event_name"].(string)
		if ti, ok := in.raw["tool_input"].(map[string]any); ok {
			in.command, _ = ti["command"].(string)
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].command != out[j].command {
			return out[i].command > out[j].command // "touch ran" first
		}
		return eventRank(out[i].event) < eventRank(out[j].event)
	})
	return out
}

func eventRank(e string) int {
	if strings.HasPrefix(e, "Pre") || strings.HasPrefix(e, "Before") {
		return 0
	}
	return 1
}

func hooksConfig(pre, post, matcher, command string) map[string]any {
	group := []any{map[string]any{
		"matcher": matcher,
		"hooks":   []any{map[string]any{"type": "command", "command": command}},
	}}
	return map[string]any{"hooks": map[string]any{pre: group, post: group}}
}

// checkSample keeps what the host gave the hook in testdata/hook-stdin,
// with run-specific values replaced, and fails when the members of what it
// gives (their names and JSON types) change; -update rewrites the sample.
func checkSample(t *testing.T, host Host, s *Session, inputs []hookInput) {
	var got []any
	for _, in := range inputs {
		got = append(got, normalize(in.raw, s))
	}
	path := filepath.Join("testdata", "hook-stdin", string(host)+".json")
	if *update {
		writeJSONFile(t, path, got)
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	var want []any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(shape(want), shape(got)); diff != "" {
		t.Errorf("the members of %s's hook input changed (-%s +now); check docs/hooks.md, then run with -update:\n%s", host, path, diff)
	}
}

var (
	nonAlnumRE = regexp.MustCompile(`[^a-zA-Z0-9]`)
	uuidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE     = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}[:-]\d{2}([:-]\d{2}(\.\d+)?Z?)?`)
	dateRE     = regexp.MustCompile(`\d{4}/\d{2}/\d{2}`)
	// Numbers a tool's output carries that change from run to run.
	varyRE = regexp.MustCompile(`(PGID: |Chunk ID: |Wall time: )[0-9a-f.]+`)
)

// normalize replaces in a hook input what differs from run to run: the
// throwaway directories (also as Claude Code names its project folders),
// ids, times.
func normalize(v any, s *Session) any {
	root := filepath.Dir(s.Home)
	var sid string
	if m, ok := v.(map[string]any); ok {
		sid, _ = m["session_id"].(string)
	}
	pairs := []string{root, "$ROOT", nonAlnumRE.ReplaceAllString(root, "-"), "-$ROOT"}
	if sid != "" {
		pairs = append(pairs, sid, "$SESSION_ID")
	}
	whole := strings.NewReplacer(pairs...)
	// Gemini names its transcript with the session id's first 8 digits;
	// replaced after whole UUIDs, which may share them (UUIDv7 from the
	// same millisecond).
	short := strings.NewReplacer()
	if len(sid) >= 8 {
		short = strings.NewReplacer(sid[:8], "$SESSION_ID8")
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = walk(e)
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = walk(e)
			}
			return out
		case string:
			s := uuidRE.ReplaceAllString(whole.Replace(v), "$$UUID")
			s = timeRE.ReplaceAllString(short.Replace(s), "$$TIME")
			s = dateRE.ReplaceAllString(s, "$$DATE")
			return varyRE.ReplaceAllString(s, "${1}$$N")
		}
		return v
	}
	return walk(v)
}

// shape answers each member's path and JSON type, and the values of the
// members that name the event and the tool.
func shape(v any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			out = append(out, path+": object")
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			out = append(out, path+": array")
			for i, e := range v {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		case string:
			if strings.HasSuffix(path, ".hook_event_name") || strings.HasSuffix(path, ".tool_name") {
				out = append(out, path+" = "+v)
			} else {
				out = append(out, path+": string")
			}
		case float64:
			out = append(out, path+": number")
		case bool:
			out = append(out, path+": bool")
		case nil:
			out = append(out, path+": null")
		}
	}
	walk("", v)
	sort.Strings(out)
	return out
}

func TestGeminiUserHooksRunUnderSkipTrust(t *testing.T) {
	t.Parallel()
	proveGate(t, GeminiCLI, func(s *Session, hook string) {
		mergeJSONFile(t, filepath.Join(s.Config, "settings.json"), hooksConfig("BeforeTool", "AfterTool", ".*", hook))
	}, "--approval-mode", "yolo", "--skip-trust")
}

// mergeJSONFile sets top-level members of a JSON object file.
func mergeJSONFile(t *testing.T, path string, members map[string]any) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	for k, v := range members {
		obj[k] = v
	}
	writeJSONFile(t, path, obj)
}

// Gemini's own error for an untrusted folder suggests --skip-trust; under it
// the project's hooks are not loaded at all, so nothing is gated.
func TestGeminiSkipTrustIgnoresProjectHooks(t *testing.T) {
	t.Parallel()
	srv, s, probe := gateSession(t, GeminiCLI)
	writeJSONFile(t, filepath.Join(s.Dir, ".gemini", "settings.json"), hooksConfig("BeforeTool", "AfterTool", ".*", probe.command))

	if out := s.Run(t, "Create the two files.", "--approval-mode", "yolo"); out.ExitCode != 55 {
		t.Errorf("untrusted folder without --skip-trust: exit %d, want 55\n%s", out.ExitCode, out.Stderr)
	}
	out := s.Run(t, "Create the two files.", "--approval-mode", "yolo", "--skip-trust")
	if out.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\n%s", out.ExitCode, out.Stderr, srv.Log())
	}
	checkUngated(t, s, probe)
}

// A sub-agent's conversation follows its own script (ByPrompt), and the
// host runs its hooks on the sub-agent's calls too: Claude Code says which
// sub-agent made the call, Gemini CLI does not.

func TestClaudeSubagentFollowsItsScriptUnderTheHook(t *testing.T) {
	t.Parallel()
	agent := ToolCall("Agent", map[string]string{"description": "Create files", "prompt": subMarker + " create the files", "subagent_type": "general-purpose"})
	inputs := proveSubagent(t, Claude, agent, Text("sub-agent done"), func(s *Session, hook string) {
		writeJSONFile(t, filepath.Join(s.Dir, ".claude", "settings.json"), hooksConfig("PreToolUse", "PostToolUse", "*", hook))
	}, "--allowedTools", "Bash,Agent")
	for _, in := range inputs {
		id, _ := in.raw["agent_id"].(string)
		typ, _ := in.raw["agent_type"].(string)
		switch sub := strings.HasPrefix(in.command, "touch "); {
		case sub && (id == "" || typ != "general-purpose"):
			t.Errorf("%s %q from the sub-agent: agent_id %q, agent_type %q; want its id and general-purpose", in.event, in.command, id, typ)
		case !sub && (id != "" || typ != ""):
			t.Errorf("%s of the main agent's %v carries agent_id %q, agent_type %q", in.event, in.raw["tool_name"], id, typ)
		}
	}
}

func TestGeminiSubagentFollowsItsScriptUnderTheHook(t *testing.T) {
	t.Parallel()
	agent := ToolCall("invoke_agent", map[string]string{"agent_name": "generalist", "prompt": subMarker + " create the files"})
	// A Gemini sub-agent ends only by calling complete_task.
	done := Calls(ToolCall("complete_task", map[string]any{"result": map[string]string{"response": "sub-agent done"}}))
	inputs := proveSubagent(t, GeminiCLI, agent, done, func(s *Session, hook string) {
		writeJSONFile(t, filepath.Join(s.Dir, ".gemini", "settings.json"), hooksConfig("BeforeTool", "AfterTool", ".*", hook))
		s.Setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
	}, "--approval-mode", "yolo")
	var tools []string
	for _, in := range inputs {
		for _, k := range []string{"agent_id", "agent_type", "agent_name"} {
			if _, ok := in.raw[k]; ok {
				t.Errorf("%s of %v carries %s: Gemini CLI 0.61 was not seen to name the agent", in.event, in.raw["tool_name"], k)
			}
		}
		tools = append(tools, in.event+" "+in.raw["tool_name"].(string))
	}
	// The host's own complete_task goes through the hooks too.
	if !slices.Contains(tools, "BeforeTool complete_task") {
		t.Errorf("hooks saw %q, want complete_task among them", tools)
	}
}

const subMarker = "SUBAGENT-TASK-7f3c"

// proveSubagent has the main agent start a sub-agent that runs one allowed
// and one refused shell command and then finishes with done; it answers
// what the hook saw.
func proveSubagent(t *testing.T, host Host, agent Call, done Reply, install func(s *Session, hook string), flags ...string) []hookInput {
	agent.ID = "call_agent"
	srv := NewServer(t, ByPrompt{
		"MAIN-TASK-7f3c": Script{Calls(agent), Text("finished")},
		subMarker:        Script{Calls(host.Shell("touch sub")), Calls(host.Shell("touch blocked")), done},
	})
	s := NewSession(t, host, srv)
	probe := newHookProbe(t)
	install(s, probe.command)

	out := s.Run(t, "MAIN-TASK-7f3c: delegate it.", flags...)
	if out.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", out.ExitCode, out.Stdout, out.Stderr, srv.Log())
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "sub")); err != nil {
		t.Errorf("the sub-agent's allowed command did not run: %v\n%s", err, srv.Log())
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "blocked")); err == nil {
		t.Errorf("the sub-agent's refused command ran")
	}
	if _, ok := srv.Result(agent.ID); !ok {
		t.Errorf("the main agent got no result from its sub-agent\n%s", srv.Log())
	}
	var refused bool
	for _, c := range srv.Calls() {
		if res, ok := srv.Result(c.ID); ok && strings.Contains(string(c.Input), "touch blocked") {
			refused = strings.Contains(res.Output, refusal)
		}
	}
	if !refused {
		t.Errorf("the sub-agent's model did not get the hook's refusal\n%s", srv.Log())
	}
	return probe.inputs(t)
}

// Codex 0.169 runs only hooks it trusts, and skips the others without a word
// in exec: a hook installed without trust gates nothing.
func TestCodexSkipsUntrustedHooks(t *testing.T) {
	t.Parallel()
	srv, s, probe := gateSession(t, CodexCLI)
	writeJSONFile(t, filepath.Join(s.Config, "hooks.json"), hooksConfig("PreToolUse", "PostToolUse", "*", probe.command))

	out := s.Run(t, "Create the two files.", "--sandbox", "danger-full-access")
	if out.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\n%s", out.ExitCode, out.Stderr, srv.Log())
	}
	checkUngated(t, s, probe)
	said := strings.ReplaceAll(out.Stdout+out.Stderr, filepath.Dir(s.Home), "")
	if strings.Contains(strings.ToLower(said), "hook") {
		t.Errorf("codex exec mentioned the skipped hook:\n%s", said)
	}
}
