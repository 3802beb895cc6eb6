package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app/apptest"
	"github.com/auditchain/auditchain/internal/hook"
	"github.com/auditchain/auditchain/internal/hosttest"
	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/realprog"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
)

// The hooks against the real hosts (Claude Code, Codex CLI, Gemini CLI from
// npm, internal/hosttest): each host is set up by the real `auditchain hook
// install` as docs/hooks.md says, runs this test binary as its hook (TestMain
// makes it `auditchain hook`) against the real app on loopback, and the
// host's own behaviour decides: the files its tools made, and the tool
// results it sent back to the scripted model.

// hostWorld is a real server with one account, reached through a front
// that can be taken down (every connection dropped), and the record.
type hostWorld struct {
	hookWorld
	front *httptest.Server
	down  atomic.Bool
}

func newHostWorld(t *testing.T, grants ...api.CreateGrantRequest) *hostWorld {
	t.Helper()
	return newHostWorldOn(t, storetest.DSN(t, storetest.SQLite), grants...)
}

// newHostWorldOn is newHostWorld on the store dsn names.
func newHostWorldOn(t *testing.T, dsn string, grants ...api.CreateGrantRequest) *hostWorld {
	t.Helper()
	s := httpapitest.Start(t, dsn, apptest.Options{})
	user, token := s.Account(t, "hosts@example.com")
	c, err := client.New(s.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grants {
		g.ExpiresAt = new(client.FormatTimestamp(time.Now().Add(24 * time.Hour)))
		if _, err := c.CreateGrant(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	w := &hostWorld{hookWorld: hookWorld{s: s, c: c, user: user}}
	target, _ := url.Parse(s.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	w.front = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			panic(http.ErrAbortHandler)
		}
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.front.Close)
	w.env = map[string]string{"AUDITCHAIN_URL": w.front.URL, "AUDITCHAIN_API_KEY": token, "AUDITCHAIN_HOOK_SPOOL": t.TempDir()}
	return w
}

// grant is a grant of max calls of tools to subagent.
func grant(subagent string, max int64, tools ...string) api.CreateGrantRequest {
	return api.CreateGrantRequest{Subagent: new(subagent), MaxToolCalls: new(max), AllowedTools: tools}
}

// session is a host session whose environment carries the hook's.
func (w *hostWorld) session(t *testing.T, host hosttest.Host, srv *hosttest.Server) *hosttest.Session {
	s := hosttest.NewSession(t, host, srv)
	for k, v := range w.env {
		s.Setenv(k, v)
	}
	return s
}

// install runs `auditchain hook install` as a user would in s's shell: its
// HOME, CODEX_HOME, working directory; the program is this test binary.
func install(t *testing.T, s *hosttest.Session, args ...string) string {
	t.Helper()
	out, errOut, err := hookInstallRun(t, sessionEnv(s), append([]string{"install"}, args...)...)
	if err != nil {
		t.Fatalf("hook install %v: %v\n%s%s", args, err, out, errOut)
	}
	return out
}

// sessionEnv is s's environment as a map.
func sessionEnv(s *hosttest.Session) map[string]string {
	env := map[string]string{}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

func rawOf(t *testing.T, e verify.ExportEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// gateRun has the host's model ask for one shell command its grant allows
// (one call left) and then a second, which the gate refuses
// (budget_exhausted); it checks what ran, what the model was told and
// what was recorded, the tool-use ids starting with idPrefix (the host's,
// or derived).
func gateRun(t *testing.T, w *hostWorld, host hosttest.Host, hookHost, idPrefix string, setup func(s *hosttest.Session), flags ...string) {
	t.Helper()
	srv := hosttest.NewServer(t, hosttest.Script{hosttest.Calls(host.Shell("touch ran")), hosttest.Calls(host.Shell("touch blocked")), hosttest.Text("finished")})
	s := w.session(t, host, srv)
	setup(s)
	out := s.Run(t, "Create the two files.", flags...)
	if out.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", out.ExitCode, out.Stdout, out.Stderr, srv.Log())
	}
	if !exists(s.Dir, "ran") {
		t.Errorf("the allowed command did not run\n%s", srv.Log())
	}
	if exists(s.Dir, "blocked") {
		t.Errorf("the command the gate refused ran")
	}
	modelCalls := srv.Calls()
	if len(modelCalls) != 2 {
		t.Fatalf("%d calls, want 2\n%s", len(modelCalls), srv.Log())
	}
	// How each host puts the hook's reason to the model (docs/hooks.md).
	says := map[hosttest.Host]string{hosttest.Claude: "PreToolUse:Bash hook error: ", hosttest.CodexCLI: "Command blocked by PreToolUse hook: ",
		hosttest.GeminiCLI: "Tool execution blocked: "}[host]
	res, ok := srv.Result(modelCalls[1].ID)
	if !ok || !strings.HasPrefix(res.Output, says+"auditchain gate: budget_exhausted: ") {
		t.Errorf("the model was told %+v (found %v), want %q and the gate's reason", res, ok, says)
	}
	// What the model reads of a refusal is the reason, not the service's
	// address, event ids or the spool (Codex shows the hook's whole stderr).
	for _, leak := range []string{w.front.URL, "evt-", "spool"} {
		if strings.Contains(res.Output, leak) {
			t.Errorf("the refusal the model read holds %q: %s", leak, res.Output)
		}
	}
	const subagent = "main"
	calls, results := w.calls(t)
	if len(calls) != 2 || len(results) != 1 {
		t.Fatalf("%d tool_call and %d tool_result events, want 2 and 1", len(calls), len(results))
	}
	byDecision := map[string]verify.ExportEvent{}
	for _, c := range calls {
		byDecision[*c.Decision] = c
	}
	allowed, denied := byDecision["allow"], byDecision["deny"]
	if rawOf(t, allowed)["subagent"] != subagent || rawOf(t, denied)["gate_status"] != "budget_exhausted" || rawOf(t, allowed)["host"] != hookHost {
		t.Errorf("calls on the record:\n%s\n%s", allowed.Raw, denied.Raw)
	}
	// The digest an auditor recomputes from what the model asked for:
	// Claude Code and Gemini CLI hand the hook the model's arguments as
	// they are; Codex hands it {"command": …} for the model's
	// exec_command {"cmd": …}.
	input := modelCalls[0].Input
	if host == hosttest.CodexCLI {
		var args struct{ Cmd string }
		json.Unmarshal(input, &args)
		input, _ = json.Marshal(map[string]string{"command": args.Cmd})
	}
	if want, _ := hook.HashJSON(input); rawOf(t, allowed)["tool_input_sha256"] != want {
		t.Errorf("tool_input_sha256 %v, want %s, the digest of %s", rawOf(t, allowed)["tool_input_sha256"], want, input)
	}
	if results[0].ParentID == nil || *results[0].ParentID != allowed.EventID {
		t.Errorf("the result %s does not name the allowed call %s", results[0].EventID, allowed.EventID)
	}
	if u := w.uses(t, subagent); u != 1 {
		t.Errorf("%d uses metered, want 1", u)
	}
	for _, c := range calls {
		if id, _ := rawOf(t, c)["tool_use_id"].(string); !strings.HasPrefix(id, idPrefix) {
			t.Errorf("tool_use_id %q, want %s…", id, idPrefix)
		}
	}
	w.verifyOffline(t)
}

// outageRun has the host's model ask for one command while the service is
// down: the hook refuses it (fails closed) and spools the record, which
// `auditchain hook flush` sends once the service is back.
func outageRun(t *testing.T, w *hostWorld, host hosttest.Host, setup func(s *hosttest.Session), flags ...string) {
	t.Helper()
	srv := hosttest.NewServer(t, hosttest.Script{hosttest.Calls(host.Shell("touch outage")), hosttest.Text("finished")})
	s := w.session(t, host, srv)
	setup(s)
	w.down.Store(true)
	out := s.Run(t, "Create the file.", flags...)
	w.down.Store(false)
	if out.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", out.ExitCode, out.Stdout, out.Stderr, srv.Log())
	}
	if exists(s.Dir, "outage") {
		t.Errorf("the command ran while the service was down")
	}
	if res, ok := srv.Result(srv.Calls()[0].ID); !ok || !strings.Contains(res.Output, "auditchain: refused: the auditchain service is unreachable; the hook fails closed") {
		t.Errorf("the model was told %+v, want the hook's refusal", res)
	}
	if calls, _ := w.calls(t); len(calls) != 0 {
		t.Fatalf("%d calls recorded during the outage", len(calls))
	}
	if stdout, errOut, exit := hookProcess(t, w.env, "", "flush"); exit != 0 || !strings.Contains(stdout, `"sent": 1`) {
		t.Fatalf("hook flush: exit %d, %s%s", exit, stdout, errOut)
	}
	calls, _ := w.calls(t)
	if len(calls) != 1 || *calls[0].Decision != "deny" || rawOf(t, calls[0])["hook_error"] == nil {
		t.Fatalf("after the flush: %+v", calls)
	}
	w.verifyOffline(t)
}

// missingProgram installs the hook with a program that does not exist (a
// moved binary) and answers whether the host still ran the tool: whether
// it fails closed when the hook cannot start.
func missingProgram(t *testing.T, host hosttest.Host, hookHost string, flags ...string) bool {
	t.Helper()
	w := newHostWorld(t)
	srv := hosttest.NewServer(t, hosttest.Script{hosttest.Calls(host.Shell("touch ran")), hosttest.Text("finished")})
	s := w.session(t, host, srv)
	args := []string{"--host", hookHost, "--exe", filepath.Join(t.TempDir(), "moved", "auditchain")}
	if host == hosttest.GeminiCLI {
		args = append(args, "--user")
		flags = append(flags, "--skip-trust")
	} else {
		args = append(args, "--dir", s.Dir)
	}
	install(t, s, args...)
	if out := s.Run(t, "Create the file.", flags...); out.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\n%s", out.ExitCode, out.Stderr, srv.Log())
	}
	return exists(s.Dir, "ran")
}

func TestHostClaudeCode(t *testing.T) {
	t.Parallel()
	installed := func(s *hosttest.Session) { install(t, s, "--host", "claude-code", "--dir", s.Dir) }
	t.Run("gate", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 1, "Bash"))
		gateRun(t, w, hosttest.Claude, "claude-code", "toolu_hosttest_", installed, "--allowedTools", "Bash")
	})
	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 5, "Bash"))
		// A user install (~/.claude/settings.json): the other scope.
		outageRun(t, w, hosttest.Claude, func(s *hosttest.Session) { install(t, s, "--host", "claude-code", "--user") }, "--allowedTools", "Bash")
	})
	// onFailure "block", which install sets: a hook that cannot start
	// blocks the call.
	t.Run("missing-program", func(t *testing.T) {
		t.Parallel()
		if missingProgram(t, hosttest.Claude, "claude-code", "--allowedTools", "Bash") {
			t.Error("the tool ran although the hook could not start")
		}
	})
	// A sub-agent is gated by its own grant (Claude Code names it by
	// agent_type), the main agent's Agent call by the main agent's.
	t.Run("subagent", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 5, "Agent"), grant("general-purpose", 1, "Bash"))
		agent := hosttest.ToolCall("Agent", map[string]string{"description": "Create files", "prompt": "SUB-7f3c create the files", "subagent_type": "general-purpose"})
		srv := hosttest.NewServer(t, hosttest.ByPrompt{
			"MAIN-7f3c": hosttest.Script{hosttest.Calls(agent), hosttest.Text("finished")},
			"SUB-7f3c":  hosttest.Script{hosttest.Calls(hosttest.Claude.Shell("touch sub")), hosttest.Calls(hosttest.Claude.Shell("touch blocked")), hosttest.Text("sub-agent done")},
		})
		s := w.session(t, hosttest.Claude, srv)
		installed(s)
		if out := s.Run(t, "MAIN-7f3c: delegate it.", "--allowedTools", "Bash,Agent"); out.ExitCode != 0 {
			t.Fatalf("exit %d\n%s\n%s", out.ExitCode, out.Stderr, srv.Log())
		}
		if !exists(s.Dir, "sub") || exists(s.Dir, "blocked") {
			t.Errorf("sub ran: %v, blocked ran: %v; want only sub\n%s", exists(s.Dir, "sub"), exists(s.Dir, "blocked"), srv.Log())
		}
		if u := w.uses(t, "general-purpose"); u != 1 {
			t.Errorf("the sub-agent's grant metered %d uses, want 1", u)
		}
		if u := w.uses(t, "main"); u != 1 {
			t.Errorf("the main agent's grant metered %d uses, want 1 (its Agent call)", u)
		}
		calls, _ := w.calls(t)
		for _, c := range calls {
			raw := rawOf(t, c)
			if (*c.Tool == "Bash") != (raw["subagent"] == "general-purpose") || (*c.Tool == "Bash" && raw["agent_id"] == nil) {
				t.Errorf("%s %s gated as %v (agent_id %v)", *c.Tool, *c.Decision, raw["subagent"], raw["agent_id"])
			}
		}
	})
}

