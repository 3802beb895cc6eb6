package hook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Check is one line of `auditchain hook doctor`: what will happen.
type Check struct {
	Status string // ok, note, FAIL
	Name   string
	Says   string
}

// Check statuses.
const (
	CheckOK   = "ok"
	CheckNote = "note"
	CheckFail = "FAIL"
)

func (c Check) String() string { return fmt.Sprintf("%-4s %-11s %s", c.Status, c.Name, c.Says) }

// DoctorEnv is the environment doctor checks the install against.
type DoctorEnv struct {
	// Getenv is the environment the host will give the hook (doctor's own:
	// run it where the host runs).
	Getenv func(string) string
	// Environ is the same environment as a list, for the synthetic call.
	Environ []string
}

func (e DoctorEnv) get(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// Doctor runs the host's hook path as far as it can offline: the settings,
// the command, the host's trust, the environment the hook gets, and a
// synthetic call through the installed command.
func Doctor(ctx context.Context, t Target, env DoctorEnv) []Check {
	var out []Check
	add := func(status, name, format string, args ...any) {
		out = append(out, Check{Status: status, Name: name, Says: fmt.Sprintf(format, args...)})
	}
	path, err := t.SettingsPath()
	if err != nil {
		add(CheckFail, "settings", "%v", err)
		return out
	}
	b, err := os.ReadFile(path)
	if err != nil {
		add(CheckFail, "settings", "%s cannot be read (%v): the host runs no auditchain hook; run auditchain hook install", path, errors.Unwrap(err))
		return out
	}
	doc, err := parseSettings(path, b)
	if err != nil {
		add(CheckFail, "settings", "%v: the host cannot read its hooks", err)
		return out
	}
	command, missing := installed(doc, t.Host)
	switch {
	case command == "":
		add(CheckFail, "settings", "%s has no auditchain hook: tool calls are neither gated nor recorded; run auditchain hook install", path)
		return out
	case len(missing) > 0:
		add(CheckFail, "settings", "%s has no auditchain hook on %s: those calls are not gated or recorded; run auditchain hook install again", path, strings.Join(missing, ", "))
	default:
		add(CheckOK, "settings", "%s runs %s on %s", path, command, strings.Join(ourHandlers(doc), ", "))
	}
	out = append(out, hostSwitches(t.Host, doc)...)
	out = append(out, commandCheck(command, env))
	out = append(out, trustChecks(ctx, t, path, doc, env)...)
	out = append(out, envChecks(t, doc, env)...)
	out = append(out, syntheticCall(ctx, t, command, env))
	return out
}

// installed is the command of our handlers and the events of the host's
// install block that run none.
func installed(doc map[string]any, host string) (command string, missing []string) {
	hooks, _ := doc["hooks"].(map[string]any)
	for event := range hookBlock(host, "") {
		list, _ := hooks[event].([]any)
		found := ""
		for _, entry := range list {
			m, _ := entry.(map[string]any)
			handlers := []any{m}
			if inner, ok := m["hooks"].([]any); ok {
				handlers = inner
			}
			for _, h := range handlers {
				if hm, ok := h.(map[string]any); ok && isOurs(hm) {
					found, _ = hm["command"].(string)
				}
			}
		}
		if found == "" {
			missing = append(missing, event)
		} else if command == "" {
			command = found
		}
	}
	slices.Sort(missing)
	return command, missing
}

// hostSwitches are the host settings that turn hooks off.
func hostSwitches(host string, doc map[string]any) []Check {
	var out []Check
	switch host {
	case "claude-code":
		if v, _ := doc["disableAllHooks"].(bool); v {
			out = append(out, Check{CheckFail, "settings", "disableAllHooks is true: Claude Code runs no hook"})
		}
	case "gemini":
		cfg, _ := doc["hooksConfig"].(map[string]any)
		if v, ok := cfg["enabled"].(bool); ok && !v {
			out = append(out, Check{CheckFail, "settings", "hooksConfig.enabled is false: Gemini runs no hook"})
		}
		disabled, _ := cfg["disabled"].([]any)
		if slices.Contains(disabled, any(hookName)) {
			out = append(out, Check{CheckFail, "settings", "hooksConfig.disabled names auditchain: Gemini skips the hook"})
		}
	}
	return out
}

// program is the program a command line runs (after any NAME=value).
func program(command string) string {
	for _, f := range shellFields(command) {
		if !strings.Contains(f, "=") || strings.HasPrefix(f, "/") {
			return f
		}
	}
	return ""
}

func commandCheck(command string, env DoctorEnv) Check {
	prog := program(command)
	if filepath.IsAbs(prog) {
		fi, err := os.Stat(prog)
		switch {
		case err != nil:
			return Check{CheckFail, "command", fmt.Sprintf("%s does not exist: the hook cannot start, so every call is refused where the host fails closed and runs unchecked where it does not", prog)}
		case fi.Mode()&0o111 == 0:
			return Check{CheckFail, "command", prog + " is not executable: the hook cannot start"}
		}
		return Check{CheckOK, "command", prog + " is an absolute path: the host's PATH does not matter"}
	}
	for _, dir := range filepath.SplitList(env.get("PATH")) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return Check{CheckNote, "command", fmt.Sprintf("%s is found at %s on this PATH; the host runs it with its own PATH (install again for an absolute path)", prog, p)}
		}
	}
	return Check{CheckFail, "command", prog + " is not on this PATH: the hook cannot start (install again for an absolute path)"}
}

