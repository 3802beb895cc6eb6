package hook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// Codex CLI 0.169 runs a hook from a hooks.json only when it is trusted: an
// entry in $CODEX_HOME/config.toml
//
//	[hooks.state."<absolute hooks.json path>:<event label>:<group>:<handler>"]
//	trusted_hash = "sha256:<hex>"
//
// whose hash is that of the handler as it is now (codex-rs
// hooks/src/engine/discovery.rs, config/src/fingerprint.rs); untrusted hooks
// are skipped without a word in `codex exec`. A project's .codex/hooks.json
// also needs the project trusted ([projects."<dir>"] trust_level =
// "trusted"). hook install writes both; doctor reads them back and asks
// Codex itself (codex app-server, hooks/list) where it can.

// codexHome is $CODEX_HOME, else ~/.codex.
func (t Target) codexHome() string {
	if h := t.env("CODEX_HOME"); h != "" {
		if abs, err := filepath.Abs(h); err == nil {
			return abs
		}
		return h
	}
	return filepath.Join(t.Home, ".codex")
}

// CodexConfigPath is the config.toml holding Codex's trust entries.
func (t Target) CodexConfigPath() string { return filepath.Join(t.codexHome(), "config.toml") }

// codexEventLabel is an event's name as trust keys spell it: PreToolUse →
// pre_tool_use.
func codexEventLabel(event string) string {
	var b strings.Builder
	for i, r := range event {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CodexHookKey is the key of one handler's entry under hooks.state: the
// hooks file, the event's label, and the positions of its matcher group and
// of the handler in it.
func CodexHookKey(hooksPath, event string, group, handler int) string {
	return hooksPath + ":" + codexEventLabel(event) + ":" + strconv.Itoa(group) + ":" + strconv.Itoa(handler)
}

// codexMatcherEvents are the events whose matcher Codex keeps (it drops
// the matcher of the others, and so does their hash).
var codexMatcherEvents = map[string]bool{"PreToolUse": true, "PostToolUse": true, "PermissionRequest": true,
	"SessionStart": true, "PreCompact": true, "PostCompact": true, "SubagentStart": true, "SubagentStop": true}

// CodexHookHash is the hash Codex trusts a command handler by: "sha256:"
// and the hex SHA-256 of the canonical JSON (keys sorted, no whitespace) of
// {event_name: label, matcher (when there is one), hooks: [{type:
// "command", command, timeout (default 600, at least 1), async (default
// false), statusMessage and additionalContextLimit (when set)}]}. ok is false
// for a handler that is not a command.
func CodexHookHash(event string, matcher any, handler map[string]any) (hash string, ok bool) {
	if t, _ := handler["type"].(string); t != "command" {
		return "", false
	}
	cmd, _ := handler["command"].(string)
	timeout := uint64(600)
	for _, k := range []string{"timeout", "timeoutSec"} {
		if n, isNum := handler[k].(float64); isNum && n >= 0 && n == math.Trunc(n) {
			timeout = max(uint64(n), 1)
			break
		} else if n, isInt := handler[k].(int); isInt && n >= 0 {
			timeout = max(uint64(n), 1)
			break
		}
	}
	async, _ := handler["async"].(bool)
	h := map[string]any{"type": "command", "command": cmd, "timeout": timeout, "async": async}
	for _, k := range []string{"statusMessage", "additionalContextLimit"} {
		if v, set := handler[k]; set && v != nil {
			h[k] = v
		}
	}
	identity := map[string]any{"event_name": codexEventLabel(event), "hooks": []any{h}}
	if m, isString := matcher.(string); isString && codexMatcherEvents[event] {
		identity["matcher"] = m
	}
	// encoding/json sorts map keys; serde_json and it agree on every
	// string but those holding U+2028, U+2029 or control characters other
	// than \n, \r and \t, which no hook command does.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(identity); err != nil {
		return "", false
	}
	sum := sha256.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:]), true
}

// codexHandler is one handler of a hooks.json and where it is.
type codexHandler struct {
	event          string
	group, handler int
	matcher        any
	config         map[string]any
	ours           bool
}

