package console

// The webhooks panel (a portal like Svix's, within CONTRACT.md "Webhooks"):
// the account's endpoints with their types and recent success rate, the
// secret shown once at creation, an endpoint's delivery attempts with status
// and duration, redelivery of a failed notification, and a test notice —
// through the use cases of /v1/webhooks and /v1/notifications.

import (
	"net/http"
	"net/url"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// endpointRow is an endpoint with the outcome of its listed attempts.
type endpointRow struct {
	api.Webhook
	Attempts, Succeeded int
}

// SuccessPct is the share of its listed attempts that succeeded.
func (e endpointRow) SuccessPct() int {
	if e.Attempts == 0 {
		return 0
	}
	return e.Succeeded * 100 / e.Attempts
}

type webhooksPage struct {
	Endpoints []endpointRow
	Max       int
	// Types are the notice types with a webhook channel (what an endpoint
	// subscribes to, and what a test may send).
	Types   []string
	Created *api.WebhookCreated
	Tested  *api.TestNotificationResult
	Refused *refusal
	Done    string
	Now     time.Time
}

var webhooksDone = map[string]string{"deleted": "The endpoint is deleted, with its attempts."}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request) error {
	return c.webhooksPage(w, r, http.StatusOK, webhooksPage{Done: done(r, webhooksDone)})
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, status int, pg webhooksPage) error {
	p := viewerOf(r).Principal
	list, err := c.App.Webhooks(r.Context(), p)
	if err != nil {
		return err
	}
	// At most app.MaxWebhooksPerAccount endpoints, each with at most
	// app.MaxDeliveriesListed attempts: bounded.
	for _, h := range list.Webhooks {
		row := endpointRow{Webhook: h}
		ds, err := c.App.WebhookDeliveries(r.Context(), p, h.ID)
		if err != nil {
			return err
		}
		for _, d := range ds.Deliveries {
			row.Attempts++
			if delivered(d) {
				row.Succeeded++
			}
		}
		pg.Endpoints = append(pg.Endpoints, row)
	}
	pg.Max, pg.Types, pg.Now = app.MaxWebhooksPerAccount, domain.WebhookTypes(), c.App.Now()
	c.render(w, r, status, "webhooks", "Webhooks", pg)
	return nil
}

// delivered reports whether an attempt was answered 2xx (Standard Webhooks).
func delivered(d api.WebhookDelivery) bool {
	return d.StatusCode != nil && *d.StatusCode >= 200 && *d.StatusCode < 300
}

// createWebhook is POST /v1/webhooks' use case: the answer shows the
// signing secret this once, out of every cache.
func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request) error {
	target, err := formText(r, "url", domain.MaxURLBytes)
	if err == nil {
		var types []string
		if types, err = formList(r, "types", domain.MaxNameBytes); err == nil {
			req := api.CreateWebhookRequest{URL: &target}
			if len(types) > 0 { // none checked: every type, as the API's omitted types
				req.Types = types
			}
			var h api.WebhookCreated
			if h, err = c.App.CreateWebhook(r.Context(), viewerOf(r).Principal, req); err == nil {
				noStore(w)
				return c.webhooksPage(w, r, http.StatusCreated, webhooksPage{Created: &h})
			}
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.webhooksPage(w, r, f.Status, webhooksPage{Refused: f})
}

func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	if err := c.App.DeleteWebhook(r.Context(), viewerOf(r).Principal, r.PathValue("webhook_id")); err != nil {
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.webhooksPage(w, r, f.Status, webhooksPage{Refused: f})
	}
	http.Redirect(w, r, Prefix+"webhooks?done=deleted", http.StatusSeeOther)
	return nil
}

// sendTest is POST /v1/notifications/test's rules on the form's type: in
// production only an administrator may (answered before the form is read,
// as the API does), and every test is charged to the account.
func (c *Console) sendTest(r *http.Request) (api.TestNotificationResult, error) {
	p := viewerOf(r).Principal
	if c.Config.Production() && !p.IsAdmin {
		return api.TestNotificationResult{}, domain.Errorf(app.CodeTestRequiresAdmin, "in production only an administrator may send test notifications")
	}
	typ, err := formText(r, "type", domain.MaxNameBytes)
	if err != nil {
		return api.TestNotificationResult{}, err
	}
	if typ == "" {
		return api.TestNotificationResult{}, domain.Validation(domain.FieldError{Field: "type", Message: "required"})
	}
	return c.App.TestNotification(r.Context(), p, api.TestNotificationRequest{Type: &typ})
}

func (c *Console) testWebhook(w http.ResponseWriter, r *http.Request) error {
	res, err := c.sendTest(r)
	if err != nil {
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.webhooksPage(w, r, f.Status, webhooksPage{Refused: f})
	}
	return c.webhooksPage(w, r, http.StatusOK, webhooksPage{Tested: &res})
}

// attemptRow is one delivery attempt; Delivered ones are not offered for
// redelivery.
type attemptRow struct {
	api.WebhookDelivery
	Delivered bool
}

// endpointPage is one endpoint's attempts, newest first.
type endpointPage struct {
	Endpoint   api.Webhook
	Deliveries []attemptRow
	Max        int
	Refused    *refusal
	Done       string
}

var endpointDone = map[string]string{"redelivered": "The notification is queued again; its next attempt appears here once it is made."}

func (c *Console) webhookEndpoint(w http.ResponseWriter, r *http.Request) error {
	return c.endpointPage(w, r, http.StatusOK, endpointPage{Done: done(r, endpointDone)})
}

func (c *Console) endpointPage(w http.ResponseWriter, r *http.Request, status int, pg endpointPage) error {
	p := viewerOf(r).Principal
	id := r.PathValue("webhook_id")
	ds, err := c.App.WebhookDeliveries(r.Context(), p, id)
	if err != nil {
		return err
	}
	list, err := c.App.Webhooks(r.Context(), p)
	if err != nil {
		return err
	}
	for _, h := range list.Webhooks {
		if h.ID == id {
			pg.Endpoint = h
		}
	}
	for _, d := range ds.Deliveries {
		pg.Deliveries = append(pg.Deliveries, attemptRow{WebhookDelivery: d, Delivered: delivered(d)})
	}
	pg.Endpoint.ID, pg.Max = id, app.MaxDeliveriesListed
	c.render(w, r, status, "webhook", "Webhook endpoint", pg)
	return nil
}

// redeliverWebhook is POST /v1/notifications/{id}/redeliver's use case for
// a notification listed among an endpoint's attempts.
func (c *Console) redeliverWebhook(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("webhook_id")
	nid, err := formText(r, "notification_id", domain.MaxNameBytes)
	if err == nil {
		if _, err = c.App.Redeliver(r.Context(), viewerOf(r).Principal, nid); err == nil {
			http.Redirect(w, r, Prefix+"webhooks/"+url.PathEscape(id)+"?done=redelivered", http.StatusSeeOther)
			return nil
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.endpointPage(w, r, f.Status, endpointPage{Refused: f})
}
