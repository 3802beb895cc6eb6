package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	imail "github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/mail/mailtest"
	"github.com/auditchain/auditchain/internal/store/storetest"
	papi "github.com/auditchain/auditchain/pkg/api"
)

// eachTeamEnv runs fn against an API with --teams on, on every backend.
// Its tests set up a team for every case, inviting the same people again
// and again: the invitation throttles are lifted here, and tested with
// their defaults in throttles_test.go.
func eachTeamEnv(t *testing.T, fn func(t *testing.T, e *env)) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		fn(t, newEnv(t, dsn, func(c *config.Config) {
			c.Teams = true
			c.InviteLimitPerAccount, c.InviteLimitPerOrg, c.InviteLimitPerRecipient, c.InviteLimitGlobal = 1e6, 1e6, 1e6, 1e6
		}))
	})
}

// person is an account of a team test with its unscoped key.
type person struct {
	userID, email, key string
}

func (e *env) person(email string) person {
	e.t.Helper()
	id, key := e.account(email)
	return person{userID: id, email: email, key: key}
}

// as is the principal of p's key, for setting a team up through the app.
func (e *env) as(p person) app.Principal {
	e.t.Helper()
	pr, err := e.app.Authenticate(context.Background(), p.key)
	if err != nil {
		e.t.Fatal(err)
	}
	return pr
}

// crew are the accounts the matrix gives roles: an owner, an active member,
// an active viewer, an invitee (a live invitation, not accepted), an
// outsider (nothing to do with the team), and target, an active member the
// removal route is aimed at.
type crew struct {
	owner, member, viewer, invitee, outsider, target person
}

func (e *env) crew() crew {
	return crew{owner: e.person("owner@example.com"), member: e.person("member@example.com"), viewer: e.person("viewer@example.com"),
		invitee: e.person("invitee@example.com"), outsider: e.person("outsider@example.com"), target: e.person("target@example.com")}
}

