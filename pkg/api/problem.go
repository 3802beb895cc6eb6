package api

// Problem is an error answer: RFC 9457 with the spec's code. Any other
// member (expected_prev_hash, remaining, limit, …) travels beside these.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail"`
	Code   string       `json:"code"`
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one field of a 422 validation_error.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}
