package console

// The keys and machines panel: the account's API keys (created here, the
// token shown once and never again: CONTRACT.md "Credentials"; scopes;
// revoke) and its machines with their signing keys, through the use cases
// of /v1/keys and GET /v1/machines. Like the API's key routes, it works
// while legal documents are unmet.

import (
	"net/http"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// maxListed bounds the rows a panel renders of a list the account grows
// (revoked keys, machines); the rest is counted, not shown.
const maxListed = 200

type keysPage struct {
	Keys     []api.Key
	MoreKeys int
	Machines []api.Machine
	// MoreMachines are the machines past maxListed.
	MoreMachines int
	Scopes       []domain.Scope
	// Created is the key just created, its token shown this once.
	Created *api.KeyCreated
	Refused *refusal
	Done    string
	Now     time.Time
	Connect connectHelp
}

var keysDone = map[string]string{"revoked": "The key is revoked: requests with it are refused from now on."}

func (c *Console) keys(w http.ResponseWriter, r *http.Request) error {
	return c.keysPage(w, r, http.StatusOK, keysPage{Done: done(r, keysDone)})
}

// keysPage renders the panel with pg's outcome of a form.
func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, status int, pg keysPage) error {
	p := viewerOf(r).Principal
	list, err := c.App.Keys(r.Context(), p)
	if err != nil {
		return err
	}
	pg.Keys = list.Keys
	if n := len(pg.Keys); n > maxListed {
		pg.Keys, pg.MoreKeys = pg.Keys[:maxListed], n-maxListed
	}
	ms, err := c.App.Machines(r.Context(), p)
	if err != nil {
		return err
	}
	pg.Machines = ms
	if n := len(ms); n > maxListed {
		pg.Machines, pg.MoreMachines = ms[:maxListed], n-maxListed
	}
	pg.Scopes, pg.Now, pg.Connect = domain.AllScopes, c.App.Now(), connect(r)
	c.render(w, r, status, "keys", "Keys and machines", pg)
	return nil
}

// createKey is POST /v1/keys' use case on the form's fields; the page that
// answers shows the token once and is kept out of every cache.
func (c *Console) createKey(w http.ResponseWriter, r *http.Request) error {
	req, err := keyRequest(r)
	if err == nil {
		var k api.KeyCreated
		if k, err = c.App.CreateKey(r.Context(), viewerOf(r).UserID, req); err == nil {
			noStore(w)
			return c.keysPage(w, r, http.StatusCreated, keysPage{Created: &k})
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.keysPage(w, r, f.Status, keysPage{Refused: f})
}

// keyRequest reads the create form: label, machine, scopes (none checked:
// unscoped) and an optional expiry (a datetime-local value, UTC).
func keyRequest(r *http.Request) (api.CreateKeyRequest, error) {
	var req api.CreateKeyRequest
	label, err := formText(r, "label", 0)
	if err != nil {
		return req, err
	}
	machine, err := formText(r, "machine", 0)
	if err != nil {
		return req, err
	}
	expires, err := formText(r, "expires_at", domain.MaxNameBytes)
	if err != nil {
		return req, err
	}
	if req.Scopes, err = formList(r, "scopes", domain.MaxNameBytes); err != nil {
		return req, err
	}
	req.Label, req.Machine = optional(label), optional(machine)
	if expires != "" {
		ts, ok := formTime(expires)
		if !ok {
			return req, domain.Validation(domain.FieldError{Field: "expires_at", Message: "must be a date and time like 2026-01-02T15:04 (UTC)"})
		}
		req.ExpiresAt = &ts
	}
	return req, nil
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.App.RevokeKey(r.Context(), viewerOf(r).Principal, r.PathValue("key_id")); err != nil {
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		return c.keysPage(w, r, f.Status, keysPage{Refused: f})
	}
	http.Redirect(w, r, Prefix+"keys?done=revoked", http.StatusSeeOther)
	return nil
}
