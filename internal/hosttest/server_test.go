package hosttest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScriptPicksReplyByCallsInHistory(t *testing.T) {
	a, b, c := ToolCall("A", nil), ToolCall("B", nil), ToolCall("C", nil)
	script := Script{Calls(a, b), Calls(c), Text("end")}
	history := func(calls ...int) Request {
		var r Request
		for _, n := range calls {
			r.Messages = append(r.Messages, Message{Role: "assistant", Calls: make([]Call, n)})
		}
		return r
	}
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"first turn", history(), "A"},
		{"one of two parallel calls back", history(1), "A"},
		{"both parallel calls back", history(2), "C"},
		{"history merged into one assistant turn", history(3), "end"},
		{"each call its own turn", history(2, 1), "end"},
		{"a text reply stays the answer", history(2, 1, 4), "end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := script.Respond(tc.req)
			got := rep.Text
			if len(rep.Calls) > 0 {
				got = rep.Calls[0].Name
			}
			if got != tc.want {
				t.Errorf("reply %q, want %q", got, tc.want)
			}
		})
	}
	if got := (Script{Calls(a)}).Respond(history(1)).Text; got != "done" {
		t.Errorf("past the end of a script without text: %q, want done", got)
	}
}

func TestByPromptFollowsTheFirstMarkedUserTurn(t *testing.T) {
	b := ByPrompt{"MAIN": Script{Text("main")}, "SUB": Script{Text("sub")}}
	req := func(texts ...string) Request {
		var r Request
		for _, s := range texts {
			r.Messages = append(r.Messages, Message{Role: "user", Text: s})
		}
		return r
	}
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{req("MAIN: go", "later SUB mentioned"), "main"},
		{req("context", "SUB: do it"), "sub"},
		{req("no marker"), "done"},
	} {
		if got := b.Respond(tc.req).Text; got != tc.want {
			t.Errorf("%v: reply %q, want %q", tc.req.Messages, got, tc.want)
		}
	}
}

// A script that never ends the turn is cut off at MaxTurns.
func TestServerEndsEveryTurnPastTheLimit(t *testing.T) {
	srv := NewServer(t, ResponderFunc(func(Request) Reply { return Calls(ToolCall("Bash", map[string]string{"command": "true"})) }))
	body := `{"model":"m","messages":[{"role":"user","content":"go"}],"tools":[{"name":"Bash"}]}`
	var last map[string]any
	for range MaxTurns + 1 {
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		last = nil
		if err := json.NewDecoder(resp.Body).Decode(&last); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []any{map[string]any{"type": "text", "text": TurnLimitText}}
	if diff := cmp.Diff(want, last["content"]); diff != "" {
		t.Errorf("turn %d content (-want +got):\n%s", MaxTurns+1, diff)
	}
	if n := len(srv.Calls()); n != MaxTurns {
		t.Errorf("%d calls asked for, want %d", n, MaxTurns)
	}
}

// As every host's proxy, the server refuses and records what was meant for
// elsewhere.
func TestServerRefusesWhatIsMeantForAnotherHost(t *testing.T) {
	srv := NewServer(t, Script{})
	proxy, _ := url.Parse(srv.URL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	if _, err := client.Get("https://example.com/x"); err == nil {
		t.Error("an HTTPS request through the server succeeded")
	}
	resp, err := client.Get("http://example.com/y")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("plain HTTP through the server: %d, want 403", resp.StatusCode)
	}
	if diff := cmp.Diff([]string{"CONNECT example.com:443", "GET example.com/y"}, srv.Proxied()); diff != "" {
		t.Errorf("Proxied (-want +got):\n%s", diff)
	}
}

// Each API's history is read back into the same conversation: the call the
// model made and the result the host returned for it.
func TestServerNormalizesEachAPIsHistory(t *testing.T) {
	srv := NewServer(t, Script{})
	for _, tc := range []struct {
		path, body string
	}{
		{"/v1/messages", `{"messages":[{"role":"user","content":"go"},
			{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Bash","input":{"command":"ls"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"no"}],"is_error":true}]}],
			"tools":[{"name":"Bash"}]}`},
		{"/v1/responses", `{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},
			{"type":"reasoning","summary":[]},
			{"type":"function_call","call_id":"c1","name":"Bash","arguments":"{\"command\":\"ls\"}"},
			{"type":"function_call_output","call_id":"c1","output":"no"}],
			"tools":[{"type":"function","name":"Bash"}]}`},
		{"/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"go"}]},
			{"role":"model","parts":[{"functionCall":{"id":"c1","name":"Bash","args":{"command":"ls"}}}]},
			{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"Bash","response":{"error":"no"}}}]}],
			"tools":[{"functionDeclarations":[{"name":"Bash"}]}]}`},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", bytes.NewBufferString(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	reqs := srv.Requests()
	for i, api := range []API{Anthropic, OpenAI, Gemini} {
		r := reqs[i]
		if r.API != api || r.Status != http.StatusOK {
			t.Fatalf("request %d: %s %d, want %s 200", i, r.API, r.Status, api)
		}
		var roles []string
		for _, m := range r.Messages {
			roles = append(roles, m.Role)
		}
		if diff := cmp.Diff([]string{"user", "assistant", "user"}, roles); diff != "" {
			t.Errorf("%s roles (-want +got):\n%s", api, diff)
		}
		if r.CallsMade() != 1 || r.Messages[1].Calls[0].ID != "c1" || string(r.Messages[1].Calls[0].Input) != `{"command":"ls"}` {
			t.Errorf("%s calls = %+v", api, r.Messages[1].Calls)
		}
		if res := r.Results(); len(res) != 1 || res[0].CallID != "c1" || res[0].Output != "no" {
			t.Errorf("%s results = %+v", api, res)
		}
	}
}
