package app

// Notifications (CONTRACT.md "Notifications", "Webhooks"): the account's
// list and preferences, the test dispatcher and redelivery. Writing a
// notice's rows is in notify.go.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

func notificationOf(n store.Notification) api.Notification {
	out := api.Notification{ID: n.ID, Type: n.Type, Channel: n.Channel, Severity: n.Severity, DeliveryStatus: n.DeliveryStatus,
		Digest: n.Digest, CreatedAt: domain.FormatTimestamp(time.UnixMicro(n.CreatedAt))}
	if n.SentAt != nil {
		s := domain.FormatTimestamp(time.UnixMicro(*n.SentAt))
		out.SentAt = &s
	}
	return out
}

// DefaultNotificationPage is SPEC.md's default page size; MaxNotificationPage
// bounds what a caller may ask.
const (
	DefaultNotificationPage = 50
	MaxNotificationPage     = 500
)

// Notifications lists the caller's rows newest first, after cursor (the
// created_at of the previous page's last row), of one severity when given.
// next_cursor is set only when a full page came back (SPEC.md).
func (a *App) Notifications(ctx context.Context, p Principal, cursor, severity *string, limit int) (api.NotificationPage, error) {
	var errs []domain.FieldError
	var before *int64
	if cursor != nil {
		t, err := domain.ParseTimestamp(*cursor)
		if err != nil {
			errs = append(errs, domain.FieldError{Field: "cursor", Message: "must be the created_at of a notification (RFC 3339)"})
		} else {
			us := t.UnixMicro()
			before = &us
		}
	}
	if severity != nil && !domain.ValidSeverity(*severity) {
		errs = append(errs, domain.FieldError{Field: "severity", Message: "must be info, warning or critical"})
	}
	if limit < 1 || limit > MaxNotificationPage {
		errs = append(errs, domain.FieldError{Field: "limit", Message: "must be between 1 and " + strconv.Itoa(MaxNotificationPage)})
	}
	if len(errs) > 0 {
		return api.NotificationPage{}, domain.Validation(errs...)
	}
	rows, err := a.store.Notifications(ctx, p.UserID, before, severity, limit)
	if err != nil {
		return api.NotificationPage{}, err
	}
	page := api.NotificationPage{Notifications: make([]api.Notification, len(rows))}
	for i, r := range rows {
		page.Notifications[i] = notificationOf(r)
	}
	if len(rows) == limit {
		page.NextCursor = &page.Notifications[len(rows)-1].CreatedAt
	}
	return page, nil
}

// Preferences lists every (type, declared channel) of the caller's
// account, the defaults unless changed.
func (a *App) Preferences(ctx context.Context, p Principal) (api.Preferences, error) {
	stored, err := a.store.Preferences(ctx, nil, p.UserID)
	if err != nil {
		return api.Preferences{}, err
	}
	set := make(map[[2]string]store.Preference, len(stored))
	for _, s := range stored {
		set[[2]string{s.Type, s.Channel}] = s
	}
	var out []api.Preference
	for _, t := range domain.NoticeTypes {
		for _, ch := range t.Channels {
			d := domain.DefaultPreference(t.Name, ch)
			row := api.Preference{Type: d.Type, Channel: d.Channel, Enabled: d.Enabled, Digest: d.Digest,
				Mandatory: t.Mandatory, Severity: t.Severity}
			if s, ok := set[[2]string{t.Name, ch}]; ok {
				row.Enabled, row.Digest = s.Enabled, s.Digest
			}
			if t.Mandatory {
				row.Enabled = true
			}
			out = append(out, row)
		}
	}
	return api.Preferences{Preferences: out}, nil
}

// MaxPreferenceRows bounds one PUT: every (type, channel) twice over.
const MaxPreferenceRows = 64

