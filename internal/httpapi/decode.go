package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
)

// validator is implemented by request bodies that check their own fields.
type validator interface {
	validate() []domain.FieldError
}

// decode reads a JSON body strictly into T: the content type must be JSON, the
// body must fit maxBytes, unknown fields are refused by name, and mistyped
// fields are named. An empty body decodes to the zero T only when optional.
func decode[T any](r *http.Request, maxBytes int64, optional bool) (T, error) {
	var v T
	body, err := readJSONBody(r, maxBytes, optional)
	if err != nil || body == nil {
		return v, err
	}
	return decodeBody[T](body)
}

// readJSONBody reads a JSON request body within maxBytes; nil without error
// when the body is empty (or null) and optional.
func readJSONBody(r *http.Request, maxBytes int64, optional bool) ([]byte, error) {
	body, err := readBody(r, maxBytes)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 || (optional && bytes.Equal(bytes.TrimSpace(body), []byte("null"))) {
		if optional {
			return nil, nil
		}
		return nil, &domain.Error{Code: domain.CodeMalformedJSON, Detail: "a JSON object body is required"}
	}
	if err := checkJSONContentType(r); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeBody decodes body strictly into T and runs T's own checks.
func decodeBody[T any](body []byte) (T, error) {
	var v T
	if err := unmarshalStrict(body, &v); err != nil {
		return v, err
	}
	if val, ok := any(&v).(validator); ok {
		if fields := val.validate(); len(fields) > 0 {
			return v, domain.Validation(fields...)
		}
	}
	return v, nil
}

func readBody(r *http.Request, maxBytes int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(maxBytes)
		}
		return nil, &domain.Error{Code: domain.CodeMalformedJSON, Detail: "the request body could not be read"}
	}
	if int64(len(body)) > maxBytes {
		return nil, tooLarge(maxBytes)
	}
	return body, nil
}

func tooLarge(max int64) *domain.Error {
	return (&domain.Error{Code: domain.CodeBodyTooLarge,
		Detail: fmt.Sprintf("the request body is larger than %d bytes", max)}).With("limit_bytes", max)
}

func checkJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return &domain.Error{Code: domain.CodeUnsupportedMedia,
		Detail: "send the body as Content-Type: application/json"}
}

// unmarshalStrict decodes one JSON value, refusing unknown fields and trailing data.
func unmarshalStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return &domain.Error{Code: domain.CodeMalformedJSON, Detail: "the body holds more than one JSON value"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &domain.Error{Code: domain.CodeMalformedJSON, Detail: "unexpected data after the JSON value"}
	}
	return nil
}

// jsonError turns a decoder error into the answer a client can act on.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return &domain.Error{Code: domain.CodeValidation,
				Detail: "the body must be a JSON object", Fields: []domain.FieldError{{Field: "", Message: "must be a JSON object"}}}
		}
		return domain.Validation(domain.FieldError{Field: field, Message: "must be " + jsonTypeName(typeErr.Type.String())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return domain.Validation(domain.FieldError{Field: name, Message: "unknown field"})
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return &domain.Error{Code: domain.CodeMalformedJSON, Detail: "the body is not valid JSON"}
	default:
		return domain.Validation(domain.FieldError{Field: "", Message: err.Error()})
	}
}

func jsonTypeName(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string":
		return "a string"
	case "int", "int64", "int32":
		return "an integer"
	case "bool":
		return "a boolean"
	case "float64", "json.Number":
		return "a number"
	}
	if strings.HasPrefix(strings.TrimPrefix(goType, "*"), "[]") {
		return "an array"
	}
	return "an object"
}
