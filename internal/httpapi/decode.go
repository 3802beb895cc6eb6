package httpapi

// The one reader of request bodies (docs/decisions/strict-input.md). Every
// route's body goes through readInput (inputreader.go) against the Go type
// the route decodes into, before anything is written:
//
//   - the body is one JSON value (RFC 8259), nested at most maxNesting deep;
//   - every string, keys included, obeys the text rule (domain.CheckText):
//     valid UTF-8, no U+0000, no \u escape of a lone surrogate (which
//     encoding/json would silently turn into U+FFFD);
//   - an object read into a struct has exactly its json keys, each once: an
//     unknown key, a key in another case ("Kind" for "kind", which
//     encoding/json would take) and a key given twice are refused;
//   - every value has its field's JSON type (an integer field takes an
//     integer that fits), and text and lists fit their `max` tags.
//
// A field of type json.RawMessage or any (an event's raw, a policy test's
// tool_input) is the client's own JSON: only the text rule applies inside
// it. Problems are named by the field's path ("subject.subagent",
// "events[2].tool"). Only then does encoding/json decode the body, which it
// then reads exactly as checked.
//
// The fast path of event appends (eventjson.go) takes the usual shape of
// an event without this reader and encoding/json; where it takes a body, the
// result is what this reader gives (FuzzEventJSON, FuzzBatchJSON).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
)

// validator is implemented by request bodies that check their own fields.
type validator interface {
	validate() []domain.FieldError
}

// decode reads a JSON body strictly into T: the content type must be JSON, the
// body must fit maxBytes, and readInput's rules hold. An empty body decodes to
// the zero T only when optional.
func decode[T any](r *http.Request, maxBytes int64, optional bool) (T, error) {
	return decodeAs[T](r, maxBytes, optional, nil)
}

// decodeAs is decode for a route that answers the reader's problems with its
// own code (refuse; nil: inputProblem.err).
func decodeAs[T any](r *http.Request, maxBytes int64, optional bool, refuse func(*inputProblem) error) (T, error) {
	var v T
	body, err := readJSONBody(r, maxBytes, optional)
	if err != nil || body == nil {
		return v, err
	}
	return decodeBody[T](body, refuse)
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

// decodeBody decodes body strictly into T and runs T's own checks; refuse
// (nil: inputProblem.err) answers what the reader finds.
func decodeBody[T any](body []byte, refuse func(*inputProblem) error) (T, error) {
	var v T
	if p := readInput(body, reflect.TypeFor[T]()); p != nil {
		if refuse != nil {
			return v, refuse(p)
		}
		return v, p.err()
	}
	if err := json.Unmarshal(body, &v); err != nil {
		// readInput let through what encoding/json refuses: a bug here.
		return v, fmt.Errorf("decode %T after the strict read: %w", v, err)
	}
	if val, ok := any(&v).(validator); ok {
		if fields := val.validate(); len(fields) > 0 {
			return v, domain.Validation(fields...)
		}
	}
	return v, nil
}

// checkInput holds v, a request value the console built from a form or a
// query, to this reader's rules for its type, as if it were a body.
func checkInput(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if p := readInput(body, reflect.TypeOf(v)); p != nil {
		return p.err()
	}
	return nil
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

// inputKind classes what readInput found wrong.
type inputKind int

const (
	inputSyntax    inputKind = iota // not one JSON value
	inputText                       // a string breaks the text rule
	inputDuplicate                  // a key given twice
	inputUnknown                    // a key the type does not have
	inputCase                       // a key the type has in another case
	inputType                       // a value of the wrong JSON type
	inputTooLong                    // text or a list over its cap
)

// fatal reports whether the problem concerns the body as a whole (it is not
// one JSON text with each name once), rather than a value's fit to its field.
func (k inputKind) fatal() bool { return k <= inputDuplicate }

// inputProblem is the first thing readInput found wrong, named by its field.
type inputProblem struct {
	kind    inputKind
	field   string // the path of the field ("" for the body itself)
	key     string // for key problems: the key as sent
	meant   string // for inputCase: the key the type has
	message string
	got     string // for inputType: what was sent ("a string", ...)
}

// err is the problem as most routes answer it: 400 malformed_json for a body
// that is not JSON, otherwise 422 validation_error naming the field.
func (p *inputProblem) err() *domain.Error {
	if p.kind == inputSyntax {
		return &domain.Error{Code: domain.CodeMalformedJSON, Detail: p.message}
	}
	return domain.Validation(domain.FieldError{Field: p.field, Message: p.message})
}
