package console

import (
	"net/http"
	"strings"
)

// panel is one entry of the navigation; a panel is a Go file with its
// handlers and template, and its routes in routes() (docs/console.md).
type panel struct {
	Slug, Title, Path string
}

// panels is the console's navigation, in order (issue #37's panels).
var panels = []panel{
	{Slug: "overview", Title: "Overview", Path: Prefix},
	{Slug: "activity", Title: "Activity", Path: Prefix + "activity"},
	{Slug: "gate", Title: "Gate", Path: Prefix + "gate"},
	{Slug: "governance", Title: "Governance", Path: Prefix + "governance"},
	{Slug: "approvals", Title: "Approvals", Path: Prefix + "approvals"},
	{Slug: "notifications", Title: "Notifications", Path: Prefix + "notifications"},
	{Slug: "webhooks", Title: "Webhooks", Path: Prefix + "webhooks"},
	{Slug: "keys", Title: "Keys and machines", Path: Prefix + "keys"},
	{Slug: "team", Title: "Team", Path: Prefix + "team"},
	{Slug: "legal", Title: "Legal", Path: Prefix + "legal"},
	{Slug: "usage", Title: "Usage", Path: Prefix + "usage"},
	{Slug: "export", Title: "Export", Path: Prefix + "export"},
}

// navItem is a panel as the layout's navigation shows it.
type navItem struct {
	panel
	Current bool
}

// nav is the navigation for a page at path.
func nav(path string) []navItem {
	out := make([]navItem, len(panels))
	for i, p := range panels {
		cur := path == p.Path || (p.Path != Prefix && strings.HasPrefix(path, p.Path+"/"))
		if p.Slug == "activity" && strings.HasPrefix(path, Prefix+"events/") {
			cur = true
		}
		out[i] = navItem{panel: p, Current: cur}
	}
	return out
}

// connectHelp is what an empty panel shows: how to connect a host, so that
// the panel fills (SPEC.md: panels stay empty until a connected host writes).
type connectHelp struct {
	// URL is this service's address as the browser reached it.
	URL string
}

// connect is the help for r's service.
func connect(r *http.Request) connectHelp {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return connectHelp{URL: scheme + "://" + r.Host}
}
