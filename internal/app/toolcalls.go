package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// A tool call through the gate (POST /v1/tool-calls, docs/decisions/
// tool-calls.md): the gate's check, the meter's use and the tool_call event
// in one transaction, so that an agent surface (the MCP proxy, the hooks)
// waits for one round trip and one commit before its tool runs, and a call
// is never metered without being recorded, or recorded as allowed without
// being metered.

// The raw members the service writes into a gated tool_call: what the gate
// decided, from the service's own reading. A client raw carrying one of them
// is refused (nothing is written), so a reader of the record knows these
// came from the gate.
const (
	rawSubagent   = "subagent"
	rawGateStatus = "gate_status"
	rawGrantID    = "grant_id"
	rawProposalID = "proposal_id"
	rawNoGrant    = "no_grant"
	// rawApprovalID names the approval a held call created, or the one a
	// call sent again with approval_id used or was refused by.
	rawApprovalID = "approval_id"
	// rawToolInputSHA256 is the client's digest of the tool's input, which
	// an approval binds (CONTRACT.md "Approvals").
	rawToolInputSHA256 = "tool_input_sha256"
)

var toolCallServerMembers = []string{rawSubagent, rawGateStatus, rawGrantID, rawProposalID, rawNoGrant, rawApprovalID}

// toolCall is a gated tool call as the use case carries it: the request
// (POST /v1/tool-calls), the caller's X-SVC-Surface, stored with its events,
// and no_grant checked, with its default (checkToolCall).
type toolCall struct {
	api.ToolCallRequest
	surface string
	noGrant string
}

// ToolCallResult is the outcome of a gated tool call.
type ToolCallResult struct {
	Decision string
	// Gate is the gate's answer the decision was made on; after a use its
	// Uses and Remaining include it. On a replay only Status, Subagent and
	// the grant and proposal ids are known (from the stored event).
	Gate     domain.GateAnswer
	GrantID  string
	Metered  bool
	Event    api.StoredEvent
	Quota    api.Quota
	Epoch    api.EpochStamp
	Replayed bool
	// ApprovalID is the approval the call created (decision ask) or was
	// sent with; Approval is set for ask.
	ApprovalID string
	Approval   *api.ApprovalTicket
}

// MalformedToolCall is the 422 validation_error of a tool-call body.
func MalformedToolCall(field, reason string) *domain.Error {
	return domain.Validation(domain.FieldError{Field: field, Message: reason})
}

// GateToolCall checks the gate for req.Subagent and req.Tool, consumes one
// call of the matched grant's budget when it authorizes, and appends the
// tool_call event recording the decision, all in one transaction holding
// the account's head: the same lock a use and an enactment take, so the
// decision obeys every grant, use and rule committed before it. Refusals by
// the gate are decisions (deny), recorded like an allow; the route's errors
// are for requests that write nothing (422, 429, 409 event_id_conflict).
// surface is the caller's X-SVC-Surface, stored with the events.
func (a *App) GateToolCall(ctx context.Context, p Principal, req api.ToolCallRequest, surface string) (ToolCallResult, error) {
	res, err := a.gateToolCall(ctx, p, toolCall{ToolCallRequest: req, surface: surface})
	a.noteRefusal(ctx, p.UserID, err)
	return res, err
}

