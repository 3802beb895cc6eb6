package httpapi

// Teams (SPEC.md "Teams"): the routes answer pkg/api's shapes; routes.go
// puts them behind --teams.

import (
	"net/http"

	"github.com/auditchain/auditchain/pkg/api"
)

func (s *Server) listOrgs(w http.ResponseWriter, r *http.Request) error {
	orgs, err := s.app.Orgs(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, orgs)
}

func (s *Server) createOrg(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.CreateTeamRequest](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	org, err := s.app.CreateOrg(r.Context(), principal(r), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, org)
}

func (s *Server) getOrg(w http.ResponseWriter, r *http.Request) error {
	d, err := s.app.Org(r.Context(), principal(r), r.PathValue("org_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, d)
}

func (s *Server) acceptInvitation(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	m, err := s.app.AcceptInvitation(r.Context(), principal(r), r.PathValue("org_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, m)
}

func (s *Server) inviteMember(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.InviteRequest](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	m, err := s.app.Invite(r.Context(), principal(r), r.PathValue("org_id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, m)
}

func (s *Server) orgKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.app.OrgKeys(r.Context(), principal(r), r.PathValue("org_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, keys)
}

func (s *Server) orgMembers(w http.ResponseWriter, r *http.Request) error {
	members, err := s.app.OrgMembers(r.Context(), principal(r), r.PathValue("org_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, members)
}

func (s *Server) removeOrgMember(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	if err := s.app.RemoveOrgMember(r.Context(), principal(r), r.PathValue("org_id"), r.PathValue("email")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
