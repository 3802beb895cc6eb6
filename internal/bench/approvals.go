package bench

// The workloads of per-call approvals (issue #38's speed bars):
// approved-call times the second pass of an approved call (the call sent
// again with approval_id), to compare with tool-call's plain allowed call;
// approvals-list times GET /v1/approvals?status=pending over 10,000 pending
// approvals.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// approvalRuleTTL is the bench rules' ttl_seconds: an hour, longer than any
// run, so no prepared approval expires before it is used.
const approvalRuleTTL = 3600

// createApprovalRule makes every call of benchSubagent's tool bash on the
// account held for approval.
func createApprovalRule(ctx context.Context, e *env, key string, resp *bytes.Buffer) error {
	body := []byte(`{"subagent":"` + benchSubagent + `","tool":"bash","ttl_seconds":` + strconv.Itoa(approvalRuleTTL) + `}`)
	if _, err := e.c.do(ctx, "POST", "/v1/approval-rules", key, body, resp); err != nil {
		if ab := notBuilt(err); ab != nil {
			return ab
		}
		return fmt.Errorf("create approval rule: %w: %s", err, resp.Bytes())
	}
	return nil
}

// heldCallRaw is the raw of the i-th held call: its tool_input_sha256, a
// digest of its own, which the approval binds.
func heldCallRaw(i int) []byte {
	sum := sha256.Sum256(strconv.AppendInt([]byte("bench-held-"), int64(i), 10))
	return append(hex.AppendEncode([]byte(`{"tool_input_sha256":"`), sum[:]), `"}`...)
}

// holdCall sends the i-th call of benchSubagent's bash, which the account's
// rule holds, and returns the pending approval's id.
func holdCall(ctx context.Context, e *env, key string, i int, resp *bytes.Buffer) (string, error) {
	body := []byte(`{"subagent":"` + benchSubagent + `","tool":"bash","event_id":"evt-held-` + e.prefix + "-" + strconv.Itoa(i) +
		`","raw":` + string(heldCallRaw(i)) + `}`)
	if _, err := e.c.do(ctx, "POST", "/v1/tool-calls", key, body, resp); err != nil {
		return "", fmt.Errorf("held call: %w: %s", err, resp.Bytes())
	}
	var r struct {
		Decision string `json:"decision"`
		Approval *struct {
			ID string `json:"approval_id"`
		} `json:"approval"`
	}
	if json.Unmarshal(resp.Bytes(), &r) != nil || r.Decision != "ask" || r.Approval == nil || r.Approval.ID == "" {
		return "", fmt.Errorf("held call: not answered ask with an approval: %.300s", resp.Bytes())
	}
	return r.Approval.ID, nil
}

// approvedCall is one prepared resend: its account and its request.
type approvedCall struct {
	acct int
	body []byte
}

// runApprovedCall is loadRun over approvedCallSetup, reporting as prefill
// the approvals prepared.
func runApprovedCall(ctx context.Context, e *env, res Result) (Result, error) {
	res, err := loadRun(approvedCallSetup(false))(ctx, e, res)
	res.Prefill = e.prefill
	return res, err
}

// runApprovedCallControl is approved-call's control: the same preparation,
// then plain allowed calls on the same accounts.
func runApprovedCallControl(ctx context.Context, e *env, res Result) (Result, error) {
	res, err := loadRun(approvedCallSetup(true))(ctx, e, res)
	res.Prefill = e.prefill
	return res, err
}

// approvedCallSetup gives every account a live grant, a rule holding
// benchSubagent's bash and a second key, then prepares one approved approval
// per operation, round-robin over the accounts: the call is held (decision
// ask) and the second key approves it. The run times only the second pass:
// the same call sent again with approval_id and a new event_id (decision
// allow: the gate, the approval's use, one metered use and the tool_call in
// one commit). As with revoke, an open loop prepares rate × (warmup +
// duration) and a margin, a closed loop --prefill (default 20,000).
//
// With plain (approved-call-control) each operation is instead a plain
// allowed call on the same accounts after the same preparation: the same
// sub-agent running read_file, which no rule holds, with a raw of the same
// shape and a new event id. Its ratio to approved-call is the resend's
// cost over a plain call, on the same store in the same state.
func approvedCallSetup(plain bool) setupFunc {
	return func(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
		return prepareApprovedCalls(ctx, e, plain)
	}
}