// team makes a team of c through the app (the routes' own tests are below)
// and returns its id.
func (e *env) team(c crew) string {
	e.t.Helper()
	ctx := context.Background()
	org, err := e.app.CreateOrg(ctx, e.as(c.owner), papi.CreateTeamRequest{Name: new("Platform")})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, inv := range []struct {
		who    person
		role   string
		accept bool
	}{{c.member, "member", true}, {c.viewer, "viewer", true}, {c.target, "member", true}, {c.invitee, "viewer", false}} {
		if _, err := e.app.Invite(ctx, e.as(c.owner), org.Org.OrgID, papi.InviteRequest{Email: &inv.who.email, Role: &inv.role}); err != nil {
			e.t.Fatal(err)
		}
		if inv.accept {
			if _, err := e.app.AcceptInvitation(ctx, e.as(inv.who), org.Org.OrgID); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return org.Org.OrgID
}

// orgRoutePath fills a team route's path.
func orgRoutePath(pattern, orgID, email string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	return method, strings.NewReplacer("{org_id}", orgID, "{email}", email).Replace(path)
}

// missingOrg is an org id of the right form that names no team.
const missingOrg = "org-0123456789abcdef0123456789abcdef"

var teamRoles = []string{"owner", "member", "viewer", "invitee", "outsider", "signed-out"}

// teamMatrix is what each role gets on each team route: "status" or
// "status code". TestTeamRoleMatrix runs every cell and fails for a team
// route of routes.go that has no row here.
var teamMatrix = map[string]map[string]string{
	"GET /v1/orgs":  {"owner": "200", "member": "200", "viewer": "200", "invitee": "200", "outsider": "200"},
	"POST /v1/orgs": {"owner": "201", "member": "201", "viewer": "201", "invitee": "201", "outsider": "201"},
	"GET /v1/orgs/{org_id}": {"owner": "200", "member": "200", "viewer": "200",
		"invitee": "404 org_not_found", "outsider": "404 org_not_found"},
	"POST /v1/orgs/{org_id}/accept": {"owner": "404 invitation_not_found", "member": "404 invitation_not_found",
		"viewer": "404 invitation_not_found", "invitee": "200", "outsider": "404 invitation_not_found"},
	"POST /v1/orgs/{org_id}/invite": {"owner": "201", "member": "403 owner_required", "viewer": "403 owner_required",
		"invitee": "404 org_not_found", "outsider": "404 org_not_found"},
	"GET /v1/orgs/{org_id}/keys": {"owner": "200", "member": "200", "viewer": "200",
		"invitee": "404 org_not_found", "outsider": "404 org_not_found"},
	"GET /v1/orgs/{org_id}/members": {"owner": "200", "member": "200", "viewer": "200",
		"invitee": "404 org_not_found", "outsider": "404 org_not_found"},
	"DELETE /v1/orgs/{org_id}/members/{email}": {"owner": "204", "member": "403 owner_required", "viewer": "403 owner_required",
		"invitee": "404 org_not_found", "outsider": "404 org_not_found"},
}

// The role matrix, generated from routes.go: every team route × owner,
// member, viewer, invitee, outsider and signed-out, each cell on a team of
// its own. A non-member's 404 is also compared, byte for byte, with the
// answer for a team that does not exist.
func TestTeamRoleMatrix(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		keys := map[string]string{"owner": c.owner.key, "member": c.member.key, "viewer": c.viewer.key,
			"invitee": c.invitee.key, "outsider": c.outsider.key, "signed-out": ""}
		var routes int
		for _, rt := range e.handler.RouteTable() {
			if rt.Feature != "teams" {
				continue
			}
			routes++
			want, ok := teamMatrix[rt.Pattern]
			if !ok {
				t.Errorf("%s is a team route without a row in teamMatrix", rt.Pattern)
				continue
			}
			for i, role := range teamRoles {
				t.Run(rt.Pattern+"/"+role, func(t *testing.T) {
					orgID := e.team(c)
					body := teamBody(rt.Pattern, fmt.Sprintf("new-%d@example.com", i))
					method, path := orgRoutePath(rt.Pattern, orgID, c.target.email)
					r := e.do(method, path, keys[role], body)
					cell := cmp.Or(want[role], "401 missing_token")
					status, code, _ := strings.Cut(cell, " ")
					if code != "" {
						wantProblem(t, r, atoi(status), code)
					} else if fmt.Sprint(r.Status) != status {
						t.Fatalf("status %d, want %s: %s", r.Status, status, r.Body)
					}
					if rt.Pattern == "GET /v1/orgs" && role != "signed-out" {
						checkListed(t, r, orgID, role)
					}
					if r.Status == 404 && strings.Contains(rt.Pattern, "{org_id}") {
						method, path := orgRoutePath(rt.Pattern, missingOrg, c.target.email)
						if missing := e.do(method, path, keys[role], teamBody(rt.Pattern, "other@example.com")); !bytes.Equal(missing.Body, r.Body) || missing.Status != r.Status {
							t.Fatalf("a %s gets %d %s, a missing team %d %s", role, r.Status, r.Body, missing.Status, missing.Body)
						}
					}
				})
			}
		}
		if routes != len(teamMatrix) {
			t.Errorf("%d team routes in routes.go, %d rows in teamMatrix", routes, len(teamMatrix))
		}
	})
}

func teamBody(pattern, email string) any {
	switch pattern {
	case "POST /v1/orgs":
		return map[string]any{"name": "Another team"}
	case "POST /v1/orgs/{org_id}/invite":
		return map[string]any{"email": email, "role": "viewer"}
	}
	return nil
}

// checkListed asserts GET /v1/orgs lists the team exactly to its active
// members, with their role.
func checkListed(t *testing.T, r response, orgID, role string) {
	t.Helper()
	var list papi.TeamList
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.Orgs, func(o papi.Team) bool { return o.OrgID == orgID })
	member := role == "owner" || role == "member" || role == "viewer"
	switch {
	case member && i < 0:
		t.Fatalf("the team is not listed to its %s: %s", role, r.Body)
	case !member && i >= 0:
		t.Fatalf("the team is listed to a %s: %s", role, r.Body)
	case member && list.Orgs[i].Role != role:
		t.Fatalf("listed with role %q to its %s", list.Orgs[i].Role, role)
	}
}

// With --teams off (the default) every team route answers 404
// feature_disabled to every caller, signed in or not, and writes nothing.
func TestTeamRoutesAnswerFeatureDisabledWhenOff(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, nil)
		_, key := e.account("a@example.com")
		_, cookie := e.signIn("b@example.com")
		var routes int
		for _, rt := range e.handler.RouteTable() {
			if rt.Feature != "teams" {
				continue
			}
			routes++
			method, path := orgRoutePath(rt.Pattern, missingOrg, "a@example.com")
			body := teamBody(rt.Pattern, "c@example.com")
			wantProblem(t, e.do(method, path, key, body), 404, "feature_disabled")
			wantProblem(t, e.do(method, path, "", body), 404, "feature_disabled")
			wantProblem(t, e.do(method, path, "ac_not-a-key", body), 404, "feature_disabled")
			wantProblem(t, e.withSession(method, path, cookie, body), 404, "feature_disabled")
		}
		if routes != len(teamMatrix) {
			t.Fatalf("%d routes behind --teams, want %d", routes, len(teamMatrix))
		}
		if n := e.count("orgs") + e.count("org_members"); n != 0 {
			t.Fatalf("%d team rows written while teams are off", n)
		}
	})
}