func TestHostCodex(t *testing.T) {
	t.Parallel()
	// No --dangerously-bypass-hook-trust: the trust entries install writes
	// are what makes Codex run the hook.
	installed := func(s *hosttest.Session) { install(t, s, "--host", "codex", "--dir", s.Dir) }
	flags := []string{"--sandbox", "danger-full-access"}
	// hook doctor reads the install back, and asks Codex itself (codex
	// app-server) which hooks it will run.
	t.Run("gate", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 1, "Bash"))
		gateRun(t, w, hosttest.CodexCLI, "codex", "call_hosttest_", func(s *hosttest.Session) {
			installed(s)
			env := sessionEnv(s)
			env["PATH"] = filepath.Dir(realprog.Bin(t, "codex")) + string(os.PathListSeparator) + env["PATH"]
			out, _, err := hookInstallRun(t, env, "doctor", "--host", "codex", "--dir", s.Dir)
			if err != nil || !strings.Contains(out, "ok   codex       Codex itself lists the hook as preToolUse trusted, postToolUse trusted") {
				t.Errorf("hook doctor: %v\n%s", err, out)
			}
		}, flags...)
	})
	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 5, "Bash"))
		// A user install ($CODEX_HOME/hooks.json): the other scope.
		outageRun(t, w, hosttest.CodexCLI, func(s *hosttest.Session) { install(t, s, "--host", "codex", "--user") }, flags...)
	})
	// Codex has no fail-closed option: a hook that cannot start lets the
	// call run (docs/hooks.md; hook doctor checks the program).
	t.Run("missing-program", func(t *testing.T) {
		t.Parallel()
		if !missingProgram(t, hosttest.CodexCLI, "codex", flags...) {
			t.Error("Codex did not run the tool: it now fails closed when a hook cannot start; update docs/hooks.md")
		}
	})
}

