package console

import (
	"bytes"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
)

// page is what the layout renders around a panel's Data.
type page struct {
	Title    string
	Nav      []navItem
	SignedIn bool
	Email    string
	CSRF     string
	Data     any
}

// funcs are the templates' helpers; none of them returns template.HTML, so
// every value a client wrote is escaped by html/template.
var funcs = template.FuncMap{
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"num":   func(n int64) string { return groupDigits(strconv.FormatInt(n, 10)) },
	"int64": func(n int) int64 { return int64(n) },
	"ago":   func(t time.Time, now time.Time) string { return ago(now.Sub(t)) },
	"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ts":    parseTS,
	"pct": func(used, limit int64) int64 {
		if limit <= 0 {
			return 0
		}
		return used * 100 / limit
	},
}

// parsePages parses every page template with the layout and the partials:
// each page file defines "content" (and may define "head").
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		t := template.Must(base.Clone())
		out[name] = template.Must(t.ParseFS(templateFS, n))
	}
	return out
}

// render writes the page name with data inside the layout. It renders into
// a buffer first, so a template failure is a clean 500 and never half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Title: title, Nav: nav(r.URL.Path), CSRF: c.csrfToken(w, r), Data: data}
	if v := viewerOf(r); v.UserID != "" {
		p.SignedIn = true
		if s, err := c.App.Session(r.Context(), v.Principal); err == nil {
			p.Email = s.Email
		}
	}
	c.write(w, status, name, "layout", p)
}

// fragment writes the template block tmpl of page name alone (a part of a
// page that a script refreshes).
func (c *Console) fragment(w http.ResponseWriter, name, tmpl string, data any) {
	c.write(w, http.StatusOK, name, tmpl, data)
}

func (c *Console) write(w http.ResponseWriter, status int, name, tmpl string, data any) {
	var buf bytes.Buffer
	t, ok := c.pages[name]
	if !ok {
		c.Log.Error("console page without a template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		c.Log.Error("console page failed to render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// groupDigits writes 1234567 as 1,234,567.
func groupDigits(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ago says how long d is, in the largest whole unit.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + " days ago"
	}
}

// parseTS reads a stored timestamp (the zero time when it does not parse).
func parseTS(s string) time.Time {
	t, err := domain.ParseTimestamp(s)
	if err != nil {
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return time.Time{}
		}
	}
	return t
}