func (a *App) gateToolCall(ctx context.Context, p Principal, req toolCall) (ToolCallResult, error) {
	now := a.now()
	client, err := checkToolCall(&req)
	if err != nil {
		// An account over its daily quota gets 429 whatever it sent, as on
		// POST /v1/events (CONTRACT.md "Batch").
		_, err = a.refuseAppend(ctx, nil, p.UserID, &api.EventInput{}, now, err)
		return ToolCallResult{}, err
	}
	// The usual request stores everything it carries in one write. When an
	// id it carries is stored already (a resend after a lost answer), one
	// read of them all says which: the same results are left out, the same
	// call is answered as stored (its results not yet stored are recorded
	// first), anything else is 409 event_id_conflict. Another writer storing
	// one of the ids in between costs one more round; the bound is only
	// there against a loop.
	var call *store.Event // the call, once read stored as sent
	for round := 0; ; round++ {
		var out ToolCallResult
		if call != nil {
			err = a.w.Write(ctx, func(t *writer.Tx) error { return a.appendToolResults(ctx, t, p, req, now) })
		} else {
			out, err = a.writeToolCall(ctx, p, req, client, now)
		}
		var over *writer.QuotaExceeded
		switch {
		case err == nil && call != nil:
			return a.replayToolCall(ctx, p, req, call, now)
		case err == nil:
			return out, nil
		case errors.As(err, &over):
			// A resend of a stored call whose results are stored too is
			// answered with it even over the quota: nothing is left to write.
			if rest, stored, serr := a.dropStored(ctx, p.UserID, req); serr == nil && stored != nil && len(rest.Results) == 0 {
				return a.replayToolCall(ctx, p, rest, stored, now)
			} else if serr != nil && !isConflict(serr) {
				return ToolCallResult{}, serr
			}
			return ToolCallResult{}, a.quotaExceeded(over.Used)
		case errors.Is(err, writer.ErrEventIDTaken) && round < 3:
			if req, call, err = a.dropStored(ctx, p.UserID, req); err != nil {
				return ToolCallResult{}, err
			}
			if call != nil && len(req.Results) == 0 {
				return a.replayToolCall(ctx, p, req, call, now)
			}
		default:
			return ToolCallResult{}, err
		}
	}
}

// writeToolCall is the usual request: its results, then the gate's check,
// the use and the tool_call, in one write.
func (a *App) writeToolCall(ctx context.Context, p Principal, req toolCall, client map[string]json.RawMessage, now time.Time) (ToolCallResult, error) {
	eventType := api.EventToolCall
	var out ToolCallResult
	var appended writer.Appended
	err := a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		out = ToolCallResult{}
		if err := a.appendToolResults(ctx, t, p, req, now); err != nil {
			return err
		}
		// The head is held from here: the gate reads under it, and the call
		// is numbered after it.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		ans, rows, err := a.gate(ctx, t.SQL(), p.UserID, *req.Subagent, req.Tool, nil, now)
		if err != nil {
			return err
		}
		var held *store.Approval
		if req.ApprovalID != nil {
			out.ApprovalID = *req.ApprovalID
		}
		switch {
		case ans.Authorized && req.ApprovalID != nil:
			ans, err = a.useApproval(ctx, t, p.UserID, req, client, ans, rows, now)
		case ans.Authorized:
			if held, err = a.holdForApproval(ctx, t, p, req, client, now); err == nil && held == nil {
				ans, err = a.meterToolCall(ctx, t, p.UserID, ans, rows, now)
			}
		}
		if err != nil {
			return err
		}
		out.Gate = ans
		if ans.Grant != nil {
			out.GrantID = ans.Grant.GrantID
		}
		out.Metered = ans.Authorized
		switch {
		case held != nil:
			out.Decision, out.ApprovalID = api.DecisionAsk, held.ApprovalID
			out.Gate.Status, out.Gate.Authorized, out.Metered = api.GateApprovalPending, false, false
			out.Gate.Reason = fmt.Sprintf("an approval rule holds this call until a person approves it: approval %s, until %s; "+
				"send the same call again with approval_id once it is approved", held.ApprovalID, domain.FormatTimestamp(held.ExpiresAt))
			out.Approval = &api.ApprovalTicket{ApprovalID: held.ApprovalID, Status: api.ApprovalPending,
				ExpiresAt: domain.FormatTimestamp(held.ExpiresAt), ArgsSHA256: held.ArgsSHA256}
		case ans.Authorized:
			out.Decision = api.DecisionAllow
		case ans.Status == domain.GateNoGrant:
			out.Decision = req.noGrant
		default:
			out.Decision = api.DecisionDeny
		}
		raw, err := withGateMembers(client, req, &out)
		if err != nil {
			return err
		}
		// The client's fields were checked before the write (checkToolCall).
		in := api.EventInput{EventID: req.EventID, EventType: &eventType, Raw: raw, Decision: &out.Decision,
			Tool: req.Tool, ParentID: req.ParentID, TS: req.TS}
		appended, err = a.appendAtTip(ctx, t, p, in, req.surface, a.quotaOf(now), now)
		return err
	})
	if err != nil {
		return ToolCallResult{}, err
	}
	a.countGate(p.UserID, out.Gate.Status)
	if out.Metered {
		a.countUses(p.UserID, 1)
	}
	out.Event = appended.Event.StoredEvent
	out.Quota = a.quota(appended.QuotaUsed)
	out.Epoch = domain.NewEpochStamp(a.cfg.EpochAnchor, now)
	return out, nil
}

