package console

import (
	"net/http"
	"strings"
)

// panel is one entry of the navigation. A panel not built yet answers a page
// that says so (never content that looks real); building one means a Go file
// with its handler and template, its routes in routes(), and Built: true.
type panel struct {
	Slug, Title, Path string
	Built             bool
	// About is one line shown on the panel's not-built page.
	About string
}

// panels is the console's navigation, in order (issue #37's panels).
var panels = []panel{
	{Slug: "overview", Title: "Overview", Path: Prefix, Built: true},
	{Slug: "activity", Title: "Activity", Path: Prefix + "activity", Built: true},
	{Slug: "gate", Built: true, Title: "Gate", Path: Prefix + "gate", About: "grants with budget used and time to expiry, the sub-agent tree, create and revoke"},
	{Slug: "governance", Built: true, Title: "Governance", Path: Prefix + "governance", About: "proposals by state; ratify, enact, reject; the rules in force"},
	{Slug: "notifications", Built: true, Title: "Notifications", Path: Prefix + "notifications", About: "the inbox, and preferences as a type × channel grid"},
	{Slug: "webhooks", Built: true, Title: "Webhooks", Path: Prefix + "webhooks", About: "endpoints, deliveries with status and duration, redeliver, send a test"},
	{Slug: "keys", Built: true, Title: "Keys and machines", Path: Prefix + "keys", About: "API keys (created once, scopes, revoke) and machines' signing keys"},
	{Slug: "team", Built: true, Title: "Team", Path: Prefix + "team", About: "orgs, members and invitations (with serve --teams)"},
	{Slug: "legal", Built: true, Title: "Legal", Path: Prefix + "legal", About: "the documents and what the account accepted"},
	{Slug: "usage", Built: true, Title: "Usage", Path: Prefix + "usage", About: "calls per day by surface and capability"},
	{Slug: "export", Built: true, Title: "Export", Path: Prefix + "export", About: "the chain's export and the public key, with the offline verify command"},
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

func (c *Console) notBuilt(p panel) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		c.render(w, r, http.StatusOK, "notbuilt", p.Title, p)
		return nil
	}
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
