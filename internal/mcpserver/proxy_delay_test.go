package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
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
	appendedTypes     []string
	appendedRaw       []string
	gated             int // calls put through the gate
}

func (s *recordingService) GateToolCall(_ context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gated++
	s.carried = append(s.carried, req.Results...)
	return &api.ToolCallResponse{Decision: "allow", GateStatus: "authorized", Metered: true}, nil
}

func (s *recordingService) AppendNext(_ context.Context, ev client.Event) (*api.AppendResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appended = append(s.appended, ev.EventID)
	s.appendedTypes = append(s.appendedTypes, ev.EventType)
	raw, _ := json.Marshal(ev.Raw)
	s.appendedRaw = append(s.appendedRaw, string(raw))
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

// failingCallService fails the tool call that carries results after a
// while (the answer lost), so that the results go back to the queue after
// the timer armed for them has fired.
type failingCallService struct {
	recordingService
	failed bool
}

func (s *failingCallService) GateToolCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	if len(req.Results) > 0 && !s.failed {
		s.failed = true
		time.Sleep(2 * mcpserver.ResultDelay)
		return nil, errors.New("connection reset (the answer was lost)")
	}
	return s.recordingService.GateToolCall(ctx, req)
}

// A call that carried results and failed after their timer fired puts them
// back with a timer of their own: they are sent alone, not left waiting for
// a call that may never come.
func TestProxyResultsOfAFailedCallAreSentAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := &failingCallService{}
		host, _ := proxied(t, newUpstream(), svc, "worker", false)
		ctx := context.Background()
		for i := range 2 {
			res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"msg": "m"}})
			if err != nil || res.IsError != (i == 1) {
				t.Fatalf("call %d: %+v, %v (the second is refused: fail closed)", i, res, err)
			}
		}
		synctest.Wait()
		if !svc.failed {
			t.Fatal("the second call carried no result")
		}
		// The first call's result waits again, and nothing else will carry
		// it (the second call was refused, so it has no result): one
		// ResultDelay later it is sent alone.
		time.Sleep(mcpserver.ResultDelay)
		synctest.Wait()
		svc.mu.Lock()
		got := slices.Clone(svc.appendedTypes)
		svc.mu.Unlock()
		if !slices.Equal(got, []string{api.EventToolResult}) {
			t.Fatalf("appended %v after the failed call, want the first call's tool_result", got)
		}
	})
}
