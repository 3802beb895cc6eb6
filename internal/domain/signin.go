package domain

import (
	"net/mail"
	"strings"
	"time"
)

// Sign-in rules (CONTRACT.md "Credentials"; docs/decisions/auth.md).
const (
	// OTPDigits is the length of a one-time code: 10^8 codes, of which a
	// guesser gets OTPMaxAttempts tries per code and OTPRequestsPerHour codes
	// an hour per email.
	OTPDigits = 8
	// OTPLifetime is how long a code can be verified.
	OTPLifetime = 10 * time.Minute
	// OTPMaxAttempts wrong tries burn a code.
	OTPMaxAttempts = 5
	// OTPRequestsPerHour bounds the codes one email can be sent in any hour.
	OTPRequestsPerHour = 5
	// SessionCookie names the session cookie.
	SessionCookie = "auditchain_session"
	// DefaultSessionTTL is --session-ttl's default.
	DefaultSessionTTL = 168 * time.Hour
)

// Codes of sign-in and legal routes (SPEC.md "Errors", CONTRACT.md "Credentials").
const (
	CodeAcceptancesRequired     = "acceptances_required"
	CodeLegalAttestationInvalid = "legal-attestation-invalid"
	CodeOTPRateLimited          = "otp_rate_limited"
	CodeInvalidOrExpiredCode    = "invalid_or_expired_code"
	CodeAccountHasNoEmail       = "account_has_no_email"
	CodeUnknownLegalDocument    = "unknown_legal_document"
	CodeLegalAcceptanceRequired = "legal_acceptance_required"
	CodeCrossOrigin             = "cross_origin_request"
	CodeSessionRequired         = "session_required"
	CodeMailUnavailable         = "mail_unavailable"
)

// NormalizeEmail is the form an email is stored and compared in (emails are
// compared case-insensitively): a plain address, lowercased. ok is false for
// anything that is not one address without a display name.
func NormalizeEmail(s string) (string, bool) {
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s || len(s) > 254 || strings.ContainsAny(s, "\r\n\x00") {
		return "", false
	}
	return strings.ToLower(s), true
}
