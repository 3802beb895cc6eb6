package console

// The activity panel: the account's events, newest first, filtered by query
// parameters (so every view is a deep link) and paged by cursor, through the
// search use case of POST /v1/events/search. New events arrive live: the
// page's script listens to GET /v1/events/stream with the session and
// refreshes the first page's rows from /console/activity/rows.

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
)

// activityLimit is the rows of one page: enough to scan, little to render.
const activityLimit = 50

// activityFilter is the query of an activity page, as the form sends it.
type activityFilter struct {
	Subagent, Tool, Decision, Surface, Type, After, Before string
}

// Any reports whether a filter is set.
func (f activityFilter) Any() bool { return f != activityFilter{} }

// Query is the filter as a query string (no cursor), already encoded.
func (f activityFilter) Query() template.URL {
	q := url.Values{}
	for _, kv := range [][2]string{{"subagent", f.Subagent}, {"tool", f.Tool}, {"decision", f.Decision}, {"surface", f.Surface},
		{"type", f.Type}, {"after", f.After}, {"before", f.Before}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return template.URL(q.Encode())
}

type activityPage struct {
	Filter   activityFilter
	Events   []app.EventRow
	Decision []string
	Surfaces []string
	// Next is the next page's cursor ("" on the last page); Cursor this
	// page's ("" on the first, the one that updates live).
	Next, Cursor string
	// ScannedTo, when the page read its whole window (app.SearchWindow
	// events) before a page of matches, is where it stopped: the cursor
	// of "search older events".
	ScannedTo string
	Window    int
	Error     string
	Connect   connectHelp
	Now       time.Time
}

// consoleFilters are the filters the search route does not have, capped as
// its own are (the body reader's max tags).
type consoleFilters struct {
	Subagent *string `json:"subagent,omitempty" max:"name"`
	Surface  *string `json:"surface,omitempty" max:"name"`
}

func readFilter(q url.Values) activityFilter {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return activityFilter{Subagent: get("subagent"), Tool: get("tool"), Decision: get("decision"), Surface: get("surface"),
		Type: get("type"), After: get("after"), Before: get("before")}
}

// search runs the page's query (app.SearchEventPage: a bounded window); a
// query the use case refuses is a domain error the page shows beside the
// form.
func (c *Console) search(r *http.Request, f activityFilter, cursor string) (app.EventPage, *int64, error) {
	q := app.EventQuery{}
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	q.Tool, q.Decision, q.Surface, q.Subagent = opt(f.Tool), opt(f.Decision), opt(f.Surface), opt(f.Subagent)
	if f.Type != "" {
		q.EventTypes = []string{f.Type}
	}
	for _, t := range []struct {
		in   string
		out  **string
		name string
	}{{f.After, &q.After, "after"}, {f.Before, &q.Before, "before"}} {
		if t.in == "" {
			continue
		}
		ts, ok := formTime(t.in)
		if !ok {
			return app.EventPage{}, nil, domain.Validation(domain.FieldError{Field: t.name, Message: "must be a date and time like 2026-01-02T15:04 (UTC)"})
		}
		*t.out = &ts
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil {
			return app.EventPage{}, nil, domain.Validation(domain.FieldError{Field: "cursor", Message: "must be a whole number"})
		}
		q.Cursor = &n
	}
	limit := activityLimit
	q.Limit = &limit
	// The search route's caps on its fields, and the same on the console's own.
	if err := c.checkInput(q.SearchRequest); err != nil {
		return app.EventPage{}, nil, err
	}
	if err := c.checkInput(consoleFilters{Subagent: q.Subagent, Surface: q.Surface}); err != nil {
		return app.EventPage{}, nil, err
	}
	pg, err := c.App.SearchEventPage(r.Context(), viewerOf(r).Principal, q)
	if err != nil {
		return app.EventPage{}, nil, err
	}
	var next *int64
	if len(pg.Rows) == activityLimit {
		n := pg.Rows[len(pg.Rows)-1].Sequence
		next = &n
	}
	return pg, next, nil
}

// formTime reads a time the form sends (an <input type=datetime-local> value,
// taken as UTC, or a timestamp with an offset) as the API's timestamp.
func formTime(s string) (string, bool) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return domain.FormatTimestamp(t), true
		}
	}
	if t, err := domain.ParseTimestamp(s); err == nil {
		return domain.FormatTimestamp(t), true
	}
	return "", false
}

func (c *Console) activity(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	pg := activityPage{Filter: readFilter(q), Cursor: q.Get("cursor"), Decision: domain.Decisions,
		Surfaces: domain.Surfaces, Connect: connect(r), Now: c.App.Now()}
	found, next, err := c.search(r, pg.Filter, pg.Cursor)
	status := http.StatusOK
	var de *domain.Error
	switch {
	case errors.As(err, &de):
		status, pg.Error = c.Status(de.Code), de.Detail
		for _, fe := range de.Fields {
			pg.Error = fe.Field + ": " + fe.Message
		}
	case err != nil:
		return err
	}
	pg.Events, pg.Window = found.Rows, found.Window
	if next != nil {
		pg.Next = strconv.FormatInt(*next, 10)
	}
	if found.ScannedTo != nil {
		pg.ScannedTo = strconv.FormatInt(*found.ScannedTo, 10)
	}
	c.render(w, r, status, "activity", "Activity", pg)
	return nil
}

// activityRows is the first page's rows alone, for the live refresh.
func (c *Console) activityRows(w http.ResponseWriter, r *http.Request) error {
	f := readFilter(r.URL.Query())
	found, _, err := c.search(r, f, "")
	if err != nil {
		return err
	}
	c.fragment(w, "activity", "rows", activityPage{Filter: f, Events: found.Rows, Now: c.App.Now()})
	return nil
}
