package app

// The delegation gate's use cases (SPEC.md "Grants", CONTRACT.md "Delegation
// tokens"): write a grant with its token and chain event, answer the gate,
// meter uses, revoke. Every decision is domain's (DecideGate, GrantState,
// GrantListState, LiveGrant, Overreach); this file loads their inputs and
// stores their outcomes. Choices are written down in docs/decisions/gate.md.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
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

// GrantRequest is a POST /v1/grants body whose keys and value types the HTTP
// layer already checked (aliases, unknown keys and unreadable values refused).
type GrantRequest struct {
	GrantID      *string // nil: generated
	Subagent     string
	ParentAgent  *string
	AllowedTools []string
	MaxToolCalls int64
	ExpiresAt    time.Time
}

// RecordOf renders a grant as its Grant record.
func RecordOf(g domain.Grant) api.GrantRecord {
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

// GrantCreated is the answer of POST /v1/grants.
type GrantCreated struct {
	Grant      api.GrantRecord
	Status     domain.GateAnswer
	Delegation json.RawMessage // the delegation token (CONTRACT.md)
}

// CreateGrant writes a grant: checks its values, refuses a live id (409) and
// overreach of the parent's live grant (403), signs its delegation token, and
// stores it with one grant.created chain event in one transaction. Readable but
// unusable values (past expiry, out-of-range budget) are stored and the status
// says so (docs/decisions/gate.md).
func (a *App) CreateGrant(ctx context.Context, p Principal, req GrantRequest) (GrantCreated, error) {
	if err := checkGrantRequest(&req); err != nil {
		return GrantCreated{}, err
	}
	now := a.Now().UTC().Truncate(time.Microsecond)
	id := ""
	if req.GrantID != nil {
		id = *req.GrantID
	} else {
		var err error
		if id, err = a.newID("g-", 16); err != nil {
			return GrantCreated{}, err
		}
	}
	g := domain.Grant{
		GrantID: id, Subagent: req.Subagent, AllowedTools: req.AllowedTools, MaxToolCalls: req.MaxToolCalls,
		ExpiresAt: req.ExpiresAt.UTC().Truncate(time.Microsecond), CreatedAt: now,
		Epoch: domain.NewEpochStamp(a.Cfg.EpochAnchor, now),
	}
	if g.AllowedTools == nil {
		g.AllowedTools = []string{}
	}
	if req.ParentAgent != nil {
		g.ParentAgent = *req.ParentAgent
	}
	record := RecordOf(g)
	recordJSON, err := json.Marshal(record)
	if err != nil {
		return GrantCreated{}, err
	}
	// Signing needs nothing the transaction decides, so it happens outside it.
	token, err := delegation.IssueToken(recordJSON, a.ServiceKey, a.Rand)
	if err != nil {
		return GrantCreated{}, err
	}
	epochJSON, err := json.Marshal(g.Epoch)
	if err != nil {
		return GrantCreated{}, err
	}

	err = a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		// The account's chain head orders its grant writes: the live-id and
		// overreach checks below see every grant committed before this one.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		same, err := a.Store.GrantsByID(ctx, t.SQL(), p.UserID, id)
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
			rows, err := a.Store.GateCandidates(ctx, t.SQL(), p.UserID, g.ParentAgent, nil, now)
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
		gen, err := a.Store.NextGrantGeneration(ctx, t.SQL(), p.UserID, id)
		if err != nil {
			return err
		}
		row := store.Grant{UserID: p.UserID, GrantID: id, Generation: gen, Subagent: g.Subagent, ParentAgent: record.ParentAgent,
			AllowedTools: g.AllowedTools, MaxToolCalls: g.MaxToolCalls, ExpiresAt: g.ExpiresAt, CreatedAt: g.CreatedAt,
			Epoch: epochJSON, Token: token}
		if err := a.Store.InsertGrant(ctx, t.SQL(), &row); err != nil {
			return err
		}
		_, err = a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventGrantCreated, Raw: record})
		return err
	})
	if err != nil {
		return GrantCreated{}, err
	}
	// Read back through the gate's own reader, restricted to this grant.
	status, _, err := a.gate(ctx, nil, p.UserID, g.Subagent, nil, &id, now)
	if err != nil {
		return GrantCreated{}, err
	}
	return GrantCreated{Grant: record, Status: status, Delegation: token}, nil
}