// appendToolResults appends req's results inside t, in order, each at the
// tip and charged to the quota.
func (a *App) appendToolResults(ctx context.Context, t *writer.Tx, p Principal, req toolCall, now time.Time) error {
	for i := range req.Results {
		// The sequence given is a stand-in: appendAtTip numbers the result.
		if _, err := a.appendAtTip(ctx, t, p, resultInput(&req.Results[i], 0), req.surface, a.quotaOf(now), now); err != nil {
			return err
		}
	}
	return nil
}

// dropStored reads which of req's ids are stored (one query): it returns
// req without the results stored as sent, and the call when it is stored as
// sent (nil when it is not stored); an id stored with other content is 409
// event_id_conflict.
func (a *App) dropStored(ctx context.Context, userID string, req toolCall) (toolCall, *store.Event, error) {
	ids := []string{*req.EventID}
	for _, r := range req.Results {
		ids = append(ids, *r.EventID)
	}
	stored, err := a.store.EventsByIDs(ctx, nil, userID, ids)
	if err != nil {
		return req, nil, err
	}
	var rest []api.ToolResult
	for _, r := range req.Results {
		e, ok := stored[*r.EventID]
		if !ok {
			rest = append(rest, r)
			continue
		}
		in := resultInput(&r, e.Sequence)
		in.PrevHash = e.PrevHash
		if e.EventType != api.EventToolResult || !sameEvent(&e, &in) {
			return req, nil, conflictOf(&e)
		}
	}
	req.Results = rest
	call, ok := stored[*req.EventID]
	if !ok {
		return req, nil, nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(call.Raw, &members) != nil || !sameToolCall(&call, req, members) {
		return req, nil, conflictOf(&call)
	}
	return req, &call, nil
}

func isConflict(err error) bool {
	var de *domain.Error
	return errors.As(err, &de) && de.Code == domain.CodeEventIDConflict
}

// checkToolCall checks req's fields before anything is read or written
// (defaulting NoGrant) and returns the client's raw members.
func checkToolCall(req *toolCall) (map[string]json.RawMessage, error) {
	// The HTTP body's check names these when absent; here only against a nil.
	for _, f := range []struct {
		name string
		v    *string
	}{{"subagent", req.Subagent}, {"tool", req.Tool}, {"event_id", req.EventID}} {
		if f.v == nil {
			return nil, MalformedToolCall(f.name, "required")
		}
	}
	if err := checkName("subagent", *req.Subagent, MalformedToolCall); err != nil {
		return nil, err
	}
	if err := checkName("tool", *req.Tool, MalformedToolCall); err != nil {
		return nil, err
	}
	req.noGrant = api.DecisionDeny
	if req.NoGrant != nil {
		switch *req.NoGrant {
		case api.DecisionAllow, api.DecisionAsk, api.DecisionDeny:
			req.noGrant = *req.NoGrant
		default:
			return nil, MalformedToolCall("no_grant", "must be allow, ask or deny")
		}
	}
	// The event's shape, with the sequence the write assigns standing in.
	eventType, zero := api.EventToolCall, int64(0)
	probe := api.EventInput{EventID: presentID(req.EventID), EventType: &eventType, Sequence: &zero, Raw: req.Raw,
		Tool: req.Tool, ParentID: req.ParentID, TS: req.TS, Decision: &req.noGrant}
	if errs := domain.ValidateEventShape(&probe); len(errs) > 0 {
		return nil, domain.Validation(errs...)
	}
	var members map[string]json.RawMessage
	if t := bytes.TrimSpace(req.Raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &members); err != nil {
			return nil, MalformedToolCall("raw", "must be a JSON object")
		}
	}
	for _, k := range toolCallServerMembers {
		if _, ok := members[k]; ok {
			return nil, MalformedToolCall("raw."+k, "is written by the service from the gate's answer; do not send it")
		}
	}
	if req.ApprovalID != nil {
		if err := checkName("approval_id", *req.ApprovalID, MalformedToolCall); err != nil {
			return nil, err
		}
		if _, err := argsDigest(members, "required with approval_id: the digest the approval binds"); err != nil {
			return nil, err
		}
	}
	if len(req.Results) > api.MaxToolCallResults {
		return nil, MalformedToolCall("results", fmt.Sprintf("at most %d results go with one call", api.MaxToolCallResults))
	}
	seen := map[string]bool{*req.EventID: true}
	for i := range req.Results {
		in := resultInput(&req.Results[i], zero)
		errs := domain.ValidateEventShape(&in)
		if in.EventID != nil && seen[*in.EventID] {
			errs = append(errs, domain.FieldError{Field: "event_id", Message: "appears twice in the request"})
		}
		if in.EventID != nil {
			seen[*in.EventID] = true
		}
		for j := range errs {
			errs[j].Field = fmt.Sprintf("results[%d].%s", i, errs[j].Field)
		}
		if len(errs) > 0 {
			return nil, domain.Validation(errs...)
		}
	}
	return members, nil
}

