package hook

import (
	"context"
	"errors"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// ClientService is the Service of a real auditchain, through pkg/client
// (surface hook).
type ClientService struct {
	C *client.Client
}

// GateCall implements Service.
func (s *ClientService) GateCall(ctx context.Context, req api.ToolCallRequest) (*api.ToolCallResponse, error) {
	return s.C.GateToolCall(ctx, req)
}

// AppendNext implements Service: the event as the hook made it — id, raw,
// decision, tool, parent and ts — so that a spooled event sent again in a
// later process is the same event, which the service answers with the one
// stored.
func (s *ClientService) AppendNext(ctx context.Context, ev *api.NextEventInput) error {
	if ev.Raw == nil {
		return errors.New("hook: an event without raw")
	}
	_, err := s.C.AppendNext(ctx, client.Event{EventID: ev.EventID, EventType: ev.EventType, Raw: ev.Raw,
		Decision: ev.Decision, Tool: ev.Tool, ParentID: ev.ParentID, TS: ev.TS})
	return err
}