// checkGrantRequest refuses values no grant can hold (422 malformed_grant).
func checkGrantRequest(req *GrantRequest) error {
	if req.GrantID != nil && !grantIDForm().MatchString(*req.GrantID) {
		return MalformedGrant("grant_id", "must have the form g-<hex> (lowercase hex digits, at most 64), or be omitted to have one generated")
	}
	if err := checkName("subagent", req.Subagent, MalformedGrant); err != nil {
		return err
	}
	if req.ParentAgent != nil {
		if err := checkName("parent_agent", *req.ParentAgent, MalformedGrant); err != nil {
			return err
		}
	}
	if len(req.AllowedTools) > MaxGrantTools {
		return MalformedGrant("allowed_tools", fmt.Sprintf("at most %d tools", MaxGrantTools))
	}
	for i, tool := range req.AllowedTools {
		if err := checkName(fmt.Sprintf("allowed_tools[%d]", i), tool, MalformedGrant); err != nil {
			return err
		}
	}
	return nil
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

// GrantStatus is the gate's reader (GET /v1/grants/status): the sub-agent's
// candidate grants and the enacted governance rules, decided by DecideGate.
// Every status the service shows (status route, grant response, revoke's
// status_after, use's refusal) comes from here.
func (a *App) GrantStatus(ctx context.Context, p Principal, subagent string, tool, grantID *string, now time.Time) (domain.GateAnswer, error) {
	ans, _, err := a.gate(ctx, nil, p.UserID, subagent, tool, grantID, now)
	if err == nil {
		a.countGate(p.UserID, ans.Status)
	}
	return ans, err
}

// gate answers for subagent and returns the candidate rows it decided over.
//
// Outside a transaction (q nil) the inputs may come from a.gateCache, which
// holds exactly what the database would answer (readcache.go); inside one they
// are always read from the transaction.
func (a *App) gate(ctx context.Context, q store.Querier, userID, subagent string, tool, grantID *string, now time.Time) (domain.GateAnswer, []store.Grant, error) {
	in, err := a.gateInputs(ctx, q, userID, subagent, grantID, now)
	if err != nil {
		return domain.GateAnswer{}, nil, err
	}
	return domain.DecideGate(in.grants, in.rules, now, subagent, tool, grantID), in.rows, nil
}

// writeGate is a write that changes what the gate reads for userID (grants,
// uses, enacted rules): readers of a.gateCache bypass it from before the
// commit until the write ended, whatever happened.
func (a *App) writeGate(ctx context.Context, userID string, fn func(t *writer.Tx) error) error {
	return a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.gateCache, userID)
		return fn(t)
	})
}

// gateKey names one cached gate read of an account: the candidates of a
// sub-agent, optionally restricted to one grant id, or (rules) the account's
// enacted rules, which every sub-agent's reads share. The tool is not part of
// it: the candidates do not depend on it, only the decision does.
type gateKey struct {
	subagent string
	grantID  string
	oneID    bool
	rules    bool
}

// gateRead is what the gate decides over. Its slices are shared by every
// reader of the cache entry, so nothing may modify them.
type gateRead struct {
	rows   []store.Grant
	grants []domain.Grant
	rules  []domain.GovernanceRule
	// atMicros is the wall-clock time (Unix µs, as the query compared it) the
	// candidates were selected for: grants expired at that time were left out,
	// which stays right for any later time but not for an earlier one (a clock
	// stepped back), so such a reader reads afresh.
	atMicros int64
}

// maxCachedCandidates keeps the cache's memory bounded by entries: a
// sub-agent with more live grants than this is read from the database.
const maxCachedCandidates = 64