var orgIDForm = regexp.MustCompile(`^org-[0-9a-f]{32}$`)

// POST /v1/orgs: 201 with the creator as owner; ids are 128 random bits;
// the name is checked; an account without email cannot own a team.
func TestCreateOrg(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		owner := e.person("owner@example.com")
		r := e.do("POST", "/v1/orgs", owner.key, map[string]any{"name": "Platform"})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		var created papi.TeamCreated
		mustJSON(t, r, &created)
		org := created.Org
		if !orgIDForm.MatchString(org.OrgID) || org.Name != "Platform" || org.OwnerUserID != owner.userID || org.Role != "owner" {
			t.Fatalf("created %+v", org)
		}
		if org.CreatedAt != domain.FormatTimestamp(e.clock.Now()) {
			t.Fatalf("created_at %s, want %s", org.CreatedAt, domain.FormatTimestamp(e.clock.Now()))
		}
		r = e.do("POST", "/v1/orgs", owner.key, map[string]any{"name": "Platform"})
		var again papi.TeamCreated
		mustJSON(t, r, &again)
		if again.Org.OrgID == org.OrgID || !orgIDForm.MatchString(again.Org.OrgID) {
			t.Fatalf("second team's id %q (first %q)", again.Org.OrgID, org.OrgID)
		}

		for _, body := range []any{map[string]any{}, map[string]any{"name": "  "}, map[string]any{"name": strings.Repeat("n", 201)},
			map[string]any{"name": "two\nlines"}, map[string]any{"name": 7}} {
			m := wantProblem(t, e.do("POST", "/v1/orgs", owner.key, body), 422, "validation_error")
			if errs := m["errors"].([]any); errs[0].(map[string]any)["field"] != "name" {
				t.Fatalf("errors %v", errs)
			}
		}
		_, noEmail := e.account("")
		wantProblem(t, e.do("POST", "/v1/orgs", noEmail, map[string]any{"name": "X"}), 400, "account_has_no_email")

		// At most domain.MaxOwnedTeams teams per owner.
		for range domain.MaxOwnedTeams - 2 {
			if _, err := e.app.CreateOrg(context.Background(), e.as(owner), papi.CreateTeamRequest{Name: new("More")}); err != nil {
				t.Fatal(err)
			}
		}
		wantProblem(t, e.do("POST", "/v1/orgs", owner.key, map[string]any{"name": "One too many"}), 409, "too_many_orgs")
		var list papi.TeamList
		mustJSON(t, e.do("GET", "/v1/orgs", owner.key, nil), &list)
		if len(list.Orgs) != domain.MaxOwnedTeams {
			t.Fatalf("%d teams listed, want %d", len(list.Orgs), domain.MaxOwnedTeams)
		}
	})
}

func mustJSON(t *testing.T, r response, v any) {
	t.Helper()
	if r.Status >= 300 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
}

