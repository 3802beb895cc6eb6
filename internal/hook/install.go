package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HostTimeoutSeconds is the timeout the installed settings give the hook
// command: twice the hook's own default deadline, so the hook always answers
// (fail closed) before the host gives up on it (a host that times a hook out
// lets the call run).
const HostTimeoutSeconds = 10

// settingsFile is where each host reads its hooks, relative to the project
// directory or the user's home.
var settingsFile = map[string]string{
	"claude-code": filepath.Join(".claude", "settings.json"),
	"codex":       filepath.Join(".codex", "hooks.json"),
	"gemini":      filepath.Join(".gemini", "settings.json"),
	"cursor":      filepath.Join(".cursor", "hooks.json"),
}

// SettingsPath is host's settings file under dir (the project directory, or
// the user's home for --user).
func SettingsPath(host, dir string) (string, error) {
	f, ok := settingsFile[host]
	if !ok {
		return "", fmt.Errorf("unknown host %q", host)
	}
	return filepath.Join(dir, f), nil
}

// Command is the hook command line installed for host.
func Command(exe, host string) string { return exe + " hook --host " + host }

// Settings is the settings block that runs the hook for host's tool events.
func Settings(host, command string) (map[string]any, error) {
	group := func(matcher string, timeout int) []any {
		return []any{map[string]any{"matcher": matcher, "hooks": []any{
			map[string]any{"type": "command", "command": command, "timeout": timeout}}}}
	}
	switch host {
	case "claude-code":
		return map[string]any{"hooks": map[string]any{
			"PreToolUse": group("*", HostTimeoutSeconds), "PostToolUse": group("*", HostTimeoutSeconds),
			"PostToolUseFailure": group("*", HostTimeoutSeconds)}}, nil
	case "codex":
		// Codex matchers are regular expressions; ".*" also covers mcp__…
		// and apply_patch, which a narrower matcher lets slip past.
		return map[string]any{"hooks": map[string]any{
			"PreToolUse": group(".*", HostTimeoutSeconds), "PostToolUse": group(".*", HostTimeoutSeconds)}}, nil
	case "gemini":
		// Gemini's timeouts are in milliseconds.
		return map[string]any{"hooks": map[string]any{
			"BeforeTool": group(".*", HostTimeoutSeconds*1000), "AfterTool": group(".*", HostTimeoutSeconds*1000)}}, nil
	case "cursor":
		hooks := map[string]any{}
		for _, ev := range append(append([]string{}, cursorPre[1:]...), cursorPost[2:]...) {
			hooks[ev] = []any{map[string]any{"command": command}}
		}
		return map[string]any{"version": 1, "hooks": hooks}, nil
	}
	return nil, fmt.Errorf("unknown host %q", host)
}

// Render prints a settings object as the files hold it: two-space indent,
// no HTML escaping.
func Render(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Merge adds block to the settings file's content (nil: no file yet):
// every other key and every other hook stays as it is; an earlier
// auditchain hook entry for the same event is replaced, so installing twice
// leaves one. Keys come out sorted (the content is unchanged).
func Merge(existing []byte, block map[string]any) ([]byte, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(existing)) > 0 {
		if err := json.Unmarshal(existing, &doc); err != nil {
			return nil, fmt.Errorf("the settings file is not a JSON object: %w", err)
		}
	}
	for k, v := range block {
		if k != "hooks" {
			if _, ok := doc[k]; !ok {
				doc[k] = v
			}
			continue
		}
	}
	hooks, _ := doc["hooks"].(map[string]any)
	if doc["hooks"] != nil && hooks == nil {
		return nil, errors.New(`the settings file's "hooks" is not an object`)
	}
	if hooks == nil {
		hooks = map[string]any{}
	}
	for event, ours := range block["hooks"].(map[string]any) {
		var kept []any
		if cur, ok := hooks[event]; ok {
			list, ok := cur.([]any)
			if !ok {
				return nil, fmt.Errorf("the settings file's hooks.%s is not a list", event)
			}
			for _, entry := range list {
				if !isOurs(entry) {
					kept = append(kept, entry)
				}
			}
		}
		hooks[event] = append(kept, ours.([]any)...)
	}
	doc["hooks"] = hooks
	return Render(doc)
}

// isOurs reports whether a settings entry runs `… hook --host …` of
// auditchain (directly, or in a matcher group's hooks).
func isOurs(entry any) bool {
	m, ok := entry.(map[string]any)
	if !ok {
		return false
	}
	if cmd, ok := m["command"].(string); ok && strings.Contains(cmd, "auditchain") && strings.Contains(cmd, " hook --host ") {
		return true
	}
	inner, _ := m["hooks"].([]any)
	for _, h := range inner {
		if isOurs(h) {
			return true
		}
	}
	return false
}

// Install merges host's block into the settings file at path (created with
// its directory when missing), keeping the file's mode.
func Install(path string, block map[string]any) ([]byte, error) {
	existing, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	out, err := Merge(existing, block)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := writeAtomic(path, out, perm); err != nil {
		return nil, err
	}
	return out, nil
}
