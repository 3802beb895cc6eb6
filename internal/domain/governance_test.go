package domain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/google/go-cmp/cmp"
)

// specTable is SPEC.md "Proposal (status)" transcribed row by row, one line per
// (state, trigger, condition). wantNext is the next state on success; wantCode
// the 409 code on refusal. The rows marked "decision" are where SPEC.md says
// "not shown" (docs/decisions/governance.md).
var specTable = []struct {
	from     string
	action   string
	caller   string // "proposer", "other" or "any"
	wantNext string
	wantCode string
}{
	// proposed | ratify | caller identity differs from proposer | ratified
	{ProposalProposed, ActionRatify, "other", ProposalRatified, ""},
	// proposed | ratify | caller is the proposer | proposed | 409 separation_of_powers
	{ProposalProposed, ActionRatify, "proposer", "", CodeSeparationOfPowers},
	// ratified | enact | any permitted caller | enacted
	{ProposalRatified, ActionEnact, "any", ProposalEnacted, ""},
	// proposed | enact | not ratified | proposed | 409 not_ratified
	{ProposalProposed, ActionEnact, "any", "", CodeNotRatified},
	// proposed | reject | | rejected
	{ProposalProposed, ActionReject, "any", ProposalRejected, ""},
	// ratified | reject | | rejected
	{ProposalRatified, ActionReject, "any", ProposalRejected, ""},
	// ratified, enacted, rejected | ratify | already past proposed | unchanged | 409 invalid_transition
	// (state before identity: the proposer gets invalid_transition here too)
	{ProposalRatified, ActionRatify, "any", "", CodeInvalidTransition},
	{ProposalEnacted, ActionRatify, "any", "", CodeInvalidTransition},
	{ProposalRejected, ActionRatify, "any", "", CodeInvalidTransition},
	// enacted, rejected | reject | | unchanged | 409 invalid_transition
	{ProposalEnacted, ActionReject, "any", "", CodeInvalidTransition},
	{ProposalRejected, ActionReject, "any", "", CodeInvalidTransition},
	// decision: enact on an enacted or rejected proposal is 409 invalid_transition
	{ProposalEnacted, ActionEnact, "any", "", CodeInvalidTransition},
	{ProposalRejected, ActionEnact, "any", "", CodeInvalidTransition},
}

var (
	allStatuses = []string{ProposalProposed, ProposalRatified, ProposalEnacted, ProposalRejected}
	allActions  = []string{ActionRatify, ActionEnact, ActionReject}
	allCallers  = []string{"proposer", "other"}
)

// expect looks a combination up in specTable and fails unless exactly one row
// covers it, so the table is checked to be complete and unambiguous.
func specExpect(t *testing.T, from, action, caller string) (wantNext, wantCode string) {
	t.Helper()
	n := 0
	for _, r := range specTable {
		if r.from == from && r.action == action && (r.caller == caller || r.caller == "any") {
			wantNext, wantCode = r.wantNext, r.wantCode
			n++
		}
	}
	if n != 1 {
		t.Fatalf("specTable has %d rows for (%s, %s, %s), want exactly 1", n, from, action, caller)
	}
	return wantNext, wantCode
}

var (
	govT0         = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	actorProposer = api.Actor{Identity: "0195a1c2-0000-7000-8000-000000000001", Kind: "api_key", Machine: "ci-runner"}
	actorOther    = api.Actor{Identity: "0195a1c2-0000-7000-8000-000000000002", Kind: "session", Machine: ""}
	actorThird    = api.Actor{Identity: "0195a1c2-0000-7000-8000-000000000003", Kind: "api_key", Machine: "laptop"}
)

func govPtr[T any](v T) *T { return &v }

func fixtureProposal() Proposal {
	return Proposal{
		ProposalID: "prop-9f86d081884c7d65",
		Status:     ProposalProposed,
		Kind:       KindDenyScope,
		Note:       govPtr("shell refused five times"),
		Evidence:   api.Evidence{BlockedAttempts: 5, Threshold: 3},
		Subject:    api.Subject{Subagent: "coder", Tool: govPtr("shell")},
		ProposedAt: govT0,
		Proposer:   actorProposer,
	}
}

// proposalIn returns a proposal that reached status by legal transitions.
func proposalIn(t *testing.T, status string) Proposal {
	t.Helper()
	p := fixtureProposal()
	step := func(action string, caller api.Actor, min int) {
		var err *Error
		if p, err = Transition(p, action, caller, govT0.Add(time.Duration(min)*time.Minute)); err != nil {
			t.Fatalf("reaching %s: %s: %v", status, action, err)
		}
	}
	switch status {
	case ProposalRatified:
		step(ActionRatify, actorOther, 1)
	case ProposalEnacted:
		step(ActionRatify, actorOther, 1)
		step(ActionEnact, actorThird, 2)
	case ProposalRejected:
		step(ActionReject, actorThird, 1)
	}
	return p
}

// withTransitionStamp is want: p with the one *_at/actor pair action sets.
func withTransitionStamp(p Proposal, next, action string, caller api.Actor, at time.Time) Proposal {
	p.Status = next
	switch action {
	case ActionRatify:
		p.RatifiedAt, p.Ratifier = &at, &caller
	case ActionEnact:
		p.EnactedAt, p.Enactor = &at, &caller
	case ActionReject:
		p.RejectedAt, p.Rejector = &at, &caller
	}
	return p
}

// TestTransitionModel enumerates every state × action × caller and compares
// Transition with specTable: the next state and stamps on success, the code and
// an unchanged proposal on refusal.
func TestTransitionModel(t *testing.T) {
	now := govT0.Add(time.Hour)
	for _, from := range allStatuses {
		for _, action := range allActions {
			for _, who := range allCallers {
				t.Run(from+"/"+action+"/"+who, func(t *testing.T) {
					wantNext, wantCode := specExpect(t, from, action, who)
					caller := actorOther
					if who == "proposer" {
						caller = actorProposer
					}
					before := proposalIn(t, from)
					snapshot := cloneProposal(t, before)

					got, err := Transition(before, action, caller, now)

					if diff := cmp.Diff(snapshot, before); diff != "" {
						t.Errorf("Transition modified its input (-before +after):\n%s", diff)
					}
					if wantCode != "" {
						if err == nil {
							t.Fatalf("Transition succeeded with status %s, want %s", got.Status, wantCode)
						}
						if err.Code != wantCode {
							t.Errorf("error = %s, want %s", err.Code, wantCode)
						}
						if diff := cmp.Diff(snapshot, got); diff != "" {
							t.Errorf("refused transition changed the proposal (-want +got):\n%s", diff)
						}
						return
					}
					if err != nil {
						t.Fatalf("Transition: %v, want next state %s", err, wantNext)
					}
					want := withTransitionStamp(snapshot, wantNext, action, caller, now)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("Transition result (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

func cloneProposal(t *testing.T, p Proposal) Proposal {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var c Proposal
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRatifyPrecedence pins the decision that state is checked before identity.
func TestRatifyPrecedence(t *testing.T) {
	tests := []struct {
		name     string
		from     string
		caller   api.Actor
		wantCode string
	}{
		{"proposer on proposed", ProposalProposed, actorProposer, CodeSeparationOfPowers},
		{"proposer on ratified", ProposalRatified, actorProposer, CodeInvalidTransition},
		{"proposer on enacted", ProposalEnacted, actorProposer, CodeInvalidTransition},
		{"proposer on rejected", ProposalRejected, actorProposer, CodeInvalidTransition},
		// Identity alone decides: same identity through another credential kind
		// or machine is still the proposer; a different identity on the same
		// machine is not.
		{"proposer identity via a session", ProposalProposed,
			api.Actor{Identity: actorProposer.Identity, Kind: "session", Machine: "elsewhere"}, CodeSeparationOfPowers},
		{"other identity on the proposer's machine", ProposalProposed,
			api.Actor{Identity: actorThird.Identity, Kind: "api_key", Machine: actorProposer.Machine}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Transition(proposalIn(t, tt.from), ActionRatify, tt.caller, govT0.Add(time.Hour))
			gotCode := ""
			if err != nil {
				gotCode = err.Code
			}
			if gotCode != tt.wantCode {
				t.Errorf("code = %q, want %q", gotCode, tt.wantCode)
			}
		})
	}
}

func TestTransitionUnknownAction(t *testing.T) {
	p := fixtureProposal()
	got, err := Transition(p, "approve", actorOther, govT0)
	if err == nil || err.Code != CodeInternal {
		t.Fatalf("Transition(approve) error = %v, want %s", err, CodeInternal)
	}
	if diff := cmp.Diff(p, got); diff != "" {
		t.Errorf("unknown action changed the proposal (-want +got):\n%s", diff)
	}
}

func TestTransitionStoresUTC(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	got, err := Transition(fixtureProposal(), ActionRatify, actorOther, time.Date(2026, 3, 1, 13, 0, 0, 0, paris))
	if err != nil {
		t.Fatal(err)
	}
	if want := govT0; !got.RatifiedAt.Equal(want) || got.RatifiedAt.Location() != time.UTC {
		t.Errorf("ratified_at = %v, want %v in UTC", got.RatifiedAt, want)
	}
}

func TestEventType(t *testing.T) {
	tests := []struct {
		action string
		want   string
	}{
		{ActionRatify, "governance.ratified"},
		{ActionEnact, "governance.enacted"},
		{ActionReject, "governance.rejected"},
		{"approve", ""},
	}
	for _, tt := range tests {
		if got := EventType(tt.action); got != tt.want {
			t.Errorf("EventType(%q) = %q, want %q", tt.action, got, tt.want)
		}
	}
}

// TestTransitionRandomWalk applies seeded random actions by random callers and
// checks, after every step, the model's answer and the invariants SPEC.md
// implies: never ratified by the proposer, enacted implies ratified, stamps only
// with their status, terminal states absorb.
func TestTransitionRandomWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 3))
	callers := []api.Actor{actorProposer, actorOther, actorThird}
	for walk := range 500 {
		p := fixtureProposal()
		now := govT0
		for step := range 12 {
			action := allActions[r.IntN(len(allActions))]
			caller := callers[r.IntN(len(callers))]
			now = now.Add(time.Duration(1+r.IntN(90)) * time.Second)
			who := "other"
			if caller.Identity == actorProposer.Identity {
				who = "proposer"
			}
			wantNext, wantCode := specExpect(t, p.Status, action, who)

			got, err := Transition(p, action, caller, now)
			where := fmt.Sprintf("walk %d step %d: %s by %s from %s", walk, step, action, who, p.Status)
			switch {
			case wantCode != "":
				if err == nil || err.Code != wantCode {
					t.Fatalf("%s: error %v, want %s", where, err, wantCode)
				}
				if diff := cmp.Diff(p, got); diff != "" {
					t.Fatalf("%s: refused transition changed the proposal:\n%s", where, diff)
				}
			case err != nil:
				t.Fatalf("%s: %v, want %s", where, err, wantNext)
			case got.Status != wantNext:
				t.Fatalf("%s: status %s, want %s", where, got.Status, wantNext)
			}
			if isTerminal(p.Status) && err == nil {
				t.Fatalf("%s: a terminal state accepted a transition", where)
			}
			checkInvariants(t, where, got)
			p = got
		}
	}
}

func isTerminal(status string) bool { return status == ProposalEnacted || status == ProposalRejected }

func checkInvariants(t *testing.T, where string, p Proposal) {
	t.Helper()
	fail := func(format string, args ...any) { t.Fatalf(where+": "+format, args...) }
	if (p.RatifiedAt == nil) != (p.Ratifier == nil) || (p.EnactedAt == nil) != (p.Enactor == nil) ||
		(p.RejectedAt == nil) != (p.Rejector == nil) {
		fail("a timestamp and its actor are set apart: %+v", p)
	}
	if p.Ratifier != nil && p.Ratifier.Identity == p.Proposer.Identity {
		fail("ratified by the proposer %s", p.Proposer.Identity)
	}
	ratified, enacted, rejected := p.RatifiedAt != nil, p.EnactedAt != nil, p.RejectedAt != nil
	switch p.Status {
	case ProposalProposed:
		if ratified || enacted || rejected {
			fail("proposed proposal carries stamps")
		}
	case ProposalRatified:
		if !ratified || enacted || rejected {
			fail("ratified proposal stamps: ratified %v enacted %v rejected %v", ratified, enacted, rejected)
		}
	case ProposalEnacted:
		if !ratified || !enacted || rejected {
			fail("enacted proposal stamps: ratified %v enacted %v rejected %v", ratified, enacted, rejected)
		}
		if p.EnactedAt.Before(*p.RatifiedAt) {
			fail("enacted_at %v before ratified_at %v", p.EnactedAt, p.RatifiedAt)
		}
	case ProposalRejected:
		if enacted || !rejected {
			fail("rejected proposal stamps: enacted %v rejected %v", enacted, rejected)
		}
	default:
		fail("unknown status %q", p.Status)
	}
}

func TestValidateNewProposal(t *testing.T) {
	tests := []struct {
		name            string
		kind            string
		blockedAttempts int
		threshold       int
		wantCode        string // "": valid
		wantField       string
	}{
		{name: "deny_scope at threshold", kind: KindDenyScope, blockedAttempts: 3, threshold: 3},
		{name: "allow_scope above threshold", kind: KindAllowScope, blockedAttempts: 7, threshold: 3},
		{name: "policy_note at a configured threshold of 1", kind: KindPolicyNote, blockedAttempts: 1, threshold: 1},
		{name: "one below threshold", kind: KindDenyScope, blockedAttempts: 2, threshold: 3,
			wantCode: CodeThresholdNotMet},
		{name: "zero attempts", kind: KindPolicyNote, blockedAttempts: 0, threshold: 3,
			wantCode: CodeThresholdNotMet},
		{name: "configured threshold, not default", kind: KindDenyScope, blockedAttempts: 4, threshold: 5,
			wantCode: CodeThresholdNotMet},
		{name: "unknown kind", kind: "deny", blockedAttempts: 5, threshold: 3,
			wantCode: CodeValidation, wantField: "kind"},
		{name: "empty kind", kind: "", blockedAttempts: 5, threshold: 3,
			wantCode: CodeValidation, wantField: "kind"},
		{name: "kind is case-sensitive", kind: "Deny_Scope", blockedAttempts: 5, threshold: 3,
			wantCode: CodeValidation, wantField: "kind"},
		{name: "bad kind is reported before the threshold", kind: "ban", blockedAttempts: 0, threshold: 3,
			wantCode: CodeValidation, wantField: "kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateNewProposal(tt.kind, tt.blockedAttempts, tt.threshold)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("ValidateNewProposal = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateNewProposal = nil, want %s", tt.wantCode)
			}
			if err.Code != tt.wantCode {
				t.Errorf("error = %s, want %s", err.Code, tt.wantCode)
			}
			if tt.wantField != "" && (len(err.Fields) != 1 || err.Fields[0].Field != tt.wantField) {
				t.Errorf("fields = %+v, want one naming %q", err.Fields, tt.wantField)
			}
			if tt.wantCode == CodeThresholdNotMet &&
				(err.Extra["blocked_attempts"] != tt.blockedAttempts || err.Extra["threshold"] != tt.threshold) {
				t.Errorf("extra = %v, want blocked_attempts %d and threshold %d", err.Extra, tt.blockedAttempts, tt.threshold)
			}
		})
	}
}

func TestActiveRules(t *testing.T) {
	mk := func(id, status, kind string, tool *string) Proposal {
		p := fixtureProposal()
		p.ProposalID, p.Kind, p.Subject.Tool = id, kind, tool
		switch status {
		case ProposalRatified:
			p, _ = Transition(p, ActionRatify, actorOther, govT0.Add(time.Minute))
		case ProposalEnacted:
			p, _ = Transition(p, ActionRatify, actorOther, govT0.Add(time.Minute))
			p, _ = Transition(p, ActionEnact, actorOther, govT0.Add(time.Duration(len(id))*time.Hour))
		case ProposalRejected:
			p, _ = Transition(p, ActionReject, actorOther, govT0.Add(time.Minute))
		}
		if p.Status != status {
			t.Fatalf("fixture %s is %s, want %s", id, p.Status, status)
		}
		return p
	}
	tests := []struct {
		name      string
		proposals []Proposal
		want      []GovernanceRule
	}{
		{name: "none"},
		{name: "only enacted proposals become rules, in order",
			proposals: []Proposal{
				mk("prop-a", ProposalProposed, KindDenyScope, nil),
				mk("prop-bb", ProposalEnacted, KindDenyScope, govPtr("shell")),
				mk("prop-ccc", ProposalRatified, KindDenyScope, nil),
				mk("prop-dddd", ProposalRejected, KindDenyScope, nil),
				mk("prop-eeeee", ProposalEnacted, KindAllowScope, nil),
				mk("prop-ffffff", ProposalEnacted, KindPolicyNote, nil),
			},
			want: []GovernanceRule{
				{ProposalID: "prop-bb", Kind: KindDenyScope, Subagent: "coder", Tool: govPtr("shell"), EnactedAt: govT0.Add(7 * time.Hour)},
				{ProposalID: "prop-eeeee", Kind: KindAllowScope, Subagent: "coder", EnactedAt: govT0.Add(10 * time.Hour)},
				{ProposalID: "prop-ffffff", Kind: KindPolicyNote, Subagent: "coder", EnactedAt: govT0.Add(11 * time.Hour)},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ActiveRules(tt.proposals)); diff != "" {
				t.Errorf("ActiveRules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRejectedNeverAReason: SPEC.md "A rejected proposal never appears as a
// reason in the gate's answers", and a ratified one is "not yet in force".
func TestRejectedNeverAReason(t *testing.T) {
	ps := []Proposal{proposalIn(t, ProposalRejected), proposalIn(t, ProposalRatified), proposalIn(t, ProposalProposed)}
	if id, denied := GovernanceDenial(ActiveRules(ps), "coder", govPtr("shell")); denied {
		t.Errorf("gate denied naming %s; no proposal is enacted", id)
	}
	enacted := proposalIn(t, ProposalEnacted)
	if id, denied := GovernanceDenial(ActiveRules(append(ps, enacted)), "coder", govPtr("shell")); !denied || id != enacted.ProposalID {
		t.Errorf("gate answer (%q, %v), want denied naming %s", id, denied, enacted.ProposalID)
	}
}