func prepareApprovedCalls(ctx context.Context, e *env, plain bool) (func(w *worker) opFunc, error) {
	n := e.prefill
	if e.rate > 0 {
		n = int(math.Ceil(e.rate*(e.o.Warmup+e.o.Duration).Seconds())) + e.clients + 64
	}
	if n <= 0 {
		return nil, errors.New("approved-call spends one prepared approval per operation: give --prefill N (closed loop) or --rate R")
	}
	e.prefill = n
	if _, err := benchGrants(ctx, e); err != nil {
		return nil, err
	}
	var resp bytes.Buffer
	for i := range e.accounts {
		if err := createApprovalRule(ctx, e, e.accounts[i].key, &resp); err != nil {
			return nil, err
		}
		if err := addKeys(ctx, e.c, &e.accounts[i], 1); err != nil {
			return nil, err
		}
	}
	calls := make([]approvedCall, n)
	err := parallelPrep(ctx, e, "approved-call: held and approved calls", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		a := i % len(e.accounts)
		acct := &e.accounts[a]
		id, err := holdCall(ctx, e, acct.key, i, resp)
		if err != nil {
			return err
		}
		// The approver is the account's second key: the key that made the
		// call may not decide (separation_of_powers).
		if _, err := e.c.do(ctx, "POST", "/v1/approvals/"+id+"/approve", acct.keys[len(acct.keys)-1], []byte(`{}`), resp); err != nil {
			return fmt.Errorf("approve %s: %w: %s", id, err, resp.Bytes())
		}
		calls[i] = approvedCall{acct: a, body: []byte(`{"subagent":"` + benchSubagent + `","tool":"bash","event_id":"evt-sent-` +
			e.prefix + "-" + strconv.Itoa(i) + `","approval_id":"` + id + `","raw":` + string(heldCallRaw(i)) + `}`)}
		if plain {
			calls[i].body = []byte(`{"subagent":"` + benchSubagent + `","tool":"read_file","event_id":"evt-plain-` +
				e.prefix + "-" + strconv.Itoa(i) + `","raw":` + string(heldCallRaw(i)) + `}`)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := settleAfterPrep(ctx, e); err != nil {
		return nil, err
	}
	allowed := []byte(`"decision":"allow"`)
	var taken atomic.Int64
	var spent sync.Once
	return func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			i := taken.Add(1) - 1
			if i >= int64(len(calls)) {
				if e.rate > 0 {
					return 0, errAbort{errors.New("approved-call ran out of prepared approvals")}
				}
				spent.Do(func() {
					fmt.Fprintf(e.progress, "bench: approved-call: the %d prepared approvals are spent: the run ends early\n", len(calls))
				})
				return 0, errDone
			}
			c := &calls[i]
			_, err := w.c.do(ctx, "POST", "/v1/tool-calls", e.accounts[c.acct].key, c.body, &w.resp)
			if ab := notBuilt(err); ab != nil {
				return 0, ab
			}
			if err == nil {
				e.stored.Add(1)
				if !bytes.Contains(w.resp.Bytes(), allowed) {
					err = fmt.Errorf("%s: call not answered allow: %.300s", e.w.name, w.resp.Bytes())
				}
			}
			return 1, err
		}
	}, nil
}

// runApprovalsList is loadRun over approvalsListSetup, reporting as prefill
// the pending approvals.
func runApprovalsList(ctx context.Context, e *env, res Result) (Result, error) {
	res, err := loadRun(approvalsListSetup)(ctx, e, res)
	res.Prefill = e.prefill
	return res, err
}

// approvalsListSetup holds --prefill calls (default 10,000) on the one
// account, each a pending approval, then each operation lists them: GET
// /v1/approvals?status=pending (newest first, the default limit of 100: the
// console's approvals panel's read).
func approvalsListSetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	n := e.prefill
	if _, err := benchGrants(ctx, e); err != nil {
		return nil, err
	}
	key := e.accounts[0].key
	var resp bytes.Buffer
	if err := createApprovalRule(ctx, e, key, &resp); err != nil {
		return nil, err
	}
	err := parallelPrep(ctx, e, "approvals-list: held calls", n, func(ctx context.Context, i int, resp *bytes.Buffer) error {
		_, err := holdCall(ctx, e, key, i, resp)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := settleAfterPrep(ctx, e); err != nil {
		return nil, err
	}
	want := []byte(`"status":"pending"`)
	return func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			_, err := w.c.do(ctx, "GET", "/v1/approvals?status=pending", key, nil, &w.resp)
			if ab := notBuilt(err); ab != nil {
				return 0, ab
			}
			if err == nil && n > 0 && !bytes.Contains(w.resp.Bytes(), want) {
				err = fmt.Errorf("approvals list without a pending approval: %.300s", w.resp.Bytes())
			}
			return 1, err
		}
	}, nil
}

// settleAfterPrep waits for the server to go idle after the preparation
// (settle): the held calls' notices (mail, webhooks) and the work behind
// their appends are then not counted against the measured operations.
func settleAfterPrep(ctx context.Context, e *env) error {
	if e.serverPID <= 0 {
		return nil
	}
	settled, err := settle(ctx, e.serverPID, serverSettleLimit)
	if err == nil {
		fmt.Fprintf(e.progress, "bench: %s: the server idle %v after the preparation\n", e.w.name, settled.Round(time.Millisecond))
	}
	return err
}
