package mcpserver_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
)

// The arguments' text through the proxy (docs/approvals.md "The arguments'
// text"): off by default, a held call's approval has none; with
// SendArgsText (--send-args-text) the approver reads the arguments' RFC 8785
// form, which hashes to the digest the approval binds; the export holds
// only the digest either way.
func TestProxySendsArgsTextOnlyWhenTold(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		ctx := context.Background()
		c, person := heldEchoWorld(t, s, "proxy-args@example.com")
		u := newUpstream()
		held := func(send bool, msg string) *api.Approval {
			t.Helper()
			upConn, proxyUp := net.Pipe()
			ss, err := u.server.Connect(ctx, &mcp.IOTransport{Reader: upConn, Writer: upConn}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ss.Close() })
			host, _ := proxyHost(t, proxyUp, mcpserver.ProxyOptions{Subagent: "worker", Service: c, SendArgsText: send}, nil)
			if res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": msg}}); err != nil || !res.IsError {
				t.Fatalf("held call: %+v %v", res, err)
			}
			l, err := person.Approvals(ctx, api.ApprovalPending, 0)
			if err != nil || len(l.Approvals) == 0 {
				t.Fatalf("pending: %v %v", l, err)
			}
			ap, err := person.Approval(ctx, l.Approvals[0].ApprovalID, 0)
			if err != nil {
				t.Fatal(err)
			}
			return ap
		}
		if ap := held(false, "OFF-BY-DEFAULT"); ap.ArgsText != nil {
			t.Fatalf("default: the approval has text %q", *ap.ArgsText)
		}
		ap := held(true, "SENT-ON-REQUEST")
		if want := `{"msg":"SENT-ON-REQUEST"}`; ap.ArgsText == nil || *ap.ArgsText != want || ap.ArgsTextMatches == nil || !*ap.ArgsTextMatches {
			t.Fatalf("with SendArgsText: text %v matches %v, want %s", ap.ArgsText, ap.ArgsTextMatches, want)
		}
		var buf bytes.Buffer
		if err := c.Export(ctx, nil, nil, &buf); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "SENT-ON-REQUEST") || strings.Contains(buf.String(), "OFF-BY-DEFAULT") {
			t.Fatal("the export holds the arguments' text")
		}
	})
}
