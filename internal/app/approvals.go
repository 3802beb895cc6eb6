package app

// Per-call approvals (CONTRACT.md "Approvals"; docs/approvals.md): rules that
// hold a sub-agent's authorized calls of a tool for a person, the approvals
// they create (toolcalls.go creates and uses them, in the tool call's own
// write), the approver's decision, the long-poll that waits for it, and the
// expiry job. Every change of an approval but expiry is recorded on the
// account's chain in the same transaction.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Codes of the approval routes.
const (
	CodeApprovalNotFound     = "approval_not_found"
	CodeApprovalRuleNotFound = "approval_rule_not_found"
	CodeApprovalNotPending   = "approval_not_pending"
)

// anyName is a rule's wildcard: every sub-agent, or every tool.
const anyName = "*"

// malformedRule is a rule body's 422 validation_error.
func malformedRule(field, reason string) *domain.Error {
	return domain.Validation(domain.FieldError{Field: field, Message: reason})
}

// ruleView is r as the API shows it.
func ruleView(r store.ApprovalRule) api.ApprovalRule {
	return api.ApprovalRule{RuleID: r.RuleID, Subagent: r.Subagent, Tool: r.Tool, TTLSeconds: r.TTLSeconds,
		CreatedAt: domain.FormatTimestamp(r.CreatedAt)}
}

// CreateApprovalRule stores a rule with its approval_rule.created event in
// one transaction.
func (a *App) CreateApprovalRule(ctx context.Context, p Principal, req api.ApprovalRuleRequest) (api.ApprovalRule, error) {
	for _, f := range []struct {
		name string
		v    *string
	}{{"subagent", req.Subagent}, {"tool", req.Tool}} {
		if f.v == nil {
			return api.ApprovalRule{}, malformedRule(f.name, "required: an exact name, or \"*\" for every one")
		}
		if *f.v != anyName {
			if err := checkName(f.name, *f.v, malformedRule); err != nil {
				return api.ApprovalRule{}, err
			}
		}
	}
	ttl := int64(api.DefaultApprovalTTL)
	if req.TTLSeconds != nil {
		ttl = *req.TTLSeconds
		if ttl < api.MinApprovalTTL || ttl > api.MaxApprovalTTL {
			return api.ApprovalRule{}, malformedRule("ttl_seconds", fmt.Sprintf("must be %d..%d seconds", api.MinApprovalTTL, api.MaxApprovalTTL))
		}
	}
	id, err := a.newID("ar-", 12)
	if err != nil {
		return api.ApprovalRule{}, err
	}
	r := store.ApprovalRule{UserID: p.UserID, RuleID: id, Subagent: *req.Subagent, Tool: *req.Tool, TTLSeconds: ttl,
		CreatedAt: a.now().UTC().Truncate(time.Microsecond)}
	view := ruleView(r)
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		if err := a.store.InsertApprovalRule(ctx, t.SQL(), r); err != nil {
			return err
		}
		_, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: api.EventApprovalRuleCreated, Raw: view})
		return err
	})
	return view, err
}

// ApprovalRules lists the account's rules, oldest first.
func (a *App) ApprovalRules(ctx context.Context, p Principal) (api.ApprovalRuleList, error) {
	rows, err := a.store.ApprovalRules(ctx, nil, p.UserID)
	if err != nil {
		return api.ApprovalRuleList{}, err
	}
	out := api.ApprovalRuleList{Rules: make([]api.ApprovalRule, len(rows))}
	for i, r := range rows {
		out.Rules[i] = ruleView(r)
	}
	return out, nil
}

// DeleteApprovalRule deletes a rule with its approval_rule.deleted event;
// approvals it created keep their course.
func (a *App) DeleteApprovalRule(ctx context.Context, p Principal, ruleID string) error {
	return a.w.Write(ctx, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		r, ok, err := a.store.DeleteApprovalRule(ctx, t.SQL(), p.UserID, ruleID)
		if err != nil {
			return err
		}
		if !ok {
			return domain.NotFound(CodeApprovalRuleNotFound, "approval rule "+ruleID)
		}
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: api.EventApprovalRuleDeleted, Raw: ruleView(r)})
		return err
	})
}

// approvalStatus is the status ap reads as at now: pending and approved end
// at expires_at, whether or not the expiry job has marked them yet.
func approvalStatus(ap store.Approval, now time.Time) string {
	if (ap.Status == store.ApprovalPending || ap.Status == store.ApprovalApproved) && !now.Before(ap.ExpiresAt) {
		return store.ApprovalExpired
	}
	return ap.Status
}

