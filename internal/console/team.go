package console

// The team panel (SPEC.md "Teams", with serve --teams): the teams the
// account owns or joined, creating one, accepting an invitation by the
// team's id (the invitation mail names it), and a team's members and live
// invitations with invite, remove and leave — through the use cases of
// /v1/orgs. While teams are off the panel says so, and its forms answer as
// the API's routes do: 404 feature_disabled.

import (
	"net/http"
	"net/url"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

type teamPage struct {
	Enabled bool
	Orgs    []api.Team
	Created *api.Team
	Joined  *api.TeamMember
	Refused *refusal
}

type orgPage struct {
	Detail  api.TeamDetail
	Members []api.TeamMember
	More    int
	Owner   bool
	Me      string
	Roles   []string
	Invited *api.TeamMember
	Refused *refusal
	Done    string
}

var errTeamsOff = &domain.Error{Code: domain.CodeFeatureDisabled, Detail: "teams are not enabled on this deployment (serve --teams)"}

func (c *Console) team(w http.ResponseWriter, r *http.Request) error {
	return c.teamPage(w, r, http.StatusOK, teamPage{})
}

func (c *Console) teamPage(w http.ResponseWriter, r *http.Request, status int, pg teamPage) error {
	pg.Enabled = c.Config.Teams
	if pg.Enabled {
		list, err := c.App.Orgs(r.Context(), viewerOf(r).Principal)
		if err != nil {
			return err
		}
		pg.Orgs = list.Orgs
	}
	c.render(w, r, status, "team", "Team", pg)
	return nil
}

// teamForm runs a team form's use case, or answers the API's refusal while
// teams are off (before the form is read).
func (c *Console) teamForm(w http.ResponseWriter, r *http.Request, run func() error) error {
	if !c.Config.Teams {
		return errTeamsOff
	}
	return run()
}

func (c *Console) createTeam(w http.ResponseWriter, r *http.Request) error {
	return c.teamForm(w, r, func() error {
		name, err := formText(r, "name", 0)
		if err == nil {
			var t api.TeamCreated
			if t, err = c.App.CreateOrg(r.Context(), viewerOf(r).Principal, api.CreateTeamRequest{Name: &name}); err == nil {
				return c.teamPage(w, r, http.StatusCreated, teamPage{Created: &t.Org})
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.teamPage(w, r, f.Status, teamPage{Refused: f})
	})
}

func (c *Console) joinTeam(w http.ResponseWriter, r *http.Request) error {
	return c.teamForm(w, r, func() error {
		id, err := formText(r, "org_id", domain.MaxNameBytes)
		if err == nil {
			var m api.TeamMemberResponse
			if m, err = c.App.AcceptInvitation(r.Context(), viewerOf(r).Principal, id); err == nil {
				return c.teamPage(w, r, http.StatusOK, teamPage{Joined: &m.Member})
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.teamPage(w, r, f.Status, teamPage{Refused: f})
	})
}

var orgDone = map[string]string{"removed": "The member is removed (or the invitation withdrawn)."}

func (c *Console) org(w http.ResponseWriter, r *http.Request) error {
	if !c.Config.Teams {
		return errTeamsOff
	}
	return c.orgPage(w, r, http.StatusOK, orgPage{Done: done(r, orgDone)})
}

func (c *Console) orgPage(w http.ResponseWriter, r *http.Request, status int, pg orgPage) error {
	p := viewerOf(r).Principal
	id := r.PathValue("org_id")
	d, err := c.App.Org(r.Context(), p, id)
	if err != nil {
		return err
	}
	ms, err := c.App.OrgMembers(r.Context(), p, id)
	if err != nil {
		return err
	}
	pg.Detail, pg.Members = d, ms.Members
	if n := len(pg.Members); n > maxListed {
		pg.Members, pg.More = pg.Members[:maxListed], n-maxListed
	}
	pg.Owner = d.Org.Role == domain.RoleOwner
	pg.Roles = []string{domain.RoleMember, domain.RoleViewer, domain.RoleOwner}
	if s, err := c.App.Session(r.Context(), p); err == nil {
		pg.Me = s.Email
	}
	c.render(w, r, status, "org", "Team "+d.Org.Name, pg)
	return nil
}

func (c *Console) inviteMember(w http.ResponseWriter, r *http.Request) error {
	return c.teamForm(w, r, func() error {
		email, err := formText(r, "email", domain.MaxNameBytes)
		if err == nil {
			var role string
			if role, err = formText(r, "role", domain.MaxNameBytes); err == nil {
				var m api.TeamMemberResponse
				if m, err = c.App.Invite(r.Context(), viewerOf(r).Principal, r.PathValue("org_id"), api.InviteRequest{Email: &email, Role: optional(role)}); err == nil {
					return c.orgPage(w, r, http.StatusCreated, orgPage{Invited: &m.Member})
				}
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.orgPage(w, r, f.Status, orgPage{Refused: f})
	})
}

// removeMember removes a member or withdraws an invitation (an owner), or
// leaves the team (the member's own row).
func (c *Console) removeMember(w http.ResponseWriter, r *http.Request) error {
	return c.teamForm(w, r, func() error {
		id := r.PathValue("org_id")
		email, err := formText(r, "email", domain.MaxNameBytes)
		if err == nil {
			if err = c.App.RemoveOrgMember(r.Context(), viewerOf(r).Principal, id, email); err == nil {
				if _, err := c.App.Org(r.Context(), viewerOf(r).Principal, id); err != nil {
					// The caller left: the team is no longer theirs to see.
					http.Redirect(w, r, Prefix+"team", http.StatusSeeOther)
					return nil
				}
				http.Redirect(w, r, Prefix+"team/"+url.PathEscape(id)+"?done=removed", http.StatusSeeOther)
				return nil
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.orgPage(w, r, f.Status, orgPage{Refused: f})
	})
}
