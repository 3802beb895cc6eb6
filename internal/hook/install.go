package hook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// HostTimeoutSeconds is the timeout the installed settings give the hook
// command: twice the hook's own default deadline, so the hook always answers
// (fail closed) before the host gives up on it (a host that times a hook out
// lets the call run, unless it is told to fail closed).
const HostTimeoutSeconds = 10

// hookName marks an installed handler as ours where the host has a field for
// it (Gemini's "name"); elsewhere the command line is the mark (ourCommand).
const hookName = "auditchain"

// Target is one install or uninstall: a host's settings at one scope.
type Target struct {
	Host string
	// User: the user's settings (under Home); otherwise the project's,
	// under Dir.
	User bool
	// Dir is the project directory, absolute with symlinks resolved, as
	// the host's working directory reads it.
	Dir  string
	Home string
	// Getenv reads the variables that move a host's files: CODEX_HOME,
	// GEMINI_CLI_HOME, GEMINI_CLI_TRUSTED_FOLDERS_PATH, CLAUDE_CONFIG_DIR.
	Getenv func(string) string
	// Command is the hook command line the host runs (install only).
	Command string
}

func (t Target) env(name string) string {
	if t.Getenv == nil {
		return ""
	}
	return t.Getenv(name)
}

// SettingsPath is the file in which the host reads its hooks at t's scope.
func (t Target) SettingsPath() (string, error) {
	base := t.Dir
	if t.User {
		base = t.Home
	}
	switch t.Host {
	case "claude-code":
		if t.User && t.env("CLAUDE_CONFIG_DIR") != "" {
			return filepath.Join(t.env("CLAUDE_CONFIG_DIR"), "settings.json"), nil
		}
		return filepath.Join(base, ".claude", "settings.json"), nil
	case "codex":
		if t.User {
			return filepath.Join(t.codexHome(), "hooks.json"), nil
		}
		return filepath.Join(base, ".codex", "hooks.json"), nil
	case "gemini":
		if t.User {
			return filepath.Join(t.geminiHome(), ".gemini", "settings.json"), nil
		}
		return filepath.Join(base, ".gemini", "settings.json"), nil
	case "cursor":
		return filepath.Join(base, ".cursor", "hooks.json"), nil
	}
	_, err := HostByName(t.Host)
	return "", err
}

// Command is the hook command line installed for host: exe quoted for a
// POSIX shell when it needs it (the hosts run the line through one).
func Command(exe, host string) string { return shellQuote(exe) + " hook --host " + host }

// Change is one file an install or uninstall writes.
type Change struct {
	Path   string
	Before []byte // nil: there is no file
	After  []byte // nil: the file is removed
	// Notes say what the change does, one line each.
	Notes []string
	// Mode is a new file's mode (0: 0o644); a file keeps its own.
	Mode os.FileMode
}

// Changed reports whether the change changes the file.
func (c Change) Changed() bool {
	return (c.Before == nil) != (c.After == nil) || !bytes.Equal(c.Before, c.After)
}

// PlanInstall computes the files an install writes, in the order Apply
// writes them: a host's trust entries before the hooks they trust, so that
// an install cut short never leaves hooks the host silently skips.
func PlanInstall(t Target) ([]Change, error) {
	return plan(t, true)
}

// PlanUninstall computes the files an uninstall writes: exactly what an
// install added is taken out (the hooks it recognises as its own, the trust
// entries it wrote), the hooks first.
func PlanUninstall(t Target) ([]Change, error) {
	return plan(t, false)
}

func plan(t Target, install bool) ([]Change, error) {
	if _, err := HostByName(t.Host); err != nil {
		return nil, err
	}
	if !t.User && !filepath.IsAbs(t.Dir) {
		return nil, fmt.Errorf("the project directory %q is not absolute", t.Dir)
	}
	path, err := t.SettingsPath()
	if err != nil {
		return nil, err
	}
	settings, err := readChange(path)
	if err != nil {
		return nil, err
	}
	doc, err := parseSettings(path, settings.Before)
	if err != nil {
		return nil, err
	}
	before := cloneJSON(doc)
	var block map[string][]any
	if install {
		block = hookBlock(t.Host, t.Command)
	}
	if err := mergeHooks(doc, block); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var extra []Change
	switch t.Host {
	case "codex":
		if extra, err = t.codexTrust(path, before, doc, install); err != nil {
			return nil, err
		}
	case "gemini":
		if extra, err = t.geminiSettings(doc, install); err != nil {
			return nil, err
		}
	case "cursor":
		if _, ok := doc["version"]; !ok && install {
			doc["version"] = 1
		}
	}
	switch {
	case reflect.DeepEqual(before, cloneJSON(doc)):
		settings.After = settings.Before // nothing to change: the file is left as it is
	case !install && onlyEmptyHooks(doc):
		settings.After = nil // the file held nothing but the hook
	default:
		if settings.After, err = Render(doc); err != nil {
			return nil, err
		}
	}
	settings.Notes = hookNotes(t.Host, before, doc)
	if install {
		return append(extra, settings), nil
	}
	return append([]Change{settings}, extra...), nil
}

