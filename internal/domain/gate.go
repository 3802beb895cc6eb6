package domain

// The delegation gate: which grant, if any, authorizes a sub-agent's call
// (SPEC.md "Grant gate answer (status)"), and whether a child grant overreaches
// its parent's live grant (CONTRACT.md "Delegation tokens"). Pure decisions over
// grants and rules the caller has loaded; the decisions that fill the spec's gaps
// are written down in docs/decisions/gate.md.

import (
	"encoding/json"
	"fmt"
	"github.com/auditchain/auditchain/pkg/api"
	"slices"
	"time"
)

// Gate statuses (SPEC.md "Grant gate answer (status)").
const (
	GateAuthorized         = "authorized"
	GateNoGrant            = "no_grant"
	GateExpired            = "expired"
	GateRevoked            = "revoked"
	GateBudgetExhausted    = "budget_exhausted"
	GateToolNotAllowed     = "tool_not_allowed"
	GateInvalidExpiry      = "invalid_expiry"
	GateInvalidLimit       = "invalid_limit"
	GateDeniedByGovernance = "denied_by_governance"
)

// Bounds of a usable grant. SPEC.md leaves the conditions of invalid_expiry and
// invalid_limit "not shown"; a stored grant outside them answers those statuses
// (docs/decisions/gate.md).
const (
	// MaxGrantToolCalls is the largest usable max_tool_calls; the smallest is 1.
	MaxGrantToolCalls int64 = 1_000_000_000
	// MaxGrantLifetime is the longest usable span from created_at to expires_at.
	MaxGrantLifetime = 366 * 24 * time.Hour
)

// Error codes of the grant routes and the overreach refusal (SPEC.md "Errors",
// CONTRACT.md "Delegation tokens").
const (
	CodeMalformedGrant  = "malformed_grant"
	CodeGrantIDExists   = "grant_id_exists"
	CodeGrantOverreach  = "grant_overreach"
	CodeMalformedQuery  = "malformed_query"
	CodeNoGrant         = "no_grant"
	CodeMalformedRevoke = "malformed_revoke"
	CodeBudgetExhausted = "budget_exhausted"
	CodeNotAuthorized   = "not_authorized"
	CodeMalformedUse    = "malformed_use"
)

// Grant is a stored grant record (SPEC.md "Grant record") with the bookkeeping
// the gate needs: RevokedAt (nil while not revoked) and Uses, the tool calls
// recorded against MaxToolCalls so far.
type Grant struct {
	GrantID      string
	Subagent     string
	ParentAgent  string
	AllowedTools []string
	MaxToolCalls int64
	ExpiresAt    time.Time
	CreatedAt    time.Time
	RevokedAt    *time.Time
	Epoch        api.EpochStamp
	Uses         int64
}

// Remaining is max_tool_calls minus uses, never below zero.
func (g Grant) Remaining() int64 { return max(0, g.MaxToolCalls-g.Uses) }

// GateAnswer is the gate's answer (SPEC.md "Grant status (gate answer)").
type GateAnswer struct {
	Status     string
	Authorized bool   // true only when Status is GateAuthorized
	Reason     string // human-readable: names why
	Subagent   string
	Grant      *Grant // the matched grant (a copy); nil when none matched
	Uses       int64  // of Grant; 0 when none matched
	Remaining  int64  // of Grant; 0 when none matched
	ProposalID string // the enacted deny rule; set only for GateDeniedByGovernance
}

// GrantState is one grant's status for a call naming tool (nil: no tool named),
// ignoring governance. The first failing check wins, in this order:
// revoked, expired (now at or after expires_at), invalid_expiry, invalid_limit,
// budget_exhausted (uses at or above max_tool_calls), tool_not_allowed (only when
// a tool is named: SPEC.md "the same call without tool is authorized").
// The grant list uses GrantListState, which adds governance.
func GrantState(g Grant, now time.Time, tool *string) (status string, reason string) {
	status = grantStatus(g, now, tool)
	return status, grantReason(status, g, tool)
}

