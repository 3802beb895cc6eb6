package app

// Legal agreements (SPEC.md "Legal", CONTRACT.md "Legal agreements";
// docs/decisions/legal.md): the documents served, acceptances recorded with
// the version and content hash accepted, and the gate that --legal-enforce
// puts on credentialed routes.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Sources of an acceptance (SPEC.md "Acceptance").
const (
	SourcePortal = "portal"
	SourceSignIn = "signin"
)

// LegalDocuments are the documents served, required ones first, and how
// they are accepted.
func (a *App) LegalDocuments() api.LegalDocuments {
	docs := a.legal.Documents()
	out := make([]api.LegalDocument, len(docs))
	for i, d := range docs {
		out[i] = api.LegalDocument{DocumentID: d.ID, Title: d.Title, Summary: d.Summary, Version: d.Version,
			ContentHash: d.ContentHash, MediaType: "text/markdown", Required: d.Required, Status: d.Status, TextURL: d.TextURL()}
	}
	return api.LegalDocuments{Documents: out, AcceptRoute: "/v1/legal/accept", AcceptanceMode: "clickwrap",
		GateEnforced: a.cfg.LegalEnforce, Notice: legal.Notice, RequiredDocumentIDs: a.legal.RequiredIDs()}
}

// LegalText is one document's text, byte for byte the text its listed
// content_hash is the SHA-256 of, or 404 unknown_legal_document.
func (a *App) LegalText(id string) (api.LegalText, error) {
	d, ok := a.legal.Get(id)
	if !ok {
		return api.LegalText{}, domain.NotFound(domain.CodeUnknownLegalDocument, "legal document")
	}
	sum := sha256.Sum256(d.Text)
	return api.LegalText{Text: string(d.Text), Version: d.Version, ContentHash: hex.EncodeToString(sum[:])}, nil
}

// acceptanceOf is a stored acceptance as the API shows it (current: the
// list's only).
func acceptanceOf(a store.Acceptance) api.Acceptance {
	return api.Acceptance{DocumentID: a.DocumentID, Version: a.Version, ContentHash: a.ContentHash, Status: "accepted",
		RecordedAt: domain.FormatTimestamp(a.RecordedAt), Source: a.Source, UserID: a.UserID, Email: a.Email}
}

// AcceptLegal records the caller's acceptance of the current version of one
// document (source portal). Only a signed-in person accepts (CheckLegalAcceptor);
// accepted must be true; version and content_hash must be the served ones
// (422 legal-attestation-invalid, nothing recorded). Accepting a version
// already accepted answers the first record.
func (a *App) AcceptLegal(ctx context.Context, p Principal, req api.AcceptRequest) (api.AcceptResult, error) {
	acct, err := a.legalAcceptor(ctx, p)
	if err != nil {
		return api.AcceptResult{}, err
	}
	if req.Accepted == nil || !*req.Accepted {
		return api.AcceptResult{}, domain.Validation(domain.FieldError{Field: "accepted", Message: "must be true to record an acceptance"})
	}
	documentID := deref(req.DocumentID)
	d, ok := a.legal.Get(documentID)
	if !ok || deref(req.Version) != d.Version || deref(req.ContentHash) != d.ContentHash {
		return api.AcceptResult{}, attestationInvalid(documentID)
	}
	rec := store.Acceptance{UserID: p.UserID, DocumentID: d.ID, Version: d.Version, ContentHash: d.ContentHash,
		Source: SourcePortal, Email: *acct.Email, RecordedAt: a.now().UTC().Truncate(time.Microsecond)}
	var all []store.Acceptance
	err = a.w.Write(ctx, func(t *writer.Tx) error {
		writer.Invalidate(t, a.legalCache, p.UserID)
		if _, err := a.store.InsertAcceptance(ctx, t.SQL(), rec); err != nil {
			return err
		}
		all, err = a.store.Acceptances(ctx, t.SQL(), p.UserID)
		return err
	})
	if err != nil {
		return api.AcceptResult{}, err
	}
	for _, r := range all { // the record that stands: the first of this version
		if r.DocumentID == d.ID && r.Version == d.Version {
			rec = r
		}
	}
	return api.AcceptResult{Acceptance: acceptanceOf(rec), Status: "recorded", UnmetDocumentIDs: a.unmet(all)}, nil
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
	acct, err := a.store.Account(ctx, p.UserID)
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

// LegalAcceptances lists the caller's acceptances, each saying whether its
// version is the one served now.
func (a *App) LegalAcceptances(ctx context.Context, p Principal) (api.Acceptances, error) {
	acct, err := a.store.Account(ctx, p.UserID)
	if err != nil {
		return api.Acceptances{}, err
	}
	all, err := a.store.Acceptances(ctx, nil, p.UserID)
	if err != nil {
		return api.Acceptances{}, err
	}
	out := api.Acceptances{Acceptances: make([]api.Acceptance, len(all)), Email: acct.Email,
		RequiredDocumentIDs: a.legal.RequiredIDs(), UnmetDocumentIDs: a.unmet(all)}
	for i, r := range all {
		out.Acceptances[i] = acceptanceOf(r)
		out.Acceptances[i].Current = new(a.current(r))
	}
	return out, nil
}

// current reports whether r accepted the version served now.
func (a *App) current(r store.Acceptance) bool {
	d, ok := a.legal.Get(r.DocumentID)
	return ok && d.Version == r.Version && d.ContentHash == r.ContentHash
}

// unmet are the required documents none of all accepts at the version
// served now.
func (a *App) unmet(all []store.Acceptance) []string {
	out := []string{}
	for _, id := range a.legal.RequiredIDs() {
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
	if !a.cfg.LegalEnforce {
		return nil
	}
	unmet, ticket, ok := a.legalCache.Get(p.UserID, p.UserID)
	if !ok {
		all, err := a.store.Acceptances(ctx, nil, p.UserID)
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
