package httpapi

// Notification and webhook routes (SPEC.md "Notifications", CONTRACT.md
// "Notifications", "Webhooks").

import (
	"net/http"
	"strconv"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) error {
	limit := app.DefaultNotificationPage
	if v := r.URL.Query().Get("limit"); r.URL.Query().Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil {
			return domain.Validation(domain.FieldError{Field: "limit", Message: "must be an integer"})
		}
		limit = n
	}
	page, err := s.app.Notifications(r.Context(), principal(r), optionalQuery(r, "cursor"), optionalQuery(r, "severity"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (s *Server) getPreferences(w http.ResponseWriter, r *http.Request) error {
	prefs, err := s.app.Preferences(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, prefs)
}

// preferencesBody is PUT /v1/notifications/preferences' body: preferences
// is required (app.MaxPreferenceRows rows at most, app's check).
type preferencesBody api.PreferencesRequest

func (b *preferencesBody) validate() []domain.FieldError {
	if b.Preferences == nil {
		return []domain.FieldError{{Field: "preferences", Message: "required"}}
	}
	return nil
}

func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[preferencesBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	res, err := s.app.PutPreferences(r.Context(), principal(r), api.PreferencesRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

// testNotificationBody is POST /v1/notifications/test's body: type is
// required.
type testNotificationBody api.TestNotificationRequest

func (b *testNotificationBody) validate() []domain.FieldError {
	if b.Type == nil {
		return []domain.FieldError{{Field: "type", Message: "required"}}
	}
	return nil
}

func (s *Server) testNotification(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	// The production rule answers before the body is looked at: a caller who
	// may not use the route learns nothing from it (SPEC.md "Authentication" 3).
	if s.cfg.Production() && !p.IsAdmin {
		return domain.Errorf(app.CodeTestRequiresAdmin, "in production only an administrator may send test notifications")
	}
	req, err := decode[testNotificationBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	res, err := s.app.TestNotification(r.Context(), p, api.TestNotificationRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

// digestRunBody is POST /v1/notifications/digest/run's body: user_id is
// required.
type digestRunBody api.DigestRunRequest

func (b *digestRunBody) validate() []domain.FieldError {
	if b.UserID == nil {
		return []domain.FieldError{{Field: "user_id", Message: "required"}}
	}
	return nil
}

func (s *Server) runDigest(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[digestRunBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	res, err := s.app.RunDigest(r.Context(), *req.UserID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) redeliverNotification(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	n, err := s.app.Redeliver(r.Context(), principal(r), r.PathValue("notification_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, n)
}

// webhookBody is POST /v1/webhooks' body: url is required.
type webhookBody api.CreateWebhookRequest

func (b *webhookBody) validate() []domain.FieldError {
	if b.URL == nil {
		return []domain.FieldError{{Field: "url", Message: "required"}}
	}
	return nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[webhookBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	hook, err := s.app.CreateWebhook(r.Context(), principal(r), api.CreateWebhookRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, hook)
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	hooks, err := s.app.Webhooks(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, hooks)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
		return err
	}
	if err := s.app.DeleteWebhook(r.Context(), principal(r), r.PathValue("webhook_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	ds, err := s.app.WebhookDeliveries(r.Context(), principal(r), r.PathValue("webhook_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ds)
}

func (s *Server) dashboardUsage(w http.ResponseWriter, r *http.Request) error {
	u, err := s.app.DashboardUsage(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}
