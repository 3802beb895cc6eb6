package domain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var gateNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// liveGrant is a grant of subagent that is authorized at gateNow, created age
// before it: Read and Grep allowed, 3 of 10 calls used, a day left.
func liveGrant(id, subagent string, age time.Duration) Grant {
	return Grant{
		GrantID:      id,
		Subagent:     subagent,
		ParentAgent:  "orchestrator",
		AllowedTools: []string{"Read", "Grep"},
		MaxToolCalls: 10,
		Uses:         3,
		CreatedAt:    gateNow.Add(-age),
		ExpiresAt:    gateNow.Add(24 * time.Hour),
	}
}

// editGrant returns g changed by each edit, leaving g itself alone.
func editGrant(g Grant, edits ...func(*Grant)) Grant {
	g.AllowedTools = append([]string(nil), g.AllowedTools...)
	for _, e := range edits {
		e(&g)
	}
	return g
}

// Edits that make a live grant fail in exactly one way, and two that narrow its tools.
func revokeGrant(g *Grant)    { g.RevokedAt = new(gateNow.Add(-time.Minute)) }
func expireGrant(g *Grant)    { g.ExpiresAt = gateNow.Add(-time.Minute) }
func expireGrantNow(g *Grant) { g.ExpiresAt = gateNow }
func overlongGrant(g *Grant)  { g.ExpiresAt = g.CreatedAt.Add(MaxGrantLifetime + time.Second) }
func zeroLimitGrant(g *Grant) { g.MaxToolCalls, g.Uses = 0, 0 }
func spendGrant(g *Grant)     { g.Uses = g.MaxToolCalls }
func onlyBashGrant(g *Grant)  { g.AllowedTools = []string{"Bash"} }
func noToolsGrant(g *Grant)   { g.AllowedTools = nil }

