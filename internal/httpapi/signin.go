package httpapi

// Sign-in and legal routes (CONTRACT.md "Credentials", "Legal agreements").

import (
	"io"
	"net/http"
	"time"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// otpRequestBody is POST /v1/auth/otp/request's body: email is required.
type otpRequestBody api.OTPRequest

func (b *otpRequestBody) validate() []domain.FieldError {
	if b.Email == nil {
		return []domain.FieldError{{Field: "email", Message: "required"}}
	}
	return nil
}

func (s *Server) requestOTP(w http.ResponseWriter, r *http.Request) error {
	req, err := decode[otpRequestBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	sent, err := s.app.RequestOTP(r.Context(), s.clientAddress(r), api.OTPRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, sent)
}

// otpVerifyBody is POST /v1/auth/otp/verify's body: both keys are required.
type otpVerifyBody api.OTPVerify

func (b *otpVerifyBody) validate() []domain.FieldError {
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
	req, err := decode[otpVerifyBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	in, err := s.app.VerifyOTP(r.Context(), api.OTPVerify(req))
	if err != nil {
		return err
	}
	http.SetCookie(w, s.sessionCookie(in.Token, in.ExpiresAt))
	return writeJSON(w, http.StatusOK, in.SignedIn)
}

// sessionCookie is the session's cookie (CONTRACT.md "Credentials"):
// HttpOnly, SameSite=Lax, Path=/, Secure in production. An empty token with
// a past expiry clears it.
func (s *Server) sessionCookie(token string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: api.SessionCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: s.cfg.Production(), Expires: expires.UTC()}
	if token == "" {
		c.MaxAge = -1
	}
	return c
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r, s.cfg.MaxBodyBytes); err != nil {
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
	return writeJSON(w, http.StatusOK, info)
}

func (s *Server) legalDocuments(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.app.LegalDocuments())
}

// legalText serves a document's text, byte for byte the text its listed
// content_hash is the SHA-256 of.
func (s *Server) legalText(w http.ResponseWriter, r *http.Request) error {
	d, err := s.app.LegalText(r.PathValue("document_id"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/markdown; charset=utf-8")
	h.Set("X-Document-Version", d.Version)
	h.Set("X-Document-Content-Hash", d.ContentHash)
	w.WriteHeader(http.StatusOK)
	_, err = io.WriteString(w, d.Text)
	return err
}

// acceptBody is POST /v1/legal/accept's body: every key is required.
type acceptBody api.AcceptRequest

func (b *acceptBody) validate() []domain.FieldError {
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

func (s *Server) acceptLegal(w http.ResponseWriter, r *http.Request) error {
	// Who may accept answers before the body is looked at: an API key
	// learns nothing from the route (as the test dispatcher's rule).
	if err := s.app.CheckLegalAcceptor(r.Context(), principal(r)); err != nil {
		return err
	}
	req, err := decode[acceptBody](r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	out, err := s.app.AcceptLegal(r.Context(), principal(r), api.AcceptRequest(req))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) legalAcceptances(w http.ResponseWriter, r *http.Request) error {
	st, err := s.app.LegalAcceptances(r.Context(), principal(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}
