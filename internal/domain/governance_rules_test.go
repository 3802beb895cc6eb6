package domain

import (
	"slices"
	"testing"
	"time"
)

func TestGovernanceDenial(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	tool := func(s string) *string { return &s }
	rule := func(id, kind, subagent string, tl *string, enacted int) GovernanceRule {
		return GovernanceRule{ProposalID: id, Kind: kind, Subagent: subagent, Tool: tl, EnactedAt: at(enacted)}
	}

	tests := []struct {
		name       string
		rules      []GovernanceRule
		subagent   string
		tool       *string
		wantID     string
		wantDenied bool
	}{
		{name: "no rules", subagent: "coder", tool: tool("shell")},

		// A deny on one tool denies that tool only.
		{name: "deny on tool denies the tool",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", tool("shell"), 1)},
			subagent: "coder", tool: tool("shell"), wantID: "prop-01", wantDenied: true},
		{name: "deny on tool leaves other tools",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", tool("shell"), 1)},
			subagent: "coder", tool: tool("read_file")},
		{name: "tool-specific rule does not apply to a call without tool",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", tool("shell"), 1)},
			subagent: "coder", tool: nil},

		// A deny with tool null covers the whole sub-agent.
		{name: "deny on whole subagent denies any tool",
			rules:    []GovernanceRule{rule("prop-02", KindDenyScope, "coder", nil, 1)},
			subagent: "coder", tool: tool("read_file"), wantID: "prop-02", wantDenied: true},
		{name: "deny on whole subagent denies a call without tool",
			rules:    []GovernanceRule{rule("prop-02", KindDenyScope, "coder", nil, 1)},
			subagent: "coder", tool: nil, wantID: "prop-02", wantDenied: true},

		// allow_scope enacted later lifts an earlier deny it covers.
		{name: "allow supersedes older tool deny",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", tool("shell"), 1),
				rule("prop-02", KindAllowScope, "coder", tool("shell"), 2),
			},
			subagent: "coder", tool: tool("shell")},
		{name: "allow supersedes older whole-subagent deny",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", nil, 1),
				rule("prop-02", KindAllowScope, "coder", nil, 2),
			},
			subagent: "coder", tool: tool("shell")},
		{name: "whole-subagent allow lifts older tool deny",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", tool("shell"), 1),
				rule("prop-02", KindAllowScope, "coder", nil, 2),
			},
			subagent: "coder", tool: tool("shell")},
		{name: "tool allow lifts whole-subagent deny for that tool",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", nil, 1),
				rule("prop-02", KindAllowScope, "coder", tool("shell"), 2),
			},
			subagent: "coder", tool: tool("shell")},
		{name: "tool allow leaves whole-subagent deny on other tools",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", nil, 1),
				rule("prop-02", KindAllowScope, "coder", tool("shell"), 2),
			},
			subagent: "coder", tool: tool("read_file"), wantID: "prop-01", wantDenied: true},
		{name: "tool allow leaves whole-subagent deny on a call without tool",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", nil, 1),
				rule("prop-02", KindAllowScope, "coder", tool("shell"), 2),
			},
			subagent: "coder", tool: nil, wantID: "prop-01", wantDenied: true},
		{name: "older allow does not lift a newer deny",
			rules: []GovernanceRule{
				rule("prop-01", KindAllowScope, "coder", tool("shell"), 1),
				rule("prop-02", KindDenyScope, "coder", tool("shell"), 2),
			},
			subagent: "coder", tool: tool("shell"), wantID: "prop-02", wantDenied: true},

		// A newer deny re-denies, naming the newest proposal.
		{name: "newer deny re-denies",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", tool("shell"), 1),
				rule("prop-02", KindAllowScope, "coder", tool("shell"), 2),
				rule("prop-03", KindDenyScope, "coder", tool("shell"), 3),
			},
			subagent: "coder", tool: tool("shell"), wantID: "prop-03", wantDenied: true},
		{name: "newer whole-subagent deny re-denies a tool allow",
			rules: []GovernanceRule{
				rule("prop-01", KindAllowScope, "coder", tool("shell"), 1),
				rule("prop-02", KindDenyScope, "coder", nil, 2),
			},
			subagent: "coder", tool: tool("shell"), wantID: "prop-02", wantDenied: true},
		{name: "order of the slice does not matter, enactment time does",
			rules: []GovernanceRule{
				rule("prop-03", KindDenyScope, "coder", tool("shell"), 3),
				rule("prop-02", KindAllowScope, "coder", tool("shell"), 2),
				rule("prop-01", KindDenyScope, "coder", tool("shell"), 1),
			},
			subagent: "coder", tool: tool("shell"), wantID: "prop-03", wantDenied: true},
		{name: "same enactment time: the larger proposal id decides",
			rules: []GovernanceRule{
				rule("prop-0b", KindDenyScope, "coder", nil, 1),
				rule("prop-0a", KindAllowScope, "coder", nil, 1),
			},
			subagent: "coder", tool: nil, wantID: "prop-0b", wantDenied: true},

		// policy_note has no gate effect, neither denying nor lifting.
		{name: "policy_note alone does not deny",
			rules:    []GovernanceRule{rule("prop-01", KindPolicyNote, "coder", nil, 1)},
			subagent: "coder", tool: tool("shell")},
		{name: "newer policy_note does not lift a deny",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", tool("shell"), 1),
				rule("prop-02", KindPolicyNote, "coder", tool("shell"), 2),
			},
			subagent: "coder", tool: tool("shell"), wantID: "prop-01", wantDenied: true},

		// Sub-agent names match exactly (SPEC.md "Matching: exact on sub-agent name").
		{name: "exact subagent: same name denied",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", nil, 1)},
			subagent: "coder", wantID: "prop-01", wantDenied: true},
		{name: "exact subagent: case differs",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", nil, 1)},
			subagent: "Coder"},
		{name: "exact subagent: prefix",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", nil, 1)},
			subagent: "code"},
		{name: "exact subagent: longer name",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", nil, 1)},
			subagent: "coder-2"},
		{name: "exact subagent: surrounding space",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", nil, 1)},
			subagent: " coder"},
		{name: "exact tool: case differs",
			rules:    []GovernanceRule{rule("prop-01", KindDenyScope, "coder", tool("shell"), 1)},
			subagent: "coder", tool: tool("Shell")},
		{name: "another subagent's allow does not lift this deny",
			rules: []GovernanceRule{
				rule("prop-01", KindDenyScope, "coder", nil, 1),
				rule("prop-02", KindAllowScope, "reviewer", nil, 2),
			},
			subagent: "coder", wantID: "prop-01", wantDenied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := slices.Clone(tt.rules)
			gotID, gotDenied := GovernanceDenial(rules, tt.subagent, tt.tool)
			if gotID != tt.wantID || gotDenied != tt.wantDenied {
				t.Errorf("GovernanceDenial(%q, %v) = (%q, %v), want (%q, %v)",
					tt.subagent, showTool(tt.tool), gotID, gotDenied, tt.wantID, tt.wantDenied)
			}
			slices.Reverse(rules)
			if id, denied := GovernanceDenial(rules, tt.subagent, tt.tool); id != gotID || denied != gotDenied {
				t.Errorf("reversed rules give (%q, %v), want the same answer (%q, %v)", id, denied, gotID, gotDenied)
			}
		})
	}
}

func showTool(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
