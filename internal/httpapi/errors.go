package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/metrics"
	"github.com/auditchain/auditchain/pkg/api"
)

// problemTypePrefix makes each code a stable URI; a URN needs no web page to resolve.
const problemTypePrefix = "urn:auditchain:problem:"

// encodeJSON writes v and a newline to w without HTML escaping (as
// api.Marshal).
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeError is the one place errors become responses. Domain errors are shown
// as they are; anything else is logged and answered as a bare 500, so no stack
// trace, SQL text or secret ever reaches a client.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The client went away; there is nobody to answer. (Requests do
			// not inherit server shutdown, so this is only ever the client.)
			return
		}
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "route", r.Pattern, "err", err.Error())
		de = &domain.Error{Code: domain.CodeInternal, Detail: "the server could not complete the request; it has been logged"}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			de = &domain.Error{Code: domain.CodeUnavailable, Detail: "the store did not answer in time; retry", RetryAfter: 1}
		case app.Unavailable(err):
			de = &domain.Error{Code: domain.CodeUnavailable,
				Detail: "the store is unavailable; the request was not acknowledged and a write's outcome is unknown — read before retrying (an append retried with the same event_id is answered idempotently)", RetryAfter: 1}
		}
	}
	status, known := statusOf[de.Code]
	// The metric's label takes its values from statusOf's fixed set only: a
	// code built at run time could otherwise make a series per value.
	label := de.Code
	if !known {
		// A code without a status is a bug in this package, not the client's.
		log.ErrorContext(r.Context(), "error code has no HTTP status", "code", de.Code, "route", r.Pattern)
		status, label = http.StatusInternalServerError, domain.CodeInternal
	}
	metrics.Refusals.Inc(label)
	if de.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(de.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = encodeJSON(w, api.Problem{
		Type: problemTypePrefix + de.Code, Title: http.StatusText(status), Status: status,
		Detail: de.Detail, Code: de.Code, Errors: fieldErrors(de.Fields), Extra: de.Extra,
	})
}

// fieldErrors is a validation failure's fields as the problem lists them.
func fieldErrors(fs []domain.FieldError) []api.FieldError {
	if len(fs) == 0 {
		return nil
	}
	out := make([]api.FieldError, len(fs))
	for i, f := range fs {
		out[i] = api.FieldError{Field: f.Field, Message: f.Message}
	}
	return out
}

