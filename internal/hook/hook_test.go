package hook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// The input digest is SHA-256 over the RFC 8785 form: key order, spacing and
// number spelling do not change it, and an auditor recomputes it from the
// canonical text alone.
func TestHashJSONIsSHA256OfJCS(t *testing.T) {
	sum := sha256.Sum256([]byte(`{"a":"x","b":10,"c":[true,null]}`))
	want := hex.EncodeToString(sum[:])
	for _, in := range []string{`{"a":"x","b":10,"c":[true,null]}`, `{ "c": [true, null], "b": 1e1, "a": "\u0078" }`, `{"b":10.0,"a":"x","c":[true,null]}`} {
		got, canon := HashJSON(json.RawMessage(in))
		if got != want || !canon {
			t.Errorf("HashJSON(%s) = %s, %v; want %s, true", in, got, canon, want)
		}
	}
	null := sha256.Sum256([]byte("null"))
	if got, _ := HashJSON(nil); got != hex.EncodeToString(null[:]) {
		t.Errorf("an absent value hashes as %s, want the digest of null", got)
	}
	// A number JCS cannot hold: the digest of the bytes as sent, said so.
	raw := `{"n":1e400}`
	sum = sha256.Sum256([]byte(raw))
	if got, canon := HashJSON(json.RawMessage(raw)); canon || got != hex.EncodeToString(sum[:]) {
		t.Errorf("HashJSON(%s) = %s, %v; want the raw digest, false", raw, got, canon)
	}
}

// Event ids are derived from the host's ids: the same call always gets the
// same id, each part changes it, and the form is the service's.
func TestEventIDIsDerived(t *testing.T) {
	form := regexp.MustCompile(`^evt-[A-Za-z0-9_.:-]{1,160}$`)
	a := EventID("claude-code", "s1", "toolu_1", api.EventToolCall)
	if a != EventID("claude-code", "s1", "toolu_1", api.EventToolCall) || !form.MatchString(a) {
		t.Fatalf("EventID = %s: not stable or not of the form", a)
	}
	seen := map[string]bool{a: true}
	for _, id := range []string{EventID("codex", "s1", "toolu_1", api.EventToolCall), EventID("claude-code", "s2", "toolu_1", api.EventToolCall),
		EventID("claude-code", "s1", "toolu_2", api.EventToolCall), EventID("claude-code", "s1", "toolu_1", api.EventToolResult),
		// The separator keeps fields apart: "s1"+"toolu_1" is not "s1t"+"oolu_1".
		EventID("claude-code", "s1t", "oolu_1", api.EventToolCall)} {
		if seen[id] {
			t.Errorf("id %s repeats", id)
		}
		seen[id] = true
	}
}

// A tool_result names its tool_call as parent without asking anyone; its raw
// holds the response's digest and whether it failed, never the text.
func TestResultNamesItsCall(t *testing.T) {
	c := &Call{Host: "claude-code", Event: "PostToolUseFailure", Phase: PhasePost, SessionID: "s", ToolUseID: "t", Tool: "Bash",
		Response: json.RawMessage(`{"stdout":"secret output"}`), Failed: true}
	ev := resultEvent(c, fixedNow)
	if ev.ParentID == nil || *ev.ParentID != EventID("claude-code", "s", "t", api.EventToolCall) {
		t.Fatalf("parent_id %v", ev.ParentID)
	}
	if strings.Contains(string(ev.Raw), "secret") || !strings.Contains(string(ev.Raw), `"failed":true`) {
		t.Fatalf("raw %s", ev.Raw)
	}
}

var fixedNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// A call without a host tool-use id gets an id every hook process of the
// same event derives alike, and that changes with the host's stamp, so two
// identical calls of a session stay two.
func TestDeriveToolUseIDFromTheHostsStdin(t *testing.T) {
	c := func(stamp string) *Call {
		return &Call{Host: "gemini", SessionID: "s", Tool: "run_shell_command", Input: json.RawMessage(`{"command":"ls"}`), Stamp: stamp}
	}
	a, b := DeriveToolUseID(c("2026-11-28T10:00:00.000Z"), fixedNow), DeriveToolUseID(c("2026-11-28T10:00:00.000Z"), fixedNow.Add(time.Second))
	if a != b || !strings.HasPrefix(a, "drv-") {
		t.Fatalf("two processes of one event derive %s and %s", a, b)
	}
	if a == DeriveToolUseID(c("2026-11-28T10:00:05.000Z"), fixedNow) {
		t.Fatal("a later identical call got the same id")
	}
	if DeriveToolUseID(c(""), fixedNow) == DeriveToolUseID(c(""), fixedNow.Add(1)) {
		t.Fatal("without a stamp, two calls at different instants got one id")
	}
}

