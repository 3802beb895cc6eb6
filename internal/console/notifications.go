package console

// The notifications panel: the inbox (the account's notification rows,
// newest first, by severity, paged: CONTRACT.md "Notifications" — a row
// names its notice, never its text), the preferences as a type × channel
// grid, a test notice, and redelivery of a failed row — through the use
// cases of /v1/notifications.

import (
	"net/http"
	"slices"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// inboxLimit is the rows of one inbox page.
const inboxLimit = 50

// prefCell is one (type, channel) of the grid; Declared false is a channel
// the type never goes out on.
type prefCell struct {
	Channel          string
	Declared         bool
	Enabled, Digest  bool
	DigestOffered    bool
	Mandatory        bool
	Key              string // "type|channel", the form's value
	EnabledID, DigID string
}

type prefRow struct {
	Type, Title, Severity string
	Mandatory             bool
	Cells                 []prefCell
}

type notificationsPage struct {
	Inbox    api.NotificationPage
	Severity string
	// Severities are the filter's choices.
	Severities []string
	Cursor     string
	Grid       []prefRow
	Channels   []string
	Types      []string
	Saved      *api.PreferencesResult
	Tested     *api.TestNotificationResult
	Refused    *refusal
	Done       string
	Connect    connectHelp
}

var channels = []string{domain.ChannelInApp, domain.ChannelEmail, domain.ChannelWebhook}

var notificationsDone = map[string]string{"redelivered": "The notification is queued again."}

func (c *Console) notifications(w http.ResponseWriter, r *http.Request) error {
	return c.notificationsPage(w, r, http.StatusOK, notificationsPage{Done: done(r, notificationsDone)})
}

func (c *Console) notificationsPage(w http.ResponseWriter, r *http.Request, status int, pg notificationsPage) error {
	p := viewerOf(r).Principal
	q := r.URL.Query()
	pg.Severity, pg.Cursor = q.Get("severity"), q.Get("cursor")
	inbox, err := c.App.Notifications(r.Context(), p, optional(pg.Cursor), optional(pg.Severity), inboxLimit)
	if err != nil {
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		pg.Refused, status = f, f.Status
	}
	pg.Inbox = inbox
	prefs, err := c.App.Preferences(r.Context(), p)
	if err != nil {
		return err
	}
	pg.Grid, pg.Channels, pg.Connect = grid(prefs), channels, connect(r)
	pg.Severities = []string{domain.SeverityInfo, domain.SeverityWarning, domain.SeverityCritical}
	for _, t := range domain.NoticeTypes {
		pg.Types = append(pg.Types, t.Name)
	}
	c.render(w, r, status, "notifications", "Notifications", pg)
	return nil
}

// grid lays the preferences out by type (rows) and channel (columns).
func grid(prefs api.Preferences) []prefRow {
	var rows []prefRow
	for _, t := range domain.NoticeTypes {
		row := prefRow{Type: t.Name, Title: t.Title, Severity: t.Severity, Mandatory: t.Mandatory}
		for _, ch := range channels {
			cell := prefCell{Channel: ch, Key: t.Name + "|" + ch, Mandatory: t.Mandatory,
				EnabledID: "on-" + t.Name + "-" + ch, DigID: "digest-" + t.Name + "-" + ch}
			i := slices.IndexFunc(prefs.Preferences, func(p api.Preference) bool { return p.Type == t.Name && p.Channel == ch })
			if i >= 0 {
				pr := prefs.Preferences[i]
				cell.Declared, cell.Enabled, cell.Digest = true, pr.Enabled, pr.Digest
				cell.DigestOffered = t.Digest && ch == domain.ChannelEmail
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

// savePreferences is PUT /v1/notifications/preferences with the whole grid:
// every declared cell of a type preferences may silence, enabled when its
// box is checked, digest when its digest box is. Mandatory types are not
// sent (they cannot be turned off).
func (c *Console) savePreferences(w http.ResponseWriter, r *http.Request) error {
	on, err := formList(r, "enabled", 2*domain.MaxNameBytes)
	if err == nil {
		var digest []string
		if digest, err = formList(r, "digest", 2*domain.MaxNameBytes); err == nil {
			req := api.PreferencesRequest{Preferences: []api.PreferenceInput{}}
			for _, t := range domain.NoticeTypes {
				if t.Mandatory {
					continue
				}
				for _, ch := range t.Channels {
					key := t.Name + "|" + ch
					in := api.PreferenceInput{Type: &t.Name, Channel: &ch, Enabled: new(slices.Contains(on, key))}
					if t.Digest && ch == domain.ChannelEmail {
						in.Digest = new(slices.Contains(digest, key))
					}
					req.Preferences = append(req.Preferences, in)
				}
			}
			// A box the grid does not have is refused, not ignored.
			for i, key := range append(on, digest...) {
				typ, ch, _ := strings.Cut(key, "|")
				pref := domain.Preference{Type: typ, Channel: ch, Enabled: true, Digest: i >= len(on)}
				if why := domain.CheckPreference(pref); why != "" {
					err = domain.Validation(domain.FieldError{Field: "preferences", Message: key + ": " + why})
				}
			}
			if err == nil {
				var res api.PreferencesResult
				if res, err = c.App.PutPreferences(r.Context(), viewerOf(r).Principal, req); err == nil {
					return c.notificationsPage(w, r, http.StatusOK, notificationsPage{Saved: &res})
				}
			}
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.notificationsPage(w, r, f.Status, notificationsPage{Refused: f})
}

func (c *Console) testNotification(w http.ResponseWriter, r *http.Request) error {
	res, err := c.sendTest(r)
	if err != nil {
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.notificationsPage(w, r, f.Status, notificationsPage{Refused: f})
	}
	return c.notificationsPage(w, r, http.StatusOK, notificationsPage{Tested: &res})
}

func (c *Console) redeliverNotification(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.App.Redeliver(r.Context(), viewerOf(r).Principal, r.PathValue("notification_id")); err != nil {
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.notificationsPage(w, r, f.Status, notificationsPage{Refused: f})
	}
	http.Redirect(w, r, Prefix+"notifications?done=redelivered", http.StatusSeeOther)
	return nil
}