// resultInput is r as an event at seq.
func resultInput(r *api.ToolResult, seq int64) api.EventInput {
	eventType := api.EventToolResult
	return api.EventInput{EventID: presentID(r.EventID), EventType: &eventType, Sequence: &seq, Raw: r.Raw, Tool: r.Tool,
		ParentID: r.ParentID, TS: r.TS}
}

// presentID is an event_id as the shape check reads it: an empty one is
// missing ("required").
func presentID(id *string) *string {
	if id == nil || *id == "" {
		return nil
	}
	return id
}

// meterToolCall consumes one call of the grant the gate authorized (inside
// t, which holds the account's head), returning the answer with the use
// counted; a grant the use could not spend (its budget or life ended since
// the answer was read, which the held head makes rare) is answered as the
// gate now sees it.
func (a *App) meterToolCall(ctx context.Context, t *writer.Tx, userID string, ans domain.GateAnswer, rows []store.Grant, now time.Time) (domain.GateAnswer, error) {
	if !ans.Authorized {
		return ans, nil
	}
	g := *ans.Grant
	row, ok := rowOf(rows, g)
	if !ok {
		return ans, fmt.Errorf("tool call: matched grant %s not among its rows", g.GrantID)
	}
	uses, consumed, err := a.store.ConsumeGrantUses(ctx, t.SQL(), userID, row.GrantID, row.Generation, 1, now)
	if err != nil {
		return ans, err
	}
	if consumed {
		g.Uses = uses
		ans.Grant, ans.Uses, ans.Remaining = &g, uses, g.Remaining()
		return ans, nil
	}
	fresh, err := a.store.GrantRow(ctx, t.SQL(), userID, row.GrantID, row.Generation)
	if err != nil {
		return ans, err
	}
	d, err := domainGrant(fresh)
	if err != nil {
		return ans, err
	}
	st, reason := domain.GrantState(d, now, nil)
	if st == domain.GateAuthorized {
		st, reason = domain.GateBudgetExhausted, "the grant's budget was spent by another call"
	}
	return domain.GateAnswer{Status: st, Reason: reason, Subagent: ans.Subagent, Grant: &d, Uses: d.Uses,
		Remaining: d.Remaining()}, nil
}

// withGateMembers is the tool_call's raw: the client's members and the
// gate's, with sorted keys (encoding/json sorts map keys).
func withGateMembers(client map[string]json.RawMessage, req toolCall, out *ToolCallResult) (json.RawMessage, error) {
	m := make(map[string]any, len(client)+5)
	for k, v := range client {
		m[k] = v
	}
	m[rawSubagent] = *req.Subagent
	m[rawGateStatus] = out.Gate.Status
	if out.GrantID != "" {
		m[rawGrantID] = out.GrantID
	}
	if out.Gate.ProposalID != "" {
		m[rawProposalID] = out.Gate.ProposalID
	}
	if out.Gate.Status == domain.GateNoGrant {
		m[rawNoGrant] = req.noGrant
	}
	if out.ApprovalID != "" {
		m[rawApprovalID] = out.ApprovalID
	}
	// Without HTML escaping (api.Marshal), the client's members are stored
	// as sent (compacted), which a replay compares them with.
	return api.Marshal(m)
}

// replayToolCall answers a tool call stored as sent (dropStored's call):
// a retry after a lost answer is answered with the stored event and
// metered no more.
func (a *App) replayToolCall(ctx context.Context, p Principal, req toolCall, stored *store.Event, now time.Time) (ToolCallResult, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(stored.Raw, &members); err != nil {
		return ToolCallResult{}, err // dropStored read it as an object
	}
	text := func(k string) string {
		var s string
		_ = json.Unmarshal(members[k], &s)
		return s
	}
	out := ToolCallResult{Decision: *stored.Decision, GrantID: text(rawGrantID), Event: stored.StoredEvent, Replayed: true,
		Epoch: domain.NewEpochStamp(a.cfg.EpochAnchor, now)}
	out.Gate = domain.GateAnswer{Status: text(rawGateStatus), Subagent: *req.Subagent, ProposalID: text(rawProposalID),
		Reason: "this tool call is already on the record (sequence " + fmt.Sprint(stored.Sequence) + "); it was not metered again"}
	out.Gate.Authorized = out.Gate.Status == domain.GateAuthorized
	out.Metered = out.Gate.Authorized
	out.ApprovalID = text(rawApprovalID)
	if out.Decision == api.DecisionAsk && out.ApprovalID != "" {
		ap, ok, err := a.store.ApprovalByID(ctx, nil, p.UserID, out.ApprovalID)
		if err != nil {
			return ToolCallResult{}, err
		}
		if ok {
			out.Approval = &api.ApprovalTicket{ApprovalID: ap.ApprovalID, Status: approvalStatus(ap, now),
				ExpiresAt: domain.FormatTimestamp(ap.ExpiresAt), ArgsSHA256: ap.ArgsSHA256}
		}
	}
	used, err := a.store.QuotaUsed(ctx, nil, p.UserID, domain.QuotaDay(now))
	if err != nil {
		return ToolCallResult{}, err
	}
	out.Quota = a.quota(used)
	return out, nil
}

// sameToolCall reports whether stored records req: a tool_call of the same
// sub-agent, tool and parent, whose raw holds the request's members as sent
// and, when no_grant decided it, the request's no_grant. Its ts is not
// compared: the event_id names the call, and a host that runs a hook twice
// for one tool use stamps each run with its own time.
func sameToolCall(stored *store.Event, req toolCall, members map[string]json.RawMessage) bool {
	if stored.EventType != api.EventToolCall || stored.Decision == nil || stored.Tool == nil || *stored.Tool != *req.Tool ||
		!equalPtr(stored.ParentID, req.ParentID) {
		return false
	}
	client, err := checkToolCall(&req)
	if err != nil {
		return false
	}
	text := func(k string) (string, bool) {
		v, ok := members[k]
		var s string
		return s, ok && json.Unmarshal(v, &s) == nil
	}
	if sub, ok := text(rawSubagent); !ok || sub != *req.Subagent {
		return false
	}
	if ng, ok := text(rawNoGrant); ok && ng != req.noGrant {
		return false
	}
	// A call sent again with approval_id is a new call: the held call's
	// event_id with an approval_id is another call under the same id.
	if id, ok := text(rawApprovalID); req.ApprovalID != nil && (!ok || id != *req.ApprovalID || *stored.Decision == api.DecisionAsk) ||
		req.ApprovalID == nil && ok && *stored.Decision != api.DecisionAsk {
		return false
	}
	for k, v := range client {
		var c bytes.Buffer
		if json.Compact(&c, v) != nil || !bytes.Equal(c.Bytes(), members[k]) {
			return false
		}
	}
	return len(members) == len(client)+countGateMembers(members)
}

// countGateMembers counts the service's members in a stored tool_call raw.
func countGateMembers(members map[string]json.RawMessage) int {
	n := 0
	for _, k := range toolCallServerMembers {
		if _, ok := members[k]; ok {
			n++
		}
	}
	return n
}

func equalPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// argsDigest is the client raw's tool_input_sha256, which must be lowercase
// hex SHA-256 (422 naming raw.tool_input_sha256 otherwise; why says when it
// is required).
func argsDigest(client map[string]json.RawMessage, why string) (string, error) {
	v, ok := client[rawToolInputSHA256]
	if !ok {
		return "", MalformedToolCall("raw."+rawToolInputSHA256, why)
	}
	var d string
	if json.Unmarshal(v, &d) != nil || !isSHA256Hex(d) {
		return "", MalformedToolCall("raw."+rawToolInputSHA256,
			"must be the lowercase hex SHA-256 of the RFC 8785 form of the tool's input (64 digits)")
	}
	return d, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// holdForApproval creates the approval of an authorized call that an
// approval rule holds (CONTRACT.md "Approvals"), with its approval.requested
// notice, inside t; nil when no rule holds it. Nothing is metered: the call
// does not run now.
func (a *App) holdForApproval(ctx context.Context, t *writer.Tx, p Principal, req toolCall, client map[string]json.RawMessage,
	now time.Time) (*store.Approval, error) {
	rule, ok, err := a.matchingApprovalRule(ctx, t, p.UserID, *req.Subagent, *req.Tool)
	if err != nil || !ok {
		return nil, err
	}
	digest, err := argsDigest(client, fmt.Sprintf("required: approval rule %s holds this call, and its approval binds the digest of the tool's input", rule.RuleID))
	if err != nil {
		return nil, err
	}
	id, err := a.newID("ap-", 16)
	if err != nil {
		return nil, err
	}
	created := now.UTC().Truncate(time.Microsecond)
	ap := store.Approval{UserID: p.UserID, ApprovalID: id, RuleID: rule.RuleID, Subagent: *req.Subagent, Tool: *req.Tool,
		ArgsSHA256: digest, CallEventID: *req.EventID, RequestedBy: p.Identity(), RequestedKind: p.Kind,
		Status: store.ApprovalPending, CreatedAt: created, ExpiresAt: created.Add(time.Duration(rule.TTLSeconds) * time.Second)}
	if err := a.store.InsertApproval(ctx, t.SQL(), &ap); err != nil {
		return nil, err
	}
	// The arguments' text, where the surface sent it, is kept beside the
	// pending approval only, for the approver (approval_args.go).
	if txt := req.ApprovalArgsText; txt != nil && *txt != "" {
		if err := a.store.InsertApprovalArgs(ctx, t.SQL(), p.UserID, id, *txt); err != nil {
			return nil, err
		}
	}
	_, err = a.notify(ctx, t, p.UserID, Notice{Type: domain.NoticeApprovalRequested, Subject: map[string]any{
		"approval_id": id, "subagent": ap.Subagent, "tool": ap.Tool, "args_sha256": digest,
		"expires_at": domain.FormatTimestamp(ap.ExpiresAt), "call_event_id": ap.CallEventID}})
	return &ap, err
}

// useApproval decides a call the gate authorized that is sent again with
// approval_id: it runs — metered, the approval marked used by a
// compare-and-set in this transaction, so that it is used once across any
// number of replicas — only when the approval is the account's, approved,
// not expired, not used, and binds this sub-agent, tool and digest;
// otherwise the answer is one of the approval_* statuses (deny).
//
// The way a call runs costs two statements, the use and the meter (issue
// #38: an approved call's second pass costs no more than a plain allowed
// call); the approval is read only to say why a call does not run.
func (a *App) useApproval(ctx context.Context, t *writer.Tx, userID string, req toolCall, client map[string]json.RawMessage,
	ans domain.GateAnswer, rows []store.Grant, now time.Time) (domain.GateAnswer, error) {
	id := *req.ApprovalID
	digest, err := argsDigest(client, "required with approval_id")
	if err != nil {
		return ans, err // checkToolCall refused it already
	}
	used, err := a.store.UseApproval(ctx, t.SQL(), userID, id, *req.Subagent, *req.Tool, digest, *req.EventID, now)
	if err != nil {
		return ans, err
	}
	if !used {
		return a.approvalRefusal(ctx, t, userID, req, digest, ans, now)
	}
	metered, err := a.meterToolCall(ctx, t, userID, ans, rows, now)
	if err != nil {
		return ans, err
	}
	if !metered.Authorized {
		// The grant's own refusal: the approval stays approved for a call
		// the grant allows.
		if err := a.store.UnuseApproval(ctx, t.SQL(), userID, id, *req.EventID); err != nil {
			return ans, err
		}
	}
	return metered, nil
}

// approvalRefusal is the approval_* answer to a call sent again with an
// approval it could not use (UseApproval changed nothing), read inside t,
// which holds the account's head.
func (a *App) approvalRefusal(ctx context.Context, t *writer.Tx, userID string, req toolCall, digest string,
	ans domain.GateAnswer, now time.Time) (domain.GateAnswer, error) {
	id := *req.ApprovalID
	refuse := func(status, reason string) (domain.GateAnswer, error) {
		return domain.GateAnswer{Status: status, Reason: reason, Subagent: ans.Subagent}, nil
	}
	ap, ok, err := a.store.ApprovalByID(ctx, t.SQL(), userID, id)
	if err != nil {
		return ans, err
	}
	if !ok || ap.Subagent != *req.Subagent || ap.Tool != *req.Tool || ap.ArgsSHA256 != digest {
		return refuse(api.GateApprovalMismatch, fmt.Sprintf("approval %s does not bind this call: the approval names one sub-agent, "+
			"tool and digest of the tool's input, and this call differs (or the account has no such approval)", id))
	}
	switch approvalStatus(ap, now) {
	case store.ApprovalPending:
		return refuse(api.GateApprovalPending, fmt.Sprintf("approval %s is still pending: nobody has approved it yet (it expires %s); try again later",
			id, domain.FormatTimestamp(ap.ExpiresAt)))
	case store.ApprovalDenied:
		return refuse(api.GateApprovalDenied, fmt.Sprintf("approval %s was denied", id))
	case store.ApprovalUsed:
		return refuse(api.GateApprovalUsed, fmt.Sprintf("approval %s was used already, by event %s; an approval runs one call",
			id, deref(ap.UsedEventID)))
	}
	// Expired; or approved and bound to this call yet not used by the
	// compare-and-set, which only the expiry boundary explains: the expiry
	// job is the one writer that changes an approval without the head.
	return refuse(api.GateApprovalExpired, fmt.Sprintf("approval %s expired at %s", id, domain.FormatTimestamp(ap.ExpiresAt)))
}
