package mcpserver

// A call an approval rule holds (docs/approvals.md; docs/mcp.md
// "Approvals"): the service answers ask with a pending approval. The proxy
// waits for a person's decision up to --approval-wait, then relays the call
// sent again with the approval id, or refuses it telling the model the
// approval id and that it may try later. It keeps the approval of each held
// call (by tool and arguments digest) for the model's retry of the same
// call, which then uses it instead of asking again.

import (
	"context"
	"sync"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// heldApprovals are the approvals of held calls by tool and arguments
// digest. Bounded: past maxHeldApprovals it starts again (a retry then asks
// anew).
type heldApprovals struct {
	mu sync.Mutex
	m  map[string]string
}

const maxHeldApprovals = 10_000

func (h *heldApprovals) get(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key]
}

func (h *heldApprovals) set(key, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHeldApprovals {
		h.m = map[string]string{}
	}
	h.m[key] = id
}

func (h *heldApprovals) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, key)
}

// proxySend sends the call once as eventID (with approvalID when not nil,
// and the results riding along).
type proxySend func(eventID string, approvalID *string, results []api.ToolResult) (*api.ToolCallResponse, error)

// throughApproval gates a call that may be held for approval: it uses the
// approval kept for the same call, or asks anew, and waits for the decision
// as ApprovalWait allows. It returns the service's last answer, the
// approval in play ("" when none) and the event id of the last call sent.
func (p *Proxy) throughApproval(ctx context.Context, c heldCall, callID string, results []api.ToolResult, send proxySend) (
	*api.ToolCallResponse, string, string, error) {
	key := c.tool + "\x00" + c.argsHash
	if held := p.approvals.get(key); held != "" {
		res, err := send(callID, &held, results)
		if err != nil {
			return nil, "", callID, err
		}
		switch res.GateStatus {
		case api.GateApprovalPending:
			res, callID, err = p.awaitApproval(ctx, key, held, callID, c, res, send)
			return res, held, callID, err
		case api.GateApprovalExpired, api.GateApprovalUsed, api.GateApprovalMismatch:
			// Spent or stale: this call asks anew, under an id of its own
			// (the results went with the first).
			p.approvals.forget(key)
			callID, results = callID+".ask", nil
		default: // allowed, denied by a person, or refused by the gate
			p.approvals.forget(key)
			return res, held, callID, nil
		}
	}
	res, err := send(callID, nil, results)
	if err != nil || res.Decision != api.DecisionAsk || res.Approval == nil {
		return res, "", callID, err
	}
	id := res.Approval.ApprovalID
	p.approvals.set(key, id)
	res, callID, err = p.awaitApproval(ctx, key, id, callID, c, res, send)
	return res, id, callID, err
}

// awaitApproval waits for the pending approval id (last is the answer that
// said so) up to ApprovalWait — asking the host's user when the proxy
// elicits (proxy_elicit.go) — and sends the call again once it is
// approved; it returns the last answer and the id of the last call sent.
func (p *Proxy) awaitApproval(ctx context.Context, key, id, callID string, c heldCall, last *api.ToolCallResponse, send proxySend) (
	*api.ToolCallResponse, string, error) {
	if p.opts.ApprovalWait <= 0 {
		return last, callID, nil
	}
	deadline := p.now().Add(p.opts.ApprovalWait)
	// The host cancelling the call ends the wait: the approval stays
	// pending for a later try.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if c.canceled != nil {
		go func() {
			select {
			case <-c.canceled:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	var status string
	if p.elicits() {
		status = p.elicitDecision(ctx, id, c, deadline)
	} else {
		status = p.waitDecision(ctx, id, deadline)
	}
	switch status {
	case api.ApprovalPending:
		return last, callID, nil
	case api.ApprovalApproved:
		callID += ".approved"
		res, err := send(callID, &id, nil)
		if err == nil && res.Decision == api.DecisionAllow {
			p.approvals.forget(key)
		}
		return res, callID, err
	default: // denied or expired (or used): the next try asks anew
		p.approvals.forget(key)
		last.Decision, last.GateStatus = api.DecisionDeny, "approval_"+status
		last.Reason = "approval " + id + " is " + status
		return last, callID, nil
	}
}

// waitDecision long-polls approval id (GET /v1/approvals/{id}?wait=) until
// it is no longer pending or deadline nears, and answers its status
// (pending when the wait ended undecided, or could not be read).
func (p *Proxy) waitDecision(ctx context.Context, id string, deadline time.Time) string {
	for {
		left := deadline.Sub(p.now())
		if left < time.Second {
			return api.ApprovalPending
		}
		ap, err := p.opts.Service.Approval(ctx, id, min(left, api.MaxApprovalWait*time.Second))
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("waiting for an approval failed; the call is refused as pending", "approval_id", id, "err", err)
			}
			return api.ApprovalPending
		}
		if ap.Status != api.ApprovalPending {
			return ap.Status
		}
	}
}
