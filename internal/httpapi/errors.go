package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
)

// problem is the RFC 9457 body every error answers with (CONTRACT.md "Errors").
type problem struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Detail string              `json:"detail"`
	Code   string              `json:"code"`
	Errors []domain.FieldError `json:"errors,omitempty"`
	Extra  map[string]any      `json:"-"`
}

// problemTypePrefix makes each code a stable URI; a URN needs no web page to resolve.
const problemTypePrefix = "urn:auditchain:problem:"

func (p problem) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 6+len(p.Extra))
	for k, v := range p.Extra {
		m[k] = v
	}
	m["type"], m["title"], m["status"], m["detail"], m["code"] = p.Type, p.Title, p.Status, p.Detail, p.Code
	if len(p.Errors) > 0 {
		m["errors"] = p.Errors
	}
	return json.Marshal(m)
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
		de = &domain.Error{Status: http.StatusInternalServerError, Code: domain.CodeInternal, Detail: "the server could not complete the request; it has been logged"}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			de = &domain.Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Detail: "the store did not answer in time; retry", RetryAfter: 1}
		case store.Unavailable(err):
			de = &domain.Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable,
				Detail: "the store is unavailable; the request was not acknowledged and a write's outcome is unknown — read before retrying (an append retried with the same event_id is answered idempotently)", RetryAfter: 1}
		}
	}
	if de.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(de.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(de.Status)
	_ = json.NewEncoder(w).Encode(problem{
		Type: problemTypePrefix + de.Code, Title: http.StatusText(de.Status), Status: de.Status,
		Detail: de.Detail, Code: de.Code, Errors: de.Fields, Extra: de.Extra,
	})
}

// writeJSON answers a success.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
