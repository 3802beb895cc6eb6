package app

// Events the service writes itself (governance.*, grant.*, chain_repair,
// anchors), numbered at the tip through the same append as client events.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// serviceSurface marks events the service writes itself.
const serviceSurface = "service"

// ServerEvent describes an event the service writes itself.
type ServerEvent struct {
	EventType string
	Raw       any
	Tool      *string
}

// appendServerEvent appends an event the service writes (governance.*,
// grant.*, chain_repair, anchors) at the tip of the account's chain, inside
// the caller's write, through the same append as client events: numbered
// after the head it holds, never charged to the quota (docs/decisions/
// record.md "Quota").
func (a *App) appendServerEvent(ctx context.Context, t *writer.Tx, p Principal, ev ServerEvent) (store.Event, error) {
	raw, err := json.Marshal(ev.Raw)
	if err != nil {
		return store.Event{}, fmt.Errorf("server event raw: %w", err)
	}
	id, err := a.newID("evt-", 16)
	if err != nil {
		return store.Event{}, err
	}
	in := api.EventInput{EventID: &id, EventType: &ev.EventType, Raw: raw, Tool: ev.Tool}
	out, err := a.appendAtTip(ctx, t, p, in, serviceSurface, nil, a.now())
	return out.Event, err
}

// appendAtTip appends in inside t, numbered (numberAtTip) after the head t
// holds, in the append: how the service's own events, a gated tool call and
// its results are placed. quota charges the event (nil: a service event,
// never charged).
func (a *App) appendAtTip(ctx context.Context, t *writer.Tx, p Principal, in api.EventInput, surface string, quota *store.Quota,
	now time.Time) (writer.Appended, error) {
	var e store.Event
	e.UserID = p.UserID
	out, err := t.Append(ctx, writer.Append{Event: &e, Quota: quota, Place: func(_ context.Context, head store.Head, _ store.Querier) error {
		next, err := a.numberAtTip(p, head, in, surface, now)
		if err == nil {
			e = next
		}
		return err
	}})
	if err == nil {
		kind := metrics.AppendToolCall // the only charged events placed here
		if quota == nil {
			kind = metrics.AppendService
		}
		t.AfterCommit(func() { metrics.EventsAppended.Inc(kind) })
	}
	return out, err
}

// numberAtTip numbers in after head — sequence tip + 1 and prev_hash the
// tip's payload_hash; 0 and null on an empty chain — and prepares the row.
// It is the service's numbering, the one way every event the caller does
// not place itself is placed: the service's own events, a gated tool call
// and its results, and POST /v1/events/append. The 2^52 cap binds only the
// sequences clients choose (CONTRACT.md "Batch": the space above is the
// service's), so it is not checked here; only the top of int64 is.
func (a *App) numberAtTip(p Principal, head store.Head, in api.EventInput, surface string, now time.Time) (store.Event, error) {
	if head.LastSequence == math.MaxInt64 {
		return store.Event{}, fmt.Errorf("the chain of %s ends at the largest sequence: nothing can be appended after it", p.UserID)
	}
	seq := head.LastSequence + 1
	in.Sequence, in.PrevHash = &seq, head.LastHash
	return a.prepareEvent(p, &in, surface, now)
}
