package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/auditchain/auditchain/pkg/api"
)

// Notifications, webhooks and usage.

// Notifications reads a page of the account's notification rows, newest
// first (GET /v1/notifications).
func (c *Client) Notifications(ctx context.Context, q api.NotificationQuery) (*api.NotificationPage, error) {
	v := url.Values{}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Severity != "" {
		v.Set("severity", q.Severity)
	}
	return get[api.NotificationPage](ctx, c, "/v1/notifications", v)
}

// Preferences reads every (type, channel) preference.
func (c *Client) Preferences(ctx context.Context) (*api.Preferences, error) {
	return get[api.Preferences](ctx, c, "/v1/notifications/preferences", nil)
}

// SetPreferences stores preference rows one by one (PUT
// /v1/notifications/preferences); rejected rows come back with a reason.
func (c *Client) SetPreferences(ctx context.Context, req api.PreferencesRequest) (*api.PreferencesResult, error) {
	return call[api.PreferencesResult](ctx, c, request{method: http.MethodPut, path: "/v1/notifications/preferences", body: &req, idempotent: true})
}

// TestNotification dispatches a notice of a type to the caller's own account
// (POST /v1/notifications/test). Not resent: a resend notifies twice.
func (c *Client) TestNotification(ctx context.Context, req api.TestNotificationRequest) (*api.TestNotificationResult, error) {
	return call[api.TestNotificationResult](ctx, c, request{method: http.MethodPost, path: "/v1/notifications/test", body: &req})
}

// RunDigest rolls an account's held email notices into one digest
// (administrator; POST /v1/notifications/digest/run). A second run reports
// DigestSent false, so a lost answer is resent safely.
func (c *Client) RunDigest(ctx context.Context, userID string) (*api.DigestRunResult, error) {
	return call[api.DigestRunResult](ctx, c, request{method: http.MethodPost, path: "/v1/notifications/digest/run",
		body: api.DigestRunRequest{UserID: &userID}, idempotent: true})
}

// Redeliver puts a failed row back in its outbox (POST
// /v1/notifications/{id}/redeliver).
func (c *Client) Redeliver(ctx context.Context, notificationID string) (*api.Notification, error) {
	out, err := call[api.NotificationRedelivered](ctx, c, request{method: http.MethodPost,
		path: "/v1/notifications/" + escape(notificationID) + "/redeliver"})
	if err != nil {
		return nil, err
	}
	return &out.Notification, nil
}

// CreateWebhook registers an endpoint (POST /v1/webhooks); the secret is in
// the answer only. Not resent: a resend registers a second endpoint.
func (c *Client) CreateWebhook(ctx context.Context, req api.CreateWebhookRequest) (*api.WebhookCreated, error) {
	return call[api.WebhookCreated](ctx, c, request{method: http.MethodPost, path: "/v1/webhooks", body: &req})
}

// Webhooks lists the account's endpoints (GET /v1/webhooks).
func (c *Client) Webhooks(ctx context.Context) (*api.WebhookList, error) {
	return get[api.WebhookList](ctx, c, "/v1/webhooks", nil)
}

// DeleteWebhook deletes an endpoint with its delivery attempts (DELETE
// /v1/webhooks/{webhook_id}).
func (c *Client) DeleteWebhook(ctx context.Context, webhookID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: "/v1/webhooks/" + escape(webhookID)}, nil)
}

// WebhookDeliveries lists an endpoint's delivery attempts, newest first.
func (c *Client) WebhookDeliveries(ctx context.Context, webhookID string) (*api.WebhookDeliveries, error) {
	return get[api.WebhookDeliveries](ctx, c, "/v1/webhooks/"+escape(webhookID)+"/deliveries", nil)
}

// Usage reads the account's figures (GET /v1/dashboard/usage).
func (c *Client) Usage(ctx context.Context) (*api.Usage, error) {
	return get[api.Usage](ctx, c, "/v1/dashboard/usage", nil)
}