// GET /v1/orgs/{org_id} and its members: active members and live
// invitations, the owner present with role owner; an expired invitation is
// neither counted, listed, nor acceptable, and can be made again.
func TestOrgMembersAndInvitationExpiry(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		var d papi.TeamDetail
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID, c.viewer.key, nil), &d)
		if d.MemberCount != 4 || d.InvitedCount != 1 || d.Org.Role != "viewer" || d.Org.OwnerUserID != c.owner.userID || d.Org.Name != "Platform" {
			t.Fatalf("detail %+v", d)
		}
		var ms papi.TeamMembers
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID+"/members", c.member.key, nil), &ms)
		got := map[string]papi.TeamMember{}
		for _, m := range ms.Members {
			got[m.Email] = m
		}
		if ms.OrgID != orgID || len(ms.Members) != 5 {
			t.Fatalf("members %+v", ms)
		}
		if o := got[c.owner.email]; o.Role != "owner" || o.Status != "active" || o.UserID == nil || *o.UserID != c.owner.userID {
			t.Fatalf("owner row %+v", o)
		}
		if v := got[c.viewer.email]; v.Role != "viewer" || v.Status != "active" || *v.UserID != c.viewer.userID {
			t.Fatalf("viewer row %+v", v)
		}
		if inv := got[c.invitee.email]; inv.Status != "invited" || inv.UserID != nil || inv.Role != "viewer" {
			t.Fatalf("invitation row %+v", inv)
		}
		if ms.Members[0].Email != c.owner.email || ms.Members[len(ms.Members)-1].Status != "invited" {
			t.Fatalf("the owners come first, the invitations last: %+v", ms.Members)
		}

		// Seven days later the invitation is gone.
		e.clock.Advance(domain.InvitationLifetime)
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID, c.viewer.key, nil), &d)
		if d.MemberCount != 4 || d.InvitedCount != 0 {
			t.Fatalf("after expiry %+v", d)
		}
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID+"/members", c.member.key, nil), &ms)
		if len(ms.Members) != 4 {
			t.Fatalf("an expired invitation is listed: %+v", ms.Members)
		}
		wantProblem(t, e.do("POST", "/v1/orgs/"+orgID+"/accept", c.invitee.key, nil), 404, "invitation_not_found")
		wantProblem(t, e.do("DELETE", "/v1/orgs/"+orgID+"/members/"+c.invitee.email, c.owner.key, nil), 404, "member_not_found")
		r := e.do("POST", "/v1/orgs/"+orgID+"/invite", c.owner.key, map[string]any{"email": c.invitee.email, "role": "member"})
		if r.Status != 201 {
			t.Fatalf("inviting again after expiry: %d %s", r.Status, r.Body)
		}
		var acc papi.TeamMemberResponse
		mustJSON(t, e.do("POST", "/v1/orgs/"+orgID+"/accept", c.invitee.key, nil), &acc)
		if acc.Member.Role != "member" || acc.Member.Status != "active" {
			t.Fatalf("accepted %+v", acc.Member)
		}
	})
}

// POST invite: 201 with the member row invited and user_id null; the
// owner-only rule and every refusal; nothing written by a refusal.
func TestInvite(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		path := "/v1/orgs/" + orgID + "/invite"
		r := e.do("POST", path, c.owner.key, map[string]any{"email": "New.Person@Example.com", "role": "owner"})
		var inv papi.TeamMemberResponse
		if r.Status != 201 {
			t.Fatalf("invite: %d %s", r.Status, r.Body)
		}
		mustJSON(t, r, &inv)
		want := papi.TeamMember{OrgID: orgID, Email: "new.person@example.com", Role: "owner", Status: "invited", CreatedAt: domain.FormatTimestamp(e.clock.Now())}
		if inv.Member != want {
			t.Fatalf("invitation %+v, want %+v", inv.Member, want)
		}
		rows := e.count("org_members")
		for _, tc := range []struct {
			key    string
			body   any
			status int
			code   string
			field  string
		}{
			{c.member.key, map[string]any{"email": "x@example.com", "role": "viewer"}, 403, "owner_required", ""},
			{c.viewer.key, map[string]any{"email": "x@example.com", "role": "admin"}, 403, "owner_required", ""},
			{c.owner.key, map[string]any{"email": "x@example.com", "role": "admin"}, 422, "validation_error", "role"},
			{c.owner.key, map[string]any{"email": "x@example.com"}, 422, "validation_error", "role"},
			{c.owner.key, map[string]any{"role": "viewer"}, 422, "validation_error", "email"},
			{c.owner.key, map[string]any{"email": "Name <x@example.com>", "role": "viewer"}, 422, "validation_error", "email"},
			{c.owner.key, map[string]any{"email": "x@example.com", "role": "viewer", "extra": 1}, 422, "validation_error", "extra"},
			{c.owner.key, map[string]any{"email": c.member.email, "role": "viewer"}, 409, "already_member", ""},
			{c.owner.key, map[string]any{"email": "NEW.person@example.com", "role": "viewer"}, 409, "already_invited", ""},
			{c.owner.key, map[string]any{"email": c.invitee.email, "role": "viewer"}, 409, "already_invited", ""},
		} {
			m := wantProblem(t, e.do("POST", path, tc.key, tc.body), tc.status, tc.code)
			if tc.field != "" {
				if errs := m["errors"].([]any); errs[0].(map[string]any)["field"] != tc.field {
					t.Fatalf("%v: errors %v, want field %s", tc.body, errs, tc.field)
				}
			}
		}
		if n := e.count("org_members"); n != rows {
			t.Fatalf("refused invitations wrote rows: %d -> %d", rows, n)
		}

		// At most domain.MaxPendingInvitations live invitations.
		owner := e.as(c.owner)
		for i := 2; i < domain.MaxPendingInvitations; i++ {
			email, role := fmt.Sprintf("bulk-%d@example.com", i), "viewer"
			if _, err := e.app.Invite(context.Background(), owner, orgID, papi.InviteRequest{Email: &email, Role: &role}); err != nil {
				t.Fatal(err)
			}
		}
		wantProblem(t, e.do("POST", path, c.owner.key, map[string]any{"email": "last@example.com", "role": "viewer"}), 409, "too_many_invitations")
	})
}

