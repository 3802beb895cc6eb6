package httpapi

import (
	"net/http"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// toKey is a key's metadata as every listing shows it (a team's included);
// the token never appears.
func toKey(k store.APIKey) api.Key {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return api.Key{ID: k.ID, Prefix: k.Prefix, Machine: k.Machine, Label: k.Label, Scopes: scopes,
		CreatedAt: domain.FormatTimestamp(k.CreatedAt), ExpiresAt: formatOpt(k.ExpiresAt), RevokedAt: formatOpt(k.RevokedAt)}
}

// KeyCreatedView is the answer of POST /v1/keys, the token shown this once
// (CONTRACT.md "Credentials"); the admin commands print it too.
func KeyCreatedView(k app.NewKey) api.KeyCreated {
	return api.KeyCreated{Key: toKey(k.Key), APIKey: k.Token}
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[api.CreateKeyRequest](r, s.app.Cfg.MaxBodyBytes, true)
	if err != nil {
		return err
	}
	var expires *time.Time
	if req.ExpiresAt != nil {
		t, err := domain.ParseTimestamp(*req.ExpiresAt)
		if err != nil {
			return domain.Validation(domain.FieldError{Field: "expires_at", Message: "must be an ISO-8601 timestamp with a UTC offset, like 2026-01-02T15:04:05+00:00"})
		}
		expires = &t
	}
	k, err := s.app.CreateKey(r.Context(), principal(r).UserID, app.KeyRequest{
		Scopes: req.Scopes, Machine: deref(req.Machine), Label: deref(req.Label), ExpiresAt: expires,
	})
	if err != nil {
		return err
	}
	// The token is shown this once (CONTRACT.md "Credentials").
	return writeJSON(w, http.StatusCreated, KeyCreatedView(k))
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.app.Keys(r.Context(), principal(r))
	if err != nil {
		return err
	}
	out := api.KeyList{Count: len(keys), Keys: make([]api.Key, len(keys))}
	for i, k := range keys {
		out.Keys[i] = toKey(k)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	k, err := s.app.RevokeKey(r.Context(), principal(r), r.PathValue("key_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.KeyRevoked{Key: toKey(k)})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	if err := s.app.Ready(r.Context()); err != nil {
		s.log.Warn("health: store not ready", "err", err.Error())
		return &domain.Error{Code: domain.CodeUnavailable, Detail: "the store is not ready", RetryAfter: 1}
	}
	return writeJSON(w, http.StatusOK, api.Health{Status: "ok", Store: string(s.app.Store.Dialect), Version: s.version})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(s.openapi)
	return err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