// codexHandlers lists doc's handlers, events in name order.
func codexHandlers(doc map[string]any) []codexHandler {
	hooks, _ := doc["hooks"].(map[string]any)
	var events []string
	for e := range hooks {
		events = append(events, e)
	}
	sortStrings(events)
	var out []codexHandler
	for _, e := range events {
		list, _ := hooks[e].([]any)
		for gi, g := range list {
			gm, _ := g.(map[string]any)
			inner, _ := gm["hooks"].([]any)
			for hi, h := range inner {
				hm, _ := h.(map[string]any)
				out = append(out, codexHandler{event: e, group: gi, handler: hi, matcher: gm["matcher"], config: hm, ours: isOurs(hm)})
			}
		}
	}
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// codexProjectMarker is the comment above a [projects."…"] table hook
// install wrote: uninstall removes that table, and only that one.
const codexProjectMarker = "# auditchain hook install trusted this project for its hooks (auditchain hook uninstall removes it)"

// codexTrust is the config.toml change that goes with a hooks.json change:
// our handlers' entries written (install) or removed (uninstall), the
// entries of other handlers moved to the positions they now have, and for a
// project install the project trusted.
func (t Target) codexTrust(hooksPath string, before, after map[string]any, install bool) ([]Change, error) {
	path := t.CodexConfigPath()
	c, err := readChange(path)
	if err != nil {
		return nil, err
	}
	f, err := parseTOML(c.Before)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	state := func(key string) []string { return []string{"hooks", "state", key} }
	var edits []tomlEdit
	var tail []string
	// remove drops the standard table at p (false: it is not there, or
	// is not only that table's).
	remove := func(p []string, keys ...string) (bool, error) {
		if !f.mentions(p...) {
			return false, nil
		}
		if !f.ownsTable(p, keys...) {
			return false, fmt.Errorf("%s: %s is written in a form hook install does not edit; remove it, then run again", path, tomlHeader(p...))
		}
		start, end := f.table(p...)
		if start > 0 && strings.TrimSpace(f.lines[start-1]) == codexProjectMarker {
			start--
		}
		edits = append(edits, tomlEdit{start: start, end: end})
		return true, nil
	}
	old, now := codexHandlers(before), codexHandlers(after)
	// Our old entries go; other handlers' entries follow their handlers
	// (positions shift when our groups leave or are appended again).
	for _, h := range old {
		if h.ours {
			if _, err := remove(state(CodexHookKey(hooksPath, h.event, h.group, h.handler)), "trusted_hash", "enabled"); err != nil {
				return nil, err
			}
		}
	}
	var notes []string
	theirs := func(list []codexHandler) []codexHandler {
		var out []codexHandler
		for _, h := range list {
			if !h.ours {
				out = append(out, h)
			}
		}
		return out
	}
	for i, o := range theirs(old) {
		n := theirs(now)[i]
		from, to := CodexHookKey(hooksPath, o.event, o.group, o.handler), CodexHookKey(hooksPath, n.event, n.group, n.handler)
		if from == to || !f.mentions(state(from)...) {
			continue
		}
		if !f.ownsTable(state(from), "trusted_hash", "enabled") {
			return nil, fmt.Errorf("%s: %s is written in a form hook install does not edit; remove it, then run again", path, tomlHeader(state(from)...))
		}
		start, end := f.table(state(from)...)
		moved := append([]string{tomlHeader(state(to)...)}, f.lines[start+1:end]...)
		edits = append(edits, tomlEdit{start: start, end: end, insert: moved})
		notes = append(notes, fmt.Sprintf("the trust of another hook follows it from %s to %s", from, to))
	}
	if install {
		for _, h := range now {
			if !h.ours {
				continue
			}
			hash, _ := CodexHookHash(h.event, h.matcher, h.config)
			key := CodexHookKey(hooksPath, h.event, h.group, h.handler)
			tail = append(tail, tomlHeader(state(key)...), "trusted_hash = "+tomlQuote(hash), "")
			notes = append(notes, fmt.Sprintf("Codex trusts the hook on %s (%s)", h.event, key))
		}
	} else if len(ourHandlers(before)) > 0 {
		notes = append(notes, "the hook's trust entries go")
	}
	if !t.User {
		project := []string{"projects", t.Dir}
		level, set := f.value(append(project, "trust_level")...)
		start, _ := f.table(project...)
		marked := start > 0 && strings.TrimSpace(f.lines[start-1]) == codexProjectMarker
		switch {
		case install && set && level != "trusted":
			return nil, fmt.Errorf("%s marks %s %s: Codex loads none of its project hooks; trust it in Codex, or install with --user", path, t.Dir, level)
		case install && !set:
			tail = append(tail, codexProjectMarker, tomlHeader(project...), `trust_level = "trusted"`, "")
			notes = append(notes, "Codex trusts the project "+t.Dir+" (project hooks load only in a trusted project)")
		case !install && marked:
			if _, err := remove(project, "trust_level"); err != nil {
				return nil, err
			}
			notes = append(notes, "the project trust hook install added goes")
		}
	}
	if len(edits) == 0 && len(tail) == 0 {
		return nil, nil
	}
	if len(tail) > 0 {
		tail = tail[:len(tail)-1]
	}
	c.After = f.apply(edits, tail)
	c.Notes, c.Mode = notes, 0o600
	if c.Before == nil && len(bytes.TrimSpace(c.After)) == 0 {
		return nil, nil
	}
	return []Change{c}, nil
}
