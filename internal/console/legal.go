package console

// The legal panel: the documents served, what this account accepted (and
// whether each acceptance is of the version served now), and the
// acceptance itself: a signed-in person's act (SPEC.md "Acceptance"),
// recorded by the use case of POST /v1/legal/accept for the version and
// content hash the page showed. Like the API's legal routes, it works while
// required documents are unmet: it is where they are met.

import (
	"net/http"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

type legalDoc struct {
	api.LegalDocument
	Text string
	// Accepted is the acceptance of the version served now, if any.
	Accepted *api.Acceptance
	Unmet    bool
}

// acceptanceRow is a recorded acceptance and whether its version is the one
// served now.
type acceptanceRow struct {
	api.Acceptance
	ServedNow bool
}

type legalPage struct {
	Docs        []legalDoc
	Acceptances api.Acceptances
	Rows        []acceptanceRow
	Enforced    bool
	Notice      string
	Recorded    *api.AcceptResult
	Refused     *refusal
}

func (c *Console) legal(w http.ResponseWriter, r *http.Request) error {
	return c.legalPage(w, r, http.StatusOK, legalPage{})
}

func (c *Console) legalPage(w http.ResponseWriter, r *http.Request, status int, pg legalPage) error {
	acc, err := c.App.LegalAcceptances(r.Context(), viewerOf(r).Principal)
	if err != nil {
		return err
	}
	docs := c.App.LegalDocuments()
	pg.Acceptances, pg.Enforced, pg.Notice = acc, docs.GateEnforced, docs.Notice
	for _, a := range acc.Acceptances {
		pg.Rows = append(pg.Rows, acceptanceRow{Acceptance: a, ServedNow: a.Current != nil && *a.Current})
	}
	for _, d := range docs.Documents {
		ld := legalDoc{LegalDocument: d}
		if t, err := c.App.LegalText(d.DocumentID); err == nil {
			ld.Text = t.Text
		}
		for i, a := range acc.Acceptances {
			if a.DocumentID == d.DocumentID && a.Current != nil && *a.Current {
				ld.Accepted = &acc.Acceptances[i]
			}
		}
		for _, id := range acc.UnmetDocumentIDs {
			ld.Unmet = ld.Unmet || id == d.DocumentID
		}
		pg.Docs = append(pg.Docs, ld)
	}
	c.render(w, r, status, "legal", "Legal", pg)
	return nil
}

// acceptLegal records the acceptance the form attests: the box checked, of
// the version and content hash the page showed (a document changed since is
// refused, 422, nothing recorded).
func (c *Console) acceptLegal(w http.ResponseWriter, r *http.Request) error {
	p := viewerOf(r).Principal
	// Who may accept answers before the form is read, as the API's route.
	err := c.App.CheckLegalAcceptor(r.Context(), p)
	var req api.AcceptRequest
	for _, f := range []struct {
		name string
		dst  **string
	}{{"document_id", &req.DocumentID}, {"version", &req.Version}, {"content_hash", &req.ContentHash}} {
		if err != nil {
			break
		}
		var v string
		v, err = formText(r, f.name, domain.MaxNameBytes)
		*f.dst = &v
	}
	if err == nil {
		req.Accepted = new(r.PostFormValue("accepted") == "true")
		var res api.AcceptResult
		if res, err = c.App.AcceptLegal(r.Context(), p, req); err == nil {
			return c.legalPage(w, r, http.StatusOK, legalPage{Recorded: &res})
		}
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.legalPage(w, r, f.Status, legalPage{Refused: f})
}
