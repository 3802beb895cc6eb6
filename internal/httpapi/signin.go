package httpapi

// Sign-in and legal routes (CONTRACT.md "Credentials", "Legal agreements").

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

type otpRequest struct {
	Email       *string               `json:"email" max:"name"`
	Acceptances []api.AcceptanceInput `json:"acceptances" max:"list"`
}

func (b *otpRequest) validate() []domain.FieldError {
	if b.Email == nil {
		return []domain.FieldError{{Field: "email", Message: "required"}}
	}
	return nil
}

func (s *Server) requestOTP(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[otpRequest](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	sent, err := s.app.RequestOTP(r.Context(), s.clientAddress(r), *req.Email, req.Acceptances)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, api.OTPSent{Status: "sent", ExpiresAt: domain.FormatTimestamp(sent.ExpiresAt)})
}

type otpVerify struct {
	Email *string `json:"email" max:"name"`
	Code  *string `json:"code" max:"name"`
}

func (b *otpVerify) validate() []domain.FieldError {
	var errs []domain.FieldError
	if b.Email == nil {
		errs = append(errs, domain.FieldError{Field: "email", Message: "required"})
	}
	if b.Code == nil {
		errs = append(errs, domain.FieldError{Field: "code", Message: "required"})
	}
	return errs
}

func (s *Server) verifyOTP(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[otpVerify](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	in, err := s.app.VerifyOTP(r.Context(), *req.Email, *req.Code)
	if err != nil {
		return err
	}
	http.SetCookie(w, s.sessionCookie(in.Token, in.ExpiresAt))
	return writeJSON(w, http.StatusOK, api.SignedIn{UserID: in.UserID, Email: in.Email,
		SessionExpiresAt: domain.FormatTimestamp(in.ExpiresAt)})
}

// sessionCookie is the session's cookie (CONTRACT.md "Credentials"):
// HttpOnly, SameSite=Lax, Path=/, Secure in production. An empty token with
// a past expiry clears it.
func (s *Server) sessionCookie(token string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: api.SessionCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.app.Cfg.Production(), Expires: expires.UTC()}
	if token == "" {
		c.MaxAge = -1
	}
	return c
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.app.Cfg.MaxBodyBytes); err != nil {
		return err
	}
	if err := s.app.Logout(r.Context(), principal(r)); err != nil {
		return err
	}
	http.SetCookie(w, s.sessionCookie("", time.Unix(0, 0)))
	return writeJSON(w, http.StatusOK, api.SignedOut{Status: "signed_out"})
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) error {
	info, err := s.app.Session(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.Session{UserID: info.UserID, Email: info.Email, Admin: info.Admin,
		ExpiresAt: domain.FormatTimestamp(info.ExpiresAt)})
}

func (s *Server) legalDocuments(w http.ResponseWriter, r *http.Request) error {
	docs := s.app.LegalDocuments()
	out := make([]api.LegalDocument, len(docs))
	for i, d := range docs {
		out[i] = api.LegalDocument{DocumentID: d.ID, Title: d.Title, Summary: d.Summary, Version: d.Version,
			ContentHash: d.ContentHash, MediaType: "text/markdown", Required: d.Required, Status: d.Status, TextURL: d.TextURL()}
	}
	return writeJSON(w, http.StatusOK, api.LegalDocuments{Documents: out, AcceptRoute: "/v1/legal/accept",
		AcceptanceMode: "clickwrap", GateEnforced: s.app.Cfg.LegalEnforce, Notice: legal.Notice,
		RequiredDocumentIDs: s.app.RequiredDocumentIDs()})
}

// legalText serves a document's text, byte for byte the text its listed
// content_hash is the SHA-256 of.
func (s *Server) legalText(w http.ResponseWriter, r *http.Request) error {
	d, err := s.app.LegalDocument(r.PathValue("document_id"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(d.Text)
	h := w.Header()
	h.Set("Content-Type", "text/markdown; charset=utf-8")
	h.Set("X-Document-Version", d.Version)
	h.Set("X-Document-Content-Hash", hex.EncodeToString(sum[:]))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(d.Text)
	return err
}

type legalAccept struct {
	Accepted    *bool   `json:"accepted"`
	ContentHash *string `json:"content_hash" max:"name"`
	DocumentID  *string `json:"document_id" max:"name"`
	Version     *string `json:"version" max:"name"`
}

func (b *legalAccept) validate() []domain.FieldError {
	var errs []domain.FieldError
	for _, f := range []struct {
		name string
		set  bool
	}{{"accepted", b.Accepted != nil}, {"content_hash", b.ContentHash != nil}, {"document_id", b.DocumentID != nil}, {"version", b.Version != nil}} {
		if !f.set {
			errs = append(errs, domain.FieldError{Field: f.name, Message: "required"})
		}
	}
	return errs
}

// toAcceptance is a stored acceptance as the API shows it (current: list only).
func toAcceptance(a store.Acceptance) api.Acceptance {
	return api.Acceptance{DocumentID: a.DocumentID, Version: a.Version, ContentHash: a.ContentHash, Status: "accepted",
		RecordedAt: domain.FormatTimestamp(a.RecordedAt), Source: a.Source, UserID: a.UserID, Email: a.Email}
}

func (s *Server) acceptLegal(w http.ResponseWriter, r *http.Request) error {
	// Who may accept answers before the body is looked at: an API key
	// learns nothing from the route (as the test dispatcher's rule).
	if err := s.app.CheckLegalAcceptor(r.Context(), principal(r)); err != nil {
		return err
	}
	req, err := decode[legalAccept](r, s.app.Cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	out, err := s.app.AcceptLegal(r.Context(), principal(r), *req.DocumentID, *req.Version, *req.ContentHash, *req.Accepted)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.AcceptResult{Acceptance: toAcceptance(out.Acceptance), Status: "recorded",
		UnmetDocumentIDs: out.Unmet})
}

func (s *Server) legalAcceptances(w http.ResponseWriter, r *http.Request) error {
	st, err := s.app.LegalAcceptances(r.Context(), principal(r))
	if err != nil {
		return err
	}
	out := make([]api.Acceptance, len(st.Acceptances))
	for i, a := range st.Acceptances {
		out[i] = toAcceptance(a.Acceptance)
		out[i].Current = new(a.Current)
	}
	return writeJSON(w, http.StatusOK, api.Acceptances{Acceptances: out, Email: st.Email,
		RequiredDocumentIDs: st.Required, UnmetDocumentIDs: st.Unmet})
}