func trustChecks(ctx context.Context, t Target, path string, doc map[string]any, env DoctorEnv) []Check {
	switch t.Host {
	case "claude-code":
		return []Check{{CheckOK, "trust", "Claude Code asks for no hook trust: claude -p runs the settings' hooks as they are"}}
	case "codex":
		return codexChecks(ctx, t, path, doc, env)
	case "gemini":
		return geminiTrustChecks(t, env)
	}
	return []Check{{CheckNote, "trust", "Cursor was not run: its trust model and events are unverified (docs/hooks.md)"}}
}

func codexChecks(ctx context.Context, t Target, hooksPath string, doc map[string]any, env DoctorEnv) []Check {
	var out []Check
	cfgPath := t.CodexConfigPath()
	b, err := os.ReadFile(cfgPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return []Check{{CheckFail, "trust", fmt.Sprintf("%s cannot be read: %v", cfgPath, err)}}
	}
	f, err := parseTOML(b)
	if err != nil {
		return []Check{{CheckFail, "trust", fmt.Sprintf("%s: %v", cfgPath, err)}}
	}
	var untrusted, trusted []string
	for _, h := range codexHandlers(doc) {
		if !h.ours {
			continue
		}
		key := CodexHookKey(hooksPath, h.event, h.group, h.handler)
		want, _ := CodexHookHash(h.event, h.matcher, h.config)
		got, _ := f.value("hooks", "state", key, "trusted_hash")
		enabled, _ := f.value("hooks", "state", key, "enabled")
		switch {
		case enabled == "false":
			untrusted = append(untrusted, h.event+" (disabled)")
		case got == "":
			untrusted = append(untrusted, h.event+" (untrusted)")
		case got != want:
			untrusted = append(untrusted, h.event+" (changed since trusted)")
		default:
			trusted = append(trusted, h.event)
		}
	}
	if len(untrusted) > 0 {
		out = append(out, Check{CheckFail, "trust", fmt.Sprintf("%s: %s: Codex skips the hook without a warning; run auditchain hook install again", cfgPath, strings.Join(untrusted, ", "))})
	} else {
		out = append(out, Check{CheckOK, "trust", fmt.Sprintf("%s trusts the hook on %s, hashed as Codex hashes it", cfgPath, strings.Join(trusted, ", "))})
	}
	if !t.User {
		if level, _ := f.value("projects", t.Dir, "trust_level"); level == "trusted" {
			out = append(out, Check{CheckOK, "trust", "Codex trusts the project " + t.Dir + ", so it loads the project's hooks"})
		} else {
			out = append(out, Check{CheckFail, "trust", "Codex does not trust the project " + t.Dir + ": it loads none of its hooks"})
		}
	}
	out = append(out, codexOwnView(ctx, t, env))
	return out
}