func TestGrantState(t *testing.T) {
	base := liveGrant("g-1", "coder", time.Hour)
	tests := []struct {
		name         string
		grant        Grant
		tool         *string
		wantStatus   string
		wantInReason []string
	}{
		{"live, no tool", base, nil, GateAuthorized, []string{"g-1", "7 of 10", "2026-03-02T12:00:00+00:00"}},
		{"live, allowed tool", base, new("Grep"), GateAuthorized, []string{`"Grep"`, "7 of 10"}},
		{"tool not in allowed_tools", base, new("Bash"), GateToolNotAllowed, []string{`"Bash"`, `(allowed_tools: ["Read","Grep"])`}},
		{"tool match is case-sensitive", base, new("read"), GateToolNotAllowed, []string{`"read"`}},
		{"empty allowed_tools, no tool", editGrant(base, noToolsGrant), nil, GateAuthorized, nil},
		{"empty allowed_tools, tool named", editGrant(base, noToolsGrant), new("Read"), GateToolNotAllowed, []string{"allows no tool", `"Read"`}},
		{"empty-slice allowed_tools, tool named", editGrant(base, func(g *Grant) { g.AllowedTools = []string{} }), new("Read"), GateToolNotAllowed, nil},
		{"revoked", editGrant(base, revokeGrant), nil, GateRevoked, []string{"revoked at 2026-03-01T11:59:00+00:00"}},
		{"expired", editGrant(base, expireGrant), nil, GateExpired, []string{"expired at 2026-03-01T11:59:00+00:00"}},
		{"expires exactly now", editGrant(base, expireGrantNow), nil, GateExpired, nil},
		{"expires one nanosecond after now", editGrant(base, func(g *Grant) { g.ExpiresAt = gateNow.Add(1) }), nil, GateAuthorized, nil},
		{"expiry already past at creation", editGrant(base, func(g *Grant) { g.ExpiresAt = g.CreatedAt.Add(-time.Hour) }), nil, GateExpired, nil},
		{"lifetime exactly the maximum", editGrant(base, func(g *Grant) { g.ExpiresAt = g.CreatedAt.Add(MaxGrantLifetime) }), nil, GateAuthorized, nil},
		{"lifetime above the maximum", editGrant(base, overlongGrant), nil, GateInvalidExpiry, []string{"366 days", "created_at"}},
		{"expiry in year 9999", editGrant(base, func(g *Grant) { g.ExpiresAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) }), nil, GateInvalidExpiry, nil},
		{"max_tool_calls 0", editGrant(base, zeroLimitGrant), nil, GateInvalidLimit, []string{"max_tool_calls 0", "1 to 1000000000"}},
		{"max_tool_calls negative", editGrant(base, func(g *Grant) { g.MaxToolCalls, g.Uses = -5, 0 }), nil, GateInvalidLimit, nil},
		{"max_tool_calls 1", editGrant(base, func(g *Grant) { g.MaxToolCalls, g.Uses = 1, 0 }), nil, GateAuthorized, []string{"1 of 1"}},
		{"max_tool_calls at the maximum", editGrant(base, func(g *Grant) { g.MaxToolCalls = MaxGrantToolCalls }), nil, GateAuthorized, nil},
		{"max_tool_calls above the maximum", editGrant(base, func(g *Grant) { g.MaxToolCalls = MaxGrantToolCalls + 1 }), nil, GateInvalidLimit, nil},
		{"one call left", editGrant(base, func(g *Grant) { g.Uses = 9 }), nil, GateAuthorized, []string{"1 of 10"}},
		{"uses exactly max", editGrant(base, spendGrant), nil, GateBudgetExhausted, []string{"used 10 of 10"}},
		{"uses above max", editGrant(base, func(g *Grant) { g.Uses = 12 }), nil, GateBudgetExhausted, []string{"used 12 of 10"}},

		// Precedence: revoked > expired > invalid_expiry > invalid_limit > budget_exhausted > tool_not_allowed.
		{"revoked beats expired", editGrant(base, revokeGrant, expireGrant), nil, GateRevoked, nil},
		{"expired beats invalid_expiry", editGrant(base, func(g *Grant) { g.CreatedAt = gateNow.Add(-400 * 24 * time.Hour) }, overlongGrant), nil, GateExpired, nil},
		{"invalid_expiry beats invalid_limit", editGrant(base, overlongGrant, zeroLimitGrant), nil, GateInvalidExpiry, nil},
		{"invalid_limit beats budget_exhausted", editGrant(base, func(g *Grant) { g.MaxToolCalls, g.Uses = 0, 5 }), nil, GateInvalidLimit, nil},
		{"budget_exhausted beats tool_not_allowed", editGrant(base, spendGrant), new("Bash"), GateBudgetExhausted, nil},
		{"every failure at once answers revoked", editGrant(base, revokeGrant, expireGrant, zeroLimitGrant, noToolsGrant), new("Bash"), GateRevoked, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, reason := GrantState(tt.grant, gateNow, tt.tool)
			if status != tt.wantStatus {
				t.Errorf("status = %s, want %s (reason %q)", status, tt.wantStatus, reason)
			}
			for _, s := range tt.wantInReason {
				if !strings.Contains(reason, s) {
					t.Errorf("reason %q does not contain %q", reason, s)
				}
			}
		})
	}
}

// gateSummary is the part of a GateAnswer the table compares; the reason is
// checked by substring.
type gateSummary struct {
	Status     string
	Authorized bool
	GrantID    string // "" when no grant matched
	Uses       int64
	Remaining  int64
	ProposalID string
}

func summarize(a GateAnswer) gateSummary {
	s := gateSummary{Status: a.Status, Authorized: a.Authorized, Uses: a.Uses, Remaining: a.Remaining, ProposalID: a.ProposalID}
	if a.Grant != nil {
		s.GrantID = a.Grant.GrantID
	}
	return s
}

