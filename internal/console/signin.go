package console

// Sign-in and sign-out pages: the API's OTP sign-in (CONTRACT.md
// "Credentials") as forms. The same app use cases, the same session cookie.

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/pkg/api"
)

// signInForm is the sign-in page: the email form, or (Code) the code form.
type signInForm struct {
	Email, Next string
	Code        bool
	// Error is what went wrong with the last try, in words.
	Error string
	// Documents are the required legal documents a new account accepts
	// (shown once the service said acceptances_required).
	Documents []api.LegalDocument
	// Sent is when the code expires, after a code was mailed.
	Sent string
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) error {
	next := safeNext(r.URL.Query().Get("next"))
	if viewerOf(r).UserID != "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	c.render(w, r, http.StatusOK, "signin", "Sign in", signInForm{Next: next})
	return nil
}

// requestCode mails a code (POST /v1/auth/otp/request's use case). A new
// email must accept the required documents: the form lists them the first
// time the service asks, and sends an acceptance of each ticked one at its
// current version.
func (c *Console) requestCode(w http.ResponseWriter, r *http.Request) error {
	email, next := r.PostFormValue("email"), safeNext(r.PostFormValue("next"))
	req := api.OTPRequest{Email: &email}
	accepted := map[string]bool{}
	for _, id := range r.PostForm["accept"] {
		accepted[id] = true
	}
	docs := c.App.LegalDocuments()
	for _, d := range docs.Documents {
		if d.Required && accepted[d.DocumentID] {
			req.Acceptances = append(req.Acceptances, api.AcceptanceInput{DocumentID: d.DocumentID, Version: d.Version, ContentHash: d.ContentHash})
		}
	}
	// The API's caps on the body's fields first (an email over 256 bytes…).
	var sent api.OTPSent
	err := c.checkInput(req)
	if err == nil {
		sent, err = c.App.RequestOTP(r.Context(), c.ClientAddress(r), req)
	}
	var de *domain.Error
	if errors.As(err, &de) {
		form := signInForm{Email: email, Next: next, Error: de.Detail}
		status := c.Status(de.Code)
		if de.Code == domain.CodeAcceptancesRequired {
			form.Error = "This email has no account yet. To create one, read and accept each document below, then ask for the code again."
			for _, d := range docs.Documents {
				if d.Required {
					form.Documents = append(form.Documents, d)
				}
			}
		}
		if de.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(de.RetryAfter))
		}
		c.render(w, r, status, "signin", "Sign in", form)
		return nil
	}
	if err != nil {
		return err
	}
	q := url.Values{"email": {email}, "next": {next}, "expires": {sent.ExpiresAt}}
	http.Redirect(w, r, Prefix+"signin/code?"+q.Encode(), http.StatusSeeOther)
	return nil
}

func (c *Console) codePage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	c.render(w, r, http.StatusOK, "signin", "Enter your code", signInForm{Email: q.Get("email"), Next: safeNext(q.Get("next")),
		Code: true, Sent: q.Get("expires")})
	return nil
}

// verifyCode checks the code (POST /v1/auth/otp/verify's use case) and sets
// the API's session cookie.
func (c *Console) verifyCode(w http.ResponseWriter, r *http.Request) error {
	email, code, next := r.PostFormValue("email"), r.PostFormValue("code"), safeNext(r.PostFormValue("next"))
	req := api.OTPVerify{Email: &email, Code: &code}
	var in app.SignedIn
	err := c.checkInput(req)
	if err == nil {
		in, err = c.App.VerifyOTP(r.Context(), req)
	}
	var de *domain.Error
	if errors.As(err, &de) {
		c.render(w, r, c.Status(de.Code), "signin", "Enter your code", signInForm{Email: email, Next: next, Code: true, Error: de.Detail})
		return nil
	}
	if err != nil {
		return err
	}
	http.SetCookie(w, c.SessionCookie(in.Token, in.ExpiresAt))
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// signOut ends this session (POST /v1/auth/logout's use case).
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) error {
	if err := c.App.Logout(r.Context(), viewerOf(r).Principal); err != nil {
		return err
	}
	http.SetCookie(w, c.SessionCookie("", time.Unix(0, 0)))
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
	return nil
}

// signOutEverywhere ends every session of the account, this one included.
func (c *Console) signOutEverywhere(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.App.LogoutEverywhere(r.Context(), viewerOf(r).Principal); err != nil {
		return err
	}
	http.SetCookie(w, c.SessionCookie("", time.Unix(0, 0)))
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
	return nil
}