// codexOwnView asks Codex itself (codex app-server, hooks/list), when it is
// on PATH, which hooks it would run.
func codexOwnView(ctx context.Context, t Target, env DoctorEnv) Check {
	bin := ""
	for _, dir := range filepath.SplitList(env.get("PATH")) {
		if fi, err := os.Stat(filepath.Join(dir, "codex")); err == nil && fi.Mode()&0o111 != 0 {
			bin = filepath.Join(dir, "codex")
			break
		}
	}
	if bin == "" {
		return Check{CheckNote, "codex", "codex is not on PATH: its own view of the hooks was not asked"}
	}
	cwd := t.Dir
	if t.User {
		cwd = t.Home
	}
	hooks, err := CodexHooksList(ctx, bin, cwd, env.Environ)
	if err != nil {
		return Check{CheckNote, "codex", fmt.Sprintf("codex app-server could not list the hooks: %v", err)}
	}
	var states []string
	ok := 0
	for _, h := range hooks {
		if !ourCommand(h.Command) {
			continue
		}
		states = append(states, h.EventName+" "+h.TrustStatus)
		if h.TrustStatus == "trusted" && h.Enabled {
			ok++
		}
	}
	switch {
	case len(states) == 0:
		return Check{CheckFail, "codex", "Codex itself lists no auditchain hook for " + cwd + ": it will gate nothing"}
	case ok < len(states):
		return Check{CheckFail, "codex", "Codex itself lists the hook as " + strings.Join(states, ", ") + ": it runs only trusted hooks"}
	}
	return Check{CheckOK, "codex", "Codex itself lists the hook as " + strings.Join(states, ", ") + ": it will run it"}
}

// CodexHook is one entry of Codex's hooks/list.
type CodexHook struct {
	Key         string `json:"key"`
	EventName   string `json:"eventName"`
	Command     string `json:"command"`
	Matcher     string `json:"matcher"`
	Source      string `json:"source"`
	Enabled     bool   `json:"enabled"`
	CurrentHash string `json:"currentHash"`
	TrustStatus string `json:"trustStatus"`
}