// An invitation is mailed, through the SMTP transport to a real SMTP
// server, to the invited email: who invited, to what, how to accept and
// until when. When the mailer cannot take it, it is withdrawn again and the
// caller gets 503 mail_unavailable.
func TestInvitationIsMailed(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		smtpd := &mailtest.Server{}
		smtpd.Start(t, nil)
		mailer, err := imail.New("smtp://"+smtpd.Addr(), imail.Options{Backoff: func(int) time.Duration { return 0 }, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		e.mail.use(mailer)
		r := e.do("POST", "/v1/orgs/"+orgID+"/invite", c.owner.key, map[string]any{"email": "Guest@Example.com", "role": "member"})
		if r.Status != 201 {
			t.Fatalf("invite: %d %s", r.Status, r.Body)
		}
		got := smtpd.Received()
		if len(got) != 1 || len(got[0].To) != 1 || got[0].To[0] != "guest@example.com" {
			t.Fatalf("arrived %+v", got)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(got[0].Data))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(msg.Body)
		expires := e.clock.Now().Add(domain.InvitationLifetime).Format("2006-01-02 15:04 UTC")
		for _, want := range []string{c.owner.email, `"Platform"`, orgID, "as member", "POST /v1/orgs/" + orgID + "/accept", "guest@example.com", expires} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the invitation mail lacks %q:\n%s", want, body)
			}
		}

		// The mail server refuses every recipient: nothing is kept.
		refusing := &mailtest.Server{RcptError: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "mailbox unavailable"}}
		refusing.Start(t, nil)
		refusingMailer, err := imail.New("smtp://"+refusing.Addr(), imail.Options{Backoff: func(int) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		e.mail.use(refusingMailer)
		wantProblem(t, e.do("POST", "/v1/orgs/"+orgID+"/invite", c.owner.key, map[string]any{"email": "lost@example.com", "role": "member"}), 503, "mail_unavailable")
		var ms papi.TeamMembers
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID+"/members", c.owner.key, nil), &ms)
		for _, m := range ms.Members {
			if m.Email == "lost@example.com" {
				t.Fatalf("an invitation that was not mailed is kept: %+v", m)
			}
		}
		rows := rowsOf(e.notices(c.member.key, "", 50), domain.NoticeTeamMemberRemoved)
		if len(rows[domain.ChannelInApp]) != 1 {
			t.Fatalf("the members were not told the invitation was withdrawn: %v", rows)
		}
	})
}

// POST accept: by the account holding the invited email, with its session
// or any of its keys; nobody else, not twice, not after a withdrawal.
func TestAcceptInvitation(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		accept := "/v1/orgs/" + orgID + "/accept"
		// Another account's key, even the inviter's, cannot accept for the invitee.
		wantProblem(t, e.do("POST", accept, c.owner.key, nil), 404, "invitation_not_found")
		wantProblem(t, e.do("POST", accept, c.outsider.key, nil), 404, "invitation_not_found")
		wantProblem(t, e.do("POST", "/v1/orgs/not-an-org/accept", c.invitee.key, nil), 404, "invitation_not_found")

		_, cookie := e.signIn(c.invitee.email)
		r := e.withSession("POST", accept, cookie, nil)
		var acc papi.TeamMemberResponse
		mustJSON(t, r, &acc)
		if r.Status != 200 || acc.Member.Status != "active" || acc.Member.UserID == nil || *acc.Member.UserID != c.invitee.userID ||
			acc.Member.Email != c.invitee.email || acc.Member.Role != "viewer" || acc.Member.OrgID != orgID {
			t.Fatalf("accept: %d %+v", r.Status, acc.Member)
		}
		wantProblem(t, e.withSession("POST", accept, cookie, nil), 404, "invitation_not_found")
		var d papi.TeamDetail
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID, c.invitee.key, nil), &d)
		if d.Org.Role != "viewer" || d.MemberCount != 5 || d.InvitedCount != 0 {
			t.Fatalf("after accept %+v", d)
		}

		// A key limited to orgs, of the account holding the email, accepts too.
		guest := e.person("guest@example.com")
		limited := e.key(guest.userID, papi.CreateKeyRequest{Scopes: []string{"orgs"}})
		email, role := guest.email, "member"
		if _, err := e.app.Invite(context.Background(), e.as(c.owner), orgID, papi.InviteRequest{Email: &email, Role: &role}); err != nil {
			t.Fatal(err)
		}
		if r := e.do("POST", accept, limited, nil); r.Status != 200 {
			t.Fatalf("accept with a limited key: %d %s", r.Status, r.Body)
		}

		// A withdrawn invitation cannot be accepted.
		late := e.person("late@example.com")
		email = late.email
		if _, err := e.app.Invite(context.Background(), e.as(c.owner), orgID, papi.InviteRequest{Email: &email, Role: &role}); err != nil {
			t.Fatal(err)
		}
		if r := e.do("DELETE", "/v1/orgs/"+orgID+"/members/"+late.email, c.owner.key, nil); r.Status != 204 {
			t.Fatalf("withdraw: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("POST", accept, late.key, nil), 404, "invitation_not_found")
	})
}

