package console

// The gate panel (SPEC.md "Grants"): the account's grants with the budget
// used and the time to expiry, the sub-agent tree their parent_agent draws,
// a grant created (the overreach rule of CONTRACT.md "Delegation tokens"
// refusing a child broader than its parent's live grant) and revoked after a
// confirmation page — through the use cases of /v1/grants.

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// maxGrantsListed bounds the grants the panel reads and renders: a row is
// about 0.6 KB, and a page stays within 150 KB with its assets (issue #37
// "Fast at size"; 200 made 150 KB without them).
const maxGrantsListed = 100

// grantRow is a listed grant with what the panel computes from it. Its
// fields are its own, not an embedded api.ListedGrant's: a template finds
// a promoted field by a reflective search of the embedded structs on every
// use, two thirds of the page's 14 ms at 100 rows (docs/performance.md
// "Console at size").
type grantRow struct {
	GrantID, Subagent, State, StateReason string
	ParentAgent, RevokedAt                *string
	AllowedTools                          []string
	MaxToolCalls, Uses, Remaining         int64
	Expires                               time.Time
	// Left is the time to expiry ("" once expired).
	Left string
}

// newGrantRow is g's row at now.
func newGrantRow(g api.ListedGrant, now time.Time) grantRow {
	row := grantRow{GrantID: g.GrantID, Subagent: g.Subagent, State: g.State, StateReason: g.StateReason,
		ParentAgent: g.ParentAgent, RevokedAt: g.RevokedAt, AllowedTools: g.AllowedTools,
		MaxToolCalls: g.MaxToolCalls, Uses: g.Uses, Remaining: g.Remaining, Expires: parseTS(g.ExpiresAt)}
	if d := row.Expires.Sub(now); d > 0 {
		row.Left = until(d)
	}
	return row
}

// agentNode is one sub-agent of the tree: the agents its grants name as
// parent_agent are above it.
type agentNode struct {
	Name string
	// Live counts its grants the gate would authorize now.
	Live, Grants int
	Children     []*agentNode
}

// grantForm is the create form's values, given back beside a refusal.
type grantForm struct {
	Subagent, ParentAgent, AllowedTools, MaxToolCalls, ExpiresAt string
}

type gatePage struct {
	Grants []grantRow
	// MoreGrants: the account has grants past maxGrantsListed (the tree is
	// drawn from the listed ones).
	MoreGrants bool
	Tree       []*agentNode
	Form       grantForm
	Created    *api.GrantCreated
	// CreateRefused is the create form's refusal, shown beside it;
	// Refused any other (a revoke's).
	CreateRefused, Refused *refusal
	Done                   string
	MaxTools               int
	Connect                connectHelp
}

var gateDone = map[string]string{
	app.OutcomeRevoked:        "The grant is revoked: the gate refuses its sub-agent's calls under it from now on.",
	app.OutcomeAlreadyRevoked: "The grant was already revoked; nothing changed.",
}

func (c *Console) gate(w http.ResponseWriter, r *http.Request) error {
	return c.gatePage(w, r, http.StatusOK, gatePage{Done: done(r, gateDone)})
}

func (c *Console) gatePage(w http.ResponseWriter, r *http.Request, status int, pg gatePage) error {
	list, more, err := c.App.NewestGrants(r.Context(), viewerOf(r).Principal, maxGrantsListed)
	if err != nil {
		return err
	}
	grants := list.Grants
	pg.MoreGrants = more
	now := c.App.Now()
	for _, g := range grants {
		pg.Grants = append(pg.Grants, newGrantRow(g, now))
	}
	pg.Tree, pg.MaxTools, pg.Connect = agentTree(grants), app.MaxGrantTools, connect(r)
	if pg.Form.ExpiresAt == "" && pg.CreateRefused == nil {
		pg.Form.ExpiresAt = now.UTC().Add(24 * time.Hour).Format("2006-01-02T15:04")
	}
	c.render(w, r, status, "gate", "Gate", pg)
	return nil
}

// agentTree draws the sub-agents of grants under the agents their grants
// name as parent_agent. A parent with no grant of its own is a root by its
// name; an agent named under two parents is drawn under the first (newest
// grant first); a cycle of parents is broken where it closes.
func agentTree(grants []api.ListedGrant) []*agentNode {
	nodes := map[string]*agentNode{}
	var order []string
	node := func(name string) *agentNode {
		n, ok := nodes[name]
		if !ok {
			n = &agentNode{Name: name}
			nodes[name] = n
			order = append(order, name)
		}
		return n
	}
	parent := map[string]string{}
	for _, g := range grants {
		n := node(g.Subagent)
		n.Grants++
		if g.State == domain.GateAuthorized {
			n.Live++
		}
		if g.ParentAgent != nil && *g.ParentAgent != g.Subagent {
			node(*g.ParentAgent)
			if _, ok := parent[g.Subagent]; !ok {
				parent[g.Subagent] = *g.ParentAgent
			}
		}
	}
	// reaches reports whether from's chain of parents reaches to.
	reaches := func(from, to string) bool {
		for seen := 0; seen <= len(parent); seen++ {
			p, ok := parent[from]
			if !ok {
				return false
			}
			if p == to {
				return true
			}
			from = p
		}
		// The chain runs into a cycle without to: that cycle is broken
		// where it closes, when one of its agents comes in order.
		return false
	}
	var roots []*agentNode
	slices.Sort(order)
	for _, name := range order {
		p, ok := parent[name]
		if ok && reaches(p, name) { // a cycle: this edge closes it
			delete(parent, name)
			ok = false
		}
		if !ok {
			roots = append(roots, nodes[name])
			continue
		}
		nodes[p].Children = append(nodes[p].Children, nodes[name])
	}
	return roots
}

