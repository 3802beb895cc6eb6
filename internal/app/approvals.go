package app

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md): rules
// that make a call wait for a person, the approvals they create, a
// person's decision, the long-poll that waits for it and the expiry job.
// The call's side (ask, and the one use) is in toolcalls.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Chain event types of approvals (CONTRACT.md "Approvals").
const (
	EventApprovalRuleCreated = "approval_rule.created"
	EventApprovalRuleDeleted = "approval_rule.deleted"
	EventApprovalGranted     = "approval.granted"
	EventApprovalDenied      = "approval.denied"
)

// Codes of the approval routes. Another account's rule or approval answers
// as a missing one (SPEC.md "Authentication" 6).
const (
	CodeApprovalNotFound     = "approval_not_found"
	CodeApprovalRuleNotFound = "approval_rule_not_found"
	CodeApprovalNotPending   = "approval_not_pending"
)

// Bounds (CONTRACT.md "Approvals").
const (
	ApprovalTTLDefault = 600
	ApprovalTTLMin     = 30
	ApprovalTTLMax     = 86400
	// MaxApprovalWait is the longest ?wait= of GET /v1/approvals/{id}.
	MaxApprovalWait = 30
	// MaxApprovalPage bounds GET /v1/approvals.
	MaxApprovalPage = 500
	// approvalRecheck is how often a long-poll reads the row again: a
	// decision made on another replica wakes no waiter here.
	approvalRecheck = time.Second
)

// JobApprovalExpiry marks expired approvals (no cron route: SPEC.md's list
// of cron routes is fixed; docs/approvals.md).
const JobApprovalExpiry = "approval-expiry"

var (
	errApprovalNotFound     = domain.NotFound(CodeApprovalNotFound, "approval")
	errApprovalRuleNotFound = domain.NotFound(CodeApprovalRuleNotFound, "approval rule")
	argsDigestForm          = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// rawToolInputDigest is the client raw member an approval binds: the
// lowercase hex SHA-256 of the RFC 8785 form of the tool's input.
const rawToolInputDigest = "tool_input_sha256"

func approvalRuleView(ru store.ApprovalRule) api.ApprovalRule {
	return api.ApprovalRule{RuleID: ru.RuleID, Subagent: ru.Subagent, Tool: ru.Tool, TTLSeconds: ru.TTLSeconds,
		CreatedAt: domain.FormatTimestamp(ru.CreatedAt)}
}

func approvalView(ap store.Approval, now time.Time) api.Approval {
	v := api.Approval{ApprovalID: ap.ApprovalID, Status: ap.EffectiveStatus(now), Subagent: ap.Subagent, Tool: ap.Tool,
		ArgsSHA256: ap.ArgsSHA256, RuleID: ap.RuleID, CallEventID: ap.CallEventID,
		RequestedBy: api.ApprovalDecider{Identity: ap.RequestedBy, Kind: ap.RequestedKind},
		CreatedAt:   domain.FormatTimestamp(ap.CreatedAt), ExpiresAt: domain.FormatTimestamp(ap.ExpiresAt),
		DecidedAt: formatOpt(ap.DecidedAt), Note: ap.Note, UsedAt: formatOpt(ap.UsedAt), UsedEventID: ap.UsedEventID}
	if ap.DecidedBy != nil {
		v.DecidedBy = &api.ApprovalDecider{Identity: *ap.DecidedBy, Kind: deref(ap.DecidedKind)}
	}
	return v
}

func approvalRef(ap store.Approval, now time.Time) *api.ApprovalRef {
	return &api.ApprovalRef{ApprovalID: ap.ApprovalID, Status: ap.EffectiveStatus(now),
		ExpiresAt: domain.FormatTimestamp(ap.ExpiresAt), ArgsSHA256: ap.ArgsSHA256}
}

// CreateApprovalRule stores a rule and appends approval_rule.created.
func (a *App) CreateApprovalRule(ctx context.Context, p Principal, req api.CreateApprovalRuleRequest) (api.ApprovalRule, error) {
	bad := func(field, reason string) *domain.Error {
		return domain.Validation(domain.FieldError{Field: field, Message: reason})
	}
	if req.Subagent == nil {
		return api.ApprovalRule{}, bad("subagent", "required: the sub-agent's exact name, or \"*\"")
	}
	if req.Tool == nil {
		return api.ApprovalRule{}, bad("tool", "required: the tool's exact name, or \"*\"")
	}
	if err := checkName("subagent", *req.Subagent, bad); err != nil {
		return api.ApprovalRule{}, err
	}
	if err := checkName("tool", *req.Tool, bad); err != nil {
		return api.ApprovalRule{}, err
	}
	ttl := int64(ApprovalTTLDefault)
	if req.TTLSeconds != nil {
		ttl = *req.TTLSeconds
		if ttl < ApprovalTTLMin || ttl > ApprovalTTLMax {
			return api.ApprovalRule{}, bad("ttl_seconds", fmt.Sprintf("must be %d..%d seconds", ApprovalTTLMin, ApprovalTTLMax))
		}
	}
	id, err := a.newID("ar-", 16)
	if err != nil {
		return api.ApprovalRule{}, err
	}
	ru := store.ApprovalRule{UserID: p.UserID, RuleID: id, Subagent: *req.Subagent, Tool: *req.Tool, TTLSeconds: ttl,
		CreatedAt: a.stamp()}
	view := approvalRuleView(ru)
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		if err := a.store.InsertApprovalRule(ctx, t.SQL(), &ru); err != nil {
			return err
		}
		_, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventApprovalRuleCreated, Raw: view})
		return err
	})
	if err != nil {
		return api.ApprovalRule{}, err
	}
	return view, nil
}

