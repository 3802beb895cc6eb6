package app

// Webhook endpoints (CONTRACT.md "Webhooks"): registered per account, the
// secret shown once, targets checked against SSRF at registration (and again
// at every connection, by the egress).

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/notify/webhook"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Bounds of endpoints.
const (
	MaxWebhooksPerAccount = 10
	MaxWebhookURLBytes    = 2048
	// MaxDeliveriesListed bounds GET /v1/webhooks/{id}/deliveries.
	MaxDeliveriesListed = 100
)

// Codes of the webhook routes (CONTRACT.md leaves them to us; docs/decisions/notifications.md).
const (
	CodeWebhookNotFound   = "webhook_not_found"
	CodeWebhookURLRefused = "webhook_url_refused"
	CodeTooManyWebhooks   = "too_many_webhooks"
)

func webhookOf(w store.Webhook) api.Webhook {
	return api.Webhook{ID: w.ID, URL: w.URL, Types: w.Types, CreatedAt: domain.FormatTimestamp(w.CreatedAt)}
}

// CreateWebhook registers the request's url for its types (every type with a
// webhook channel when types is nil). A target that is not http(s) or
// resolves to a loopback, private, link-local or metadata address is
// refused, unless the operator allowed private targets.
func (a *App) CreateWebhook(ctx context.Context, p Principal, req api.CreateWebhookRequest) (api.WebhookCreated, error) {
	url, types := deref(req.URL), req.Types
	if len(url) > MaxWebhookURLBytes {
		return api.WebhookCreated{}, domain.Validation(domain.FieldError{Field: "url", Message: "at most 2048 bytes"})
	}
	if types == nil {
		types = domain.WebhookTypes()
	}
	if len(types) == 0 {
		return api.WebhookCreated{}, domain.Validation(domain.FieldError{Field: "types", Message: "must name at least one type (omit it for every type)"})
	}
	if bad := domain.InvalidWebhookTypes(types); len(bad) > 0 {
		return api.WebhookCreated{}, domain.Validation(domain.FieldError{Field: "types",
			Message: "not a notification type with a webhook channel: " + strings.Join(bad, ", ")})
	}
	types = slices.Compact(slices.Sorted(slices.Values(types)))
	if err := a.egress.CheckURL(ctx, url); err != nil {
		if ctx.Err() != nil {
			return api.WebhookCreated{}, ctx.Err()
		}
		// Every other reason (scheme, address, a name that does not
		// resolve) is the caller's to fix.
		return api.WebhookCreated{}, (&domain.Error{Code: CodeWebhookURLRefused, Detail: err.Error()}).With("url", url)
	}
	secret, err := webhook.NewSecret(a.rand)
	if err != nil {
		return api.WebhookCreated{}, err
	}
	id, err := uuid.NewV7FromReader(a.rand)
	if err != nil {
		return api.WebhookCreated{}, err
	}
	w := store.Webhook{ID: id.String(), UserID: p.UserID, URL: url, Types: types, Secret: secret,
		CreatedAt: a.now().UTC().Truncate(time.Microsecond)}
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		// Under the account's lock, so two registrations count each other.
		if _, err := t.Lock(ctx, p.UserID); err != nil {
			return err
		}
		n, err := a.store.CountWebhooks(ctx, t.SQL(), p.UserID)
		if err != nil {
			return err
		}
		if n >= MaxWebhooksPerAccount {
			return domain.Errorf(CodeTooManyWebhooks, "an account has at most %d webhook endpoints; delete one first", MaxWebhooksPerAccount)
		}
		return a.store.CreateWebhook(ctx, t.SQL(), w)
	})
	if err != nil {
		return api.WebhookCreated{}, err
	}
	return api.WebhookCreated{Webhook: webhookOf(w), Secret: secret}, nil
}

// Webhooks lists the caller's endpoints without secrets, oldest first.
func (a *App) Webhooks(ctx context.Context, p Principal) (api.WebhookList, error) {
	ws, err := a.store.Webhooks(ctx, nil, p.UserID, "")
	if err != nil {
		return api.WebhookList{}, err
	}
	out := make([]api.Webhook, len(ws))
	for i, w := range ws {
		out[i] = webhookOf(w)
	}
	return api.WebhookList{Webhooks: out}, nil
}

var errWebhookNotFound = domain.NotFound(CodeWebhookNotFound, "webhook")

// DeleteWebhook removes the caller's endpoint with its attempts. Rows queued
// for it alone fail at the next drain.
func (a *App) DeleteWebhook(ctx context.Context, p Principal, id string) error {
	err := a.w.Write(ctx, func(t *writer.Tx) error { return a.store.DeleteWebhook(ctx, t.SQL(), p.UserID, id) })
	if errors.Is(err, store.ErrNotFound) {
		return errWebhookNotFound
	}
	return err
}

// WebhookDeliveries lists the attempts to deliver to the caller's endpoint
// id, newest first.
func (a *App) WebhookDeliveries(ctx context.Context, p Principal, id string) (api.WebhookDeliveries, error) {
	ok, err := a.store.WebhookExists(ctx, p.UserID, id)
	if err != nil {
		return api.WebhookDeliveries{}, err
	}
	if !ok {
		return api.WebhookDeliveries{}, errWebhookNotFound
	}
	ds, err := a.store.Deliveries(ctx, id, MaxDeliveriesListed)
	if err != nil {
		return api.WebhookDeliveries{}, err
	}
	out := make([]api.WebhookDelivery, len(ds))
	for i, d := range ds {
		out[i] = api.WebhookDelivery{NotificationID: d.NotificationID, Attempt: d.Attempt, StatusCode: d.StatusCode, Error: d.Error,
			DurationMS: float64(d.Duration.Microseconds()) / 1000, CreatedAt: domain.FormatTimestamp(d.CreatedAt)}
	}
	return api.WebhookDeliveries{Deliveries: out}, nil
}
