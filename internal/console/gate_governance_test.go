package console_test

// The gate and governance panels' rules over HTTP: the same use cases and
// refusals as /v1/grants and /v1/governance, shown beside the forms.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/console"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
)

// formMinute is t as a datetime-local value (UTC).
func formMinute(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }

// TestGatePanelHTTP: an empty gate shows the connect help; a grant is
// created from the form; a child broader than its parent's live grant is
// refused inline with 403 grant_overreach and nothing is written; the tree
// nests the child under its parent; a revoke goes through its confirmation
// page, and the gate then answers revoked.
func TestGatePanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "gate@example.com"
		userID, _ := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		c := client(t)
		tok := signIn(t, e, c, email)

		r := do(t, c, "GET", e.srv.URL+"/console/gate", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, "Nothing recorded yet") || strings.Contains(r.body, `id="grants"`) {
			t.Fatalf("an empty gate: %d\n%s", r.status, r.body)
		}
		now := e.srv.App.Now()
		parent := url.Values{"csrf": {tok}, "subagent": {"orch"}, "allowed_tools": {"read, search"}, "max_tool_calls": {"10"},
			"expires_at": {formMinute(now.Add(2 * time.Hour))}}
		if r := do(t, c, "POST", e.srv.URL+"/console/gate", url.Values{"subagent": {"orch"}}); r.status != http.StatusForbidden {
			t.Fatalf("create without CSRF: %d", r.status)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/gate", parent)
		if r.status != http.StatusCreated || !strings.Contains(r.body, `id="created"`) || !strings.Contains(r.body, "svc-delegation-v1") {
			t.Fatalf("create: %d\n%s", r.status, r.body)
		}
		// Overreach: more tools, a larger budget and a later expiry than the
		// parent's live grant; refused beside the form, its values kept.
		over := url.Values{"csrf": {tok}, "subagent": {"worker"}, "parent_agent": {"orch"}, "allowed_tools": {"read\nwrite"},
			"max_tool_calls": {"20"}, "expires_at": {formMinute(now.Add(3 * time.Hour))}}
		r = do(t, c, "POST", e.srv.URL+"/console/gate", over)
		if r.status != http.StatusForbidden || strings.Index(r.body, `id="refused"`) < strings.Index(r.body, `id="create-grant-h"`) ||
			!regexp.MustCompile(`403 grant_overreach: [^<]*allowed_tools, expires_at, max_tool_calls`).MatchString(r.body) ||
			!strings.Contains(r.body, `value="worker"`) {
			t.Fatalf("overreach: %d\n%s", r.status, r.body)
		}
		// Bad fields: the API's 422 malformed_grant.
		for _, form := range []url.Values{
			{"subagent": {"w"}, "max_tool_calls": {"ten"}, "expires_at": {formMinute(now)}},
			{"subagent": {"w"}, "max_tool_calls": {"1"}},
			{"subagent": {" "}, "max_tool_calls": {"1"}, "expires_at": {formMinute(now)}},
			{"subagent": {"w"}, "max_tool_calls": {"1"}, "expires_at": {"tomorrow"}},
		} {
			form.Set("csrf", tok)
			if r := do(t, c, "POST", e.srv.URL+"/console/gate", form); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "malformed_grant") {
				t.Errorf("create %v: %d", form, r.status)
			}
		}
		if list, _ := e.srv.App.ListGrants(ctx, p, nil); list.Count != 1 {
			t.Fatalf("refused forms wrote grants: %d", list.Count)
		}
		child := url.Values{"csrf": {tok}, "subagent": {`work<b>er</b>`}, "parent_agent": {"orch"}, "allowed_tools": {"read"},
			"max_tool_calls": {"5"}, "expires_at": {formMinute(now.Add(time.Hour))}}
		if r := do(t, c, "POST", e.srv.URL+"/console/gate", child); r.status != http.StatusCreated {
			t.Fatalf("a child within its parent: %d\n%s", r.status, r.body)
		}
		r = do(t, c, "GET", e.srv.URL+"/console/gate", nil)
		if strings.Contains(r.body, "<b>er</b>") {
			t.Error("a sub-agent's name is not escaped")
		}
		if !regexp.MustCompile(`(?s)<strong>orch</strong>[^<]*<span[^>]*>1 live of 1 grants</span><ul>\s*<li><strong>work&lt;b&gt;er&lt;/b&gt;</strong>`).MatchString(r.body) {
			t.Errorf("the tree does not nest the child under its parent:\n%s", r.body)
		}
		if !strings.Contains(r.body, "0 of 5 (5 left)") || !strings.Contains(r.body, "in 59 min") && !strings.Contains(r.body, "in 1 h 0 min") {
			t.Errorf("budget used or time to expiry missing:\n%s", r.body)
		}
		list, _ := e.srv.App.ListGrants(ctx, p, new(`work<b>er</b>`))
		id := list.Grants[0].GrantID
		confirmURL := "/console/gate/" + id + "/revoke?subagent=" + url.QueryEscape(`work<b>er</b>`)
		if !strings.Contains(r.body, `href="`+strings.ReplaceAll(confirmURL, "&", "&amp;")) && !strings.Contains(r.body, `href="/console/gate/`+id+`/revoke?subagent=work%3cb%3eer%3c%2fb%3e"`) {
			t.Errorf("no link to the revoke's confirmation:\n%s", r.body)
		}

		// Revoke: the confirmation page, then its form.
		r = do(t, c, "GET", e.srv.URL+confirmURL, nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, `action="/console/gate/`+id+`/revoke"`) || !strings.Contains(r.body, "Cancel") {
			t.Fatalf("confirmation: %d\n%s", r.status, r.body)
		}
		if st, _ := e.srv.App.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: `work<b>er</b>`}, e.srv.App.Now()); st.Status != "authorized" {
			t.Fatalf("the confirmation page revoked: %s", st.Status)
		}
		if r := do(t, c, "GET", e.srv.URL+"/console/gate/g-00/revoke?subagent=orch", nil); r.status != http.StatusNotFound {
			t.Errorf("confirming a missing grant: %d", r.status)
		}
		revoke := url.Values{"csrf": {tok}, "subagent": {`work<b>er</b>`}}
		if r := do(t, c, "POST", e.srv.URL+"/console/gate/"+id+"/revoke", url.Values{"subagent": revoke["subagent"]}); r.status != http.StatusForbidden {
			t.Errorf("revoke without CSRF: %d", r.status)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/gate/"+id+"/revoke", revoke)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/gate?done=revoked" {
			t.Fatalf("revoke: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
		}
		if st, _ := e.srv.App.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: `work<b>er</b>`}, e.srv.App.Now()); st.Status != "revoked" {
			t.Errorf("after the revoke the gate answers %s", st.Status)
		}
		r = do(t, c, "POST", e.srv.URL+"/console/gate/"+id+"/revoke", revoke)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/gate?done="+app.OutcomeAlreadyRevoked {
			t.Errorf("revoking twice: %d %q", r.status, r.header.Get("Location"))
		}
		r = do(t, c, "GET", e.srv.URL+"/console/gate?done=revoked", nil)
		if !strings.Contains(r.body, `id="done"`) || strings.Contains(r.body, `/console/gate/`+id+`/revoke`) {
			t.Errorf("after the revoke the grant is still offered for revocation:\n%s", r.body)
		}
		// Counted as the API counts its grants routes, on surface dashboard.
		if u, err := e.srv.App.DashboardUsage(ctx, p); err != nil || u.CallsToday.ByCapability["grants"] < 10 || u.CallsToday.BySurface["dashboard"] < 10 {
			t.Errorf("usage: %v %+v", err, u.CallsToday)
		}
		if r := do(t, c, "POST", e.srv.URL+"/console/gate/g-00/revoke", url.Values{"csrf": {tok}, "subagent": {"orch"}}); r.status != http.StatusNotFound || !strings.Contains(r.body, "404 no_grant") ||
			strings.Index(r.body, "404 no_grant") > strings.Index(r.body, `id="create-grant-h"`) {
			t.Errorf("revoking a missing grant: %d", r.status)
		}
	})
}