// The result's hook processes all find the call its before-tool run
// remembered, however they interleave; the pairing file is claimed, the
// next identical call starts afresh, and claims are swept once old.
func TestPairingFileIsClaimedOnceAndSwept(t *testing.T) {
	sp := &Spool{Dir: t.TempDir()}
	pre := &Call{Host: "gemini", Event: "BeforeTool", SessionID: "s", Tool: "t", Input: json.RawMessage(`{}`), ToolUseID: "drv-1"}
	if err := sp.RememberCall(pre); err != nil {
		t.Fatal(err)
	}
	post := func(stamp string) *Call {
		return &Call{Host: "gemini", Event: "AfterTool", SessionID: "s", Tool: "t", Input: json.RawMessage(`{}`), Stamp: stamp}
	}
	if a, b := sp.TakeCall(post("t1"), fixedNow), sp.TakeCall(post("t1"), fixedNow); a != "drv-1" || b != "drv-1" {
		t.Fatalf("the result's two processes found %q and %q", a, b)
	}
	if got := sp.TakeCall(post("t2"), fixedNow); got != "" {
		t.Fatalf("another result found %q, its call remembered nothing", got)
	}
	files, _ := os.ReadDir(sp.callsDir())
	if len(files) != 1 || !strings.HasSuffix(files[0].Name(), ".taken") {
		t.Fatalf("pairing files: %v", files)
	}
	sp.TakeCall(post("t3"), fixedNow.Add(claimedPairTTL+time.Hour))
	if files, _ := os.ReadDir(sp.callsDir()); len(files) != 0 {
		t.Fatalf("old claims not swept: %v", files)
	}
}

// failed is the host's own error flag (docs/hooks.md "failed"), as each
// host sent it for `ls /nonexistent-dir` (exit 2): Claude Code reports a
// failure, Gemini CLI a result holding the exit code, Codex CLI only the
// output, so its results say nothing either way.
func TestFailedIsTheHostsErrorFlag(t *testing.T) {
	for _, tc := range []struct {
		host, stdin string
		want        string // the raw's failed member: true, false or absent
	}{
		{"claude-code", `{"session_id":"s","hook_event_name":"PostToolUseFailure","tool_name":"Bash","tool_input":{"command":"ls /nonexistent-dir"},"tool_use_id":"toolu_1","error":"Exit code 2\nls: cannot access '/nonexistent-dir': No such file or directory","is_interrupt":false}`, "true"},
		{"codex", `{"session_id":"s","turn_id":"t","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls /nonexistent-dir"},"tool_response":"ls: cannot access '/nonexistent-dir': No such file or directory\n","tool_use_id":"call_1"}`, "absent"},
		{"gemini", `{"session_id":"s","hook_event_name":"AfterTool","timestamp":"2026-11-28T02:03:51.177Z","tool_name":"run_shell_command","tool_input":{"command":"ls /nonexistent-dir"},"tool_response":{"llmContent":"Output: ls: cannot access '/nonexistent-dir'\nExit Code: 2","returnDisplay":""}}`, "false"},
		{"gemini", `{"session_id":"s","hook_event_name":"AfterTool","timestamp":"2026-11-28T02:03:51.177Z","tool_name":"read_file","tool_input":{"file_path":"/x"},"tool_response":{"llmContent":"","error":{"message":"File not found","type":"file_not_found"}}}`, "true"},
	} {
		h, _ := HostByName(tc.host)
		c, err := h.Parse([]byte(tc.stdin))
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		json.Unmarshal(resultEvent(c, fixedNow).Raw, &raw)
		got := "absent"
		if v, ok := raw["failed"]; ok {
			got = strings.TrimSpace(string(mustJSON(v)))
		}
		if got != tc.want {
			t.Errorf("%s %s: failed %s, want %s", tc.host, c.Tool, got, tc.want)
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }
