package console

// The governance panel (SPEC.md "Governance", "Proposal (status)"): the
// account's proposals by state, a proposal made, and its ratify, enact and
// reject — through the use cases of /v1/governance — with the rules in force
// the gate obeys. Who acts is the credential alone (app.Principal.Identity:
// for the console, the session), so the proposer's own session is shown its
// ratify disabled with the reason, and refused with 409 separation_of_powers
// if it sends it anyway; another session of the account, or an API key, is
// another identity and may ratify.

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// proposalsPerState bounds each state's list on the panel.
const proposalsPerState = 50

// proposalRow is a proposal with whether the viewer's identity proposed it.
type proposalRow struct {
	api.Proposal
	Own bool
}

type proposalGroup struct {
	State, Title string
	Rows         []proposalRow
	// More says the state has proposals past proposalsPerState.
	More bool
}

// ruleRow is an enacted rule in force.
type ruleRow struct {
	domain.GovernanceRule
	Effect string
}

// proposalForm is the propose form's values, given back beside a refusal.
type proposalForm struct {
	Kind, Subagent, Tool, BlockedAttempts, Note string
}

type governancePage struct {
	Groups []proposalGroup
	Any    bool
	Rules  []ruleRow
	Kinds  []string
	// Threshold is the configured number of blocked attempts a proposal
	// needs (SPEC.md: default 3).
	Threshold int
	Form      proposalForm
	// ProposeRefused is the propose form's refusal, shown beside it;
	// Refused a transition's.
	ProposeRefused, Refused *refusal
	Done                    string
	Connect                 connectHelp
}

var governanceDone = map[string]string{
	"proposed": "The proposal is recorded. Another identity — a second session of this account, or an API key — ratifies it.",
	"ratified": "The proposal is ratified; enacting it puts it in force.",
	"enacted":  "The proposal is enacted: the gate obeys it from now on.",
	"rejected": "The proposal is rejected; it never reaches the gate.",
}

func (c *Console) governance(w http.ResponseWriter, r *http.Request) error {
	return c.governancePage(w, r, http.StatusOK, governancePage{Done: done(r, governanceDone)})
}

func (c *Console) governancePage(w http.ResponseWriter, r *http.Request, status int, pg governancePage) error {
	p := viewerOf(r).Principal
	for _, s := range []struct{ state, title string }{
		{domain.ProposalProposed, "Proposed: waiting for another identity to ratify or reject"},
		{domain.ProposalRatified, "Ratified: waiting to be enacted or rejected"},
		{domain.ProposalEnacted, "Enacted"},
		{domain.ProposalRejected, "Rejected"},
	} {
		list, err := c.App.Proposals(r.Context(), p, api.ProposalQuery{Status: s.state, Limit: proposalsPerState})
		if err != nil {
			return err
		}
		g := proposalGroup{State: s.state, Title: s.title, More: list.NextCursor != nil}
		for _, pr := range list.Proposals {
			g.Rows = append(g.Rows, proposalRow{Proposal: pr, Own: pr.Proposer.Identity == p.Identity()})
		}
		pg.Any = pg.Any || len(g.Rows) > 0
		pg.Groups = append(pg.Groups, g)
	}
	rules, err := c.App.EnactedRules(r.Context(), nil, p.UserID)
	if err != nil {
		return err
	}
	for _, rl := range rules {
		pg.Rules = append(pg.Rules, ruleRow{GovernanceRule: rl, Effect: ruleEffect(rl.Kind)})
	}
	pg.Kinds = []string{domain.KindDenyScope, domain.KindAllowScope, domain.KindPolicyNote}
	pg.Threshold, pg.Connect = c.Config.GovernanceThreshold, connect(r)
	c.render(w, r, status, "governance", "Governance", pg)
	return nil
}

// ruleEffect says what an enacted rule of kind does at the gate
// (domain.GovernanceDenial).
func ruleEffect(kind string) string {
	switch kind {
	case domain.KindDenyScope:
		return "the gate denies its calls (denied_by_governance), unless a later allow_scope lifts it"
	case domain.KindAllowScope:
		return "lifts an earlier deny_scope it covers"
	}
	return "a note: no effect at the gate"
}

// createProposal is POST /v1/governance/proposals' use case on the form's
// fields, held to that route's rules (a kind, the subject's sub-agent, the
// blocked attempts; the configured threshold decides).
func (c *Console) createProposal(w http.ResponseWriter, r *http.Request) error {
	form, req, err := proposalRequest(r)
	if err == nil {
		if _, err = c.App.CreateProposal(r.Context(), viewerOf(r).Principal, req); err == nil {
			http.Redirect(w, r, Prefix+"governance?done=proposed", http.StatusSeeOther)
			return nil
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.governancePage(w, r, f.Status, governancePage{ProposeRefused: f, Form: form})
}

func proposalRequest(r *http.Request) (proposalForm, api.CreateProposalRequest, error) {
	var form proposalForm
	var req api.CreateProposalRequest
	if err := readFormTexts(r,
		formField{"kind", &form.Kind, domain.MaxNameBytes},
		formField{"subagent", &form.Subagent, domain.MaxNameBytes},
		formField{"tool", &form.Tool, domain.MaxNameBytes},
		formField{"blocked_attempts", &form.BlockedAttempts, domain.MaxNameBytes},
		formField{"note", &form.Note, domain.MaxNoteBytes},
	); err != nil {
		return form, req, err
	}
	var errs []domain.FieldError
	if form.Kind == "" {
		errs = append(errs, domain.FieldError{Field: "kind", Message: "required: one of deny_scope, allow_scope, policy_note"})
	}
	if strings.TrimSpace(form.Subagent) == "" {
		errs = append(errs, domain.FieldError{Field: "subject.subagent", Message: "required: the exact sub-agent name, not blank"})
	}
	if form.Tool != "" && strings.TrimSpace(form.Tool) == "" {
		errs = append(errs, domain.FieldError{Field: "subject.tool", Message: "must not be blank; empty means the whole sub-agent"})
	}
	blocked, err := strconv.Atoi(form.BlockedAttempts)
	if err != nil {
		errs = append(errs, domain.FieldError{Field: "evidence.blocked_attempts", Message: "required: an integer"})
	}
	if len(errs) > 0 {
		return form, req, domain.Validation(errs...)
	}
	req.Kind, req.Note = &form.Kind, optional(form.Note)
	req.Subject = &api.ProposalSubject{Subagent: &form.Subagent, Tool: optional(form.Tool)}
	req.Evidence = &api.ProposalEvidence{BlockedAttempts: &blocked}
	return form, req, nil
}

// transition is the handler of one transition form: the route's use case
// with the form's optional reason, by the viewer's identity.
func (c *Console) transition(action, outcome string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		reason, err := formText(r, "reason", domain.MaxReasonBytes)
		if err == nil {
			_, err = c.App.TransitionProposal(r.Context(), viewerOf(r).Principal, r.PathValue("proposal_id"), action,
				api.TransitionRequest{Reason: optional(reason)})
			if err == nil {
				http.Redirect(w, r, Prefix+"governance?done="+outcome, http.StatusSeeOther)
				return nil
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.governancePage(w, r, f.Status, governancePage{Refused: f})
	}
}
