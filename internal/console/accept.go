package console

// Required legal documents (serve --legal-enforce): while some are unmet,
// the API refuses a session's calls (403 legal_acceptance_required), and the
// console asks for them instead of its pages; the form is the legal
// panel's, acceptLegal (legal.go), for each unmet document (CONTRACT.md
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
