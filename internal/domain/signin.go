package domain

import (
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
// compared case-insensitively): exactly one plain address local@domain,
// lowercased. ok is false for anything else (docs/decisions/auth.md
// "Addresses"): a display name, a comment, a group, a route, a second
// address, a quoted or non-ASCII local part, a domain literal
// (a@[127.0.0.1]) or a domain that is not a DNS host name. The service
// mails what was typed, and only to a named host: net/mail's reading of
// RFC 5322 admits every one of those forms.
func NormalizeEmail(s string) (string, bool) {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || len(s) > 254 || !dotAtom(local) || !hostName(domain) {
		return "", false
	}
	return strings.ToLower(s), true
}

// dotAtom reports whether local is an RFC 5322 dot-atom of at most 64
// octets (RFC 5321 4.5.3.1.1): atext runs joined by single dots.
func dotAtom(local string) bool {
	if local == "" || len(local) > 64 {
		return false
	}
	for part := range strings.SplitSeq(local, ".") {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", rune(c)) {
				return false
			}
		}
	}
	return true
}

// hostName reports whether d is a DNS host name of at least two labels
// (RFC 1123 2.1; an IDN in its xn-- form): letters, digits and inner
// hyphens, 1 to 63 octets a label, 253 in all, and a last label that is not
// all digits, so that no IPv4 address passes for one (RFC 3696 2).
func hostName(d string) bool {
	if len(d) > 253 {
		return false
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if !isAlnum(l[i]) && l[i] != '-' {
				return false
			}
		}
	}
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