// approvalView is ap as the API shows it at now.
func approvalView(ap store.Approval, now time.Time) api.Approval {
	v := api.Approval{ApprovalID: ap.ApprovalID, Status: approvalStatus(ap, now), RuleID: ap.RuleID, Subagent: ap.Subagent,
		Tool: ap.Tool, ArgsSHA256: ap.ArgsSHA256, CallEventID: ap.CallEventID,
		RequestedBy: api.Identity{Identity: ap.RequestedBy, Kind: ap.RequestedKind},
		CreatedAt:   domain.FormatTimestamp(ap.CreatedAt), ExpiresAt: domain.FormatTimestamp(ap.ExpiresAt),
		Note: ap.Note, UsedEventID: ap.UsedEventID}
	if ap.DecidedAt != nil {
		s := domain.FormatTimestamp(*ap.DecidedAt)
		v.DecidedAt = &s
	}
	if ap.DecidedBy != nil && ap.DecidedKind != nil {
		v.DecidedBy = &api.Identity{Identity: *ap.DecidedBy, Kind: *ap.DecidedKind}
	}
	if ap.UsedAt != nil {
		s := domain.FormatTimestamp(*ap.UsedAt)
		v.UsedAt = &s
	}
	return v
}

// Bounds of GET /v1/approvals' limit.
const (
	DefaultApprovalList = 100
	MaxApprovalList     = 1000
)

// Approvals lists the account's approvals newest first, of one status
// ("" for all), at most limit.
func (a *App) Approvals(ctx context.Context, p Principal, status string, limit int) (api.ApprovalList, error) {
	switch status {
	case "", api.ApprovalPending, api.ApprovalApproved, api.ApprovalDenied, api.ApprovalExpired, api.ApprovalUsed:
	default:
		return api.ApprovalList{}, domain.Validation(domain.FieldError{Field: "status",
			Message: "must be pending, approved, denied, expired or used"})
	}
	if limit == 0 {
		limit = DefaultApprovalList
	}
	if limit < 1 || limit > MaxApprovalList {
		return api.ApprovalList{}, domain.Validation(domain.FieldError{Field: "limit", Message: fmt.Sprintf("must be between 1 and %d", MaxApprovalList)})
	}
	now := a.now()
	rows, err := a.store.Approvals(ctx, p.UserID, status, now, limit)
	if err != nil {
		return api.ApprovalList{}, err
	}
	out := api.ApprovalList{Approvals: make([]api.Approval, len(rows))}
	for i, r := range rows {
		out.Approvals[i] = approvalView(r, now)
	}
	return out, nil
}

// Approval reads one of the account's approvals. With wait > 0 a pending
// one is read again as soon as an approval.* event of the account is
// announced (the stream's frames: this replica's writes, and across
// PostgreSQL replicas their NOTIFY; approvals_wait.go), when it expires, or once wait has
// passed, whichever comes first: between reads it holds no database
// connection, only a subscription to the account's frames.
func (a *App) Approval(ctx context.Context, p Principal, approvalID string, wait time.Duration) (api.Approval, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Subscribed before the read, so a decision committed after the
		// read is announced to it.
		w, err := a.watchApprovals(ctx, p.UserID, wait > 0)
		if err != nil {
			return api.Approval{}, err
		}
		v, ap, err := a.readApproval(ctx, p, approvalID)
		if err != nil || v.Status != api.ApprovalPending || wait <= 0 {
			w.close()
			return v, err
		}
		over := w.wait(ctx, timer.C, ap.ExpiresAt.Sub(a.now()))
		w.close()
		if over {
			v, _, err := a.readApproval(context.WithoutCancel(ctx), p, approvalID)
			return v, err
		}
	}
}

// readApproval reads an approval and its view at now (404 when the account
// has none of that id).
func (a *App) readApproval(ctx context.Context, p Principal, approvalID string) (api.Approval, store.Approval, error) {
	ap, ok, err := a.store.ApprovalByID(ctx, nil, p.UserID, approvalID)
	if err != nil {
		return api.Approval{}, ap, err
	}
	if !ok {
		return api.Approval{}, ap, domain.NotFound(CodeApprovalNotFound, "approval "+approvalID)
	}
	v := approvalView(ap, a.now())
	if v.Status != api.ApprovalPending {
		return v, ap, nil
	}
	txt, ok, err := a.store.ApprovalArgs(ctx, p.UserID, approvalID)
	if ok {
		withArgsText(&v, map[string]string{approvalID: txt})
	}
	return v, ap, err
}