// GET keys: the metadata of every active member's keys, revoked ones
// included; never a token, never an invitee's or an outsider's key.
func TestOrgKeys(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		labelled := e.key(c.member.userID, papi.CreateKeyRequest{Scopes: []string{"events:read"}, Machine: new("ci-1"), Label: new("deploy")})
		revoked, err := e.app.CreateKey(context.Background(), c.viewer.userID, papi.CreateKeyRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.app.RevokeKey(context.Background(), e.as(c.viewer), revoked.Key.ID); err != nil {
			t.Fatal(err)
		}
		r := e.do("GET", "/v1/orgs/"+orgID+"/keys", c.viewer.key, nil)
		var keys papi.TeamKeys
		mustJSON(t, r, &keys)
		for _, secret := range []string{labelled, revoked.APIKey, c.owner.key, c.member.key, c.viewer.key, c.target.key} {
			if strings.Contains(string(r.Body), secret) {
				t.Fatal("a key token was listed")
			}
		}
		if keys.OrgID != orgID || len(keys.Keys) != 6 { // owner, member ×2, viewer ×2, target
			t.Fatalf("%d keys listed: %s", len(keys.Keys), r.Body)
		}
		byPrefix := map[string]papi.TeamKey{}
		for _, k := range keys.Keys {
			byPrefix[k.Prefix] = k
		}
		if k := byPrefix[labelled[:11]]; k.Machine != "ci-1" || k.Label != "deploy" || !slices.Equal(k.Scopes, []string{"events:read"}) {
			t.Fatalf("labelled key %+v", k)
		}
		if k := byPrefix[revoked.Key.Prefix]; k.RevokedAt == nil {
			t.Fatalf("revoked key %+v", k)
		}
		for _, outside := range []string{c.invitee.key, c.outsider.key} {
			if _, ok := byPrefix[outside[:11]]; ok {
				t.Fatal("a non-member's key is listed")
			}
		}
	})
}