// until says how long d is, in its two largest units.
func until(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "in " + strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return "in " + strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		return "in " + strconv.Itoa(int(d/time.Hour)) + " h " + strconv.Itoa(int(d%time.Hour/time.Minute)) + " min"
	default:
		return "in " + strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
}

// createGrant is POST /v1/grants' use case on the form's fields.
func (c *Console) createGrant(w http.ResponseWriter, r *http.Request) error {
	form, req, err := grantRequest(r)
	if err == nil {
		var g api.GrantCreated
		if g, err = c.App.CreateGrant(r.Context(), viewerOf(r).Principal, req); err == nil {
			return c.gatePage(w, r, http.StatusCreated, gatePage{Created: &g})
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.gatePage(w, r, f.Status, gatePage{CreateRefused: f, Form: form})
}

// grantRequest reads the create form: the sub-agent, its parent (optional),
// the allowed tools (one per line or comma-separated; none allows no tool by name),
// the budget and the expiry (a datetime-local value, UTC).
func grantRequest(r *http.Request) (grantForm, api.CreateGrantRequest, error) {
	var form grantForm
	var req api.CreateGrantRequest
	if err := readFormTexts(r,
		formField{"subagent", &form.Subagent, 0},
		formField{"parent_agent", &form.ParentAgent, 0},
		formField{"allowed_tools", &form.AllowedTools, (app.MaxGrantNameBytes + 2) * app.MaxGrantTools},
		formField{"max_tool_calls", &form.MaxToolCalls, domain.MaxNameBytes},
		formField{"expires_at", &form.ExpiresAt, domain.MaxNameBytes},
	); err != nil {
		// POST /v1/grants answers a field it cannot read as malformed_grant.
		var de *domain.Error
		if errors.As(err, &de) && len(de.Fields) == 1 {
			return form, req, app.MalformedGrant(de.Fields[0].Field, de.Fields[0].Message)
		}
		return form, req, err
	}
	req.Subagent, req.ParentAgent = &form.Subagent, optional(form.ParentAgent)
	req.AllowedTools = []string{}
	for _, t := range strings.FieldsFunc(form.AllowedTools, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if t = strings.TrimSpace(t); t != "" {
			req.AllowedTools = append(req.AllowedTools, t)
		}
	}
	if form.MaxToolCalls != "" {
		n, err := strconv.ParseInt(form.MaxToolCalls, 10, 64)
		if err != nil {
			return form, req, app.MalformedGrant("max_tool_calls", "must be an integer (no fraction or exponent, within 64 bits)")
		}
		req.MaxToolCalls = &n
	}
	if form.ExpiresAt != "" {
		ts, ok := formTime(form.ExpiresAt)
		if !ok {
			return form, req, app.MalformedGrant("expires_at", "must be a date and time like 2026-01-02T15:04 (UTC)")
		}
		req.ExpiresAt = &ts
	}
	return form, req, nil
}

// revokePage is the confirmation a revoke asks for before it is sent.
type revokePage struct {
	Grant grantRow
}

// confirmRevoke is GET gate/{grant_id}/revoke?subagent=: the grant the
// revoke would end, and the form that ends it (a step that needs no script).
func (c *Console) confirmRevoke(w http.ResponseWriter, r *http.Request) error {
	id, subagent := r.PathValue("grant_id"), r.URL.Query().Get("subagent")
	list, err := c.App.ListGrants(r.Context(), viewerOf(r).Principal, &subagent)
	if err != nil {
		return err
	}
	// The grant RevokeGrant would match: the live one of the id, else the
	// newest (the list is newest first).
	var found *api.ListedGrant
	for i, g := range list.Grants {
		if g.GrantID != id {
			continue
		}
		if found == nil || (g.State == domain.GateAuthorized && found.State != domain.GateAuthorized) {
			found = &list.Grants[i]
		}
	}
	if found == nil {
		return (&domain.Error{Code: domain.CodeNoGrant, Detail: "no grant " + id + " for sub-agent " + strconv.Quote(subagent)}).With("grant_id", id)
	}
	c.render(w, r, http.StatusOK, "revoke", "Revoke grant "+id, revokePage{Grant: newGrantRow(*found, c.App.Now())})
	return nil
}

// revokeGrant is POST /v1/grants/{grant_id}/revoke's use case, sent by the
// confirmation page's form.
func (c *Console) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	subagent, err := formText(r, "subagent", 0)
	if err == nil {
		var res api.RevokeResult
		if res, err = c.App.RevokeGrant(r.Context(), viewerOf(r).Principal, r.PathValue("grant_id"), api.RevokeRequest{Subagent: &subagent}); err == nil {
			http.Redirect(w, r, Prefix+"gate?done="+url.QueryEscape(res.Outcome), http.StatusSeeOther)
			return nil
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.gatePage(w, r, f.Status, gatePage{Refused: f})
}
