package app

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// TestProposalJSON pins the wire names of SPEC.md's Proposal resource as
// the routes answer it, including the nulls of a fresh proposal and the
// spec's form of a timestamp.
func TestProposalJSON(t *testing.T) {
	p := domain.Proposal{
		ProposalID: "prop-9f86d081884c7d65",
		Status:     domain.ProposalProposed,
		Kind:       domain.KindDenyScope,
		Evidence:   api.Evidence{BlockedAttempts: 5, Threshold: 3},
		Subject:    api.Subject{Subagent: "coder"},
		ProposedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Proposer:   api.Actor{Identity: "0195a1c2-0000-7000-8000-000000000001", Kind: "api_key", Machine: "ci-runner"},
	}
	b, err := json.Marshal(proposalView(p))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"proposal_id": "prop-9f86d081884c7d65",
		"status":      "proposed",
		"kind":        "deny_scope",
		"note":        nil,
		"evidence":    map[string]any{"blocked_attempts": 5.0, "threshold": 3.0},
		"subject":     map[string]any{"subagent": "coder", "tool": nil},
		"proposed_at": "2026-03-01T12:00:00.000000+00:00",
		"proposer":    map[string]any{"identity": "0195a1c2-0000-7000-8000-000000000001", "kind": "api_key", "machine": "ci-runner"},
		"ratified_at": nil, "ratifier": nil,
		"enacted_at": nil, "enactor": nil,
		"rejected_at": nil, "rejector": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Proposal JSON (-want +got):\n%s", diff)
	}
}