func (a *App) gateInputs(ctx context.Context, q store.Querier, userID, subagent string, grantID *string, now time.Time) (gateRead, error) {
	if q != nil {
		return a.readGateInputs(ctx, q, userID, subagent, grantID, now)
	}
	key := gateKey{subagent: subagent}
	if grantID != nil {
		key.grantID, key.oneID = *grantID, true
	}
	candidates, ticket, hit := a.gateCache.Get(userID, key)
	if !hit || now.UnixMicro() < candidates.atMicros {
		var err error
		if candidates, err = a.readCandidates(ctx, nil, userID, subagent, grantID, now); err != nil {
			return gateRead{}, err
		}
		if len(candidates.rows) <= maxCachedCandidates {
			a.gateCache.Put(userID, ticket, key, candidates)
		}
	}
	rules, ticket, hit := a.gateCache.Get(userID, gateKey{rules: true})
	if !hit {
		var err error
		if rules.rules, err = a.EnactedRules(ctx, nil, userID); err != nil {
			return gateRead{}, err
		}
		a.gateCache.Put(userID, ticket, gateKey{rules: true}, rules)
	}
	candidates.rules = rules.rules
	return candidates, nil
}

// readGateInputs reads the gate's inputs through q, bypassing the cache.
func (a *App) readGateInputs(ctx context.Context, q store.Querier, userID, subagent string, grantID *string, now time.Time) (gateRead, error) {
	in, err := a.readCandidates(ctx, q, userID, subagent, grantID, now)
	if err != nil {
		return gateRead{}, err
	}
	in.rules, err = a.EnactedRules(ctx, q, userID)
	return in, err
}

func (a *App) readCandidates(ctx context.Context, q store.Querier, userID, subagent string, grantID *string, now time.Time) (gateRead, error) {
	rows, err := a.Store.GateCandidates(ctx, q, userID, subagent, grantID, now)
	if err != nil {
		return gateRead{}, err
	}
	grants, err := domainGrants(rows)
	if err != nil {
		return gateRead{}, err
	}
	return gateRead{rows: rows, grants: grants, atMicros: now.UnixMicro()}, nil
}

// ListedGrant is one grant of GET /v1/grants with its state from the gate.
type ListedGrant struct {
	Grant       domain.Grant
	State       string
	StateReason string
}

// ListGrants lists the account's grants newest first, optionally of one
// sub-agent, each with GrantListState (the status route's check, governance
// included).
func (a *App) ListGrants(ctx context.Context, p Principal, subagent *string) ([]ListedGrant, error) {
	now := a.Now()
	rows, err := a.Store.Grants(ctx, p.UserID, subagent)
	if err != nil {
		return nil, err
	}
	rules, err := a.EnactedRules(ctx, nil, p.UserID)
	if err != nil {
		return nil, err
	}
	out := make([]ListedGrant, 0, len(rows))
	for _, r := range rows {
		g, err := domainGrant(r)
		if err != nil {
			return nil, err
		}
		state, reason := domain.GrantListState(g, rules, now)
		out = append(out, ListedGrant{Grant: g, State: state, StateReason: reason})
	}
	return out, nil
}

// UseResult is the answer of POST /v1/grants/{grant_id}/use.
type UseResult struct {
	Grant domain.Grant // after the use
}

// MalformedUse is the 422 malformed_use answer.
func MalformedUse(field, reason string) *domain.Error {
	return malformed(domain.CodeMalformedUse, field, reason)
}