// PutPreferences stores the rows it can and reports the rest with reasons:
// accepted rows are stored regardless of rejected ones (SPEC.md).
func (a *App) PutPreferences(ctx context.Context, p Principal, req api.PreferencesRequest) (api.PreferencesResult, error) {
	in := req.Preferences
	if len(in) > MaxPreferenceRows {
		return api.PreferencesResult{}, domain.Validation(domain.FieldError{Field: "preferences",
			Message: "at most " + strconv.Itoa(MaxPreferenceRows) + " rows"})
	}
	res := api.PreferencesResult{Rejected: []api.RejectedPreference{}}
	var ok []domain.Preference
	for i, r := range in {
		if r.Type == nil || r.Channel == nil {
			return api.PreferencesResult{}, domain.Validation(domain.FieldError{Field: fmt.Sprintf("preferences[%d]", i),
				Message: "type and channel are required"})
		}
		pref := domain.Preference{Type: *r.Type, Channel: *r.Channel, Enabled: r.Enabled == nil || *r.Enabled, Digest: r.Digest != nil && *r.Digest}
		if reason := domain.CheckPreference(pref); reason != "" {
			res.Rejected = append(res.Rejected, api.RejectedPreference{Type: pref.Type, Channel: pref.Channel, Enabled: pref.Enabled,
				Digest: pref.Digest, Reason: reason})
			continue
		}
		ok = append(ok, pref)
	}
	if len(ok) > 0 {
		err := a.w.Write(ctx, func(t *writer.Tx) error {
			for _, pref := range ok {
				if err := a.store.PutPreference(ctx, t.SQL(), p.UserID, store.Preference{Type: pref.Type, Channel: pref.Channel,
					Enabled: pref.Enabled, Digest: pref.Digest}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return api.PreferencesResult{}, err
		}
	}
	res.Accepted = len(ok)
	return res, nil
}

// Codes of the test dispatcher (SPEC.md "Errors").
const (
	CodeTestRequiresAdmin   = "test_endpoint_requires_admin_in_production"
	CodeUnknownNoticeType   = "unknown_notification_type"
	CodeNotificationMissing = "notification_not_found"
	CodeNotFailed           = "notification_not_failed"
)

// TestNotification dispatches a notice of typ to the caller's own account
// as its real emitter would; body and severity go into the email, severity
// alone into the push (which carries no text: CONTRACT.md "Notifications"),
// neither into the row. In production only an administrator may; in every
// environment each call is charged to the account and the deployment
// (testBudgets: 429 rate_limit_exceeded once one is spent).
func (a *App) TestNotification(ctx context.Context, p Principal, req api.TestNotificationRequest) (api.TestNotificationResult, error) {
	res, err := a.testNotification(ctx, p, deref(req.Type), req.Body, req.Severity)
	a.noteRefusal(ctx, p.UserID, err)
	return res, err
}

func (a *App) testNotification(ctx context.Context, p Principal, typ string, body, severity *string) (api.TestNotificationResult, error) {
	if a.cfg.Production() && !p.IsAdmin {
		return api.TestNotificationResult{}, domain.Errorf(CodeTestRequiresAdmin, "in production only an administrator may send test notifications")
	}
	nt, ok := domain.LookupNoticeType(typ)
	if !ok {
		return api.TestNotificationResult{}, domain.Errorf(CodeUnknownNoticeType, "notification type %q is not declared", typ)
	}
	n := Notice{Type: typ, Subject: map[string]any{"test": true}, Title: "test notification", Body: "test notification"}
	if body != nil {
		n.Body = *body
	}
	if severity != nil {
		if !domain.ValidSeverity(*severity) {
			return api.TestNotificationResult{}, domain.Validation(domain.FieldError{Field: "severity", Message: "must be info, warning or critical"})
		}
		n.Severity = *severity
	}
	if len(n.Body) > 4096 {
		return api.TestNotificationResult{}, domain.Validation(domain.FieldError{Field: "body", Message: "at most 4096 bytes"})
	}
	var rows []store.Notification
	err := a.w.Write(ctx, func(t *writer.Tx) (err error) {
		if err := a.charge(ctx, t, domain.CodeRateLimited, a.testBudgets(p.UserID)...); err != nil {
			return err
		}
		rows, err = a.notify(ctx, t, p.UserID, n)
		return err
	})
	if err != nil {
		return api.TestNotificationResult{}, err
	}
	res := api.TestNotificationResult{Dispatched: make([]string, 0, len(rows)), DeliveryStatus: make(map[string]string, len(rows))}
	for _, r := range rows {
		res.DeliveryStatus[r.Channel] = r.DeliveryStatus
	}
	for _, ch := range nt.Channels { // in the type's order, not the rows' stamps'
		if _, ok := res.DeliveryStatus[ch]; ok {
			res.Dispatched = append(res.Dispatched, ch)
		}
	}
	return res, nil
}

// Redeliver puts the caller's failed row back in its outbox (CONTRACT.md
// "Webhooks": it goes back to queued). A row that has not failed answers
// 409 notification_not_failed; another account's row is 404, as a missing one.
func (a *App) Redeliver(ctx context.Context, p Principal, id string) (api.NotificationRedelivered, error) {
	var out store.Notification
	err := a.w.Write(ctx, func(t *writer.Tx) error {
		n, err := a.store.Requeue(ctx, t.SQL(), p.UserID, id)
		if err != nil {
			return err
		}
		if n.DeliveryStatus != domain.DeliveryFailed {
			return (&domain.Error{Code: CodeNotFailed,
				Detail: "only a failed notification can be redelivered; this one is " + n.DeliveryStatus}).With("delivery_status", n.DeliveryStatus)
		}
		n.DeliveryStatus, n.SentAt = domain.DeliveryQueued, nil
		out = n
		if n.Channel == domain.ChannelEmail {
			t.AfterCommit(a.notices.wakeMailer)
		} else {
			t.AfterCommit(a.kickWebhooks)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return api.NotificationRedelivered{}, domain.NotFound(CodeNotificationMissing, "notification")
	}
	if err != nil {
		return api.NotificationRedelivered{}, err
	}
	return api.NotificationRedelivered{Notification: notificationOf(out)}, nil
}
