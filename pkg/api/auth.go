package api

// Sign-in (CONTRACT.md "Credentials"): a one-time code mailed, then a
// session cookie.

// SessionCookie names the session cookie the service sets at sign-in.
const SessionCookie = "auditchain_session"

// SessionTokenPrefix starts every session token (the cookie's value), so a
// credential tells by its text whether it is a session or an API key.
const SessionTokenPrefix = "acs_"

// AcceptanceInput is one legal acceptance carried by a new account's first
// code request.
type AcceptanceInput struct {
	DocumentID  string `json:"document_id" max:"name"`
	Version     string `json:"version" max:"name"`
	ContentHash string `json:"content_hash" max:"name"`
}

// OTPRequest is the body of POST /v1/auth/otp/request; Email is required.
type OTPRequest struct {
	Email       *string           `json:"email" max:"name"`
	Acceptances []AcceptanceInput `json:"acceptances,omitempty" max:"list"`
}

// OTPSent answers POST /v1/auth/otp/request (202).
type OTPSent struct {
	Status    string `json:"status"` // sent
	ExpiresAt string `json:"expires_at"`
}

// OTPVerify is the body of POST /v1/auth/otp/verify; both are required.
type OTPVerify struct {
	Email *string `json:"email" max:"name"`
	Code  *string `json:"code" max:"name"`
}

// SignedIn answers POST /v1/auth/otp/verify; the session itself is the
// cookie the answer sets.
type SignedIn struct {
	UserID           string `json:"user_id"`
	Email            string `json:"email"`
	SessionExpiresAt string `json:"session_expires_at"`
}

// Session answers GET /v1/auth/session.
type Session struct {
	UserID    string `json:"user_id"`
	Email     string `json:"email"`
	Admin     bool   `json:"admin"`
	ExpiresAt string `json:"expires_at"`
}

// SignedOut answers POST /v1/auth/logout.
type SignedOut struct {
	Status string `json:"status"` // signed_out
}