// DELETE a member: an owner removes a member and withdraws an invitation,
// a member leaves; the last owner cannot go; the owner the team names is
// succeeded by the longest-standing remaining owner.
func TestRemoveMembersAndTheLastOwner(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		member := func(email string) string { return "/v1/orgs/" + orgID + "/members/" + email }

		// The sole owner can neither leave nor be removed.
		wantProblem(t, e.do("DELETE", member(c.owner.email), c.owner.key, nil), 409, "last_owner")
		wantProblem(t, e.do("DELETE", member(strings.ToUpper(c.owner.email)), c.owner.key, nil), 409, "last_owner")
		wantProblem(t, e.do("DELETE", member(c.owner.email), c.member.key, nil), 403, "owner_required")
		wantProblem(t, e.do("DELETE", member("nobody@example.com"), c.owner.key, nil), 404, "member_not_found")
		wantProblem(t, e.do("DELETE", member("not%20an%20email"), c.owner.key, nil), 404, "member_not_found")

		// An owner removes a member: it no longer sees the team.
		if r := e.do("DELETE", member(c.target.email), c.owner.key, nil); r.Status != 204 {
			t.Fatalf("remove: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("GET", "/v1/orgs/"+orgID, c.target.key, nil), 404, "org_not_found")
		var list papi.TeamList
		mustJSON(t, e.do("GET", "/v1/orgs", c.target.key, nil), &list)
		if len(list.Orgs) != 0 {
			t.Fatalf("a removed member still lists the team: %+v", list)
		}
		// A member leaves.
		if r := e.do("DELETE", member(c.viewer.email), c.viewer.key, nil); r.Status != 204 {
			t.Fatalf("leave: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("GET", "/v1/orgs/"+orgID+"/members", c.viewer.key, nil), 404, "org_not_found")
		// An owner withdraws an invitation.
		if r := e.do("DELETE", member(c.invitee.email), c.owner.key, nil); r.Status != 204 {
			t.Fatalf("withdraw: %d %s", r.Status, r.Body)
		}
		wantProblem(t, e.do("POST", "/v1/orgs/"+orgID+"/accept", c.invitee.key, nil), 404, "invitation_not_found")

		// A second owner: now the first may leave, and the team names the second.
		second := e.person("second@example.com")
		email, role := second.email, "owner"
		if _, err := e.app.Invite(context.Background(), e.as(c.owner), orgID, papi.InviteRequest{Email: &email, Role: &role}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.app.AcceptInvitation(context.Background(), e.as(second), orgID); err != nil {
			t.Fatal(err)
		}
		if r := e.do("DELETE", member(c.owner.email), c.owner.key, nil); r.Status != 204 {
			t.Fatalf("the first owner leaves: %d %s", r.Status, r.Body)
		}
		var d papi.TeamDetail
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID, c.member.key, nil), &d)
		if d.Org.OwnerUserID != second.userID || d.MemberCount != 2 {
			t.Fatalf("after the first owner left: %+v", d)
		}
		var ms papi.TeamMembers
		mustJSON(t, e.do("GET", "/v1/orgs/"+orgID+"/members", c.member.key, nil), &ms)
		if ms.Members[0].Email != second.email || ms.Members[0].Role != "owner" || ms.Members[0].Status != "active" {
			t.Fatalf("members %+v", ms.Members)
		}
		wantProblem(t, e.do("DELETE", member(second.email), second.key, nil), 409, "last_owner")
	})
}

// Team changes are notices to the team's members (docs/decisions/teams.md):
// an invitation, a join and a removal each reach every active member, and a
// removal the member removed; none is a chain event.
func TestTeamChangesAreNoticesToMembers(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		c := e.crew()
		orgID := e.team(c)
		if r := e.do("DELETE", "/v1/orgs/"+orgID+"/members/"+c.target.email, c.owner.key, nil); r.Status != 204 {
			t.Fatalf("remove: %d", r.Status)
		}
		counts := func(p person) map[string]int {
			out := map[string]int{}
			for _, n := range e.notices(p.key, "", 50) {
				if n["channel"] == domain.ChannelInApp && strings.HasPrefix(n["type"].(string), "team.") {
					out[n["type"].(string)]++
				}
			}
			return out
		}
		// The owner saw four invitations, three joins and the removal; the
		// viewer (joined second) two invitations (its own is sent before it
		// joins), two joins and the removal; the removed member its removal.
		for _, tc := range []struct {
			p                        person
			invited, joined, removed int
		}{{c.owner, 4, 3, 1}, {c.viewer, 2, 2, 1}, {c.target, 1, 1, 1}, {c.invitee, 0, 0, 0}, {c.outsider, 0, 0, 0}} {
			got := counts(tc.p)
			want := map[string]int{domain.NoticeTeamMemberInvited: tc.invited, domain.NoticeTeamMemberJoined: tc.joined, domain.NoticeTeamMemberRemoved: tc.removed}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %d %s notices, want %d (%v)", tc.p.email, got[k], k, v, got)
				}
			}
		}
		for _, p := range []person{c.owner, c.member} {
			var tip map[string]any
			mustJSON(t, e.do("GET", "/v1/chain/tip", p.key, nil), &tip)
			if tip["sequence"] != nil {
				t.Fatalf("a team change wrote a chain event: %v", tip)
			}
		}
	})
}