// ApprovalRules lists the account's rules, oldest first.
func (a *App) ApprovalRules(ctx context.Context, p Principal) (api.ApprovalRuleList, error) {
	rows, err := a.store.ApprovalRules(ctx, nil, p.UserID)
	if err != nil {
		return api.ApprovalRuleList{}, err
	}
	out := api.ApprovalRuleList{Rules: make([]api.ApprovalRule, 0, len(rows))}
	for _, ru := range rows {
		out.Rules = append(out.Rules, approvalRuleView(ru))
	}
	return out, nil
}

// DeleteApprovalRule deletes a rule and appends approval_rule.deleted.
// Approvals it created stay as they are.
func (a *App) DeleteApprovalRule(ctx context.Context, p Principal, ruleID string) error {
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		ru, err := a.store.DeleteApprovalRule(ctx, t.SQL(), p.UserID, ruleID)
		if err != nil {
			return err
		}
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventApprovalRuleDeleted, Raw: approvalRuleView(ru)})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return errApprovalRuleNotFound
	}
	return err
}

// ListApprovals lists the account's approvals newest first, optionally of
// one status.
func (a *App) ListApprovals(ctx context.Context, p Principal, status string) (api.ApprovalList, error) {
	switch status {
	case "", api.ApprovalPending, api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired, api.ApprovalUsed:
	default:
		return api.ApprovalList{}, (&domain.Error{Code: domain.CodeMalformedQuery,
			Detail: "status must be pending, approved, denied, expired or used"}).With("field", "status")
	}
	now := a.now()
	rows, err := a.store.ListApprovals(ctx, nil, p.UserID, status, now, MaxApprovalPage)
	if err != nil {
		return api.ApprovalList{}, err
	}
	out := api.ApprovalList{Approvals: make([]api.Approval, 0, len(rows))}
	for _, ap := range rows {
		out.Approvals = append(out.Approvals, approvalView(ap, now))
	}
	return out, nil
}

// GetApproval reads one approval. With wait > 0 it answers as soon as the
// approval is no longer pending, or after wait, whichever is first: it
// holds no database connection while it waits. A decision on this process
// wakes it at once; one on another replica is seen by the re-read every
// approvalRecheck (docs/approvals.md).
func (a *App) GetApproval(ctx context.Context, p Principal, approvalID string, wait time.Duration) (api.Approval, error) {
	var deadline <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		deadline = timer.C
	}
	recheck := time.NewTicker(approvalRecheck)
	defer recheck.Stop()
	for {
		// Listening starts before the read, so a decision between the two
		// still wakes this loop.
		woken, cancel := a.waiters.subscribe(p.UserID, approvalID)
		ap, err := a.store.ApprovalByID(ctx, nil, p.UserID, approvalID)
		if errors.Is(err, store.ErrNotFound) {
			cancel()
			return api.Approval{}, errApprovalNotFound
		}
		now := a.now()
		if err != nil || deadline == nil || ap.EffectiveStatus(now) != store.ApprovalPending {
			cancel()
			return approvalView(ap, now), err
		}
		select {
		case <-woken:
		case <-recheck.C:
		case <-deadline:
			deadline = nil // one more read answers
		case <-ctx.Done():
			cancel()
			return api.Approval{}, ctx.Err()
		}
		cancel()
	}
}

