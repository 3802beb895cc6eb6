package app

// The delegation gate's use cases (SPEC.md "Grants", CONTRACT.md "Delegation
// tokens"): write a grant with its token and chain event, list and revoke
// grants; the gate's reader is gate.go, metering grant_use.go. Every
// decision is domain's (DecideGate, GrantState, GrantListState, LiveGrant,
// Overreach); these files load their inputs and store their outcomes.
// Choices are written down in docs/decisions/gate.md.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/delegation"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Chain event types the gate writes (CONTRACT.md "The record": server-written grant.*).
const (
	EventGrantCreated = "grant.created"
	EventGrantRevoked = "grant.revoked"
)

// Revoke outcomes (SPEC.md "POST /v1/grants/{grant_id}/revoke").
const (
	OutcomeRevoked        = "revoked"
	OutcomeAlreadyRevoked = "already_revoked"
	OutcomeConsumed       = "consumed"
)

// Bounds on names a grant carries, so one grant cannot bloat every status read.
const (
	MaxGrantNameBytes = 200
	MaxGrantTools     = 256
)

// grantIDForm is SPEC.md's "form g-<hex>": lowercase hex, at most 64 digits.
// Compiled on first use: package initialisation is paid by every process
// start, `auditchain hook` included.
var grantIDForm = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^g-[0-9a-f]{1,64}$`) })

// recordOf renders a grant as its Grant record.
func recordOf(g domain.Grant) api.GrantRecord {
	r := api.GrantRecord{GrantID: g.GrantID, Subagent: g.Subagent, AllowedTools: g.AllowedTools, MaxToolCalls: g.MaxToolCalls,
		ExpiresAt: domain.FormatTimestamp(g.ExpiresAt), CreatedAt: domain.FormatTimestamp(g.CreatedAt), Action: "granted", Epoch: g.Epoch}
	if r.AllowedTools == nil {
		r.AllowedTools = []string{}
	}
	if g.ParentAgent != "" {
		p := g.ParentAgent
		r.ParentAgent = &p
	}
	return r
}

// MalformedGrant is the 422 malformed_grant answer: field is the correct key
// and reason says what was wrong with what was sent (CONTRACT.md "Errors").
func MalformedGrant(field, reason string) *domain.Error {
	return malformed(domain.CodeMalformedGrant, field, reason)
}

func malformed(code, field, reason string) *domain.Error {
	detail := reason
	if field != "" {
		detail = field + ": " + reason
	}
	return (&domain.Error{Code: code, Detail: detail,
		Fields: []domain.FieldError{{Field: field, Message: reason}}}).With("field", field).With("reason", reason)
}

// CreateGrant writes a grant: checks its values, refuses a live id (409) and
// overreach of the parent's live grant (403), signs its delegation token, and
// stores it with one grant.created chain event in one transaction. Readable but
// unusable values (past expiry, out-of-range budget) are stored and the status
// says so (docs/decisions/gate.md).
func (a *App) CreateGrant(ctx context.Context, p Principal, req api.CreateGrantRequest) (api.GrantCreated, error) {
	g, err := newGrant(&req)
	if err != nil {
		return api.GrantCreated{}, err
	}
	now := a.now().UTC().Truncate(time.Microsecond)
	id := ""
	if req.GrantID != nil {
		id = *req.GrantID
	} else if id, err = a.newID("g-", 16); err != nil {
		return api.GrantCreated{}, err
	}
	g.GrantID, g.CreatedAt, g.Epoch = id, now, domain.NewEpochStamp(a.cfg.EpochAnchor, now)
	record := recordOf(g)
	recordJSON, err := json.Marshal(record)
	if err != nil {
		return api.GrantCreated{}, err
	}
	// Signing needs nothing the transaction decides, so it happens outside it.
	token, err := delegation.IssueToken(recordJSON, a.serviceKey, a.rand)
	if err != nil {
		return api.GrantCreated{}, err
	}
	epochJSON, err := json.Marshal(g.Epoch)
	if err != nil {
		return api.GrantCreated{}, err
	}

	err = a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		// The account's chain head orders its grant writes: the live-id and
		// overreach checks below see every grant committed before this one.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		same, err := a.store.GrantsByID(ctx, t.SQL(), p.UserID, id)
		if err != nil {
			return err
		}
		for _, s := range same {
			d, err := domainGrant(s)
			if err != nil {
				return err
			}
			if st, reason := domain.GrantState(d, now, nil); st == domain.GateAuthorized {
				return (&domain.Error{Code: domain.CodeGrantIDExists,
					Detail: fmt.Sprintf("grant_id %s already names a live grant (%s)", id, reason)}).With("grant_id", id)
			}
		}
		if g.ParentAgent != "" {
			rows, err := a.store.GateCandidates(ctx, t.SQL(), p.UserID, g.ParentAgent, nil, now)
			if err != nil {
				return err
			}
			parents, err := domainGrants(rows)
			if err != nil {
				return err
			}
			if live, ok := domain.LiveGrant(parents, now, g.ParentAgent); ok {
				if v := domain.Overreach(live, g); len(v) > 0 {
					return (&domain.Error{Code: domain.CodeGrantOverreach,
						Detail: fmt.Sprintf("the grant is broader than parent %q's live grant %s in: %s",
							g.ParentAgent, live.GrantID, strings.Join(v, ", "))}).
						With("violations", v).With("parent_grant_id", live.GrantID)
				}
			}
		}
		gen, err := a.store.NextGrantGeneration(ctx, t.SQL(), p.UserID, id)
		if err != nil {
			return err
		}
		row := store.Grant{UserID: p.UserID, GrantID: id, Generation: gen, Subagent: g.Subagent, ParentAgent: record.ParentAgent,
			AllowedTools: g.AllowedTools, MaxToolCalls: g.MaxToolCalls, ExpiresAt: g.ExpiresAt, CreatedAt: g.CreatedAt,
			Epoch: epochJSON, Token: token}
		if err := a.store.InsertGrant(ctx, t.SQL(), &row); err != nil {
			return err
		}
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventGrantCreated, Raw: record})
		return err
	})
	if err != nil {
		return api.GrantCreated{}, err
	}
	// Read back through the gate's own reader, restricted to this grant.
	status, _, err := a.gate(ctx, nil, p.UserID, g.Subagent, nil, &id, now)
	if err != nil {
		return api.GrantCreated{}, err
	}
	return api.GrantCreated{Grant: record, Status: gateView(status), Delegation: token}, nil
}

// newGrant reads the grant a POST /v1/grants body asks for (its id, creation
// time and epoch are the writer's), or refuses values no grant can hold
// (422 malformed_grant). The body's keys and value types are the HTTP
// layer's to check (aliases, unknown keys and unreadable values refused).
func newGrant(req *api.CreateGrantRequest) (domain.Grant, error) {
	if req.Subagent == nil {
		return domain.Grant{}, required(MalformedGrant, "subagent", "the sub-agent's exact name")
	}
	if req.ExpiresAt == nil {
		return domain.Grant{}, required(MalformedGrant, "expires_at", "an absolute ISO-8601 timestamp with a UTC offset, like 2026-01-02T15:04:05+00:00")
	}
	expires, err := domain.ParseTimestamp(*req.ExpiresAt)
	if err != nil {
		return domain.Grant{}, MalformedGrant("expires_at", fmt.Sprintf("%q is not an ISO-8601 timestamp with a UTC offset, like 2026-01-02T15:04:05+00:00", *req.ExpiresAt))
	}
	if req.MaxToolCalls == nil {
		return domain.Grant{}, required(MalformedGrant, "max_tool_calls", "the budget of tool calls, an integer")
	}
	if req.GrantID != nil && !grantIDForm().MatchString(*req.GrantID) {
		return domain.Grant{}, MalformedGrant("grant_id", "must have the form g-<hex> (lowercase hex digits, at most 64), or be omitted to have one generated")
	}
	if err := checkName("subagent", *req.Subagent, MalformedGrant); err != nil {
		return domain.Grant{}, err
	}
	if req.ParentAgent != nil {
		if err := checkName("parent_agent", *req.ParentAgent, MalformedGrant); err != nil {
			return domain.Grant{}, err
		}
	}
	if len(req.AllowedTools) > MaxGrantTools {
		return domain.Grant{}, MalformedGrant("allowed_tools", fmt.Sprintf("at most %d tools", MaxGrantTools))
	}
	for i, tool := range req.AllowedTools {
		if err := checkName(fmt.Sprintf("allowed_tools[%d]", i), tool, MalformedGrant); err != nil {
			return domain.Grant{}, err
		}
	}
	g := domain.Grant{Subagent: *req.Subagent, AllowedTools: req.AllowedTools, MaxToolCalls: *req.MaxToolCalls,
		ExpiresAt: expires.UTC().Truncate(time.Microsecond)}
	if g.AllowedTools == nil {
		g.AllowedTools = []string{}
	}
	if req.ParentAgent != nil {
		g.ParentAgent = *req.ParentAgent
	}
	return g, nil
}

// required is the answer to a body without key: bad's code, the key, and
// what it must hold.
func required(bad func(field, reason string) *domain.Error, key, what string) error {
	return bad(key, "required: "+what)
}

// checkName refuses a blank or oversized name: matching is exact, so a blank
// name could never be asked about (GET grants/status refuses it).
func checkName(field, v string, bad func(field, reason string) *domain.Error) error {
	if strings.TrimSpace(v) == "" {
		return bad(field, "must not be blank")
	}
	if len(v) > MaxGrantNameBytes {
		return bad(field, fmt.Sprintf("must be at most %d bytes", MaxGrantNameBytes))
	}
	return nil
}

// ListGrants lists the account's grants newest first, optionally of one
// sub-agent, each with GrantListState (the status route's check, governance
// included).
func (a *App) ListGrants(ctx context.Context, p Principal, subagent *string) (api.GrantList, error) {
	rows, err := a.store.Grants(ctx, p.UserID, subagent)
	if err != nil {
		return api.GrantList{}, err
	}
	return a.listedGrants(ctx, p, rows, len(rows))
}

// NewestGrants is ListGrants' first limit grants, and whether there are
// more: what a page shows (the console's gate panel) at the cost of limit
// rows, never counting them all (a count read every grant row: 25 ms at
// 10,000 on PostgreSQL).
func (a *App) NewestGrants(ctx context.Context, p Principal, limit int) (api.GrantList, bool, error) {
	rows, err := a.store.NewestGrants(ctx, p.UserID, limit+1)
	if err != nil {
		return api.GrantList{}, false, err
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	list, err := a.listedGrants(ctx, p, rows, len(rows))
	return list, more, err
}

// listedGrants is rows as listed, each with its state under the rules in
// force; count is the list's count.
func (a *App) listedGrants(ctx context.Context, p Principal, rows []store.Grant, count int) (api.GrantList, error) {
	now := a.now()
	rules, err := a.EnactedRules(ctx, nil, p.UserID)
	if err != nil {
		return api.GrantList{}, err
	}
	out := make([]api.ListedGrant, 0, len(rows))
	for _, r := range rows {
		g, err := domainGrant(r)
		if err != nil {
			return api.GrantList{}, err
		}
		state, reason := domain.GrantListState(g, rules, now)
		out = append(out, api.ListedGrant{GrantRecord: recordOf(g), State: state, StateReason: reason,
			Uses: g.Uses, Remaining: g.Remaining(), RevokedAt: formatOpt(g.RevokedAt)})
	}
	return api.GrantList{Count: count, Grants: out}, nil
}

// MalformedRevoke is the 422 malformed_revoke answer.
func MalformedRevoke(field, reason string) *domain.Error {
	return malformed(domain.CodeMalformedRevoke, field, reason)
}

// RevokeGrant revokes grantID of subagent: the grant the gate matches for that
// id (the live one, else the newest). A grant already revoked answers
// already_revoked and writes nothing; otherwise revoked_at is set and one
// grant.revoked event is appended in the same transaction, and onGrantRevoked
// runs there too.
func (a *App) RevokeGrant(ctx context.Context, p Principal, grantID string, req api.RevokeRequest) (api.RevokeResult, error) {
	if req.Subagent == nil {
		return api.RevokeResult{}, required(MalformedRevoke, "subagent", "the sub-agent's exact name")
	}
	subagent := *req.Subagent
	if err := checkName("subagent", subagent, MalformedRevoke); err != nil {
		return api.RevokeResult{}, err
	}
	now := a.now().UTC().Truncate(time.Microsecond)
	var outcome string
	var revokedAt time.Time
	err := a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		rows, err := a.store.GrantsByID(ctx, t.SQL(), p.UserID, grantID)
		if err != nil {
			return err
		}
		var mine []store.Grant
		for _, r := range rows {
			if r.Subagent == subagent {
				mine = append(mine, r)
			}
		}
		grants, err := domainGrants(mine)
		if err != nil {
			return err
		}
		ans := domain.DecideGate(grants, nil, now, subagent, nil, &grantID)
		if ans.Grant == nil {
			return (&domain.Error{Code: domain.CodeNoGrant,
				Detail: fmt.Sprintf("no grant %s for sub-agent %q", grantID, subagent)}).With("grant_id", grantID)
		}
		g := *ans.Grant
		if g.RevokedAt != nil {
			outcome, revokedAt = OutcomeAlreadyRevoked, *g.RevokedAt
			return nil
		}
		row, ok := rowOf(mine, g)
		if !ok {
			return fmt.Errorf("revoke: matched grant %s not among its rows", g.GrantID)
		}
		revoked, err := a.store.RevokeGrant(ctx, t.SQL(), p.UserID, row.GrantID, row.Generation, now)
		if err != nil {
			return err
		}
		if !revoked { // unreachable under the head lock; say so rather than guess
			return fmt.Errorf("revoke: grant %s changed under the account lock", g.GrantID)
		}
		g.RevokedAt = &now
		outcome, revokedAt = OutcomeRevoked, now
		if _, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventGrantRevoked,
			Raw: grantRevokedEvent{GrantRecord: recordOf(g), RevokedAt: domain.FormatTimestamp(now)}}); err != nil {
			return err
		}
		return a.onGrantRevoked(ctx, t, p, g)
	})
	if err != nil {
		return api.RevokeResult{}, err
	}
	// Not a gate check of the caller's: uncounted.
	after, _, err := a.gate(ctx, nil, p.UserID, subagent, nil, nil, now)
	if err != nil {
		return api.RevokeResult{}, err
	}
	return api.RevokeResult{GrantID: grantID, Outcome: outcome, Subagent: subagent, RevokedAt: domain.FormatTimestamp(revokedAt),
		StatusAfter: api.RevokeGateState{Authorized: after.Authorized, Reason: after.Reason, Status: after.Status, Subagent: after.Subagent}}, nil
}

// grantRevokedEvent is the raw of a grant.revoked chain event.
type grantRevokedEvent struct {
	api.GrantRecord
	RevokedAt string `json:"revoked_at"`
}

// onGrantRevoked runs inside the revoke's transaction, after its chain event,
// once per grant actually revoked (never for already_revoked): it writes the
// grant.revoked notice's rows (in_app, email, webhook; severity warning;
// SPEC.md "Grant (status)"), which commit or roll back with the revocation,
// so a revoke that answers 200 always has them.
func (a *App) onGrantRevoked(ctx context.Context, t *writer.Tx, p Principal, g domain.Grant) error {
	_, err := a.notify(ctx, t, p.UserID, Notice{Type: domain.NoticeGrantRevoked,
		Subject: map[string]any{"grant_id": g.GrantID, "subagent": g.Subagent}})
	return err
}

// DelegationKey publishes the service identity's public half, which verifies
// every token's binding signature offline.
func (a *App) DelegationKey() api.DelegationPublicKey {
	return api.DelegationPublicKey{KeyID: a.ServiceKeyID(), Algorithm: "ed25519",
		PublicKey: base64.StdEncoding.EncodeToString(a.ServicePublicKey())}
}