func TestDecideGate(t *testing.T) {
	older := liveGrant("g-old", "coder", 2*time.Hour)
	newer := liveGrant("g-new", "coder", time.Hour)
	rule := func(id, kind, subagent string, tool *string, enactedAgo time.Duration) GovernanceRule {
		return GovernanceRule{ProposalID: id, Kind: kind, Subagent: subagent, Tool: tool, EnactedAt: gateNow.Add(-enactedAgo)}
	}
	authorized := func(id string) gateSummary {
		return gateSummary{Status: GateAuthorized, Authorized: true, GrantID: id, Uses: 3, Remaining: 7}
	}
	failed := func(status, id string) gateSummary {
		return gateSummary{Status: status, GrantID: id, Uses: 3, Remaining: 7}
	}

	type row struct {
		name         string
		grants       []Grant
		rules        []GovernanceRule
		subagent     string
		tool         *string
		grantID      *string
		want         gateSummary
		wantInReason []string
	}
	tests := []row{
		{name: "no grants", subagent: "coder",
			want: gateSummary{Status: GateNoGrant}, wantInReason: []string{`no grant for sub-agent "coder"`}},
		{name: "only another sub-agent's grant", grants: []Grant{liveGrant("g-1", "writer", time.Hour)}, subagent: "coder",
			want: gateSummary{Status: GateNoGrant}},
		{name: "name match is case-sensitive", grants: []Grant{liveGrant("g-1", "Coder", time.Hour)}, subagent: "coder",
			want: gateSummary{Status: GateNoGrant}},
		{name: "name match counts leading whitespace", grants: []Grant{liveGrant("g-1", " coder", time.Hour)}, subagent: "coder",
			want: gateSummary{Status: GateNoGrant}},
		{name: "name match counts trailing whitespace", grants: []Grant{liveGrant("g-1", "coder", time.Hour)}, subagent: "coder ",
			want: gateSummary{Status: GateNoGrant}},
		{name: "one live grant", grants: []Grant{newer}, subagent: "coder",
			want: authorized("g-new"), wantInReason: []string{"g-new", "7 of 10"}},
		{name: "two live grants: the most recent wins", grants: []Grant{older, newer}, subagent: "coder",
			want: authorized("g-new")},
		{name: "two live grants, other order", grants: []Grant{newer, older}, subagent: "coder",
			want: authorized("g-new")},
		{name: "same created_at: the greater grant_id wins",
			grants:   []Grant{liveGrant("g-b", "coder", time.Hour), liveGrant("g-a", "coder", time.Hour)},
			subagent: "coder", want: authorized("g-b")},
		{name: "recent failing grants do not shadow an older live one",
			grants:   []Grant{editGrant(newer, revokeGrant), older, editGrant(liveGrant("g-newest", "coder", time.Minute), spendGrant)},
			subagent: "coder", want: authorized("g-old")},
		{name: "newest of several failing grants answers",
			grants:   []Grant{editGrant(older, expireGrant), editGrant(newer, revokeGrant)},
			subagent: "coder", want: failed(GateRevoked, "g-new")},
		{name: "a live grant of another sub-agent does not rescue",
			grants:   []Grant{editGrant(newer, revokeGrant), liveGrant("g-w", "writer", time.Minute)},
			subagent: "coder", want: failed(GateRevoked, "g-new")},
		{name: "uses exactly max", grants: []Grant{editGrant(newer, spendGrant)}, subagent: "coder",
			want: gateSummary{Status: GateBudgetExhausted, GrantID: "g-new", Uses: 10, Remaining: 0}},
		{name: "uses above max: remaining is 0", grants: []Grant{editGrant(newer, func(g *Grant) { g.Uses = 12 })}, subagent: "coder",
			want: gateSummary{Status: GateBudgetExhausted, GrantID: "g-new", Uses: 12, Remaining: 0}},
		{name: "negative max: remaining is 0", grants: []Grant{editGrant(newer, func(g *Grant) { g.MaxToolCalls, g.Uses = -5, 0 })}, subagent: "coder",
			want: gateSummary{Status: GateInvalidLimit, GrantID: "g-new"}},
		{name: "expires exactly now", grants: []Grant{editGrant(newer, expireGrantNow)}, subagent: "coder",
			want: failed(GateExpired, "g-new")},

		// Tool vs no tool (SPEC.md: the same call without tool is authorized).
		{name: "tool not allowed", grants: []Grant{newer}, subagent: "coder", tool: new("Bash"),
			want: failed(GateToolNotAllowed, "g-new"), wantInReason: []string{`"Bash"`}},
		{name: "same call without tool", grants: []Grant{newer}, subagent: "coder",
			want: authorized("g-new")},
		{name: "allowed tool", grants: []Grant{newer}, subagent: "coder", tool: new("Read"),
			want: authorized("g-new"), wantInReason: []string{`tool "Read"`}},
		{name: "older grant allowing the tool wins over newer lacking it",
			grants: []Grant{editGrant(older, onlyBashGrant), newer}, subagent: "coder", tool: new("Bash"),
			want: authorized("g-old")},
		{name: "newer grant allowing the tool wins",
			grants: []Grant{editGrant(older, onlyBashGrant), newer}, subagent: "coder", tool: new("Read"),
			want: authorized("g-new")},
		{name: "no tools by name, no tool named", grants: []Grant{editGrant(newer, noToolsGrant)}, subagent: "coder",
			want: authorized("g-new")},
		{name: "no tools by name, tool named", grants: []Grant{editGrant(newer, noToolsGrant)}, subagent: "coder", tool: new("Read"),
			want: failed(GateToolNotAllowed, "g-new")},

		// grant_id restricts the check to that grant.
		{name: "grant_id picks the older live grant", grants: []Grant{older, newer}, subagent: "coder", grantID: new("g-old"),
			want: authorized("g-old")},
		{name: "grant_id names a revoked grant beside a live one", grants: []Grant{editGrant(older, revokeGrant), newer}, subagent: "coder", grantID: new("g-old"),
			want: failed(GateRevoked, "g-old")},
		{name: "grant_id matches nothing", grants: []Grant{older, newer}, subagent: "coder", grantID: new("g-none"),
			want: gateSummary{Status: GateNoGrant}, wantInReason: []string{"g-none", `"coder"`}},
		{name: "grant_id of another sub-agent's grant", grants: []Grant{newer, liveGrant("g-w", "writer", time.Hour)}, subagent: "coder", grantID: new("g-w"),
			want: gateSummary{Status: GateNoGrant}},
		{name: "grant_id reused: its live grant answers",
			grants:   []Grant{editGrant(liveGrant("g-x", "coder", time.Minute), revokeGrant), liveGrant("g-x", "coder", time.Hour), newer},
			subagent: "coder", grantID: new("g-x"),
			want: gateSummary{Status: GateAuthorized, Authorized: true, GrantID: "g-x", Uses: 3, Remaining: 7}},
		{name: "grant_id match is case-sensitive", grants: []Grant{newer}, subagent: "coder", grantID: new("G-NEW"),
			want: gateSummary{Status: GateNoGrant}},
		{name: "grant_id and tool together", grants: []Grant{editGrant(older, onlyBashGrant), newer}, subagent: "coder", grantID: new("g-new"), tool: new("Bash"),
			want: failed(GateToolNotAllowed, "g-new")},

		// Governance (SPEC.md: an enacted proposal makes the gate answer
		// denied_by_governance for the named sub-agent and tool).
		{name: "deny on a tool overrides an authorized grant",
			grants: []Grant{editGrant(newer, onlyBashGrant)}, rules: []GovernanceRule{rule("prop-1", KindDenyScope, "coder", new("Bash"), time.Hour)},
			subagent: "coder", tool: new("Bash"),
			want:         gateSummary{Status: GateDeniedByGovernance, GrantID: "g-new", Uses: 3, Remaining: 7, ProposalID: "prop-1"},
			wantInReason: []string{"prop-1", `tool "Bash"`, "authorized"}},
		{name: "deny on a tool leaves other tools alone",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-1", KindDenyScope, "coder", new("Bash"), time.Hour)},
			subagent: "coder", tool: new("Read"), want: authorized("g-new")},
		{name: "deny on a tool leaves calls naming no tool alone",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-1", KindDenyScope, "coder", new("Bash"), time.Hour)},
			subagent: "coder", want: authorized("g-new")},
		{name: "deny on the whole sub-agent, no tool",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-2", KindDenyScope, "coder", nil, time.Hour)},
			subagent:     "coder",
			want:         gateSummary{Status: GateDeniedByGovernance, GrantID: "g-new", Uses: 3, Remaining: 7, ProposalID: "prop-2"},
			wantInReason: []string{"prop-2", `sub-agent "coder" entirely`}},
		{name: "deny on the whole sub-agent, tool named",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-2", KindDenyScope, "coder", nil, time.Hour)},
			subagent: "coder", tool: new("Read"),
			want: gateSummary{Status: GateDeniedByGovernance, GrantID: "g-new", Uses: 3, Remaining: 7, ProposalID: "prop-2"}},
		{name: "deny with no grant at all",
			rules:    []GovernanceRule{rule("prop-2", KindDenyScope, "coder", nil, time.Hour)},
			subagent: "coder",
			want:     gateSummary{Status: GateDeniedByGovernance, ProposalID: "prop-2"}, wantInReason: []string{"prop-2", GateNoGrant}},
		{name: "deny with only a revoked grant",
			grants: []Grant{editGrant(newer, revokeGrant)}, rules: []GovernanceRule{rule("prop-2", KindDenyScope, "coder", nil, time.Hour)},
			subagent:     "coder",
			want:         gateSummary{Status: GateDeniedByGovernance, GrantID: "g-new", Uses: 3, Remaining: 7, ProposalID: "prop-2"},
			wantInReason: []string{GateRevoked}},
		{name: "deny with a grant_id that matches nothing",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-2", KindDenyScope, "coder", nil, time.Hour)},
			subagent: "coder", grantID: new("g-none"),
			want: gateSummary{Status: GateDeniedByGovernance, ProposalID: "prop-2"}},
		{name: "deny of another sub-agent does not apply",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-3", KindDenyScope, "writer", nil, time.Hour)},
			subagent: "coder", want: authorized("g-new")},
		{name: "deny names the sub-agent exactly",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-3", KindDenyScope, "Coder", nil, time.Hour)},
			subagent: "coder", want: authorized("g-new")},
		{name: "later allow_scope supersedes a deny",
			grants: []Grant{newer},
			rules: []GovernanceRule{
				rule("prop-1", KindDenyScope, "coder", new("Read"), 2*time.Hour),
				rule("prop-4", KindAllowScope, "coder", new("Read"), time.Hour),
			},
			subagent: "coder", tool: new("Read"), want: authorized("g-new")},
		{name: "later deny supersedes an allow_scope",
			grants: []Grant{newer},
			rules: []GovernanceRule{
				rule("prop-4", KindAllowScope, "coder", new("Read"), 2*time.Hour),
				rule("prop-5", KindDenyScope, "coder", new("Read"), time.Hour),
			},
			subagent: "coder", tool: new("Read"),
			want: gateSummary{Status: GateDeniedByGovernance, GrantID: "g-new", Uses: 3, Remaining: 7, ProposalID: "prop-5"}},
		{name: "allow_scope never authorizes without a grant",
			rules:    []GovernanceRule{rule("prop-4", KindAllowScope, "coder", nil, time.Hour)},
			subagent: "coder", want: gateSummary{Status: GateNoGrant}},
		{name: "policy_note has no gate effect and is never a reason",
			grants: []Grant{newer}, rules: []GovernanceRule{rule("prop-6", KindPolicyNote, "coder", nil, time.Hour)},
			subagent: "coder", want: authorized("g-new")},
		// A rejected proposal never becomes a GovernanceRule (only enacted ones
		// do), so the gate cannot name it: the same call with it left out.
		{name: "rejected deny proposal is not a rule",
			grants: []Grant{newer}, subagent: "coder", tool: new("Read"), want: authorized("g-new")},
	}
	// Each failing kind: a recent failing grant never shadows an older live one,
	// and alone it answers its own status.
	failing := []struct {
		status string
		edit   func(*Grant)
	}{
		{GateRevoked, revokeGrant}, {GateExpired, expireGrant}, {GateInvalidExpiry, overlongGrant},
		{GateInvalidLimit, zeroLimitGrant}, {GateBudgetExhausted, spendGrant},
	}
	for _, f := range failing {
		status, edit := f.status, f.edit
		tests = append(tests,
			row{name: "recent " + status + " does not shadow older live",
				grants: []Grant{editGrant(newer, edit), older}, subagent: "coder", want: authorized("g-old")},
			row{name: "only " + status, grants: []Grant{editGrant(newer, edit)}, subagent: "coder",
				want: summarize(GateAnswer{Status: status, Grant: new(editGrant(newer, edit)), Uses: editGrant(newer, edit).Uses, Remaining: editGrant(newer, edit).Remaining()})},
		)
	}
	tests = append(tests, row{name: "recent tool_not_allowed does not shadow older live",
		grants: []Grant{editGrant(newer, onlyBashGrant), older}, subagent: "coder", tool: new("Read"), want: authorized("g-old")})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := DecideGate(tt.grants, tt.rules, gateNow, tt.subagent, tt.tool, tt.grantID)
			if diff := cmp.Diff(tt.want, summarize(a)); diff != "" {
				t.Errorf("DecideGate mismatch (-want +got):\n%s\nreason: %s", diff, a.Reason)
			}
			if a.Subagent != tt.subagent {
				t.Errorf("Subagent = %q, want %q", a.Subagent, tt.subagent)
			}
			if a.Reason == "" {
				t.Error("empty reason")
			}
			for _, s := range tt.wantInReason {
				if !strings.Contains(a.Reason, s) {
					t.Errorf("reason %q does not contain %q", a.Reason, s)
				}
			}
		})
	}
}

func TestDecideGateLeavesInputsAlone(t *testing.T) {
	grants := []Grant{liveGrant("g-b", "coder", time.Hour), liveGrant("g-a", "coder", 2*time.Hour)}
	want := []Grant{editGrant(grants[0]), editGrant(grants[1])}
	a := DecideGate(grants, nil, gateNow, "coder", nil, nil)
	a.Grant.Uses = 99
	if diff := cmp.Diff(want, grants); diff != "" {
		t.Errorf("grants changed (-want +got):\n%s", diff)
	}
}

func TestGrantListState(t *testing.T) {
	g := liveGrant("g-1", "coder", time.Hour)
	wholeDeny := GovernanceRule{ProposalID: "prop-1", Kind: KindDenyScope, Subagent: "coder", EnactedAt: gateNow.Add(-time.Minute)}
	toolDeny := GovernanceRule{ProposalID: "prop-2", Kind: KindDenyScope, Subagent: "coder", Tool: new("Read"), EnactedAt: gateNow.Add(-time.Minute)}
	tests := []struct {
		name      string
		grant     Grant
		rules     []GovernanceRule
		wantState string
	}{
		{"live", g, nil, GateAuthorized},
		{"revoked", editGrant(g, revokeGrant), nil, GateRevoked},
		{"tools are not considered", editGrant(g, noToolsGrant), nil, GateAuthorized},
		{"whole sub-agent denied", g, []GovernanceRule{wholeDeny}, GateDeniedByGovernance},
		{"a tool denied", g, []GovernanceRule{toolDeny}, GateAuthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, reason := GrantListState(tt.grant, tt.rules, gateNow)
			if state != tt.wantState || reason == "" {
				t.Errorf("GrantListState = %s, %q; want %s and a reason", state, reason, tt.wantState)
			}
		})
	}
}