// DecideApproval approves (approve true) or denies a pending approval, by
// an identity other than the one that made the call, and appends
// approval.granted or approval.denied naming the approver.
func (a *App) DecideApproval(ctx context.Context, p Principal, approvalID string, approve bool, note *string) (api.Approval, error) {
	status, eventType := store.ApprovalDenied, EventApprovalDenied
	if approve {
		status, eventType = store.ApprovalApproved, EventApprovalGranted
	}
	now := a.stamp()
	var ap store.Approval
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		var err error
		if ap, err = a.store.ApprovalByID(ctx, t.SQL(), p.UserID, approvalID); err != nil {
			return err
		}
		if ap.RequestedBy == p.Identity() {
			return (&domain.Error{Code: domain.CodeSeparationOfPowers,
				Detail: "the identity that made the call may not decide its approval"}).With("approval_id", approvalID)
		}
		ok, err := a.store.DecideApproval(ctx, t.SQL(), p.UserID, approvalID, status, p.Identity(), p.Kind, note, now)
		if err != nil {
			return err
		}
		if !ok {
			return (&domain.Error{Code: CodeApprovalNotPending,
				Detail: fmt.Sprintf("approval %s is %s, no longer pending", approvalID, ap.EffectiveStatus(now))}).
				With("approval_id", approvalID).With("status", ap.EffectiveStatus(now))
		}
		ap.Status, ap.DecidedAt, ap.Note = status, &now, note
		identity, kind := p.Identity(), p.Kind
		ap.DecidedBy, ap.DecidedKind = &identity, &kind
		raw := map[string]any{"approval_id": ap.ApprovalID, "subagent": ap.Subagent, "tool": ap.Tool,
			"args_sha256": ap.ArgsSHA256, "call_event_id": ap.CallEventID,
			"requested_by": api.ApprovalDecider{Identity: ap.RequestedBy, Kind: ap.RequestedKind},
			"approver":     api.ApprovalDecider{Identity: identity, Kind: kind}}
		if note != nil {
			raw["note"] = *note
		}
		tool := ap.Tool
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: eventType, Raw: raw, Tool: &tool})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return api.Approval{}, errApprovalNotFound
	}
	if err != nil {
		return api.Approval{}, err
	}
	a.waiters.wake(p.UserID, approvalID)
	return approvalView(ap, now), nil
}

// ApprovalExpirySweep marks every pending or approved approval past its
// expiry as expired, and writes nothing else: no event, no notice. Reads
// already answer such an approval expired; the mark keeps ?status= lists
// and the store in step.
func (a *App) ApprovalExpirySweep(ctx context.Context) (api.ApprovalExpiry, error) {
	var n int64
	err := a.w.Write(ctx, func(t *writer.Tx) (err error) {
		n, err = a.store.ExpireApprovals(ctx, t.SQL(), a.now())
		return err
	})
	return api.ApprovalExpiry{Expired: n}, err
}

// approvalWaiters wakes the long-polls of this process when an approval
// they wait on is decided here.
type approvalWaiters struct {
	mu   sync.Mutex
	byID map[approvalKey]map[*chan struct{}]struct{}
}

type approvalKey struct{ userID, approvalID string }

// subscribe returns a channel closed by the next wake of the approval, and
// the function that stops listening.
func (w *approvalWaiters) subscribe(userID, approvalID string) (<-chan struct{}, func()) {
	k := approvalKey{userID, approvalID}
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = make(map[approvalKey]map[*chan struct{}]struct{})
	}
	if w.byID[k] == nil {
		w.byID[k] = make(map[*chan struct{}]struct{})
	}
	w.byID[k][&ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.byID[k]; ok {
			delete(set, &ch)
			if len(set) == 0 {
				delete(w.byID, k)
			}
		}
	}
}

func (w *approvalWaiters) wake(userID, approvalID string) {
	k := approvalKey{userID, approvalID}
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.byID[k] {
		close(*ch)
	}
	delete(w.byID, k)
}

