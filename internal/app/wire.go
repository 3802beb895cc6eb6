package app

// The small conversions shared by the use cases that read pkg/api requests
// and answer pkg/api shapes: an optional text, an optional time.

import (
	"time"

	"github.com/auditchain/auditchain/internal/domain"
)

// formatOpt is an optional time in the API's form.
func formatOpt(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := domain.FormatTimestamp(*t)
	return &s
}

// deref is an optional text, "" when absent.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
