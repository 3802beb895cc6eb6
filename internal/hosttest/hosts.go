package hosttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/realprog"
)

// Host names an agent host program among the pinned ones.
type Host string

const (
	Claude    Host = "claude"
	CodexCLI  Host = "codex"
	GeminiCLI Host = "gemini"
)

// CodexModel is the model Codex is told it talks to: one it knows, so it
// offers that model's tools without warning about missing metadata.
const CodexModel = "gpt-5.5"

// DefaultTimeout bounds one host run; a run normally takes one to three
// seconds, so hitting it means the host is waiting for something.
const DefaultTimeout = 60 * time.Second

// Session is one host installed in a throwaway HOME, pointed at a Server,
// with a throwaway working directory as its project. Fields may be changed
// between NewSession and Run.
type Session struct {
	Host   Host
	Bin    string
	Server *Server

	Home   string // $HOME
	Dir    string // the working directory, the project
	Config string // the host's user configuration: ~/.claude, $CODEX_HOME, ~/.gemini

	// Env is the whole environment of the host (nothing is inherited but
	// PATH); append to it to add variables.
	Env     []string
	Timeout time.Duration
}

// Outcome is what a run left: the exit code and the output streams.
type Outcome struct {
	ExitCode int
	Stdout   string
	Stderr   string
	Elapsed  time.Duration
}

