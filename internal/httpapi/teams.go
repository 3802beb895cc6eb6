package httpapi

// Teams (SPEC.md "Teams"): the routes answer pkg/api's shapes; routes.go
// puts them behind --teams.

import (
	"net/http"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

func toTeam(o store.MemberOrg) api.Team {
	return api.Team{OrgID: o.OrgID, Name: o.Name, OwnerUserID: o.OwnerUserID, CreatedAt: domain.FormatTimestamp(o.CreatedAt), Role: o.Role}
}

func toTeamMember(m store.OrgMember) api.TeamMember {
	return api.TeamMember{OrgID: m.OrgID, UserID: m.UserID, Email: m.Email, Role: m.Role, Status: m.Status,
		CreatedAt: domain.FormatTimestamp(m.CreatedAt)}
}

func (s *Server) listOrgs(w http.ResponseWriter, r *http.Request) error {
	orgs, err := s.app.Orgs(r.Context(), principal(r))
	if err != nil {
		return err
	}
	out := api.TeamList{Orgs: make([]api.Team, len(orgs))}
	for i, o := range orgs {
		out.Orgs[i] = toTeam(o)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) createOrg(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.CreateTeamRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	org, err := s.app.CreateOrg(r.Context(), principal(r), deref(req.Name))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.TeamCreated{Org: toTeam(org)})
}

func (s *Server) getOrg(w http.ResponseWriter, r *http.Request) error {
	d, err := s.app.Org(r.Context(), principal(r), r.PathValue("org_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.TeamDetail{Org: toTeam(d.Org), MemberCount: d.MemberCount, InvitedCount: d.InvitedCount})
}

func (s *Server) acceptInvitation(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	m, err := s.app.AcceptInvitation(r.Context(), principal(r), r.PathValue("org_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.TeamMemberResponse{Member: toTeamMember(m)})
}

func (s *Server) inviteMember(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.InviteRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	m, err := s.app.Invite(r.Context(), principal(r), r.PathValue("org_id"), req.Email, req.Role)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, api.TeamMemberResponse{Member: toTeamMember(m)})
}

func (s *Server) orgKeys(w http.ResponseWriter, r *http.Request) error {
	orgID := r.PathValue("org_id")
	keys, err := s.app.OrgKeys(r.Context(), principal(r), orgID)
	if err != nil {
		return err
	}
	out := api.TeamKeys{OrgID: orgID, Keys: make([]api.TeamKey, len(keys))}
	for i, k := range keys {
		out.Keys[i] = toKey(k)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) orgMembers(w http.ResponseWriter, r *http.Request) error {
	orgID := r.PathValue("org_id")
	members, err := s.app.OrgMembers(r.Context(), principal(r), orgID)
	if err != nil {
		return err
	}
	out := api.TeamMembers{OrgID: orgID, Members: make([]api.TeamMember, len(members))}
	for i, m := range members {
		out.Members[i] = toTeamMember(m)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) removeOrgMember(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	if err := s.app.RemoveOrgMember(r.Context(), principal(r), r.PathValue("org_id"), r.PathValue("email")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
