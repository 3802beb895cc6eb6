package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/auditchain/auditchain/internal/suggest"
	"github.com/auditchain/auditchain/pkg/api"
)

// Host adapts one agent host's hook protocol (docs/hooks.md "Hosts").
type Host interface {
	// Name is the --host value.
	Name() string
	// Parse reads the host's stdin.
	Parse(stdin []byte) (*Call, error)
	// Answer is what the hook prints on stdout and its exit code; a
	// non-empty stderr is written to stderr (the reason the model is shown
	// on exit 2).
	Answer(c *Call, v Verdict) (stdout []byte, exit int, stderr string)
}

// Hosts lists the supported hosts.
var Hosts = []Host{claudeCode{}, codex{}, gemini{}, cursor{}}

// HostNames lists the --host values.
func HostNames() []string {
	var out []string
	for _, h := range Hosts {
		out = append(out, h.Name())
	}
	return out
}

// HostByName returns the adapter of name.
func HostByName(name string) (Host, error) {
	for _, h := range Hosts {
		if h.Name() == name {
			return h, nil
		}
	}
	if name == "" {
		return nil, fmt.Errorf("no host: give --host, one of %s", strings.Join(HostNames(), ", "))
	}
	if meant := suggest.Closest(name, HostNames()); meant != "" {
		return nil, fmt.Errorf("unknown host %q; did you mean %s? (the hosts: %s)", name, meant, strings.Join(HostNames(), ", "))
	}
	return nil, fmt.Errorf("unknown host %q; the hosts are %s", name, strings.Join(HostNames(), ", "))
}

// empty is the answer that changes nothing: the host goes on with its own
// permission rules.
var empty = []byte("{}\n")

// OneLine is s on one line: a reason the host shows as a block message.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // maps of strings: cannot fail
	return b.Bytes()
}