// CodexHooksList runs `codex app-server` and asks it, over its JSON-RPC on
// stdio, which hooks it discovers for cwd and how it trusts them: Codex's
// own reading of hooks.json and config.toml, offline.
func CodexHooksList(ctx context.Context, codex, cwd string, environ []string) ([]CodexHook, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "app-server")
	cmd.Env, cmd.Dir = environ, cwd
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for _, msg := range []any{
		map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"clientInfo": map[string]any{"name": "auditchain-hook-doctor", "version": "1"}, "capabilities": map[string]any{"experimentalApi": true}}},
		map[string]any{"jsonrpc": "2.0", "method": "initialized"},
		map[string]any{"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": map[string]any{"cwds": []string{cwd}}},
	} {
		b, _ := json.Marshal(msg)
		if _, err := in.Write(append(b, '\n')); err != nil {
			return nil, err
		}
	}
	sc := bufio.NewScanner(outPipe)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var res struct {
			ID     *int `json:"id"`
			Result *struct {
				Data []struct {
					Hooks    []CodexHook `json:"hooks"`
					Warnings []string    `json:"warnings"`
				} `json:"data"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &res) != nil || res.ID == nil || *res.ID != 2 {
			continue
		}
		if res.Error != nil {
			return nil, errors.New(res.Error.Message)
		}
		var out []CodexHook
		if res.Result != nil {
			for _, d := range res.Result.Data {
				out = append(out, d.Hooks...)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no answer to hooks/list (%s)", strings.TrimSpace(lastLine(stderr.String())))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func geminiTrustChecks(t Target, env DoctorEnv) []Check {
	skip := Check{CheckNote, "trust", "under gemini --skip-trust a user-scope install runs; a project one does not (Gemini then loads no project settings)"}
	if t.User {
		return []Check{{CheckOK, "trust", "user hooks load in every trusted folder and under gemini --skip-trust"}}
	}
	switch env.get("GEMINI_CLI_TRUST_WORKSPACE") {
	case "true":
		return []Check{{CheckOK, "trust", "GEMINI_CLI_TRUST_WORKSPACE=true trusts the folder: Gemini loads its hooks"}, skip}
	case "false":
		return []Check{{CheckFail, "trust", "GEMINI_CLI_TRUST_WORKSPACE=false: Gemini loads no project hooks"}, skip}
	}
	path := t.GeminiTrustedFoldersPath()
	rules := map[string]any{}
	if b, err := os.ReadFile(path); err == nil {
		if rules, err = parseSettings(path, b); err != nil {
			return []Check{{CheckFail, "trust", fmt.Sprintf("%v: Gemini stops at it", err)}, skip}
		}
	}
	switch answer, rule := GeminiFolderTrusted(rules, t.Dir); answer {
	case "yes":
		return []Check{{CheckOK, "trust", fmt.Sprintf("%s trusts %s (rule %s): Gemini loads the project's hooks", path, t.Dir, rule)}, skip}
	case "no":
		return []Check{{CheckFail, "trust", fmt.Sprintf("%s distrusts %s (rule %s): Gemini loads none of its hooks", path, t.Dir, rule)}, skip}
	}
	return []Check{{CheckFail, "trust", fmt.Sprintf("no rule of %s trusts %s: gemini -p stops (exit 55), and with --skip-trust loads none of its hooks", path, t.Dir)}, skip}
}

func envChecks(t Target, doc map[string]any, env DoctorEnv) []Check {
	var out []Check
	var unset []string
	for _, k := range neededEnv {
		if env.get(k) == "" {
			unset = append(unset, k)
		}
	}
	if len(unset) > 0 {
		out = append(out, Check{CheckFail, "environment", strings.Join(unset, " and ") + " not set here: unless the host's environment has them, the hook refuses every call"})
	} else {
		out = append(out, Check{CheckOK, "environment", "AUDITCHAIN_URL and AUDITCHAIN_API_KEY are set here"})
	}
	if t.Host != "gemini" {
		return out
	}
	// Gemini redacts its hooks' environment when the setting is on (in the
	// user's or the project's settings) or GITHUB_SHA is set.
	on := env.get("GITHUB_SHA") != "" || env.get("SURFACE") == "Github"
	allowed := map[string]bool{}
	for _, d := range geminiScopes(t, doc) {
		sec, _ := d["security"].(map[string]any)
		red, _ := sec["environmentVariableRedaction"].(map[string]any)
		if v, _ := red["enabled"].(bool); v {
			on = true
		}
		list, _ := red["allowed"].([]any)
		for _, v := range list {
			if s, ok := v.(string); ok {
				allowed[strings.ToUpper(s)] = true
			}
		}
	}
	var stripped []string
	for _, k := range neededEnv {
		if !allowed[k] {
			stripped = append(stripped, k)
		}
	}
	switch {
	case len(stripped) == 0:
		out = append(out, Check{CheckOK, "environment", "Gemini's redaction allows AUDITCHAIN_URL and AUDITCHAIN_API_KEY: the hook gets them"})
	case on:
		out = append(out, Check{CheckFail, "environment", "Gemini's redaction is on and strips " + strings.Join(stripped, " and ") + " from the hook: every call is refused; run auditchain hook install again"})
	default:
		out = append(out, Check{CheckNote, "environment", "Gemini's redaction is off now, but would strip " + strings.Join(stripped, " and ") + " (it turns on when GITHUB_SHA is set)"})
	}
	return out
}

// geminiScopes are the settings documents Gemini merges for t: the user's,
// and the project's (when t is a project install).
func geminiScopes(t Target, doc map[string]any) []map[string]any {
	if t.User {
		return []map[string]any{doc}
	}
	user := t
	user.User = true
	out := []map[string]any{doc}
	if p, err := user.SettingsPath(); err == nil {
		if b, err := os.ReadFile(p); err == nil {
			if d, err := parseSettings(p, b); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

// syntheticStdin is an event each host's hook answers without a network
// call, so that running the installed command records and meters nothing.
var syntheticStdin = map[string]string{
	"claude-code": `{"session_id":"auditchain-doctor","hook_event_name":"SessionStart","source":"startup"}`,
	"codex":       `{"session_id":"auditchain-doctor","hook_event_name":"SessionStart","source":"startup"}`,
	"gemini":      `{"session_id":"auditchain-doctor","hook_event_name":"SessionStart","source":"startup"}`,
	"cursor":      `{"conversation_id":"auditchain-doctor","hook_event_name":"stop","status":"completed"}`,
}

// syntheticCall runs the installed command through a shell, as the hosts do,
// with an event the hook only answers.
func syntheticCall(ctx context.Context, t Target, command string, env DoctorEnv) Check {
	ctx, cancel := context.WithTimeout(ctx, HostTimeoutSeconds*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = env.Environ
	cmd.Dir = t.Dir
	if t.User || t.Dir == "" {
		cmd.Dir = t.Home
	}
	cmd.Stdin = strings.NewReader(syntheticStdin[t.Host])
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	var answer map[string]any
	switch {
	case ctx.Err() != nil:
		return Check{CheckFail, "call", fmt.Sprintf("the command did not answer within %ds, the host's timeout", HostTimeoutSeconds)}
	case err != nil:
		return Check{CheckFail, "call", fmt.Sprintf("the command failed (%v; %s): the host cannot run the hook", err, strings.TrimSpace(lastLine(stderr.String())))}
	case json.Unmarshal(stdout.Bytes(), &answer) != nil:
		return Check{CheckFail, "call", fmt.Sprintf("the command printed %q, not the JSON the host reads", stdout.String())}
	}
	return Check{CheckOK, "call", fmt.Sprintf("the command answers a %s event in %s (exit 0, JSON on stdout, nothing recorded)", t.Host, took)}
}