func TestLiveGrant(t *testing.T) {
	older := liveGrant("g-old", "lead", 2*time.Hour)
	newer := liveGrant("g-new", "lead", time.Hour)
	tests := []struct {
		name    string
		grants  []Grant
		wantID  string
		wantOK  bool
		subject string
	}{
		{name: "no grants", subject: "lead"},
		{name: "revoked only", grants: []Grant{editGrant(newer, revokeGrant)}, subject: "lead"},
		{name: "spent only", grants: []Grant{editGrant(newer, spendGrant)}, subject: "lead"},
		{name: "most recent live", grants: []Grant{older, newer}, subject: "lead", wantID: "g-new", wantOK: true},
		{name: "failing newer does not shadow", grants: []Grant{editGrant(newer, expireGrant), older}, subject: "lead", wantID: "g-old", wantOK: true},
		{name: "tool is not considered", grants: []Grant{editGrant(newer, noToolsGrant)}, subject: "lead", wantID: "g-new", wantOK: true},
		{name: "other sub-agent", grants: []Grant{liveGrant("g-w", "writer", time.Hour)}, subject: "lead"},
		{name: "exact name", grants: []Grant{newer}, subject: "Lead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ok := LiveGrant(tt.grants, gateNow, tt.subject)
			if ok != tt.wantOK || g.GrantID != tt.wantID {
				t.Errorf("LiveGrant = %q, %v; want %q, %v", g.GrantID, ok, tt.wantID, tt.wantOK)
			}
		})
	}
}

