package api

// Problem is an error answer: RFC 9457 with the spec's code (CONTRACT.md
// "Errors"). Extra holds every other member the answer carries
// (expected_prev_hash, remaining, limit, …), written beside these; a reader
// decoding into Problem finds them only in the body itself.
type Problem struct {
	Type   string         `json:"type"`
	Title  string         `json:"title"`
	Status int            `json:"status"`
	Detail string         `json:"detail"`
	Code   string         `json:"code"`
	Errors []FieldError   `json:"errors,omitempty"`
	Extra  map[string]any `json:"-"`
}

// MarshalJSON writes p as one object: the members above, which no member of
// Extra can replace, and Extra's, keys sorted, without HTML escaping
// (Marshal).
func (p Problem) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 6+len(p.Extra))
	for k, v := range p.Extra {
		m[k] = v
	}
	m["type"], m["title"], m["status"], m["detail"], m["code"] = p.Type, p.Title, p.Status, p.Detail, p.Code
	if len(p.Errors) > 0 {
		m["errors"] = p.Errors
	}
	return Marshal(m)
}

// FieldError is one field of a 422 validation_error.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}