// UseGrant records n tool calls against grantID of subagent: all of n or
// nothing. The gate (governance included) must authorize the grant, and n must
// fit its remaining budget at the moment of the write: the store's conditional
// UPDATE decides, so concurrent uses on any replica never overspend. A use
// appends no chain event (docs/decisions/gate.md: the meter is not the record).
func (a *App) UseGrant(ctx context.Context, p Principal, grantID, subagent string, n int64) (UseResult, error) {
	if err := checkName("subagent", subagent, MalformedUse); err != nil {
		return UseResult{}, err
	}
	if n < 1 {
		return UseResult{}, MalformedUse("n", "must be a positive integer")
	}
	now := a.Now()
	ans, rows, err := a.gate(ctx, nil, p.UserID, subagent, nil, &grantID, now)
	if err != nil {
		return UseResult{}, err
	}
	if ans.Status == domain.GateBudgetExhausted {
		return UseResult{}, budgetExhausted(*ans.Grant, n)
	}
	if !ans.Authorized {
		return UseResult{}, notAuthorized(ans)
	}
	g := *ans.Grant
	if n > g.Remaining() {
		return UseResult{}, budgetExhausted(g, n)
	}
	row, ok := rowOf(rows, g)
	if !ok {
		return UseResult{}, fmt.Errorf("use: matched grant %s not among its rows", g.GrantID)
	}
	var uses int64
	var consumed bool
	err = a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		// Re-check the gate inside the write, holding the account's head: an
		// enactment (which takes the same lock) or a newer grant committed since
		// the check above must be obeyed by this use, not only by the next one.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		again, _, err := a.gate(ctx, t.SQL(), p.UserID, subagent, nil, &grantID, now)
		if err != nil {
			return err
		}
		if !again.Authorized && again.Status != domain.GateBudgetExhausted {
			return notAuthorized(again)
		}
		uses, consumed, err = a.Store.ConsumeGrantUses(ctx, t.SQL(), p.UserID, row.GrantID, row.Generation, n, now)
		return err
	})
	if err != nil {
		return UseResult{}, err
	}
	if consumed {
		a.countUses(p.UserID, n)
		g.Uses = uses
		return UseResult{Grant: g}, nil
	}
	// The grant changed between the check and the write: say what it is now.
	fresh, err := a.Store.GrantRow(ctx, nil, p.UserID, row.GrantID, row.Generation)
	if err != nil {
		return UseResult{}, err
	}
	d, err := domainGrant(fresh)
	if err != nil {
		return UseResult{}, err
	}
	switch st, reason := domain.GrantState(d, now, nil); st {
	case domain.GateAuthorized, domain.GateBudgetExhausted:
		return UseResult{}, budgetExhausted(d, n)
	default:
		return UseResult{}, notAuthorized(domain.GateAnswer{Status: st, Reason: reason, Subagent: subagent})
	}
}

func budgetExhausted(g domain.Grant, n int64) error {
	return (&domain.Error{Code: domain.CodeBudgetExhausted,
		Detail: fmt.Sprintf("grant %s has %d of %d tool calls remaining; a use of %d does not fit, so none was recorded",
			g.GrantID, g.Remaining(), g.MaxToolCalls, n)}).
		With("uses", g.Uses).With("remaining", g.Remaining()).With("max_tool_calls", g.MaxToolCalls).With("n", n)
}

// NoGrantToUse is the answer of a use naming a grant id that names nothing
// (one the text rule refuses before the store is asked): what the gate
// answers for any unknown id.
func NoGrantToUse() error {
	return notAuthorized(domain.GateAnswer{Status: domain.GateNoGrant, Reason: "no grant with that grant_id"})
}

func notAuthorized(ans domain.GateAnswer) error {
	e := (&domain.Error{Code: domain.CodeNotAuthorized,
		Detail: "the gate does not authorize this grant (" + ans.Status + "): " + ans.Reason}).
		With("gate_status", ans.Status).With("gate_reason", ans.Reason)
	if ans.ProposalID != "" {
		e = e.With("proposal_id", ans.ProposalID)
	}
	return e
}

