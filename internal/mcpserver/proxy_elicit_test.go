package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// A held call put to the host's user through elicitation/create
// (docs/approvals.md "Through the host's user"): accept approves it with the
// approver key, once, the record naming that key and saying the host's user
// decided through elicitation; decline denies it; cancel leaves it pending
// for a later try; a decision made elsewhere while the question is open
// withdraws the question and decides the call, and so does the host
// cancelling the call; a host that declared no elicitation is not asked.
// Both stores.
func TestProxyElicitsApproval(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		ctx := context.Background()
		user, token := s.Account(t, "proxy-elicit@example.com")
		c, err := client.New(s.URL, token, client.WithSurface(client.SurfaceMCPStdio))
		if err != nil {
			t.Fatal(err)
		}
		approverKey, err := s.App.CreateKey(ctx, user, api.CreateKeyRequest{Label: new("elicitation"), Scopes: []string{"approvals"}})
		if err != nil {
			t.Fatal(err)
		}
		approver, err := client.New(s.URL, approverKey.APIKey)
		if err != nil {
			t.Fatal(err)
		}
		person, err := client.New(s.URL, s.Key(t, user, api.CreateKeyRequest{Scopes: []string{"approvals"}}))
		if err != nil {
			t.Fatal(err)
		}
		grant(t, c, "worker", 10, "echo")
		if _, err := c.CreateApprovalRule(ctx, api.ApprovalRuleRequest{Subagent: new("worker"), Tool: new("echo")}); err != nil {
			t.Fatal(err)
		}

		// The host's user: answers each question with the next action; for
		// "wait" it holds the question until the proxy withdraws it.
		type asked struct {
			message   string
			withdrawn bool
		}
		actions := make(chan string, 1)
		questions := make(chan asked, 1)
		opened := make(chan string, 1) // the approval id of a question held open
		handler := func(hctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			action := <-actions
			q := asked{message: req.Params.Message}
			if action == "wait" {
				opened <- regexp.MustCompile(`\(approval ([^)]+)\)`).FindStringSubmatch(q.message)[1]
				<-hctx.Done()
				q.withdrawn = true
				questions <- q
				return nil, hctx.Err()
			}
			questions <- q
			res := &mcp.ElicitResult{Action: action}
			if action == "accept" {
				res.Content = map[string]any{"note": "looks fine"}
			}
			return res, nil
		}
		u := newUpstream()
		upConn, proxyUp := net.Pipe()
		ss, err := u.server.Connect(ctx, &mcp.IOTransport{Reader: upConn, Writer: upConn}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		host, _ := proxyHost(t, proxyUp, mcpserver.ProxyOptions{Subagent: "worker", Service: c, ApprovalWait: 20 * time.Second,
			Approver: approver}, &mcp.ClientOptions{ElicitationHandler: handler})
		call := func(msg string) *mcp.CallToolResult {
			t.Helper()
			res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": msg}})
			if err != nil {
				t.Fatalf("echo %q: %v", msg, err)
			}
			return res
		}
		newest := func() api.Approval {
			t.Helper()
			l, err := person.Approvals(ctx, "", 0)
			if err != nil || len(l.Approvals) == 0 {
				t.Fatalf("approvals: %v %v", l, err)
			}
			return l.Approvals[0]
		}

		// Accept: the call runs once; the question named the sub-agent, the
		// tool, the arguments and their digest.
		actions <- "accept"
		if res := call("ship it"); res.IsError || u.echoes.Load() != 1 {
			t.Fatalf("accepted: %+v (upstream ran %d)", res, u.echoes.Load())
		}
		q := <-questions
		digest, _ := mcpserver.ArgumentsHash(json.RawMessage(`{"msg":"ship it"}`))
		for _, want := range []string{`"worker"`, `"echo"`, `{"msg":"ship it"}`, digest} {
			if !strings.Contains(q.message, want) {
				t.Errorf("the question does not name %s: %s", want, q.message)
			}
		}
		ap := newest()
		if ap.Status != api.ApprovalUsed || ap.DecidedBy == nil || ap.DecidedBy.Identity != approverKey.ID || ap.Note == nil ||
			!strings.HasPrefix(*ap.Note, mcpserver.ElicitationNote+" (auditchain mcp proxy; host test-host 1): looks fine") {
			t.Fatalf("accepted approval: %+v decided by %+v note %v", ap, ap.DecidedBy, ap.Note)
		}
		if ap.RequestedBy.Identity == approverKey.ID {
			t.Fatalf("the approver key made the call")
		}

		// Decline: denied, never run.
		actions <- "decline"
		if res := call("rm -rf"); !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "refused: approval_denied: ") ||
			u.echoes.Load() != 1 {
			t.Fatalf("declined: %+v (upstream ran %d)", res, u.echoes.Load())
		}
		<-questions
		if ap := newest(); ap.Status != api.ApprovalDenied || ap.DecidedBy == nil || ap.DecidedBy.Identity != approverKey.ID {
			t.Fatalf("declined approval: %+v", ap)
		}

		// Cancel: left pending; the model may try again later.
		actions <- "cancel"
		res := call("later")
		<-questions
		pending := newest()
		if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || pending.Status != api.ApprovalPending ||
			!strings.Contains(text, pending.ApprovalID) || !strings.Contains(text, "try the same call again later") {
			t.Fatalf("cancelled: %+v, approval %+v", res, pending)
		}

		// The retry asks again; a person approves in the console meanwhile:
		// the question is withdrawn and the call runs on the person's word.
		actions <- "wait"
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			r, _ := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "later"}})
			done <- r
		}()
		if id := <-opened; id != pending.ApprovalID {
			t.Fatalf("the retry asked about %s, want the kept approval %s", id, pending.ApprovalID)
		}
		personal, err := person.Approve(ctx, pending.ApprovalID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := <-done; r == nil || r.IsError || u.echoes.Load() != 2 {
			t.Fatalf("approved elsewhere: %+v (upstream ran %d)", r, u.echoes.Load())
		}
		if q := <-questions; !q.withdrawn {
			t.Fatal("the question stayed open after the decision")
		}

		// The host cancels the call while its user is being asked: the
		// question is withdrawn at once (not after the 20 s wait) and the
		// approval stays pending.
		actions <- "wait"
		cctx, cancelCall := context.WithCancel(ctx)
		cancelled := make(chan error, 1)
		go func() {
			_, err := host.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "never mind"}})
			cancelled <- err
		}()
		id := <-opened
		cancelledAt := time.Now()
		cancelCall()
		if err := <-cancelled; err == nil {
			t.Fatal("the cancelled call answered")
		}
		if q := <-questions; !q.withdrawn || time.Since(cancelledAt) > 10*time.Second {
			t.Fatalf("the question was withdrawn %v after the host cancelled the call (withdrawn: %v), want at once, not at the wait's end (20 s)",
				time.Since(cancelledAt), q.withdrawn)
		}
		if ap, err := person.Approval(ctx, id, 0); err != nil || ap.Status != api.ApprovalPending || u.echoes.Load() != 2 {
			t.Fatalf("after the host cancelled: %+v %v (upstream ran %d)", ap, err, u.echoes.Load())
		}

		// A host that declared no elicitation gets the plain wait: nothing
		// is asked, and the person's approval through the API runs the call.
		upConn2, proxyUp2 := net.Pipe()
		ss2, err := u.server.Connect(ctx, &mcp.IOTransport{Reader: upConn2, Writer: upConn2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss2.Close() })
		var logs syncBuffer
		plain, _ := proxyHost(t, proxyUp2, mcpserver.ProxyOptions{Subagent: "worker", Service: c, ApprovalWait: 20 * time.Second,
			Approver: approver, Log: slog.New(slog.NewTextHandler(&logs, nil))}, nil)
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		ready, streamed := make(chan struct{}), make(chan error, 1)
		go func() {
			streamed <- c.Stream(sctx, func(m client.StreamMessage) error {
				switch {
				case m.Kind == "ready" && !m.Reconnected:
					close(ready)
				case m.Kind == "event" && m.Event.EventType == "tool_call" && m.Event.Decision != nil && *m.Event.Decision == api.DecisionAsk:
					_, err := person.Approve(sctx, newest().ApprovalID, nil)
					if err == nil {
						err = client.ErrStopStream
					}
					return err
				}
				return nil
			})
		}()
		<-ready
		if r, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "no questions"}}); err != nil ||
			r.IsError || u.echoes.Load() != 3 {
			t.Fatalf("a host without elicitation: %+v %v (upstream ran %d)", r, err, u.echoes.Load())
		}
		if err := <-streamed; err != nil {
			t.Fatal(err)
		}
		// Not asked: the proxy said at initialize that it would not ask, and
		// never met a host refusing a question.
		if l := logs.String(); !strings.Contains(l, "the host declared no form elicitation") || strings.Contains(l, "did not answer the approval question") {
			t.Fatalf("the proxy's log:\n%s", l)
		}

		// The chain: each decision names its approver.
		granted := map[string]string{}
		for _, e := range exported(t, s, token) {
			if e.EventType == api.EventApprovalGranted {
				var raw api.ApprovalEvent
				if err := json.Unmarshal(e.Raw, &raw); err != nil {
					t.Fatal(err)
				}
				granted[raw.ApprovalID] = raw.Approver.Identity
			}
		}
		if len(granted) != 3 || granted[ap.ApprovalID] != approverKey.ID || granted[pending.ApprovalID] != personal.DecidedBy.Identity {
			t.Fatalf("approval.granted events: %v", granted)
		}
	})
}

// syncBuffer is a bytes.Buffer the proxy's goroutines may log to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
