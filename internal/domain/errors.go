// Package domain holds auditchain's types and pure rules: error codes, scopes,
// the epoch stamp, and (as later issues land) the gate and governance decisions.
// Nothing here does I/O, so every rule is table-tested directly.
package domain

import "fmt"

// Error is the one error type that crosses from the use cases to the HTTP layer.
// It becomes an RFC 9457 problem document (CONTRACT.md "Errors"): Code is the
// extension member `code` from SPEC.md's tables, and the HTTP status is the
// code's, mapped once in the HTTP layer (httpapi's statusOf); Extra carries the
// context members SPEC.md names (scope, expected_prev_hash, received, ...).
type Error struct {
	Code   string
	Detail string
	Extra  map[string]any
	// Fields lists validation failures (422 validation_error).
	Fields []FieldError
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int
}

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// With returns a copy of e carrying one more extension member.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Extra = make(map[string]any, len(e.Extra)+1)
	for k, v := range e.Extra {
		c.Extra[k] = v
	}
	c.Extra[key] = value
	return &c
}

// Errorf builds an Error with a formatted detail.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Codes shared by every credentialed route (SPEC.md "Errors", common table) and by
// the request decoder; route-specific codes live beside their rules.
const (
	CodeMissingToken      = "missing_token"
	CodeInvalidAPIKey     = "invalid_or_expired_api_key"
	CodeScopeMissing      = "scope_missing"
	CodeValidation        = "validation_error"
	CodeMalformedJSON     = "malformed_json"
	CodeUnsupportedMedia  = "unsupported_media_type"
	CodeBodyTooLarge      = "body_too_large"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeNotImplemented    = "not_implemented"
	CodeInternal          = "internal_error"
	CodeUnavailable       = "service_unavailable"
	CodeKeyNotFound       = "key_not_found"
	CodeUnauthorized      = "unauthorized"
	CodeCronUnconfigured  = "cron_secret_unconfigured"
	CodeAdminOnly         = "admin_only"
	CodeRateLimited       = "rate_limit_exceeded"
	CodeDailyQuota        = "daily_quota_exceeded"
	CodeBatchTooLarge     = "batch_too_large"
	CodeEventNotFound     = "event_not_found"
	CodeInvalidAfter      = "invalid_after"
	CodeInvalidBefore     = "invalid_before"
	CodeSignatureInvalid  = "event_signature_invalid"
	CodePrevHashMismatch  = "prev_hash_mismatch"
	CodeNonMonotonic      = "non_monotonic_sequence"
	CodePrevHashGenesis   = "prev_hash_for_genesis"
	CodeEventIDConflict   = "event_id_conflict"
	CodeQueueFull         = "append_queue_full"
	CodeInvalidSigningKey = "invalid_signing_key"
	CodeAccountExists     = "account_exists"
	CodeAccountNotFound   = "account_not_found"
)

// Validation builds a 422 validation_error naming each bad field.
func Validation(fields ...FieldError) *Error {
	detail := "the request body is invalid"
	if len(fields) == 1 {
		detail = fields[0].Field + ": " + fields[0].Message
	}
	return &Error{Code: CodeValidation, Detail: detail, Fields: fields}
}

// NotFound is the 404 used for objects that are missing or belong to another
// account: the two must be indistinguishable (SPEC.md "Authentication" 6).
func NotFound(code, what string) *Error {
	return &Error{Code: code, Detail: what + " not found"}
}