// readChange reads path into a Change whose After is still to be made.
func readChange(path string) (Change, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Change{Path: path}, nil
	}
	if err != nil {
		return Change{}, err
	}
	if b == nil {
		b = []byte{}
	}
	return Change{Path: path, Before: b}, nil
}

// parseSettings reads a host's JSON settings file (nil: none yet). Gemini
// and Cursor allow comments in theirs; they are read, and a rewritten file
// comes out without them (the dry run shows it).
func parseSettings(path string, b []byte) (map[string]any, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(b)) == 0 {
		return doc, nil
	}
	if err := json.Unmarshal(stripJSONComments(b), &doc); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %w", path, err)
	}
	return doc, nil
}

// onlyEmptyHooks reports whether doc holds nothing but an empty hooks
// object (and Cursor's version).
func onlyEmptyHooks(doc map[string]any) bool {
	for k, v := range doc {
		if m, ok := v.(map[string]any); k == "hooks" && ok && len(m) == 0 || k == "version" {
			continue
		}
		return false
	}
	return true
}

// Render prints a settings object as the files hold it: two-space indent,
// no HTML escaping, keys sorted.
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

// hookBlock is, per host event, the matcher groups that run command.
func hookBlock(host, command string) map[string][]any {
	handler := func(extra ...any) map[string]any {
		h := map[string]any{"type": "command", "command": command, "timeout": HostTimeoutSeconds}
		for i := 0; i < len(extra); i += 2 {
			h[extra[i].(string)] = extra[i+1]
		}
		return h
	}
	group := func(matcher string, h map[string]any) []any {
		return []any{map[string]any{"matcher": matcher, "hooks": []any{h}}}
	}
	switch host {
	case "claude-code":
		// onFailure "block": a hook that cannot start, times out or
		// crashes blocks the call instead of letting it run.
		return map[string][]any{
			"PreToolUse":         group("*", handler("onFailure", "block")),
			"PostToolUse":        group("*", handler()),
			"PostToolUseFailure": group("*", handler()),
		}
	case "codex":
		// Codex matchers are regular expressions; ".*" also covers mcp__…
		// and apply_patch, which a narrower matcher lets slip past.
		return map[string][]any{"PreToolUse": group(".*", handler()), "PostToolUse": group(".*", handler())}
	case "gemini":
		// Gemini's timeouts are in milliseconds; "name" marks the entry.
		h := handler("name", hookName, "timeout", HostTimeoutSeconds*1000)
		return map[string][]any{"BeforeTool": group(".*", h), "AfterTool": group(".*", h)}
	case "cursor":
		// Cursor (unverified: docs/hooks.md): flat entries, failClosed on
		// the events that gate; file edits are gated before they happen
		// through the generic preToolUse with an edit-tool matcher.
		gate := map[string]any{"command": command, "timeout": HostTimeoutSeconds, "failClosed": true}
		rec := map[string]any{"command": command, "timeout": HostTimeoutSeconds}
		withMatcher := func(m map[string]any) map[string]any {
			c := maps(m)
			c["matcher"] = cursorEditTools
			return c
		}
		return map[string][]any{
			"beforeShellExecution": {gate}, "beforeMCPExecution": {gate}, "beforeReadFile": {gate},
			"preToolUse":          {withMatcher(gate)},
			"afterShellExecution": {rec}, "afterMCPExecution": {rec},
			"postToolUse": {withMatcher(rec)},
		}
	}
	return nil
}

// cursorEditTools are the Cursor tools that change files (unverified).
const cursorEditTools = "Write|Edit|MultiEdit|StrReplace|Delete|NotebookEdit"

