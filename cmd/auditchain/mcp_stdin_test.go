package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// `auditchain mcp` tells a session that ended as MCP's stdio transport
// ends one (the host closes stdin after initialize: exit 0) from input
// that never was a session: that is exit 1 with a line on stderr saying
// what is wrong, and each unreadable line still gets its JSON-RPC error
// on stdout.
func TestMCPStdinThatIsNoSession(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		wantErr     []string // empty: a normal close
		wantStdout  string
	}{
		{"garbage", "<initialize>\n", []string{"1 line(s) were not JSON-RPC messages", "sends initialize first", "docs/mcp.md"}, `"code":-32700`},
		{"empty", "", []string{"stdin ended before an MCP session began", "sends initialize first"}, ""},
		{"a request before initialize", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n", []string{"stdin ended before an MCP session began"}, `"id":1`},
		{"initialize then EOF", mcpInitialize + "\n", nil, `"protocolVersion":"2025-06-18"`},
		{"a whole short session", mcpInitialize + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n", nil, `"gate_check"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := mcpCmd(context.Background(), nil, cliEnv("http://127.0.0.1:1", "ac_x"), strings.NewReader(tc.stdin), &out, &errOut)
			var printed bytes.Buffer
			code := exitCode(err, &printed)
			if len(tc.wantErr) == 0 {
				if code != 0 {
					t.Fatalf("exit %d (%v), want 0; stdout %q", code, err, out.String())
				}
			} else {
				if code != exitFailure {
					t.Fatalf("exit %d (%v), want %d", code, err, exitFailure)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(printed.String(), w) {
						t.Errorf("stderr %q lacks %q", printed.String(), w)
					}
				}
			}
			if !strings.Contains(out.String(), tc.wantStdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.wantStdout)
			}
		})
	}
}

// --approval-elicit needs a wait to ask within and an approver key that is
// not the proxy's own (the service would refuse it: separation of powers);
// each is refused before the upstream starts, saying which.
func TestMCPProxyApprovalElicitFlags(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--approval-elicit", "--approver-key", "ac_y"}, "--approval-elicit asks within --approval-wait"},
		{nil, []string{"--approval-elicit", "--approval-wait", "1m"}, "--approval-elicit needs --approver-key (or AUDITCHAIN_APPROVER_KEY)"},
		{nil, []string{"--approval-elicit", "--approval-wait", "1m", "--approver-key", "ac_x"}, "--approver-key is the proxy's own key"},
		{map[string]string{"AUDITCHAIN_APPROVER_KEY": "ac_x"}, []string{"--approval-elicit", "--approval-wait", "1m"}, "--approver-key is the proxy's own key"},
	} {
		env := cliEnv("http://127.0.0.1:1", "ac_x")
		getenv := func(k string) string {
			if v, ok := tc.env[k]; ok {
				return v
			}
			return env(k)
		}
		args := append(append([]string{"proxy"}, tc.args...), "--", "/nonexistent/upstream")
		err := mcpCmd(context.Background(), args, getenv, strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want %q", tc.env, tc.args, err, tc.want)
		}
	}
}