// NewSession prepares host in fresh directories with every start-up check,
// update check and telemetry off, and the server as its model and as its
// HTTP(S) proxy. It skips the test without the pinned programs (realprog).
func NewSession(tb testing.TB, host Host, srv *Server) *Session {
	tb.Helper()
	root := tb.TempDir()
	s := &Session{
		Host: host, Bin: realprog.Bin(tb, string(host)), Server: srv,
		Home: filepath.Join(root, "home"), Dir: filepath.Join(root, "project"),
		Timeout: DefaultTimeout,
	}
	for _, d := range []string{s.Home, s.Dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	s.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.Home,
		"TMPDIR=" + filepath.Join(root, "tmp"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		// Loopback goes direct; anything else reaches the server's proxy
		// face, which records and refuses it (Server.Proxied).
		"HTTP_PROXY=" + srv.URL, "HTTPS_PROXY=" + srv.URL,
		"http_proxy=" + srv.URL, "https_proxy=" + srv.URL,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		tb.Fatal(err)
	}
	switch host {
	case Claude:
		s.setupClaude(tb)
	case CodexCLI:
		s.setupCodex(tb)
	case GeminiCLI:
		s.setupGemini(tb)
	default:
		tb.Fatalf("hosttest: unknown host %q", host)
	}
	return s
}

// Run runs the host once, headless, on prompt with extra flags, and answers
// how it ended. A run past the timeout fails the test with what the host
// printed and what the server saw.
func (s *Session) Run(tb testing.TB, prompt string, flags ...string) Outcome {
	tb.Helper()
	var args []string
	switch s.Host {
	case Claude:
		args = append([]string{"-p", "--output-format", "json"}, flags...)
		args = append(args, "--", prompt)
	case CodexCLI:
		args = append([]string{"exec", "--skip-git-repo-check", "--color", "never", "-C", s.Dir}, flags...)
		args = append(args, "--", prompt)
	case GeminiCLI:
		args = append([]string{"--output-format", "json"}, flags...)
		args = append(args, "--prompt", prompt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin, args...)
	cmd.Dir, cmd.Env = s.Dir, s.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	out := Outcome{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		tb.Fatalf("%s did not finish within %s\nstdout:\n%s\nstderr:\n%s\nserver:\n%s", s.Host, s.Timeout, out.Stdout, out.Stderr, s.Server.Log())
	case errors.As(err, &exit):
		out.ExitCode = exit.ExitCode()
	case err != nil:
		tb.Fatalf("%s: %v", s.Host, err)
	}
	tb.Logf("%s ran in %s, exit %d", s.Host, out.Elapsed.Round(time.Millisecond), out.ExitCode)
	return out
}

// Shell answers a call of the host's shell tool running command: Claude
// Code's Bash, Codex's exec_command (which its hooks see as Bash), Gemini
// CLI's run_shell_command.
func (h Host) Shell(command string) Call {
	switch h {
	case Claude:
		return ToolCall("Bash", map[string]string{"command": command, "description": "Run " + command})
	case CodexCLI:
		return ToolCall("exec_command", map[string]string{"cmd": command})
	default:
		return ToolCall("run_shell_command", map[string]string{"command": command, "description": "Run " + command})
	}
}

// Setenv sets one variable of the host's environment.
func (s *Session) Setenv(name, value string) {
	prefix := name + "="
	for i, kv := range s.Env {
		if strings.HasPrefix(kv, prefix) {
			s.Env[i] = prefix + value
			return
		}
	}
	s.Env = append(s.Env, prefix+value)
}

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func writeJSONFile(tb testing.TB, path string, v any) {
	tb.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		tb.Fatal(err)
	}
	writeFile(tb, path, b.String())
}

// Claude Code: ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY reach the server; -p
// needs no onboarding, but ~/.claude.json says it is done so that nothing
// interactive is ever started.
func (s *Session) setupClaude(tb testing.TB) {
	s.Config = filepath.Join(s.Home, ".claude")
	writeJSONFile(tb, filepath.Join(s.Home, ".claude.json"), map[string]any{
		"hasCompletedOnboarding": true, "numStartups": 1,
	})
	s.Env = append(s.Env,
		"ANTHROPIC_BASE_URL="+s.Server.URL,
		"ANTHROPIC_API_KEY=sk-ant-hosttest",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	)
}

// Codex CLI: a custom model provider in $CODEX_HOME/config.toml speaking
// the Responses API to the server, its key in an environment variable, no
// retries (a wrong answer fails at once instead of after five back-offs), no
// update check, no analytics.
func (s *Session) setupCodex(tb testing.TB) {
	s.Config = filepath.Join(s.Home, ".codex")
	writeFile(tb, filepath.Join(s.Config, "config.toml"), fmt.Sprintf(`model = %q
model_provider = "hosttest"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false

[model_providers.hosttest]
name = "hosttest"
base_url = "%s/v1"
env_key = "HOSTTEST_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, CodexModel, s.Server.URL))
	s.Env = append(s.Env, "CODEX_HOME="+s.Config, "HOSTTEST_API_KEY=sk-hosttest")
}

// Gemini CLI: GOOGLE_GEMINI_BASE_URL reaches the server, but alone it selects
// the "gateway" auth that -p refuses ("Invalid auth method selected"), so the
// user settings select the API key auth and GEMINI_API_KEY carries the key.
// System settings point into the throwaway tree, so a machine's
// /etc/gemini-cli cannot change a run; GEMINI_CLI_NO_RELAUNCH keeps it one
// process. Folder trust is left on, as installed: a test that needs project
// hooks trusts the project (TrustProject).
func (s *Session) setupGemini(tb testing.TB) {
	s.Config = filepath.Join(s.Home, ".gemini")
	writeJSONFile(tb, filepath.Join(s.Config, "settings.json"), map[string]any{
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	})
	system := filepath.Join(filepath.Dir(s.Home), "gemini-system")
	s.Env = append(s.Env,
		"GOOGLE_GEMINI_BASE_URL="+s.Server.URL,
		"GEMINI_API_KEY=hosttest",
		"GEMINI_CLI_NO_RELAUNCH=true",
		"GEMINI_CLI_SYSTEM_SETTINGS_PATH="+filepath.Join(system, "settings.json"),
		"GEMINI_CLI_SYSTEM_DEFAULTS_PATH="+filepath.Join(system, "system-defaults.json"),
	)
}
