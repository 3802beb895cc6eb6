package console

// The legal panel: the documents served, what this account accepted (and
// whether each acceptance is of the version served now), and the
// acceptance itself: a signed-in person's act (SPEC.md "Acceptance"),
// recorded by the use case of POST /v1/legal/accept for the version and
// content hash the page showed. Like the API's legal routes, it works while
// required documents are unmet: it is where they are met.

import (
	"net/http"
	"strconv"

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

// acceptLegal records the acceptances a form attests, for both forms that
// accept (one use case, POST /v1/legal/accept's): the legal panel's, one
// document, and the page that asks for the required ones (accept.go), each
// unmet document with next, where the person was going. Every document is
// accepted at the version and content hash the page showed (a document
// changed since is refused, 422, nothing recorded), if its box is ticked:
// the panel sends an unticked box to the use case, which refuses it (422);
// the asking page records the ticked ones, then asks again for what is still
// unmet, or goes on to next.
func (c *Console) acceptLegal(w http.ResponseWriter, r *http.Request) error {
	p := viewerOf(r).Principal
	next := safeNext(r.PostFormValue("next")) // parses the form
	_, asking := r.PostForm["next"]
	// Who may accept answers before the form is read, as the API's route.
	err := c.App.CheckLegalAcceptor(r.Context(), p)
	var reqs []api.AcceptRequest
	if err == nil {
		reqs, err = acceptRequests(r)
	}
	var recorded *api.AcceptResult
	for _, req := range reqs {
		if err != nil {
			break
		}
		if asking && !*req.Accepted {
			continue
		}
		var res api.AcceptResult
		if res, err = c.App.AcceptLegal(r.Context(), p, req); err == nil {
			recorded = &res
		}
	}
	if asking {
		if err == nil {
			if err = c.App.RequireAcceptances(r.Context(), p); err == nil {
				http.Redirect(w, r, next, http.StatusSeeOther)
				return nil
			}
		}
		f, err := c.refused(err)
		if err != nil {
			return err
		}
		pg, err := c.acceptForm(r, next)
		if err != nil {
			return err
		}
		pg.Error = "Accept every document listed to go on."
		if f.Code != domain.CodeLegalAcceptanceRequired {
			pg.Error = strconv.Itoa(f.Status) + " " + f.Code + ": " + f.Detail
		}
		c.render(w, r, f.Status, "accept", "Accept the required documents", pg)
		return nil
	}
	if err == nil {
		return c.legalPage(w, r, http.StatusOK, legalPage{Recorded: recorded})
	}
	f, err := c.refused(err)
	if err != nil {
		return err
	}
	return c.legalPage(w, r, f.Status, legalPage{Refused: f})
}

// acceptRequests reads an accept form: document_id, version and
// content_hash once per document, in that order, under the API's text rule
// and caps; accepted names each document whose box is ticked.
func acceptRequests(r *http.Request) ([]api.AcceptRequest, error) {
	var fields [3][]string
	for i, name := range []string{"document_id", "version", "content_hash"} {
		vs, err := formList(r, name, domain.MaxNameBytes)
		if err != nil {
			return nil, err
		}
		fields[i] = vs
	}
	ids, versions, hashes := fields[0], fields[1], fields[2]
	if len(ids) == 0 || len(versions) != len(ids) || len(hashes) != len(ids) {
		return nil, domain.Validation(domain.FieldError{Field: "document_id", Message: "each document needs its version and content_hash"})
	}
	ticked := map[string]bool{}
	for _, id := range r.PostForm["accepted"] {
		ticked[id] = true
	}
	out := make([]api.AcceptRequest, len(ids))
	for i := range ids {
		out[i] = api.AcceptRequest{DocumentID: &ids[i], Version: &versions[i], ContentHash: &hashes[i], Accepted: new(ticked[ids[i]])}
	}
	return out, nil
}