// claudeStdin is the stdin of Claude Code's and Codex's hooks (the same
// JSON; Codex adds turn_id).
type claudeStdin struct {
	SessionID     string          `json:"session_id"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	ToolResponse  json.RawMessage `json:"tool_response"`
	Error         json.RawMessage `json:"error"`
	AgentID       string          `json:"agent_id"`
	AgentType     string          `json:"agent_type"`
}

func parseClaude(host string, stdin []byte) (*Call, error) {
	var in claudeStdin
	if err := json.Unmarshal(stdin, &in); err != nil {
		return nil, fmt.Errorf("%s stdin: %w", host, err)
	}
	c := &Call{Host: host, Event: in.HookEventName, SessionID: in.SessionID, ToolUseID: in.ToolUseID, Tool: in.ToolName,
		Input: in.ToolInput, AgentID: in.AgentID, AgentType: in.AgentType}
	switch in.HookEventName {
	case "PreToolUse":
		c.Phase = PhasePre
	case "PostToolUse":
		c.Phase, c.Response = PhasePost, in.ToolResponse
	case "PostToolUseFailure":
		c.Phase, c.Failed, c.Response = PhasePost, true, in.ToolResponse
		if c.Response == nil {
			c.Response = in.Error
		}
	}
	return c, nil
}

// claudeAnswer is PreToolUse's decision JSON; ask becomes deny when the host
// has no ask.
func claudeAnswer(c *Call, v Verdict, ask bool) []byte {
	if c.Phase != PhasePre || v.Decision == api.DecisionAllow {
		return empty
	}
	d := v.Decision
	if d == api.DecisionAsk && !ask {
		d = api.DecisionDeny
	}
	return encode(map[string]any{"hookSpecificOutput": map[string]string{
		"hookEventName": c.Event, "permissionDecision": d, "permissionDecisionReason": v.Reason}})
}

type claudeCode struct{}

func (claudeCode) Name() string                      { return "claude-code" }
func (claudeCode) Parse(stdin []byte) (*Call, error) { return parseClaude("claude-code", stdin) }

// Answer: the decision JSON on exit 0 (deny > ask > allow in Claude Code's
// own precedence).
func (claudeCode) Answer(c *Call, v Verdict) ([]byte, int, string) {
	return claudeAnswer(c, v, true), 0, ""
}

type codex struct{}

func (codex) Name() string { return "codex" }

// Parse: Codex 0.169 runs PostToolUse with the tool's output alone, a
// command that exits non-zero included: it reports no failure.
func (codex) Parse(stdin []byte) (*Call, error) {
	c, err := parseClaude("codex", stdin)
	if err == nil && c.Phase == PhasePost {
		c.FailureUnknown = true
	}
	return c, err
}

// Answer: a refusal is the decision JSON and exit 2 with the reason on
// stderr, which blocks whichever of the two a Codex version reads (ask
// becomes deny). Codex shows the whole stderr to the model as the block
// reason, so stderr is that one line and nothing else.
func (codex) Answer(c *Call, v Verdict) ([]byte, int, string) {
	out := claudeAnswer(c, v, false)
	if c.Phase == PhasePre && v.Decision != api.DecisionAllow {
		return out, 2, OneLine(v.Reason)
	}
	return out, 0, ""
}

type gemini struct{}

func (gemini) Name() string { return "gemini" }

func (gemini) Parse(stdin []byte) (*Call, error) {
	var in struct {
		SessionID     string          `json:"session_id"`
		HookEventName string          `json:"hook_event_name"`
		Timestamp     string          `json:"timestamp"`
		ToolName      string          `json:"tool_name"`
		ToolInput     json.RawMessage `json:"tool_input"`
		ToolResponse  json.RawMessage `json:"tool_response"`
	}
	if err := json.Unmarshal(stdin, &in); err != nil {
		return nil, fmt.Errorf("gemini stdin: %w", err)
	}
	// Gemini sends no tool-use id; every hook it runs for one event gets the
	// same stdin, timestamp included, from which the id is derived.
	c := &Call{Host: "gemini", Event: in.HookEventName, SessionID: in.SessionID, Stamp: in.Timestamp, Tool: in.ToolName,
		Input: in.ToolInput}
	switch in.HookEventName {
	case "BeforeTool":
		c.Phase = PhasePre
	case "AfterTool":
		c.Phase, c.Response = PhasePost, in.ToolResponse
		var r struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(in.ToolResponse, &r) == nil && len(r.Error) > 0 && string(r.Error) != "null" {
			c.Failed = true
		}
	}
	return c, nil
}

// Answer: {"decision":"deny","reason":…} on exit 0; Gemini has no ask.
func (gemini) Answer(c *Call, v Verdict) ([]byte, int, string) {
	if c.Phase != PhasePre || v.Decision == api.DecisionAllow {
		return empty, 0, ""
	}
	return encode(map[string]string{"decision": api.DecisionDeny, "reason": v.Reason}), 0, ""
}

type cursor struct{}

func (cursor) Name() string { return "cursor" }

// cursorPre and cursorPost are the Cursor events the adapter gates and
// records; any other event is answered {} and not recorded.
var (
	cursorPre  = []string{"preToolUse", "beforeShellExecution", "beforeMCPExecution", "beforeReadFile"}
	cursorPost = []string{"postToolUse", "postToolUseFailure", "afterShellExecution", "afterMCPExecution", "afterFileEdit"}
)

func (cursor) Parse(stdin []byte) (*Call, error) {
	var in struct {
		HookEventName  string          `json:"hook_event_name"`
		ConversationID string          `json:"conversation_id"`
		GenerationID   string          `json:"generation_id"`
		ToolUseID      string          `json:"tool_use_id"`
		ToolName       string          `json:"tool_name"`
		ToolInput      json.RawMessage `json:"tool_input"`
		ToolOutput     json.RawMessage `json:"tool_output"`
		Command        json.RawMessage `json:"command"`
		Cwd            json.RawMessage `json:"cwd"`
		Output         json.RawMessage `json:"output"`
		ResultJSON     json.RawMessage `json:"result_json"`
		FilePath       json.RawMessage `json:"file_path"`
		Edits          json.RawMessage `json:"edits"`
		Error          json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(stdin, &in); err != nil {
		return nil, fmt.Errorf("cursor stdin: %w", err)
	}
	// Cursor's specific events carry no tool-use id and no timestamp: the
	// generation is what every hook of one event sees alike (docs/hooks.md).
	c := &Call{Host: "cursor", Event: in.HookEventName, SessionID: in.ConversationID, ToolUseID: in.ToolUseID,
		Stamp: in.GenerationID, Tool: in.ToolName, Input: in.ToolInput}
	obj := func(kv ...any) json.RawMessage {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			if v := kv[i+1].(json.RawMessage); v != nil {
				m[kv[i].(string)] = v
			}
		}
		return encode(m)
	}
	switch in.HookEventName {
	case "beforeShellExecution", "afterShellExecution":
		c.Tool, c.Input, c.Response = "Shell", obj("command", in.Command, "cwd", in.Cwd), in.Output
	case "beforeMCPExecution", "afterMCPExecution":
		c.Response = in.ResultJSON
	case "beforeReadFile":
		// The file's content is in stdin too: only the path is hashed.
		c.Tool, c.Input = "Read", obj("file_path", in.FilePath)
	case "afterFileEdit":
		c.Tool, c.Input, c.Response = "Edit", obj("file_path", in.FilePath), in.Edits
	case "postToolUse":
		c.Response = in.ToolOutput
	case "postToolUseFailure":
		c.Response, c.Failed = in.ToolOutput, true
		if c.Response == nil {
			c.Response = in.Error
		}
	}
	switch {
	case slices.Contains(cursorPre, in.HookEventName):
		c.Phase = PhasePre
	case slices.Contains(cursorPost, in.HookEventName):
		c.Phase = PhasePost
	}
	return c, nil
}

// Answer: {"permission":…,"user_message":…,"agent_message":…} on exit 0.
func (cursor) Answer(c *Call, v Verdict) ([]byte, int, string) {
	if c.Phase != PhasePre || v.Decision == api.DecisionAllow {
		return empty, 0, ""
	}
	return encode(map[string]string{"permission": v.Decision, "user_message": v.Reason, "agent_message": v.Reason}), 0, ""
}
