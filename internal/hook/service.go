package hook

import (
	"context"
	"errors"
	"time"

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

// Approval implements Service.
func (s *ClientService) Approval(ctx context.Context, id string, wait time.Duration) (*api.Approval, error) {
	return s.C.Approval(ctx, id, wait)
}

// AppendNext implements Service: the event as the hook made it — id, raw,
// decision, tool, parent and ts — so that a spooled event sent again in a
// later process is the same event, which the service answers with the one
// stored.
func (s *ClientService) AppendNext(ctx context.Context, ev *api.EventInput) error {
	if ev.Raw == nil {
		return errors.New("hook: an event without raw")
	}
	_, err := s.C.AppendNext(ctx, client.Event{EventID: valueOf(ev.EventID), EventType: valueOf(ev.EventType), Raw: ev.Raw,
		Decision: ev.Decision, Tool: ev.Tool, ParentID: ev.ParentID, TS: ev.TS})
	return err
}

// valueOf is *p, or "" for nil (a spool file without the field).
func valueOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
