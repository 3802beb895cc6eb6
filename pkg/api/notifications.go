package api

// Notifications, webhooks and the usage figures (SPEC.md "Notifications",
// CONTRACT.md "Notifications", "Webhooks"; GET /v1/dashboard/usage).

// Notification is one row: a notice that went out on one channel (never its
// text).
type Notification struct {
	ID             string  `json:"id"`
	Type           string  `json:"type"`
	Channel        string  `json:"channel"`  // in_app, email, webhook
	Severity       string  `json:"severity"` // info, warning, critical
	DeliveryStatus string  `json:"delivery_status"`
	Digest         bool    `json:"digest"`
	CreatedAt      string  `json:"created_at"`
	SentAt         *string `json:"sent_at"`
}

// NotificationPage answers GET /v1/notifications (newest first):
// NextCursor, set only after a full page, is the next page's cursor.
type NotificationPage struct {
	Notifications []Notification `json:"notifications"`
	NextCursor    *string        `json:"next_cursor"`
}

// NotificationQuery is the query of GET /v1/notifications.
type NotificationQuery struct {
	Cursor   string // "" for the first page
	Limit    int    // 0: the service's default (50)
	Severity string // "" for any
}

// NotificationRedelivered answers POST /v1/notifications/{id}/redeliver.
type NotificationRedelivered struct {
	Notification Notification `json:"notification"`
}

// Preference is one (type, channel) preference as GET shows it.
type Preference struct {
	Type      string `json:"type"`
	Channel   string `json:"channel"`
	Enabled   bool   `json:"enabled"`
	Digest    bool   `json:"digest"`
	Mandatory bool   `json:"mandatory"`
	Severity  string `json:"severity"`
}

// Preferences answers GET /v1/notifications/preferences.
type Preferences struct {
	Preferences []Preference `json:"preferences"`
}

// PreferenceInput is one row of PUT /v1/notifications/preferences: Type and
// Channel are required; Enabled nil means true, Digest nil false.
type PreferenceInput struct {
	Type    *string `json:"type" max:"name"`
	Channel *string `json:"channel" max:"name"`
	Enabled *bool   `json:"enabled,omitempty"`
	Digest  *bool   `json:"digest,omitempty"`
}

// PreferencesRequest is the body of PUT /v1/notifications/preferences;
// Preferences is required (at most 64 rows).
type PreferencesRequest struct {
	Preferences []PreferenceInput `json:"preferences"`
}

// RejectedPreference is a row PUT did not store, and why.
type RejectedPreference struct {
	Type    string `json:"type"`
	Channel string `json:"channel"`
	Enabled bool   `json:"enabled"`
	Digest  bool   `json:"digest"`
	Reason  string `json:"reason"`
}

// PreferencesResult answers PUT /v1/notifications/preferences: accepted
// rows are stored regardless of rejected ones.
type PreferencesResult struct {
	Accepted int                  `json:"accepted"`
	Rejected []RejectedPreference `json:"rejected"`
}

// TestNotificationRequest is the body of POST /v1/notifications/test; Type
// is required.
type TestNotificationRequest struct {
	Type     *string `json:"type" max:"name"`
	Body     *string `json:"body,omitempty" max:"note"`
	Severity *string `json:"severity,omitempty" max:"name"`
}

// TestNotificationResult answers POST /v1/notifications/test.
type TestNotificationResult struct {
	Dispatched     []string          `json:"dispatched"`
	DeliveryStatus map[string]string `json:"delivery_status"`
}

// DigestRunRequest is the body of POST /v1/notifications/digest/run; UserID
// is required.
type DigestRunRequest struct {
	UserID *string `json:"user_id" max:"name"`
}

// DigestRunResult answers POST /v1/notifications/digest/run.
type DigestRunResult struct {
	DigestSent bool           `json:"digest_sent"`
	Grouped    map[string]int `json:"grouped"`
	UserID     string         `json:"user_id"`
}

// Webhook is a registered endpoint (never its secret after creation).
type Webhook struct {
	ID        string   `json:"id"`
	URL       string   `json:"url"`
	Types     []string `json:"types"`
	CreatedAt string   `json:"created_at"`
}

// CreateWebhookRequest is the body of POST /v1/webhooks: URL is required;
// Types nil means every type with a webhook channel.
type CreateWebhookRequest struct {
	URL   *string  `json:"url" max:"url"`
	Types []string `json:"types,omitempty" max:"list" each:"name"`
}

// WebhookCreated answers POST /v1/webhooks (201): Secret (whsec_…) signs
// deliveries (Standard Webhooks) and is shown this once.
type WebhookCreated struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookList answers GET /v1/webhooks (oldest first).
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookPayload is the body of a webhook delivery (CONTRACT.md
// "Webhooks"), signed as Standard Webhooks: thin, a prompt to poll GET
// /v1/notifications, never the fact itself.
type WebhookPayload struct {
	Type      string             `json:"type"`
	Timestamp string             `json:"timestamp"`
	Data      WebhookPayloadData `json:"data"`
}

// WebhookPayloadData names the notification a push is about; Subject names
// its object (for grant.revoked: grant_id and subagent).
type WebhookPayloadData struct {
	NotificationID string         `json:"notification_id"`
	UserID         string         `json:"user_id"`
	Severity       string         `json:"severity"`
	Subject        map[string]any `json:"subject"`
}

// WebhookDelivery is one delivery attempt.
type WebhookDelivery struct {
	NotificationID string  `json:"notification_id"`
	Attempt        int     `json:"attempt"`
	StatusCode     *int    `json:"status_code"`
	Error          *string `json:"error"`
	DurationMS     float64 `json:"duration_ms"`
	CreatedAt      string  `json:"created_at"`
}

// WebhookDeliveries answers GET /v1/webhooks/{webhook_id}/deliveries.
type WebhookDeliveries struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// Usage answers GET /v1/dashboard/usage: the caller's account in figures
// (Day is the UTC date the "today" figures count).
type Usage struct {
	Day           string           `json:"day"`
	Events        UsageEvents      `json:"events"`
	TreeSize      int64            `json:"tree_size"`
	Grants        UsageGrants      `json:"grants"`
	Gate          map[string]int64 `json:"gate"`
	Proposals     map[string]int64 `json:"proposals"`
	Notifications map[string]int64 `json:"notifications"`
	CallsToday    UsageCalls       `json:"calls_today"`
}

// UsageEvents is Usage's events against the daily quota.
type UsageEvents struct {
	Today          int64 `json:"today"`
	Total          int64 `json:"total"`
	QuotaLimit     int64 `json:"quota_limit"`
	QuotaRemaining int64 `json:"quota_remaining"`
}

// UsageGrants is Usage's grants by state, and today's uses.
type UsageGrants struct {
	Live      int64 `json:"live"`
	Expired   int64 `json:"expired"`
	Revoked   int64 `json:"revoked"`
	UsesToday int64 `json:"uses_today"`
}

// UsageCalls counts today's credentialed calls.
type UsageCalls struct {
	ByCapability map[string]int64 `json:"by_capability"`
	BySurface    map[string]int64 `json:"by_surface"`
}