func TestOverreach(t *testing.T) {
	parent := liveGrant("g-parent", "lead", time.Hour) // Read, Grep; 10 calls (3 used); a day left
	child := func(edits ...func(*Grant)) Grant {
		c := editGrant(liveGrant("g-child", "coder", 0), func(g *Grant) { g.Uses = 0; g.ParentAgent = "lead" })
		return editGrant(c, edits...)
	}
	tools := func(ts ...string) func(*Grant) { return func(g *Grant) { g.AllowedTools = ts } }
	later := func(g *Grant) { g.ExpiresAt = parent.ExpiresAt.Add(time.Second) }
	bigger := func(g *Grant) { g.MaxToolCalls = parent.MaxToolCalls + 1 }
	tests := []struct {
		name   string
		parent Grant
		child  Grant
		want   []string
	}{
		{"same bounds", parent, child(), nil},
		{"subset of tools", parent, child(tools("Grep")), nil},
		{"no tools", parent, child(noToolsGrant), nil},
		{"tool the parent lacks", parent, child(tools("Read", "Bash")), []string{"allowed_tools"}},
		{"tool differs in case", parent, child(tools("read")), []string{"allowed_tools"}},
		{"parent names no tools", editGrant(parent, noToolsGrant), child(tools("Read")), []string{"allowed_tools"}},
		{"expires with the parent", parent, child(func(g *Grant) { g.ExpiresAt = parent.ExpiresAt }), nil},
		{"expires earlier", parent, child(func(g *Grant) { g.ExpiresAt = parent.ExpiresAt.Add(-time.Hour) }), nil},
		{"expires later", parent, child(later), []string{"expires_at"}},
		{"budget equal to parent's max", parent, child(func(g *Grant) { g.MaxToolCalls = 10 }), nil},
		{"budget above parent's remaining, within its max", parent, child(func(g *Grant) { g.MaxToolCalls = 8 }), nil},
		{"budget above parent's max", parent, child(bigger), []string{"max_tool_calls"}},
		{"tools and budget", parent, child(tools("Bash"), bigger), []string{"allowed_tools", "max_tool_calls"}},
		{"expiry and budget", parent, child(later, bigger), []string{"expires_at", "max_tool_calls"}},
		{"all three", parent, child(bigger, later, tools("Bash")), []string{"allowed_tools", "expires_at", "max_tool_calls"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Overreach(tt.parent, tt.child)); diff != "" {
				t.Errorf("Overreach mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkDecideGate: ten grants (one live, the rest failing or another
// sub-agent's) and five rules, one of them applying.
func BenchmarkDecideGate(b *testing.B) {
	var grants []Grant
	for i := range 10 {
		g := liveGrant(fmt.Sprintf("g-%02d", i), "coder", time.Duration(i+1)*time.Hour)
		switch i % 5 {
		case 0:
			g = editGrant(g, revokeGrant)
		case 1:
			g = editGrant(g, expireGrant)
		case 2:
			g = editGrant(g, spendGrant)
		case 3:
			g.Subagent = "writer"
		}
		grants = append(grants, g)
	}
	rules := []GovernanceRule{
		{ProposalID: "prop-1", Kind: KindDenyScope, Subagent: "writer", EnactedAt: gateNow.Add(-5 * time.Hour)},
		{ProposalID: "prop-2", Kind: KindDenyScope, Subagent: "coder", Tool: new("Bash"), EnactedAt: gateNow.Add(-4 * time.Hour)},
		{ProposalID: "prop-3", Kind: KindAllowScope, Subagent: "coder", Tool: new("Bash"), EnactedAt: gateNow.Add(-3 * time.Hour)},
		{ProposalID: "prop-4", Kind: KindPolicyNote, Subagent: "coder", EnactedAt: gateNow.Add(-2 * time.Hour)},
		{ProposalID: "prop-5", Kind: KindDenyScope, Subagent: "coder", Tool: new("Write"), EnactedAt: gateNow.Add(-time.Hour)},
	}
	tool := new("Read")
	for b.Loop() {
		if a := DecideGate(grants, rules, gateNow, "coder", tool, nil); !a.Authorized {
			b.Fatalf("status %s: %s", a.Status, a.Reason)
		}
	}
}