// PendingApprovals lists the account's pending approvals newest first, at
// most limit, each with the arguments' text kept for it (the console's
// approvals panel; GET /v1/approvals lists without it).
func (a *App) PendingApprovals(ctx context.Context, p Principal, limit int) ([]api.Approval, error) {
	now := a.now()
	list, err := a.Approvals(ctx, p, api.ApprovalPending, limit)
	if err != nil || len(list.Approvals) == 0 {
		return list.Approvals, err
	}
	texts, err := a.store.PendingApprovalArgs(ctx, p.UserID, now, limit)
	if err != nil {
		return nil, err
	}
	for i := range list.Approvals {
		withArgsText(&list.Approvals[i], texts)
	}
	return list.Approvals, nil
}

// withArgsText sets v's arguments' text from texts (by approval id), with
// whether it hashes to the digest the approval binds.
func withArgsText(v *api.Approval, texts map[string]string) {
	txt, ok := texts[v.ApprovalID]
	if !ok {
		return
	}
	sum := sha256.Sum256([]byte(txt))
	matches := hex.EncodeToString(sum[:]) == v.ArgsSHA256
	v.ArgsText, v.ArgsTextMatches = &txt, &matches
}

// DecideApproval approves or denies a pending approval of the account, with
// its approval.granted or approval.denied event naming the decider, in one
// transaction holding the account's head: 404 for an approval the account
// does not have, 409 separation_of_powers when the caller is the identity
// that made the call, 409 approval_not_pending once it is not pending.
func (a *App) DecideApproval(ctx context.Context, p Principal, approvalID string, approve bool, note *string) (api.Approval, error) {
	status, eventType := store.ApprovalDenied, api.EventApprovalDenied
	if approve {
		status, eventType = store.ApprovalApproved, api.EventApprovalGranted
	}
	now := a.now().UTC().Truncate(time.Microsecond)
	var out store.Approval
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		ap, ok, err := a.store.ApprovalByID(ctx, t.SQL(), p.UserID, approvalID)
		if err != nil {
			return err
		}
		if !ok {
			return domain.NotFound(CodeApprovalNotFound, "approval "+approvalID)
		}
		if ap.RequestedBy == p.Identity() {
			return domain.Errorf(domain.CodeSeparationOfPowers,
				"the identity that made the call may not decide its approval; another key or a signed-in person must").
				With("approval_id", approvalID)
		}
		if st := approvalStatus(ap, now); st != store.ApprovalPending {
			return domain.Errorf(CodeApprovalNotPending, "approval %s is %s, no longer pending", approvalID, st).
				With("approval_id", approvalID).With("status", st)
		}
		decided, err := a.store.DecideApproval(ctx, t.SQL(), p.UserID, approvalID, status, p.Identity(), p.Kind, note, now)
		if err != nil {
			return err
		}
		if !decided { // expired between the read and the update
			return domain.Errorf(CodeApprovalNotPending, "approval %s is expired, no longer pending", approvalID).
				With("approval_id", approvalID).With("status", store.ApprovalExpired)
		}
		// The arguments' text is kept for the decision only.
		if err := a.store.DeleteApprovalArgs(ctx, t.SQL(), p.UserID, approvalID); err != nil {
			return err
		}
		ap.Status, ap.DecidedAt, ap.Note = status, &now, note
		by, kind := p.Identity(), p.Kind
		ap.DecidedBy, ap.DecidedKind = &by, &kind
		out = ap
		raw := api.ApprovalEvent{ApprovalID: ap.ApprovalID, Subagent: ap.Subagent, Tool: ap.Tool, ArgsSHA256: ap.ArgsSHA256,
			CallEventID: ap.CallEventID, RequestedBy: api.Identity{Identity: ap.RequestedBy, Kind: ap.RequestedKind},
			Approver: api.Identity{Identity: by, Kind: kind}, ExpiresAt: domain.FormatTimestamp(ap.ExpiresAt), Note: note}
		tool := ap.Tool
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: eventType, Raw: raw, Tool: &tool})
		return err
	})
	if err != nil {
		return api.Approval{}, err
	}
	return approvalView(out, now), nil
}

// ApprovalExpirySweep marks expired every pending or approved approval past
// its expires_at, and writes nothing else: expiry is a consequence of the
// rule's ttl, already on the chain, and reads treat an approval past its
// time as expired whether or not it was marked. It deletes the arguments'
// text kept for approvals no longer pending (approval_args.go).
func (a *App) ApprovalExpirySweep(ctx context.Context) (api.ApprovalExpiry, error) {
	var n int64
	err := a.w.Write(ctx, func(t *writer.Tx) (err error) {
		if n, err = a.store.ExpireApprovals(ctx, t.SQL(), a.now()); err != nil {
			return err
		}
		// And forgets the arguments' text of approvals no longer pending.
		_, err = a.store.DeleteSettledApprovalArgs(ctx, t.SQL())
		return err
	})
	return api.ApprovalExpiry{Expired: n}, err
}
