package hook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/gowebpki/jcs"
)

// HashJSON is the digest the record keeps instead of a tool's input or
// output: lowercase hex SHA-256 of the RFC 8785 (JCS) canonical form of the
// JSON value as the host sent it (absent: JSON null). canonical is false when
// the value could not be canonicalised (JCS refuses, for example, numbers a
// double cannot hold): the digest is then of the bytes as sent.
func HashJSON(v json.RawMessage) (digest string, canonical bool) {
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	b, err := jcs.Transform(v)
	canonical = err == nil
	if !canonical {
		b = v
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), canonical
}

// ArgsText is a tool's input as the hook sends it for the approver when
// told to (--send-args-text; docs/approvals.md "The arguments' text"): its
// RFC 8785 form, whose SHA-256 is the recorded tool_input_sha256 (the bytes
// as sent when it has none), held to the text rule and cut to
// api.MaxApprovalArgsText bytes.
func ArgsText(v json.RawMessage) string {
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	b, err := jcs.Transform(v)
	if err != nil {
		b = v
	}
	return api.CutArgsText(b)
}

// idVersion separates the hook's derived ids from any other scheme.
const idVersion = "auditchain-hook-v1"

// EventID derives an event's id from the host's ids, so that a resent event
// (a retried append, a spooled row flushed twice) carries the same id and
// the service stores it once, and so that a tool_result names its tool_call
// as parent without asking the service: evt-hk- and the first 32 hex digits
// of SHA-256 over the NUL-separated fields.
func EventID(host, session, toolUseID, eventType string) string {
	h := sha256.New()
	for _, f := range []string{idVersion, host, session, toolUseID, eventType} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return "evt-hk-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// DeriveToolUseID is the tool-use id of a call whose host sends none: drv-
// and the first 32 hex digits of SHA-256 over the NUL-separated version,
// host, session id, tool, the input's digest and the host's stamp
// (Call.Stamp). Every hook process the host runs for one event reads the
// same stdin, so all of them derive the same id, and the service stores and
// meters the call once (POST /v1/tool-calls is idempotent by event_id)
// however many hook commands are installed. Without a stamp two identical
// calls of a session could not be told apart: the clock stands in, unique
// but not shared between processes.
func DeriveToolUseID(c *Call, now time.Time) string {
	stamp := c.Stamp
	if stamp == "" {
		stamp = "clock:" + strconv.FormatInt(now.UnixNano(), 10)
	}
	digest, _ := c.inputDigest()
	h := sha256.New()
	for _, f := range []string{idVersion, c.Host, c.SessionID, c.Tool, digest, stamp} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return "drv-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// inputDigest is HashJSON(c.Input), computed once per call (an input can
// hold a whole file).
func (c *Call) inputDigest() (string, bool) {
	if c.inputSHA == "" {
		c.inputSHA, c.inputCanon = HashJSON(c.Input)
	}
	return c.inputSHA, c.inputCanon
}

// callFacts are what the hook adds to a tool_call's raw when it records the
// call itself, because it could not ask the gate (a call through the gate
// gets the gate's members from the service: subagent, gate_status,
// grant_id, proposal_id, no_grant).
type callFacts struct {
	subagent  string
	hookError string
}

// callRaw is the raw of a tool_call: hashes and ids only, never the input.
type callRaw struct {
	Host               string `json:"host"`
	HookEvent          string `json:"hook_event"`
	SessionID          string `json:"session_id"`
	ToolUseID          string `json:"tool_use_id"`
	ToolInputSHA256    string `json:"tool_input_sha256"`
	ToolInputCanonical bool   `json:"tool_input_canonical"`
	Subagent           string `json:"subagent,omitempty"`
	AgentID            string `json:"agent_id,omitempty"`
	HookError          string `json:"hook_error,omitempty"`
}

// resultRaw is the raw of a tool_result.
type resultRaw struct {
	Host                  string `json:"host"`
	HookEvent             string `json:"hook_event"`
	SessionID             string `json:"session_id"`
	ToolUseID             string `json:"tool_use_id"`
	ToolResponseSHA256    string `json:"tool_response_sha256"`
	ToolResponseCanonical bool   `json:"tool_response_canonical"`
	Failed                *bool  `json:"failed,omitempty"`
}

func callEvent(c *Call, now time.Time, decision string, f callFacts) *api.EventInput {
	digest, canon := c.inputDigest()
	raw := callRaw{Host: c.Host, HookEvent: c.Event, SessionID: c.SessionID, ToolUseID: c.ToolUseID,
		ToolInputSHA256: digest, ToolInputCanonical: canon, Subagent: f.subagent, AgentID: c.AgentID, HookError: f.hookError}
	return event(c, api.EventToolCall, now, raw, &decision, nil)
}

func resultEvent(c *Call, now time.Time) *api.EventInput {
	digest, canon := HashJSON(c.Response)
	raw := resultRaw{Host: c.Host, HookEvent: c.Event, SessionID: c.SessionID, ToolUseID: c.ToolUseID,
		ToolResponseSHA256: digest, ToolResponseCanonical: canon}
	if !c.FailureUnknown {
		raw.Failed = &c.Failed
	}
	var parent *string
	if !c.noParent {
		p := EventID(c.Host, c.SessionID, c.ToolUseID, api.EventToolCall)
		parent = &p
	}
	return event(c, api.EventToolResult, now, raw, nil, parent)
}

func event(c *Call, eventType string, now time.Time, raw any, decision, parent *string) *api.EventInput {
	b, err := json.Marshal(raw)
	if err == nil {
		b, err = jcs.Transform(b)
	}
	if err != nil {
		// Strings and booleans only: cannot fail.
		panic("hook: encode raw: " + err.Error())
	}
	ts := client.FormatTimestamp(now)
	var tool *string
	if c.Tool != "" {
		tool = &c.Tool
	}
	return &api.EventInput{EventID: new(EventID(c.Host, c.SessionID, c.ToolUseID, eventType)), EventType: &eventType,
		Raw: b, Decision: decision, Tool: tool, ParentID: parent, TS: &ts}
}