func TestHostGemini(t *testing.T) {
	t.Parallel()
	flags := []string{"--approval-mode", "yolo"}
	// The project install as documented: Gemini trusts the folder through
	// the trustedFolders.json entry install writes (no
	// GEMINI_CLI_TRUST_WORKSPACE), and with GITHUB_SHA set its redaction is
	// strict, so the hook gets AUDITCHAIN_* only through the allow-list.
	// A second, user-scope install naming the program differently makes
	// Gemini run two hook commands for every event: each call is still
	// metered and recorded once, its result once.
	t.Run("gate", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 1, "run_shell_command"))
		alias := filepath.Join(t.TempDir(), "ac")
		if err := os.Symlink(os.Args[0], alias); err != nil {
			t.Fatal(err)
		}
		gateRun(t, w, hosttest.GeminiCLI, "gemini", "drv-", func(s *hosttest.Session) {
			install(t, s, "--host", "gemini", "--dir", s.Dir)
			install(t, s, "--host", "gemini", "--user", "--exe", alias)
			s.Setenv("GITHUB_SHA", "0123456789abcdef")
			if out, _, err := hookInstallRun(t, sessionEnv(s), "doctor", "--host", "gemini", "--dir", s.Dir); err != nil ||
				!strings.Contains(out, "ok   environment Gemini's redaction allows") || !strings.Contains(out, "ok   trust") {
				t.Errorf("hook doctor: %v\n%s", err, out)
			}
		}, flags...)
	})
	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 5, "run_shell_command"))
		// A user install, which runs in any folder under --skip-trust.
		outageRun(t, w, hosttest.GeminiCLI, func(s *hosttest.Session) { install(t, s, "--host", "gemini", "--user") }, append(flags, "--skip-trust")...)
	})
	// Gemini blocks a call whose hook cannot start.
	t.Run("missing-program", func(t *testing.T) {
		t.Parallel()
		if missingProgram(t, hosttest.GeminiCLI, "gemini", flags...) {
			t.Error("the tool ran although the hook could not start")
		}
	})
	// --skip-trust, which Gemini's own error suggests, loads no project
	// settings in a folder Gemini does not trust: the project install, which
	// trusts the folder, gates there too; without that trust nothing is.
	t.Run("skip-trust", func(t *testing.T) {
		t.Parallel()
		w := newHostWorld(t, grant("main", 5, "run_shell_command"))
		srv := hosttest.NewServer(t, hosttest.Script{hosttest.Calls(hosttest.GeminiCLI.Shell("touch ran")), hosttest.Text("finished")})
		s := w.session(t, hosttest.GeminiCLI, srv)
		install(t, s, "--host", "gemini", "--dir", s.Dir)
		if out := s.Run(t, "Create the file.", append(flags, "--skip-trust")...); out.ExitCode != 0 || !exists(s.Dir, "ran") {
			t.Fatalf("exit %d, ran %v\n%s", out.ExitCode, exists(s.Dir, "ran"), out.Stderr)
		}
		if calls, results := w.calls(t); len(calls) != 1 || len(results) != 1 {
			t.Fatalf("the project install under --skip-trust: %d calls, %d results recorded, want 1 and 1", len(calls), len(results))
		}
		if err := os.Remove(filepath.Join(s.Home, ".gemini", "trustedFolders.json")); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(s.Dir, "ran"))
		if out := s.Run(t, "Create the file.", append(flags, "--skip-trust")...); out.ExitCode != 0 || !exists(s.Dir, "ran") {
			t.Fatalf("exit %d, ran %v\n%s", out.ExitCode, exists(s.Dir, "ran"), out.Stderr)
		}
		if calls, _ := w.calls(t); len(calls) != 1 {
			t.Fatalf("a project hook ran under --skip-trust in an untrusted folder: %d calls recorded, want the first run's 1", len(calls))
		}
	})
}