// grantStatus is GrantState without the reason, so DecideGate formats only the
// reason it answers with.
func grantStatus(g Grant, now time.Time, tool *string) string {
	switch {
	case g.RevokedAt != nil:
		return GateRevoked
	case !now.Before(g.ExpiresAt):
		return GateExpired
	case g.ExpiresAt.Sub(g.CreatedAt) > MaxGrantLifetime:
		return GateInvalidExpiry
	case g.MaxToolCalls < 1 || g.MaxToolCalls > MaxGrantToolCalls:
		return GateInvalidLimit
	case g.Uses >= g.MaxToolCalls:
		return GateBudgetExhausted
	case tool != nil && !slices.Contains(g.AllowedTools, *tool):
		return GateToolNotAllowed
	}
	return GateAuthorized
}

// grantReason names why g answers status: the field that failed and its value.
func grantReason(status string, g Grant, tool *string) string {
	switch status {
	case GateRevoked:
		return fmt.Sprintf("grant %s was revoked at %s", g.GrantID, stamp(*g.RevokedAt))
	case GateExpired:
		return fmt.Sprintf("grant %s expired at %s", g.GrantID, stamp(g.ExpiresAt))
	case GateInvalidExpiry:
		return fmt.Sprintf("grant %s has expires_at %s, more than %d days after created_at %s",
			g.GrantID, stamp(g.ExpiresAt), MaxGrantLifetime/(24*time.Hour), stamp(g.CreatedAt))
	case GateInvalidLimit:
		return fmt.Sprintf("grant %s has max_tool_calls %d, outside 1 to %d", g.GrantID, g.MaxToolCalls, MaxGrantToolCalls)
	case GateBudgetExhausted:
		return fmt.Sprintf("grant %s has used %d of %d tool calls; 0 remaining", g.GrantID, g.Uses, g.MaxToolCalls)
	case GateToolNotAllowed:
		if len(g.AllowedTools) == 0 {
			return fmt.Sprintf("grant %s allows no tool by name, so not %q", g.GrantID, *tool)
		}
		// The list as JSON, as the grant's allowed_tools reads on the wire.
		list, _ := json.Marshal(g.AllowedTools)
		return fmt.Sprintf("grant %s does not allow tool %q (allowed_tools: %s)", g.GrantID, *tool, list)
	}
	what := fmt.Sprintf("sub-agent %q", g.Subagent)
	if tool != nil {
		what = fmt.Sprintf("tool %q for sub-agent %q", *tool, g.Subagent)
	}
	return fmt.Sprintf("grant %s authorizes %s until %s; %d of %d tool calls remaining",
		g.GrantID, what, stamp(g.ExpiresAt), g.Remaining(), g.MaxToolCalls)
}

// DecideGate answers GET grants/status for subagent, optionally naming tool and
// restricting the check to the grant grantID (SPEC.md "Grant gate answer
// (status)", "Matching"):
//   - candidates are the grants whose sub-agent equals subagent exactly (case and
//     whitespace count) and, when grantID is given, whose id equals it; no
//     candidate answers no_grant;
//   - the most recent authorized candidate wins (CreatedAt, then GrantID), so a
//     failing recent grant never shadows an older live one;
//   - when none is authorized, the most recent candidate's own status answers
//     (a sub-agent whose only grant is revoked answers revoked);
//   - an enacted deny rule (GovernanceDenial) overrides all of it: the answer is
//     denied_by_governance naming the proposal, carrying the grant that would
//     otherwise have matched, or none — a rule is the stronger statement and
//     outlasts any grant.
//
// grants may hold other sub-agents' grants; neither input is modified.
func DecideGate(grants []Grant, rules []GovernanceRule, now time.Time, subagent string, tool *string, grantID *string) GateAnswer {
	var newest, live *Grant // most recent candidate; most recent authorized candidate
	for i := range grants {
		g := &grants[i]
		if g.Subagent != subagent || (grantID != nil && g.GrantID != *grantID) {
			continue
		}
		if newest == nil || newer(g, newest) {
			newest = g
		}
		if (live == nil || newer(g, live)) && grantStatus(*g, now, tool) == GateAuthorized {
			live = g
		}
	}

	a := GateAnswer{Subagent: subagent}
	matched := live
	if matched == nil {
		matched = newest
	}
	switch {
	case matched != nil:
		a.Status, a.Reason = GrantState(*matched, now, tool)
	case grantID != nil:
		a.Status, a.Reason = GateNoGrant, fmt.Sprintf("no grant %s for sub-agent %q", *grantID, subagent)
	default:
		a.Status, a.Reason = GateNoGrant, fmt.Sprintf("no grant for sub-agent %q", subagent)
	}
	if matched != nil {
		g := *matched
		a.Grant, a.Uses, a.Remaining = &g, g.Uses, g.Remaining()
	}

	if id, denied := GovernanceDenial(rules, subagent, tool); denied {
		a.Reason = fmt.Sprintf("enacted proposal %s denies %s (the grant check alone answers %s: %s)",
			id, ruleScope(rules, id), a.Status, a.Reason)
		a.Status, a.ProposalID = GateDeniedByGovernance, id
	}
	a.Authorized = a.Status == GateAuthorized
	return a
}

