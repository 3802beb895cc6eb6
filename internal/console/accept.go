package console

// Required legal documents (serve --legal-enforce): while some are unmet,
// the API refuses a session's calls (403 legal_acceptance_required), and the
// console asks for them instead of its pages, then records each acceptance
// through app.AcceptLegal, as POST /v1/legal/accept does (CONTRACT.md
// "Legal agreements").

import (
	"errors"
	"net/http"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

type acceptPage struct {
	Documents []api.LegalDocument
	Next      string
	Error     string
}

// mustAccept answers a request refused by RequireAcceptances: a page asks
// for the unmet documents (with the API's status); a form, or any other
// refusal, is the refusal.
func (c *Console) mustAccept(w http.ResponseWriter, r *http.Request, err error) {
	de, ok := errors.AsType[*domain.Error](err)
	if !ok || de.Code != domain.CodeLegalAcceptanceRequired || r.Method != http.MethodGet {
		c.fail(w, r, err)
		return
	}
	pg, err := c.acceptForm(r, safeNext(r.URL.RequestURI()))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, c.Status(de.Code), "accept", "Accept the required documents", pg)
}

// acceptForm lists the documents the viewer has yet to accept.
func (c *Console) acceptForm(r *http.Request, next string) (acceptPage, error) {
	got, err := c.App.LegalAcceptances(r.Context(), viewerOf(r).Principal)
	if err != nil {
		return acceptPage{}, err
	}
	unmet := map[string]bool{}
	for _, id := range got.UnmetDocumentIDs {
		unmet[id] = true
	}
	pg := acceptPage{Next: next}
	for _, d := range c.App.LegalDocuments().Documents {
		if unmet[d.DocumentID] {
			pg.Documents = append(pg.Documents, d)
		}
	}
	return pg, nil
}

// accept records the ticked documents at the versions served now, then goes
// on to where the viewer was going.
func (c *Console) accept(w http.ResponseWriter, r *http.Request) error {
	p, next := viewerOf(r).Principal, safeNext(r.PostFormValue("next"))
	// Who may accept is the API's rule (POST /v1/legal/accept), as on the
	// legal panel: it answers before anything is recorded.
	if err := c.App.CheckLegalAcceptor(r.Context(), p); err != nil {
		return err
	}
	ticked := map[string]bool{}
	for _, id := range r.PostForm["accept"] {
		ticked[id] = true
	}
	yes := true
	for _, d := range c.App.LegalDocuments().Documents {
		if !ticked[d.DocumentID] {
			continue
		}
		req := api.AcceptRequest{Accepted: &yes, DocumentID: &d.DocumentID, Version: &d.Version, ContentHash: &d.ContentHash}
		if _, err := c.App.AcceptLegal(r.Context(), p, req); err != nil {
			return err
		}
	}
	if err := c.App.RequireAcceptances(r.Context(), p); err != nil {
		pg, ferr := c.acceptForm(r, next)
		if ferr != nil {
			return ferr
		}
		pg.Error = "Accept every document listed to go on."
		c.render(w, r, c.Status(domain.CodeLegalAcceptanceRequired), "accept", "Accept the required documents", pg)
		return nil
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}