// statusOf maps every error code to its HTTP status: SPEC.md's tables where
// they give one, CONTRACT.md and docs/decisions otherwise. The codes live
// beside their rules (domain, app); the status is the HTTP layer's alone.
// TestEveryCodeHasAStatus holds every code constant of the service in it.
// statusOfCode is the HTTP status of code (500 for a code without one), for
// the console's error pages.
func statusOfCode(code string) int {
	if st, ok := statusOf[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

var statusOf = map[string]int{
	// 400: the request cannot be read as sent.
	domain.CodeMalformedJSON:     http.StatusBadRequest,
	domain.CodeInvalidAfter:      http.StatusBadRequest,
	domain.CodeInvalidBefore:     http.StatusBadRequest,
	domain.CodeAccountHasNoEmail: http.StatusBadRequest,
	app.CodeUnknownNoticeType:    http.StatusBadRequest,
	app.CodeInvalidTreeSize:      http.StatusBadRequest,
	app.CodeInvalidRange:         http.StatusBadRequest,
	app.CodeInvalidEventID:       http.StatusBadRequest,
	app.CodeInvalidCursor:        http.StatusBadRequest,
	app.CodeInvalidLimit:         http.StatusBadRequest,
	codeUnsupportedProtocol:      http.StatusBadRequest,
	codeBatchNotSupported:        http.StatusBadRequest,
	codeInvalidJSONRPC:           http.StatusBadRequest,

	// 401: no valid credential.
	domain.CodeMissingToken:         http.StatusUnauthorized,
	domain.CodeInvalidAPIKey:        http.StatusUnauthorized,
	domain.CodeUnauthorized:         http.StatusUnauthorized,
	domain.CodeInvalidOrExpiredCode: http.StatusUnauthorized,
	domain.CodeSignatureInvalid:     http.StatusUnauthorized,

	// 403: the caller may not. session_required: a valid API key on a
	// route for a signed-in person (RFC 9110 15.5.4: credentials were
	// given and are insufficient; a 401 would tell the client its key is bad).
	domain.CodeSessionRequired:         http.StatusForbidden,
	domain.CodeScopeMissing:            http.StatusForbidden,
	domain.CodeAdminOnly:               http.StatusForbidden,
	domain.CodeCrossOrigin:             http.StatusForbidden,
	domain.CodeLegalAcceptanceRequired: http.StatusForbidden,
	domain.CodeGrantOverreach:          http.StatusForbidden,
	domain.CodeMachineMismatch:         http.StatusForbidden,
	domain.CodeOwnerRequired:           http.StatusForbidden,
	app.CodeTestRequiresAdmin:          http.StatusForbidden,

	// 404: nothing by that name on this account (another account's objects
	// answer the same).
	domain.CodeNotFound:             http.StatusNotFound,
	domain.CodeEventNotFound:        http.StatusNotFound,
	domain.CodeKeyNotFound:          http.StatusNotFound,
	domain.CodeAccountNotFound:      http.StatusNotFound,
	domain.CodeNoGrant:              http.StatusNotFound,
	domain.CodeUnknownLegalDocument: http.StatusNotFound,
	app.CodeProposalNotFound:        http.StatusNotFound,
	app.CodeNotificationMissing:     http.StatusNotFound,
	app.CodeWebhookNotFound:         http.StatusNotFound,
	app.CodeApprovalNotFound:        http.StatusNotFound,
	app.CodeApprovalRuleNotFound:    http.StatusNotFound,
	domain.CodeFeatureDisabled:      http.StatusNotFound,
	domain.CodeOrgNotFound:          http.StatusNotFound,
	domain.CodeInvitationNotFound:   http.StatusNotFound,
	domain.CodeMemberNotFound:       http.StatusNotFound,
	domain.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	codeNotAcceptable:               http.StatusNotAcceptable,
	domain.CodeUnsupportedMedia:     http.StatusUnsupportedMediaType,
	domain.CodeBodyTooLarge:         http.StatusRequestEntityTooLarge,
	domain.CodeBatchTooLarge:        http.StatusRequestEntityTooLarge,

	// 409: the state of the account refuses it.
	domain.CodeAccountExists:      http.StatusConflict,
	domain.CodeGrantIDExists:      http.StatusConflict,
	domain.CodeBudgetExhausted:    http.StatusConflict,
	domain.CodeNotAuthorized:      http.StatusConflict,
	domain.CodePrevHashMismatch:   http.StatusConflict,
	domain.CodeNonMonotonic:       http.StatusConflict,
	domain.CodePrevHashGenesis:    http.StatusConflict,
	domain.CodeEventIDConflict:    http.StatusConflict,
	domain.CodeSeparationOfPowers: http.StatusConflict,
	domain.CodeNotRatified:        http.StatusConflict,
	domain.CodeInvalidTransition:  http.StatusConflict,
	app.CodeSequenceTaken:         http.StatusConflict,
	app.CodeHealConflict:          http.StatusConflict,
	app.CodeNotFailed:             http.StatusConflict,
	app.CodeTooManyWebhooks:       http.StatusConflict,
	app.CodeApprovalNotPending:    http.StatusConflict,
	domain.CodeAlreadyMember:      http.StatusConflict,
	domain.CodeAlreadyInvited:     http.StatusConflict,
	domain.CodeLastOwner:          http.StatusConflict,
	domain.CodeTooManyInvitations: http.StatusConflict,
	domain.CodeTooManyOrgs:        http.StatusConflict,

	// 422: read, but not acceptable.
	domain.CodeValidation:              http.StatusUnprocessableEntity,
	domain.CodeMalformedGrant:          http.StatusUnprocessableEntity,
	domain.CodeMalformedQuery:          http.StatusUnprocessableEntity,
	domain.CodeMalformedRevoke:         http.StatusUnprocessableEntity,
	domain.CodeMalformedUse:            http.StatusUnprocessableEntity,
	domain.CodeThresholdNotMet:         http.StatusUnprocessableEntity,
	domain.CodeAcceptancesRequired:     http.StatusUnprocessableEntity,
	domain.CodeLegalAttestationInvalid: http.StatusUnprocessableEntity,
	domain.CodeInvalidSigningKey:       http.StatusUnprocessableEntity,
	app.CodeWebhookURLRefused:          http.StatusUnprocessableEntity,

	// 429: too many, for now.
	domain.CodeRateLimited:    http.StatusTooManyRequests,
	domain.CodeDailyQuota:     http.StatusTooManyRequests,
	domain.CodeOTPRateLimited: http.StatusTooManyRequests,
	codeTooManyStreams:        http.StatusTooManyRequests,
	app.CodeTooManyKeys:       http.StatusTooManyRequests,

	// 5xx: the service's side.
	domain.CodeInternal:         http.StatusInternalServerError,
	domain.CodeNotImplemented:   http.StatusNotImplemented,
	domain.CodeUnavailable:      http.StatusServiceUnavailable,
	domain.CodeQueueFull:        http.StatusServiceUnavailable,
	domain.CodeCronUnconfigured: http.StatusServiceUnavailable,
	domain.CodeMailUnavailable:  http.StatusServiceUnavailable,
}

// writeJSON answers a success.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return encodeJSON(w, v)
}
