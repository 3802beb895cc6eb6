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

// GateStatus implements Service.
func (s ClientService) GateStatus(ctx context.Context, subagent, tool string) (*api.GrantStatus, error) {
	q := api.GrantStatusQuery{Subagent: subagent}
	if tool != "" {
		q.Tool = &tool
	}
	return s.C.GrantStatus(ctx, q)
}

// UseOne implements Service.
func (s ClientService) UseOne(ctx context.Context, grantID, subagent string) error {
	_, err := s.C.UseGrant(ctx, grantID, api.UseRequest{Subagent: subagent, N: 1})
	return err
}

// Append implements Service: the client fills sequence and prev_hash from
// the tip and follows it. The event keeps the hook's id, raw, decision,
// tool and parent; its ts is the client's clock, which the hook sets to the
// event's ts.
func (s ClientService) Append(ctx context.Context, ev *api.EventInput) error {
	if ev.Raw == nil {
		return errors.New("hook: an event without raw")
	}
	_, err := s.C.Append(ctx, client.Event{EventID: ev.EventID, EventType: ev.EventType, Raw: ev.Raw,
		Decision: ev.Decision, Tool: ev.Tool, ParentID: ev.ParentID})
	return err
}

// Tip implements Service.
func (s ClientService) Tip(ctx context.Context) (*api.ChainTip, error) { return s.C.Tip(ctx) }

// AppendBatch implements Service.
func (s ClientService) AppendBatch(ctx context.Context, rows []api.EventInput) (*api.BatchResponse, error) {
	return s.C.AppendBatch(ctx, api.BatchRequest{Events: rows})
}
