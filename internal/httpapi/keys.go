package httpapi

import (
	"net/http"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.CreateKeyRequest](r, s.cfg.MaxBodyBytes, true)
	if err != nil {
		return err
	}
	k, err := s.app.CreateKey(r.Context(), principal(r).UserID, req)
	if err != nil {
		return err
	}
	// The token is shown this once (CONTRACT.md "Credentials").
	return writeJSON(w, http.StatusCreated, k)
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.app.Keys(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, keys)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	k, err := s.app.RevokeKey(r.Context(), principal(r), r.PathValue("key_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, k)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if err := s.app.Ready(r.Context()); err != nil {
		s.log.Warn("health: store not ready", "err", err.Error())
		return &domain.Error{Code: domain.CodeUnavailable, Detail: "the store is not ready", RetryAfter: 1}
	}
	return writeJSON(w, http.StatusOK, api.Health{Status: "ok", Store: s.app.StoreEngine(), Version: s.version})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(s.openapi)
	return err
}

// metrics writes the Prometheus exposition of this replica's registry.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	s.registry.ServeHTTP(w, r)
	return nil
}
