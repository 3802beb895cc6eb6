package app

// Legal agreements (SPEC.md "Legal", CONTRACT.md "Legal agreements";
// docs/decisions/legal.md): the documents served, acceptances recorded with
// the version and content hash accepted, and the gate that --legal-enforce
// puts on credentialed routes.

import (
	"context"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/store"
)

// Sources of an acceptance (SPEC.md "Acceptance").
const (
	SourcePortal = "portal"
	SourceSignIn = "signin"
)

// LegalDocuments are the documents served, required ones first.
func (a *App) LegalDocuments() []legal.Document { return a.Legal.Documents() }

// LegalDocument is one document, or 404 unknown_legal_document.
func (a *App) LegalDocument(id string) (legal.Document, error) {
	d, ok := a.Legal.Get(id)
	if !ok {
		return d, domain.NotFound(domain.CodeUnknownLegalDocument, "legal document")
	}
	return d, nil
}

// RequiredDocumentIDs are the documents every account must accept.
func (a *App) RequiredDocumentIDs() []string { return a.Legal.RequiredIDs() }

// AcceptedLegal is the answer of POST /v1/legal/accept.
type AcceptedLegal struct {
	Acceptance store.Acceptance
	Unmet      []string
}

// AcceptLegal records the caller's acceptance of the current version of one
// document (source portal). Only a signed-in person accepts (CheckLegalAcceptor);
// accepted must be true; version and content_hash must be the served ones
// (422 legal-attestation-invalid, nothing recorded). Accepting a version
// already accepted answers the first record.
func (a *App) AcceptLegal(ctx context.Context, p Principal, documentID, version, contentHash string, accepted bool) (AcceptedLegal, error) {
	acct, err := a.legalAcceptor(ctx, p)
	if err != nil {
		return AcceptedLegal{}, err
	}
	if !accepted {
		return AcceptedLegal{}, domain.Validation(domain.FieldError{Field: "accepted", Message: "must be true to record an acceptance"})
	}
	d, ok := a.Legal.Get(documentID)
	if !ok || version != d.Version || contentHash != d.ContentHash {
		return AcceptedLegal{}, attestationInvalid(documentID)
	}
	rec := store.Acceptance{UserID: p.UserID, DocumentID: d.ID, Version: d.Version, ContentHash: d.ContentHash,
		Source: SourcePortal, Email: *acct.Email, RecordedAt: a.Now().UTC().Truncate(time.Microsecond)}
	var all []store.Acceptance
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.legalCache, p.UserID)
		if _, err := a.Store.InsertAcceptance(ctx, t.SQL(), rec); err != nil {
			return err
		}
		all, err = a.Store.Acceptances(ctx, t.SQL(), p.UserID)
		return err
	})
	if err != nil {
		return AcceptedLegal{}, err
	}
	for _, r := range all { // the record that stands: the first of this version
		if r.DocumentID == d.ID && r.Version == d.Version {
			rec = r
		}
	}
	return AcceptedLegal{Acceptance: rec, Unmet: a.unmet(all)}, nil
}

// CheckLegalAcceptor refuses a caller who may not accept a legal document,
// before its request is read: an account without an email cannot be tied
// to a receipt (400 account_has_no_email, SPEC.md), and an API key, of any
// scope, acts for a program, while SPEC.md gives acceptance to a signed-in
// caller: 403 session_required (docs/decisions/legal.md).
func (a *App) CheckLegalAcceptor(ctx context.Context, p Principal) error {
	_, err := a.legalAcceptor(ctx, p)
	return err
}

func (a *App) legalAcceptor(ctx context.Context, p Principal) (store.Account, error) {
	acct, err := a.Store.Account(ctx, p.UserID)
	if err != nil {
		return store.Account{}, err
	}
	if acct.Email == nil {
		return store.Account{}, &domain.Error{Code: domain.CodeAccountHasNoEmail,
			Detail: "this account has no email, so an acceptance cannot be tied to a receipt"}
	}
	if p.Kind != KindSession {
		return store.Account{}, &domain.Error{Code: domain.CodeSessionRequired,
			Detail: "accepting a legal document is a signed-in person's act: sign in and send the session cookie, not an API key"}
	}
	return acct, nil
}

// LegalStatus is the answer of GET /v1/legal/acceptances.
type LegalStatus struct {
	Acceptances []ListedAcceptance
	Email       *string
	Required    []string
	Unmet       []string
}

// ListedAcceptance is an acceptance and whether its version is the one
// served now.
type ListedAcceptance struct {
	store.Acceptance
	Current bool
}

// LegalAcceptances lists the caller's acceptances.
func (a *App) LegalAcceptances(ctx context.Context, p Principal) (LegalStatus, error) {
	acct, err := a.Store.Account(ctx, p.UserID)
	if err != nil {
		return LegalStatus{}, err
	}
	all, err := a.Store.Acceptances(ctx, nil, p.UserID)
	if err != nil {
		return LegalStatus{}, err
	}
	out := LegalStatus{Acceptances: make([]ListedAcceptance, len(all)), Email: acct.Email, Required: a.Legal.RequiredIDs(), Unmet: a.unmet(all)}
	for i, r := range all {
		out.Acceptances[i] = ListedAcceptance{Acceptance: r, Current: a.current(r)}
	}
	return out, nil
}

// current reports whether r accepted the version served now.
func (a *App) current(r store.Acceptance) bool {
	d, ok := a.Legal.Get(r.DocumentID)
	return ok && d.Version == r.Version && d.ContentHash == r.ContentHash
}

// unmet are the required documents none of all accepts at the version
// served now.
func (a *App) unmet(all []store.Acceptance) []string {
	out := []string{}
	for _, id := range a.Legal.RequiredIDs() {
		if !slices.ContainsFunc(all, func(r store.Acceptance) bool { return r.DocumentID == id && a.current(r) }) {
			out = append(out, id)
		}
	}
	return out
}

// RequireAcceptances is the gate of --legal-enforce (CONTRACT.md "Legal
// agreements"): while a required document is unmet, 403
// legal_acceptance_required naming them. Without the flag it lets every
// caller through.
func (a *App) RequireAcceptances(ctx context.Context, p Principal) error {
	if !a.Cfg.LegalEnforce {
		return nil
	}
	unmet, ticket, ok := a.legalCache.Get(p.UserID, p.UserID)
	if !ok {
		all, err := a.Store.Acceptances(ctx, nil, p.UserID)
		if err != nil {
			return err
		}
		unmet = a.unmet(all)
		a.legalCache.Put(p.UserID, ticket, p.UserID, unmet)
	}
	if len(unmet) == 0 {
		return nil
	}
	return (&domain.Error{Code: domain.CodeLegalAcceptanceRequired,
		Detail: "accept the required legal documents first (POST /v1/legal/accept)"}).With("unmet_document_ids", unmet)
}