// errApprovalRace rolls back a tool call whose approval another call used
// between this call's read and its use; the call is then answered again.
var errApprovalRace = errors.New("the approval was used by another call")

// toolInputDigest is the call's raw.tool_input_sha256, or "" when it is
// absent or not 64 lowercase hex digits.
func toolInputDigest(client map[string]json.RawMessage) string {
	var d string
	if json.Unmarshal(client[rawToolInputDigest], &d) != nil || !argsDigestForm.MatchString(d) {
		return ""
	}
	return d
}

// askApproval creates the pending approval of an authorized call a rule
// matches, with its approval.requested notice, inside t (which holds the
// account's head); nil when no rule matches. A matching call without a
// usable raw.tool_input_sha256 is refused (422): nothing is written.
func (a *App) askApproval(ctx context.Context, t *writer.Tx, p Principal, req toolCall, client map[string]json.RawMessage,
	now time.Time) (*store.Approval, error) {
	rule, ok, err := a.store.MatchApprovalRule(ctx, t.SQL(), p.UserID, *req.Subagent, *req.Tool)
	if err != nil || !ok {
		return nil, err
	}
	digest := toolInputDigest(client)
	if digest == "" {
		return nil, MalformedToolCall("raw."+rawToolInputDigest, fmt.Sprintf(
			"approval rule %s asks a person to approve this call: send the lowercase hex SHA-256 of the RFC 8785 form of the tool's input",
			rule.RuleID))
	}
	id, err := a.newID("ap-", 16)
	if err != nil {
		return nil, err
	}
	at := now.UTC().Truncate(time.Microsecond)
	ap := store.Approval{UserID: p.UserID, ApprovalID: id, RuleID: rule.RuleID, Subagent: *req.Subagent, Tool: *req.Tool,
		ArgsSHA256: digest, Status: store.ApprovalPending, RequestedBy: p.Identity(), RequestedKind: p.Kind,
		CallEventID: *req.EventID, CreatedAt: at, ExpiresAt: at.Add(time.Duration(rule.TTLSeconds) * time.Second)}
	if err := a.store.InsertApproval(ctx, t.SQL(), &ap); err != nil {
		return nil, err
	}
	_, err = a.notify(ctx, t, p.UserID, Notice{Type: domain.NoticeApprovalRequested, Subject: map[string]any{
		"approval_id": id, "subagent": ap.Subagent, "tool": ap.Tool, "args_sha256": digest,
		"expires_at": domain.FormatTimestamp(ap.ExpiresAt)}})
	return &ap, err
}

// checkApproval reads the approval a call was sent with (inside t, which
// holds the account's head) and says whether it lets the call run: status
// "" when it is approved for this sub-agent, tool and digest, else the gate
// status and reason of the deny. The approval is nil when the account has
// none by that id.
func (a *App) checkApproval(ctx context.Context, t *writer.Tx, p Principal, req toolCall, client map[string]json.RawMessage,
	now time.Time) (ap *store.Approval, status, reason string, err error) {
	row, err := a.store.ApprovalByID(ctx, t.SQL(), p.UserID, *req.ApprovalID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, domain.GateApprovalMismatch, "no approval " + *req.ApprovalID + " on this account", nil
	}
	if err != nil {
		return nil, "", "", err
	}
	if row.Subagent != *req.Subagent || row.Tool != *req.Tool || row.ArgsSHA256 != toolInputDigest(client) {
		return &row, domain.GateApprovalMismatch,
			"approval " + row.ApprovalID + " is for another call: the sub-agent, the tool and raw.tool_input_sha256 must be the approved call's", nil
	}
	switch row.EffectiveStatus(now) {
	case store.ApprovalApproved:
		return &row, "", "", nil
	case store.ApprovalPending:
		return &row, domain.GateApprovalPending, "approval " + row.ApprovalID + " waits for a person; try again later", nil
	case store.ApprovalDenied:
		return &row, domain.GateApprovalDenied, "approval " + row.ApprovalID + " was denied", nil
	case store.ApprovalExpired:
		return &row, domain.GateApprovalExpired, "approval " + row.ApprovalID + " expired at " + domain.FormatTimestamp(row.ExpiresAt), nil
	default:
		return &row, domain.GateApprovalUsed, "approval " + row.ApprovalID + " was used already; an approval runs one call", nil
	}
}