// GrantListState is a grant's state and state_reason in GET /v1/grants, "computed
// by the same check as the status route" (SPEC.md "Grant record"): the gate's
// answer for that one grant and no tool, so an enacted deny of the whole
// sub-agent shows as denied_by_governance. It checks g alone rather than
// filtering by grant_id, because a non-live grant's id may be reused (409
// grant_id_exists covers only live grants).
func GrantListState(g Grant, rules []GovernanceRule, now time.Time) (state, reason string) {
	a := DecideGate([]Grant{g}, rules, now, g.Subagent, nil, nil)
	return a.Status, a.Reason
}

// LiveGrant is the most recent grant of subagent that is authorized without
// naming a tool: the parent's "live grant" a child is checked against (SPEC.md
// "POST /v1/grants"). Governance is not consulted: a deny rule stops the parent's
// calls, not the bounds its grant sets for children.
func LiveGrant(grants []Grant, now time.Time, subagent string) (Grant, bool) {
	var live *Grant
	for i := range grants {
		g := &grants[i]
		if g.Subagent == subagent && (live == nil || newer(g, live)) && grantStatus(*g, now, nil) == GateAuthorized {
			live = g
		}
	}
	if live == nil {
		return Grant{}, false
	}
	return *live, true
}

// Overreach names, sorted, the fields in which child is broader than parent, the
// live grant of the child's parent agent (see LiveGrant); none is nil. A child is
// broader when it names a tool parent does not allow ("allowed_tools"), expires
// later ("expires_at"), or states a larger max_tool_calls than parent's
// ("max_tool_calls": compared with the parent's budget, not its remaining calls,
// so the same request gets the same answer however far the parent has used it).
func Overreach(parent, child Grant) []string {
	var fields []string // appended in sorted order
	for _, t := range child.AllowedTools {
		if !slices.Contains(parent.AllowedTools, t) {
			fields = append(fields, "allowed_tools")
			break
		}
	}
	if child.ExpiresAt.After(parent.ExpiresAt) {
		fields = append(fields, "expires_at")
	}
	if child.MaxToolCalls > parent.MaxToolCalls {
		fields = append(fields, "max_tool_calls")
	}
	return fields
}

// newer orders grants by recency: later CreatedAt, then the greater GrantID, so
// the choice never depends on the order the store returned them in.
func newer(a, b *Grant) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.GrantID > b.GrantID
}

// ruleScope describes what the enacted rule id covers, for the answer's reason.
func ruleScope(rules []GovernanceRule, id string) string {
	for _, r := range rules {
		if r.ProposalID == id {
			if r.Tool != nil {
				return fmt.Sprintf("tool %q for sub-agent %q", *r.Tool, r.Subagent)
			}
			return fmt.Sprintf("sub-agent %q entirely", r.Subagent)
		}
	}
	return "this call"
}

// stamp writes an instant in SPEC.md's timestamp form for reasons and
// cached_at: UTC with an explicit +00:00 offset, trailing zero fractions dropped.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.999999999-07:00") }