// RevokeResult is the answer of POST /v1/grants/{grant_id}/revoke.
type RevokeResult struct {
	GrantID     string
	Subagent    string
	Outcome     string // OutcomeRevoked or OutcomeAlreadyRevoked
	RevokedAt   time.Time
	StatusAfter domain.GateAnswer // the sub-agent's status once revoked
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
func (a *App) RevokeGrant(ctx context.Context, p Principal, grantID, subagent string) (RevokeResult, error) {
	if err := checkName("subagent", subagent, MalformedRevoke); err != nil {
		return RevokeResult{}, err
	}
	now := a.Now().UTC().Truncate(time.Microsecond)
	res := RevokeResult{GrantID: grantID, Subagent: subagent}
	err := a.writeGate(ctx, p.UserID, func(t *writer.Tx) error {
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		rows, err := a.Store.GrantsByID(ctx, t.SQL(), p.UserID, grantID)
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
			res.Outcome, res.RevokedAt = OutcomeAlreadyRevoked, *g.RevokedAt
			return nil
		}
		row, ok := rowOf(mine, g)
		if !ok {
			return fmt.Errorf("revoke: matched grant %s not among its rows", g.GrantID)
		}
		revoked, err := a.Store.RevokeGrant(ctx, t.SQL(), p.UserID, row.GrantID, row.Generation, now)
		if err != nil {
			return err
		}
		if !revoked { // unreachable under the head lock; say so rather than guess
			return fmt.Errorf("revoke: grant %s changed under the account lock", g.GrantID)
		}
		g.RevokedAt = &now
		res.Outcome, res.RevokedAt = OutcomeRevoked, now
		if _, err := a.appendServerEvent(ctx, t, p, ServerEvent{EventType: EventGrantRevoked,
			Raw: grantRevokedEvent{GrantRecord: RecordOf(g), RevokedAt: domain.FormatTimestamp(now)}}); err != nil {
			return err
		}
		return a.onGrantRevoked(ctx, t, p, g)
	})
	if err != nil {
		return RevokeResult{}, err
	}
	// Not a gate check of the caller's: uncounted.
	res.StatusAfter, _, err = a.gate(ctx, nil, p.UserID, subagent, nil, nil, now)
	return res, err
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

// DelegationPublicKey is GET /v1/delegation/public-key.
type DelegationPublicKey struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	PublicKey string `json:"public_key"`
}

// DelegationKey publishes the service identity's public half, which verifies
// every token's binding signature offline.
func (a *App) DelegationKey() DelegationPublicKey {
	return DelegationPublicKey{KeyID: a.ServiceKeyID(), Algorithm: "ed25519",
		PublicKey: base64.StdEncoding.EncodeToString(a.ServicePublicKey())}
}

// domainGrant converts a stored row into what the gate decides over.
func domainGrant(r store.Grant) (domain.Grant, error) {
	g := domain.Grant{GrantID: r.GrantID, Subagent: r.Subagent, AllowedTools: r.AllowedTools, MaxToolCalls: r.MaxToolCalls,
		ExpiresAt: r.ExpiresAt, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt, Uses: r.Uses}
	if r.ParentAgent != nil {
		g.ParentAgent = *r.ParentAgent
	}
	var err error
	if g.Epoch, err = parseEpoch(r.Epoch); err != nil {
		return g, fmt.Errorf("grant %s: stored epoch: %w", r.GrantID, err)
	}
	return g, nil
}

// epochs caches decoded epoch stamps by their stored JSON. Every grant written
// on one UTC day carries the same stamp, so the cache holds about one entry per
// day and spares the status check a JSON decode per candidate grant.
var epochs sync.Map // string → api.EpochStamp

func parseEpoch(raw []byte) (api.EpochStamp, error) {
	if e, ok := epochs.Load(string(raw)); ok {
		return e.(api.EpochStamp), nil
	}
	var e api.EpochStamp
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, err
	}
	epochs.Store(string(raw), e)
	return e, nil
}

func domainGrants(rows []store.Grant) ([]domain.Grant, error) {
	out := make([]domain.Grant, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = domainGrant(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rowOf finds the stored row a decided grant came from. Rows sharing an id
// differ in generation, which the gate does not see; two rows identical in
// every field the gate sees answer alike, so the latest generation stands for
// them.
func rowOf(rows []store.Grant, g domain.Grant) (store.Grant, bool) {
	var found *store.Grant
	for i := range rows {
		d, err := domainGrant(rows[i])
		if err == nil && reflect.DeepEqual(d, g) && (found == nil || rows[i].Generation > found.Generation) {
			found = &rows[i]
		}
	}
	if found == nil {
		return store.Grant{}, false
	}
	return *found, true
}