func maps(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// mergeHooks takes every handler of ours out of doc's hooks (a group left
// with no handler goes too) and then appends block's groups (nil block: an
// uninstall). Every other key, group and handler stays where it is.
func mergeHooks(doc map[string]any, block map[string][]any) error {
	hooks, _ := doc["hooks"].(map[string]any)
	if doc["hooks"] != nil && hooks == nil {
		return errors.New(`"hooks" is not an object`)
	}
	if hooks == nil {
		hooks = map[string]any{}
	}
	events := make([]string, 0, len(hooks))
	for event := range hooks {
		events = append(events, event)
	}
	for event := range block {
		if _, ok := hooks[event]; !ok {
			events = append(events, event)
		}
	}
	emptied := false
	for _, event := range events {
		var list []any
		if cur, ok := hooks[event]; ok {
			if list, ok = cur.([]any); !ok {
				return fmt.Errorf("hooks.%s is not a list", event)
			}
		}
		kept, removed := withoutOurs(list)
		kept = append(kept, block[event]...)
		switch {
		case len(kept) > 0:
			hooks[event] = kept
		case removed:
			delete(hooks, event)
			emptied = true
		}
	}
	switch {
	case len(hooks) > 0:
		doc["hooks"] = hooks
	case emptied:
		delete(doc, "hooks") // the install's, now empty
	}
	return nil
}

// withoutOurs is list without our handlers: a flat entry (Cursor) of ours
// goes, a matcher group loses ours and goes when nothing is left of it.
func withoutOurs(list []any) (kept []any, removed bool) {
	for _, entry := range list {
		m, ok := entry.(map[string]any)
		if !ok {
			kept = append(kept, entry)
			continue
		}
		if isOurs(m) {
			removed = true
			continue
		}
		inner, ok := m["hooks"].([]any)
		if !ok {
			kept = append(kept, entry)
			continue
		}
		var rest []any
		for _, h := range inner {
			if hm, ok := h.(map[string]any); ok && isOurs(hm) {
				removed = true
				continue
			}
			rest = append(rest, h)
		}
		if len(rest) == len(inner) {
			kept = append(kept, entry)
			continue
		}
		if len(rest) > 0 {
			g := maps(m)
			g["hooks"] = rest
			kept = append(kept, g)
		}
	}
	return kept, removed
}

// isOurs reports whether a handler is one install wrote: Gemini's name
// says so, or the command runs `<program> hook --host <host>` for a host
// this program knows, whatever the program is called (--exe).
func isOurs(h map[string]any) bool {
	if name, _ := h["name"].(string); name == hookName {
		return true
	}
	cmd, _ := h["command"].(string)
	return ourCommand(cmd)
}

// ourCommand reports whether a command line runs `hook --host <host>` after
// its program (and any leading variable assignments).
func ourCommand(cmd string) bool {
	f := shellFields(cmd)
	for i := 1; i+1 < len(f); i++ {
		if f[i] != "hook" {
			continue
		}
		host, ok := strings.CutPrefix(f[i+1], "--host=")
		if !ok && f[i+1] == "--host" && i+2 < len(f) {
			host, ok = f[i+2], true
		}
		if ok && slices.Contains(HostNames(), host) {
			return true
		}
	}
	return false
}

// shellFields splits a command line as a POSIX shell splits words: blanks
// separate them, quotes and backslashes group (no expansions).
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// path characters.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,@%=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ourHandlers lists the events of doc whose hooks run ours.
func ourHandlers(doc map[string]any) []string {
	hooks, _ := doc["hooks"].(map[string]any)
	var out []string
	for event, v := range hooks {
		list, _ := v.([]any)
		if _, removed := withoutOurs(list); removed {
			out = append(out, event)
		}
	}
	slices.Sort(out)
	return out
}

// hookNotes says what the settings change does.
func hookNotes(host string, before, after map[string]any) []string {
	was, now := ourHandlers(before), ourHandlers(after)
	switch {
	case len(now) > 0:
		return []string{fmt.Sprintf("%s runs the hook on %s", host, strings.Join(now, ", "))}
	case len(was) > 0:
		return []string{fmt.Sprintf("the hook no longer runs on %s", strings.Join(was, ", "))}
	}
	return nil
}

// cloneJSON deep-copies a decoded JSON value.
func cloneJSON(doc map[string]any) map[string]any {
	b, _ := json.Marshal(doc)
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	return out
}

// stripJSONComments removes // and /* */ comments outside strings (JSONC,
// which Gemini's and Cursor's settings allow).
func stripJSONComments(b []byte) []byte {
	if !bytes.Contains(b, []byte("/")) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			j := i + 1
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			out = append(out, b[i:min(j+1, len(b))]...)
			i = j
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return out
			}
			i += end + 3
		default:
			out = append(out, b[i])
		}
	}
	return out
}

// Apply writes the changes in order, each file atomically and keeping its
// mode (a new one gets the change's). A file
// that changed since it was read is not overwritten: the plan is stale.
func Apply(changes []Change) error {
	for _, c := range changes {
		if !c.Changed() {
			continue
		}
		cur, err := os.ReadFile(c.Path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			cur = nil
		case err != nil:
			return err
		case cur == nil:
			cur = []byte{}
		}
		if (cur == nil) != (c.Before == nil) || !bytes.Equal(cur, c.Before) {
			return fmt.Errorf("%s changed while it was being planned; run again", c.Path)
		}
		if c.After == nil {
			if err := os.Remove(c.Path); err != nil {
				return err
			}
			continue
		}
		perm := c.Mode
		if perm == 0 {
			perm = 0o644
		}
		if fi, err := os.Stat(c.Path); err == nil {
			perm = fi.Mode().Perm()
		}
		if err := writeAtomic(c.Path, c.After, perm); err != nil {
			return err
		}
	}
	return nil
}
