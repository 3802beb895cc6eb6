package httpapi

// Notification and webhook routes (SPEC.md "Notifications", CONTRACT.md
// "Notifications", "Webhooks").

import (
	"net/http"
	"strconv"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
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
	return writeJSON(w, http.StatusOK, map[string]any{"preferences": prefs})
}

type putPreferencesRequest struct {
	Preferences []app.PreferenceInput `json:"preferences"` // at most app.MaxPreferenceRows
}

func (b *putPreferencesRequest) validate() []domain.FieldError {
	if b.Preferences == nil {
		return []domain.FieldError{{Field: "preferences", Message: "required"}}
	}
	return nil
}

func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[putPreferencesRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	res, err := s.app.PutPreferences(r.Context(), principal(r), req.Preferences)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

type testNotificationRequest struct {
	Type     *string `json:"type" max:"name"`
	Body     *string `json:"body" max:"note"`
	Severity *string `json:"severity" max:"name"`
}

func (b *testNotificationRequest) validate() []domain.FieldError {
	if b.Type == nil {
		return []domain.FieldError{{Field: "type", Message: "required"}}
	}
	return nil
}

func (s *Server) testNotification(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	// The production rule answers before the body is looked at: a caller who
	// may not use the route learns nothing from it (SPEC.md "Authentication" 3).
	if s.app.Cfg.Production() && !p.IsAdmin {
		return domain.Errorf(app.CodeTestRequiresAdmin, "in production only an administrator may send test notifications")
	}
	req, err := decode[testNotificationRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	res, err := s.app.TestNotification(r.Context(), p, *req.Type, req.Body, req.Severity)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

type digestRunRequest struct {
	UserID *string `json:"user_id" max:"name"`
}

func (b *digestRunRequest) validate() []domain.FieldError {
	if b.UserID == nil {
		return []domain.FieldError{{Field: "user_id", Message: "required"}}
	}
	return nil
}

func (s *Server) runDigest(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[digestRunRequest](r, s.app.Cfg.MaxBodyBytes, false)
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
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	n, err := s.app.Redeliver(r.Context(), principal(r), r.PathValue("notification_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"notification": n})
}

type createWebhookRequest struct {
	URL   *string  `json:"url" max:"url"`
	Types []string `json:"types" max:"list" each:"name"`
}

func (b *createWebhookRequest) validate() []domain.FieldError {
	if b.URL == nil {
		return []domain.FieldError{{Field: "url", Message: "required"}}
	}
	return nil
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[createWebhookRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	hook, err := s.app.CreateWebhook(r.Context(), principal(r), *req.URL, req.Types)
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
	return writeJSON(w, http.StatusOK, map[string]any{"webhooks": hooks})
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
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
	return writeJSON(w, http.StatusOK, map[string]any{"deliveries": ds})
}

func (s *Server) dashboardUsage(w http.ResponseWriter, r *http.Request) error {
	u, err := s.app.DashboardUsage(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}
