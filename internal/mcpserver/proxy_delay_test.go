package mcpserver_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditchain/auditchain/internal/mcpserver"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// recordingService answers every tool call allow and keeps what the proxy
// sends: the timing of the tool_result is the subject here, so the service
// stands still inside the synctest bubble (the end-to-end tests use a real
// one).
type recordingService struct {
	mcpserver.Service // nil: any other method is a test failure (panics)
	mu                sync.Mutex
	carried           []api.ToolResult // results that rode with a call
	appended          []string         // event ids appended on their own
}

func (s *recordingService) GateToolCall(_ context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.carried = append(s.carried, req.Results...)
	return &api.ToolCallResponse{Decision: "allow", GateStatus: "authorized", Metered: true}, nil
}

func (s *recordingService) Append(_ context.Context, ev client.Event) (*api.AppendResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appended = append(s.appended, ev.EventID)
	return &api.AppendResponse{}, nil
}

func (s *recordingService) counts() (carried, appended int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.carried), len(s.appended)
}

// A result waits for the next call to carry it; without one it is sent on
// its own once ResultDelay has passed, and never twice.
func TestProxyResultWaitsForTheNextCallThenGoesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := &recordingService{}
		host, p := proxied(t, newUpstream(), svc, "worker", false)
		ctx := context.Background()
		call := func() {
			t.Helper()
			if res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "m"}}); err != nil || res.IsError {
				t.Fatalf("call: %+v %v", res, err)
			}
		}
		call()
		call() // carries the first call's result
		synctest.Wait()
		if carried, appended := svc.counts(); carried != 1 || appended != 0 {
			t.Fatalf("after two calls: %d results carried, %d appended; want 1 and 0", carried, appended)
		}
		time.Sleep(mcpserver.ResultDelay - time.Millisecond)
		synctest.Wait()
		if _, appended := svc.counts(); appended != 0 {
			t.Fatalf("the second result went alone before ResultDelay")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if carried, appended := svc.counts(); carried != 1 || appended != 1 {
			t.Fatalf("after ResultDelay: %d carried, %d appended; want 1 and 1", carried, appended)
		}
		call()
		p.Flush() // sends the third result at once, without waiting
		if carried, appended := svc.counts(); carried != 1 || appended != 2 {
			t.Fatalf("after Flush: %d carried, %d appended; want 1 and 2", carried, appended)
		}
	})
}