// Two accepts of one invitation at once, over HTTP against the real store:
// exactly one 200, the other 404, and exactly one active member row.
func TestConcurrentAcceptsMakeOneMember(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		owner := e.person("owner@example.com")
		org, err := e.app.CreateOrg(context.Background(), e.as(owner), papi.CreateTeamRequest{Name: new("Race")})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			guest := e.person(fmt.Sprintf("guest-%d@example.com", i))
			second := e.key(guest.userID, papi.CreateKeyRequest{Scopes: []string{"orgs"}})
			email, role := guest.email, "member"
			if _, err := e.app.Invite(context.Background(), e.as(owner), org.Org.OrgID, papi.InviteRequest{Email: &email, Role: &role}); err != nil {
				t.Fatal(err)
			}
			got := e.race(
				raceCall{"POST", "/v1/orgs/" + org.Org.OrgID + "/accept", guest.key},
				raceCall{"POST", "/v1/orgs/" + org.Org.OrgID + "/accept", second})
			slices.SortFunc(got, func(a, b response) int { return a.Status - b.Status })
			if got[0].Status != 200 {
				t.Fatalf("round %d: no accept succeeded: %d %s / %d %s", i, got[0].Status, got[0].Body, got[1].Status, got[1].Body)
			}
			wantProblem(t, got[1], 404, "invitation_not_found")
			var n int
			if err := e.store.DB().QueryRow(`SELECT count(*) FROM org_members WHERE org_id = $1 AND email = $2 AND status = 'active' AND user_id = $3`,
				org.Org.OrgID, guest.email, guest.userID).Scan(&n); err != nil || n != 1 {
				t.Fatalf("round %d: %d active rows (%v)", i, n, err)
			}
		}
		var d papi.TeamDetail
		mustJSON(t, e.do("GET", "/v1/orgs/"+org.Org.OrgID, owner.key, nil), &d)
		if d.MemberCount != 13 || d.InvitedCount != 0 {
			t.Fatalf("after the races %+v", d)
		}
	})
}

// Two owners leaving at once, and two owners removing each other at once:
// the team always keeps one owner, and owner_user_id names it.
func TestConcurrentRemovalsKeepAnOwner(t *testing.T) {
	eachTeamEnv(t, func(t *testing.T, e *env) {
		for i := range 8 {
			a := e.person(fmt.Sprintf("a-%d@example.com", i))
			b := e.person(fmt.Sprintf("b-%d@example.com", i))
			org, err := e.app.CreateOrg(context.Background(), e.as(a), papi.CreateTeamRequest{Name: new("Two owners")})
			if err != nil {
				t.Fatal(err)
			}
			email, role := b.email, "owner"
			if _, err := e.app.Invite(context.Background(), e.as(a), org.Org.OrgID, papi.InviteRequest{Email: &email, Role: &role}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.app.AcceptInvitation(context.Background(), e.as(b), org.Org.OrgID); err != nil {
				t.Fatal(err)
			}
			path := func(p person) string { return "/v1/orgs/" + org.Org.OrgID + "/members/" + p.email }
			leave := i%2 == 0
			var got []response
			if leave { // each leaves: one 204, one 409 last_owner
				got = e.race(raceCall{"DELETE", path(a), a.key}, raceCall{"DELETE", path(b), b.key})
			} else { // each removes the other: one 204, and the removed one is no member any more
				got = e.race(raceCall{"DELETE", path(b), a.key}, raceCall{"DELETE", path(a), b.key})
			}
			slices.SortFunc(got, func(x, y response) int { return x.Status - y.Status })
			if got[0].Status != 204 {
				t.Fatalf("round %d: %d %s / %d %s", i, got[0].Status, got[0].Body, got[1].Status, got[1].Body)
			}
			if leave {
				wantProblem(t, got[1], 409, "last_owner")
			} else {
				wantProblem(t, got[1], 404, "org_not_found")
			}
			var owners int
			var named string
			if err := e.store.DB().QueryRow(`SELECT count(*) FROM org_members WHERE org_id = $1 AND role = 'owner' AND status = 'active'`, org.Org.OrgID).Scan(&owners); err != nil {
				t.Fatal(err)
			}
			if err := e.store.DB().QueryRow(`SELECT m.email FROM orgs o JOIN org_members m ON m.org_id = o.org_id AND m.user_id = o.owner_user_id
				WHERE o.org_id = $1 AND m.role = 'owner' AND m.status = 'active'`, org.Org.OrgID).Scan(&named); err != nil {
				t.Fatalf("round %d: owner_user_id names no active owner: %v", i, err)
			}
			if owners != 1 {
				t.Fatalf("round %d: %d owners left", i, owners)
			}
		}
	})
}

type raceCall struct{ method, path, key string }

// race sends the calls at once (each on its own goroutine, released
// together) and returns their answers in call order. It checks nothing
// itself: t may not fail from those goroutines.
func (e *env) race(calls ...raceCall) []response {
	e.t.Helper()
	out := make([]response, len(calls))
	errs := make([]error, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range calls {
		req, err := http.NewRequest(c.method, e.srv.URL+c.path, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		req.Header.Set("X-API-Key", c.key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			out[i], errs[i] = response{Status: resp.StatusCode, Header: resp.Header, Body: body}, err
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return out
}
