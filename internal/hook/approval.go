package hook

// A call an approval rule holds (docs/approvals.md; docs/hooks.md
// "Approvals"): the service answers ask with a pending approval. The hook
// waits for a person's decision up to --approval-wait (within its own
// deadline, which must stay below the host's hook timeout), then runs the
// call sent again with the approval id, or refuses it telling the model the
// approval id and that it may try later. The approval is kept in the spool
// directory under the call's sub-agent, tool and input digest, so that the
// model's retry of the same call uses it instead of asking again.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// approvalMargin is what the hook keeps of its deadline after waiting: the
// call sent again and the answer to the host.
const approvalMargin = time.Second

func (s *Spool) approvalsDir() string { return filepath.Join(s.Dir, "approvals") }

// approvalKey names a call by what an approval binds.
func approvalKey(subagent, tool, digest string) string {
	h := sha256.Sum256([]byte(subagent + "\x00" + tool + "\x00" + digest))
	return hex.EncodeToString(h[:16])
}

// heldApproval is the approval kept for key ("" when none).
func (r *Runner) heldApproval(key string) string {
	if r.Spool == nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(r.Spool.approvalsDir(), key))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (r *Runner) keepApproval(key, id string) {
	if r.Spool != nil {
		writeHint(filepath.Join(r.Spool.approvalsDir(), key), []byte(id))
	}
}

func (r *Runner) forgetApproval(key string) {
	if r.Spool != nil {
		os.Remove(filepath.Join(r.Spool.approvalsDir(), key))
	}
}

// gateOnce sends the call once (with approvalID when not nil) as eventID.
type gateOnce func(eventID string, approvalID *string) (*api.ToolCallResponse, error)

// throughApproval gates a call that may be held for approval: it uses the
// approval kept for the same call, or asks anew, and waits for the decision
// as r.ApprovalWait allows. It returns the service's last answer and the
// approval in play ("" when none).
func (r *Runner) throughApproval(ctx context.Context, key, eventID string, send gateOnce) (*api.ToolCallResponse, string, error) {
	if held := r.heldApproval(key); held != "" {
		res, err := send(eventID, &held)
		if err != nil {
			return nil, "", err
		}
		switch res.GateStatus {
		case api.GateApprovalPending:
			res, err = r.awaitApproval(ctx, key, held, eventID, res, send)
			return res, held, err
		case api.GateApprovalExpired, api.GateApprovalUsed, api.GateApprovalMismatch:
			// Spent or stale: this call asks anew, under an id of its own.
			r.forgetApproval(key)
			eventID += ".ask"
		default: // allowed, denied by a person, or refused by the gate
			r.forgetApproval(key)
			return res, held, nil
		}
	}
	res, err := send(eventID, nil)
	if err != nil || res.Decision != api.DecisionAsk || res.Approval == nil {
		return res, "", err
	}
	id := res.Approval.ApprovalID
	r.keepApproval(key, id)
	res, err = r.awaitApproval(ctx, key, id, eventID, res, send)
	return res, id, err
}

// awaitApproval waits for approval id (pending; last is the answer that
// said so) up to r.ApprovalWait, within ctx's deadline less approvalMargin,
// and sends the call again once it is approved.
func (r *Runner) awaitApproval(ctx context.Context, key, id, eventID string, last *api.ToolCallResponse, send gateOnce) (*api.ToolCallResponse, error) {
	if r.ApprovalWait <= 0 {
		return last, nil
	}
	deadline := r.now().Add(r.ApprovalWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-approvalMargin).Before(deadline) {
		deadline = d.Add(-approvalMargin)
	}
	for {
		left := deadline.Sub(r.now())
		if left < time.Second {
			return last, nil
		}
		ap, err := r.Service.Approval(ctx, id, min(left, api.MaxApprovalWait*time.Second))
		if err != nil {
			r.logf("wait for approval %s: %v", id, err)
			return last, nil // refused as pending: the model may try again
		}
		switch ap.Status {
		case api.ApprovalPending:
			continue
		case api.ApprovalApproved:
			res, err := send(eventID+".approved", &id)
			if err == nil && res.Decision == api.DecisionAllow {
				r.forgetApproval(key)
			}
			return res, err
		default: // denied or expired: the next try asks anew
			r.forgetApproval(key)
			last.GateStatus, last.Decision = "approval_"+ap.Status, api.DecisionDeny
			last.Reason = fmt.Sprintf("approval %s is %s", id, ap.Status)
			return last, nil
		}
	}
}

// approvalRefusal is what a call refused for its approval id tells the
// model; ok is false for any other answer.
func approvalRefusal(res *api.ToolCallResponse, id string) (reason string, ok bool) {
	switch {
	case id != "" && (res.Decision == api.DecisionAsk || res.GateStatus == api.GateApprovalPending):
		return fmt.Sprintf("auditchain: this call waits for a person's approval (approval %s) and did not run; "+
			"someone other than this agent must approve it (auditchain approvals approve %s); "+
			"you may try the same call again later", id, id), true
	case strings.HasPrefix(res.GateStatus, "approval_"):
		return refusal(res.GateStatus, res.Reason, ""), true
	}
	return "", false
}