var proposalRow = regexp.MustCompile(`<tr id="row-(prop-[0-9a-f]+)">`)

// TestGovernancePanelHTTP: a session proposes (the threshold refusing too
// little evidence); the proposer's own session is shown its ratify disabled
// with the reason and refused 409 separation_of_powers when it sends it
// anyway; a second session of the account — another identity — ratifies;
// enact puts the rule in force and the gate obeys it; reject ends another.
func TestGovernancePanelHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "gov@example.com"
		userID, _ := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		proposer, ratifier := client(t), client(t)
		ptok := signIn(t, e, proposer, email)
		rtok := signIn(t, e, ratifier, email)

		r := do(t, proposer, "GET", e.srv.URL+"/console/governance", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, "Nothing recorded yet") || !strings.Contains(r.body, `id="no-rules"`) {
			t.Fatalf("an empty governance panel: %d\n%s", r.status, r.body)
		}
		propose := url.Values{"csrf": {ptok}, "kind": {"deny_scope"}, "subagent": {"worker"}, "tool": {"write"}, "blocked_attempts": {"2"},
			"note": {"<i>too many</i> writes"}}
		if r := do(t, proposer, "POST", e.srv.URL+"/console/governance", propose); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.body, "422 threshold_not_met") || !strings.Contains(r.body, `value="worker"`) ||
			strings.Index(r.body, "422 threshold_not_met") < strings.Index(r.body, `id="propose-h"`) {
			t.Fatalf("below the threshold, refused beside the form: %d\n%s", r.status, r.body)
		}
		for _, bad := range []url.Values{{"kind": {"nope"}}, {"subagent": {" "}}, {"blocked_attempts": {""}}} {
			form := url.Values{}
			for k, v := range propose {
				form[k] = v
			}
			form.Set("blocked_attempts", "3")
			for k, v := range bad {
				form[k] = v
			}
			if r := do(t, proposer, "POST", e.srv.URL+"/console/governance", form); r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "validation_error") {
				t.Errorf("propose %v: %d", bad, r.status)
			}
		}
		if list, _ := e.srv.App.Proposals(ctx, p, api.ProposalQuery{}); list.Count != 0 {
			t.Fatalf("refused forms wrote %d proposals", list.Count)
		}
		propose.Set("blocked_attempts", "3")
		r = do(t, proposer, "POST", e.srv.URL+"/console/governance", propose)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/governance?done=proposed" {
			t.Fatalf("propose: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
		}
		list, _ := e.srv.App.Proposals(ctx, p, api.ProposalQuery{})
		if list.Count != 1 || list.Proposals[0].Proposer.Kind != app.KindSession {
			t.Fatalf("proposals: %+v", list)
		}
		id := list.Proposals[0].ProposalID

		// The proposer's session: ratify disabled, with the reason.
		r = do(t, proposer, "GET", e.srv.URL+"/console/governance", nil)
		if strings.Contains(r.body, "<i>too many</i>") {
			t.Error("the note is not escaped")
		}
		if !strings.Contains(r.body, `<button type="button" disabled aria-describedby="why-`+id+`">Ratify</button>`) ||
			!strings.Contains(r.body, "another identity must ratify it (separation of powers)") ||
			strings.Contains(r.body, `action="/console/governance/`+id+`/ratify"`) {
			t.Errorf("the proposer's ratify is not disabled with its reason:\n%s", r.body)
		}
		// And sent anyway, the use case refuses it.
		r = do(t, proposer, "POST", e.srv.URL+"/console/governance/"+id+"/ratify", url.Values{"csrf": {ptok}})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "409 separation_of_powers") {
			t.Fatalf("the proposer ratifies: %d\n%s", r.status, r.body)
		}
		if r := do(t, ratifier, "POST", e.srv.URL+"/console/governance/"+id+"/enact", url.Values{"csrf": {rtok}}); r.status != http.StatusConflict || !strings.Contains(r.body, "409 not_ratified") {
			t.Errorf("enact before ratify: %d", r.status)
		}
		// The second session: another identity, offered ratify.
		r = do(t, ratifier, "GET", e.srv.URL+"/console/governance", nil)
		if !strings.Contains(r.body, `action="/console/governance/`+id+`/ratify"`) || strings.Contains(r.body, "why-"+id) {
			t.Fatalf("the second session is not offered ratify:\n%s", r.body)
		}
		if r := do(t, ratifier, "POST", e.srv.URL+"/console/governance/"+id+"/ratify", url.Values{}); r.status != http.StatusForbidden {
			t.Errorf("ratify without CSRF: %d", r.status)
		}
		r = do(t, ratifier, "POST", e.srv.URL+"/console/governance/"+id+"/ratify", url.Values{"csrf": {rtok}, "reason": {"seen it"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/governance?done=ratified" {
			t.Fatalf("ratify: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
		}
		// Enact: any permitted caller, the proposer included.
		r = do(t, proposer, "POST", e.srv.URL+"/console/governance/"+id+"/enact", url.Values{"csrf": {ptok}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/governance?done=enacted" {
			t.Fatalf("enact: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
		}
		got, _ := e.srv.App.Proposal(ctx, p, id)
		if pr := got.Proposal; pr.Status != "enacted" || pr.Ratifier == nil || pr.Ratifier.Identity == pr.Proposer.Identity {
			t.Fatalf("the proposal: %+v", pr)
		}
		r = do(t, proposer, "GET", e.srv.URL+"/console/governance", nil)
		if !regexp.MustCompile(`(?s)id="rules".*<code>` + id + `</code></td><td>deny_scope</td><td>worker</td><td>write</td>`).MatchString(r.body) {
			t.Errorf("the rule is not in force on the panel:\n%s", r.body)
		}
		if m := proposalRow.FindAllStringSubmatch(r.body, -1); len(m) != 1 || !strings.Contains(r.body, `id="proposals-enacted"`) {
			t.Errorf("proposals listed: %v", m)
		}
		if _, err := e.srv.App.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new("worker"), MaxToolCalls: new(int64(5)),
			ExpiresAt: new(e.srv.App.Now().Add(time.Hour).UTC().Format(time.RFC3339)), AllowedTools: []string{"write"}}); err != nil {
			t.Fatal(err)
		}
		if st, _ := e.srv.App.GrantStatus(ctx, p, api.GrantStatusQuery{Subagent: "worker", Tool: new("write")}, e.srv.App.Now()); st.Status != "denied_by_governance" || st.ProposalID != id {
			t.Errorf("the gate after the enactment: %+v", st)
		}

		// Reject: another proposal, with a reason; a second reject is 409.
		propose.Set("kind", "policy_note")
		do(t, proposer, "POST", e.srv.URL+"/console/governance", propose)
		list, _ = e.srv.App.Proposals(ctx, p, api.ProposalQuery{Status: "proposed"})
		other := list.Proposals[0].ProposalID
		r = do(t, proposer, "POST", e.srv.URL+"/console/governance/"+other+"/reject", url.Values{"csrf": {ptok}, "reason": {"duplicate"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/governance?done=rejected" {
			t.Fatalf("reject: %d %q", r.status, r.header.Get("Location"))
		}
		if r := do(t, ratifier, "POST", e.srv.URL+"/console/governance/"+other+"/reject", url.Values{"csrf": {rtok}}); r.status != http.StatusConflict || !strings.Contains(r.body, "409 invalid_transition") {
			t.Errorf("reject twice: %d", r.status)
		}
		if r := do(t, ratifier, "POST", e.srv.URL+"/console/governance/prop-00/ratify", url.Values{"csrf": {rtok}}); r.status != http.StatusNotFound || !strings.Contains(r.body, "proposal_not_found") {
			t.Errorf("ratify a missing proposal: %d", r.status)
		}
		if u, err := e.srv.App.DashboardUsage(ctx, p); err != nil || u.CallsToday.ByCapability["governance"] < 10 {
			t.Errorf("usage: %v %+v", err, u.CallsToday)
		}
		r = do(t, ratifier, "GET", e.srv.URL+"/console/governance", nil)
		if !strings.Contains(r.body, `id="proposals-rejected"`) || !strings.Contains(r.body, `rejected by session <code class="hash">`) {
			t.Errorf("the rejected proposal is not listed:\n%s", r.body)
		}
	})
}

// The gate panel reads and renders its newest MaxGrantsListed grants, and
// says that it left older ones out (issue #37 "Fast at size").
func TestGatePanelListsTheNewestGrants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		const email = "many@example.com"
		userID, _ := e.srv.Account(t, email)
		p := appPrincipal(userID)
		ctx := context.Background()
		c := client(t)
		signIn(t, e, c, email)
		expires := e.srv.App.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		var newest string
		for i := range console.MaxGrantsListed + 2 {
			g, err := e.srv.App.CreateGrant(ctx, p, api.CreateGrantRequest{Subagent: new(fmt.Sprintf("w%d", i)), MaxToolCalls: new(int64(5)),
				ExpiresAt: new(expires)})
			if err != nil {
				t.Fatal(err)
			}
			newest = g.Grant.GrantID
		}
		r := do(t, c, "GET", e.srv.URL+"/console/gate", nil)
		rows := strings.Count(r.body, `aria-label="Revoke grant `)
		if r.status != http.StatusOK || rows != console.MaxGrantsListed || !strings.Contains(r.body, fmt.Sprintf(`<p id="more-grants">The newest %d grants are shown`, console.MaxGrantsListed)) ||
			!strings.Contains(r.body, "<code>"+newest+"</code>") {
			t.Fatalf("gate: %d, %d rows\n%s", r.status, rows, r.body)
		}
	})
}
