package console

// What the panels' forms share: their fields read under the API's text rule
// and caps (docs/decisions/strict-input.md), and a refusal shown beside the
// form with the API's status for its code.

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/auditchain/auditchain/internal/domain"
)

// formText is the form's field name, held to the text rule and to max bytes
// as the API's body reader holds the same field ("" when absent).
func formText(r *http.Request, name string, max int) (string, error) {
	v := r.PostFormValue(name)
	if !domain.ValidText(v) {
		return "", domain.Validation(domain.FieldError{Field: name, Message: domain.TextRuleMessage})
	}
	if max > 0 && len(v) > max {
		return "", domain.Validation(domain.FieldError{Field: name, Message: "must be at most " + strconv.Itoa(max) + " bytes"})
	}
	return v, nil
}

// formField is one text field of a form: its name, where its value goes and
// its bound in bytes (0: the body's bound alone).
type formField struct {
	name string
	to   *string
	max  int
}

// readFormTexts reads each field with formText, in order, and stops at the
// first one refused, returning its refusal (a domain.Validation naming it).
func readFormTexts(r *http.Request, fields ...formField) error {
	for _, f := range fields {
		v, err := formText(r, f.name, f.max)
		if err != nil {
			return err
		}
		*f.to = v
	}
	return nil
}

// formList is every value of the form's field name, each held to the text
// rule and max bytes, at most domain.MaxListItems of them.
func formList(r *http.Request, name string, max int) ([]string, error) {
	if err := r.ParseForm(); err != nil {
		return nil, domain.Validation(domain.FieldError{Field: "form", Message: "the form could not be read: " + err.Error()})
	}
	vs := r.PostForm[name]
	if len(vs) > domain.MaxListItems {
		return nil, domain.Validation(domain.FieldError{Field: name, Message: "at most " + strconv.Itoa(domain.MaxListItems) + " items"})
	}
	for _, v := range vs {
		if !domain.ValidText(v) || len(v) > max {
			return nil, domain.Validation(domain.FieldError{Field: name, Message: domain.TextRuleMessage + ", each at most " + strconv.Itoa(max) + " bytes"})
		}
	}
	return vs, nil
}

// optional is s as an optional field of a request (nil when empty).
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// refusal is a use case's refusal as a panel shows it beside its form.
type refusal struct {
	Status int
	Code   string
	Detail string
}

// refused turns a domain error into the refusal a panel shows (and its
// HTTP status); any other error is returned for c.fail.
func (c *Console) refused(err error) (*refusal, error) {
	var de *domain.Error
	if !errors.As(err, &de) {
		return nil, err
	}
	f := &refusal{Status: c.Status(de.Code), Code: de.Code, Detail: de.Detail}
	if len(de.Fields) > 0 {
		parts := make([]string, len(de.Fields))
		for i, fe := range de.Fields {
			parts[i] = fe.Field + ": " + fe.Message
		}
		f.Detail = strings.Join(parts, "; ")
	}
	return f, nil
}

// noStore keeps a page that shows a secret out of every cache (the secret is
// shown once: CONTRACT.md "Credentials", "Webhooks").
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
}

// done is the message of a finished action, named by a redirect's ?done=
// (a fixed sentence, never text from the query).
func done(r *http.Request, messages map[string]string) string {
	return messages[r.URL.Query().Get("done")]
}
