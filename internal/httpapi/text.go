package httpapi

// The text rule at the edge (domain.ValidText, docs/decisions/strict-input.md):
// every path segment and query parameter is valid UTF-8 without U+0000, or the
// request is answered before any store is asked. JSON strings are held to the
// same rule by the body reader (decode.go).

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
)

// checkText applies the text rule to the path values and query parameters
// of a request to the route pattern.
func checkText(pattern string, r *http.Request) error {
	for _, name := range pathParams(pattern) {
		if !domain.ValidText(r.PathValue(name)) {
			return badPathValue(pattern, name)
		}
	}
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return domain.Validation(domain.FieldError{Field: "query", Message: "the query string is not valid: " + err.Error()})
	}
	for name, values := range q {
		bad := !domain.ValidText(name)
		for _, v := range values {
			bad = bad || !domain.ValidText(v)
		}
		if bad {
			return badQueryValue(pattern, name)
		}
	}
	return nil
}

// pathParams lists the {name} wildcards of a route pattern.
func pathParams(pattern string) []string {
	var names []string
	for rest := pattern; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return names
		}
		j := strings.IndexByte(rest[i:], '}')
		names = append(names, strings.TrimSuffix(rest[i+1:i+j], "..."))
		rest = rest[i+j:]
	}
}

// missingIDs are the path ids that name an object, with the code and name
// of the 404 their routes answer for one that names nothing.
var missingIDs = map[string]struct{ code, what string }{
	"event_id":        {domain.CodeEventNotFound, "event"},
	"key_id":          {domain.CodeKeyNotFound, "key"},
	"proposal_id":     {app.CodeProposalNotFound, "proposal"},
	"notification_id": {app.CodeNotificationMissing, "notification"},
	"webhook_id":      {app.CodeWebhookNotFound, "webhook"},
	"approval_id":     {app.CodeApprovalNotFound, "approval"},
	"rule_id":         {app.CodeApprovalRuleNotFound, "approval rule"},
	"document_id":     {domain.CodeUnknownLegalDocument, "legal document"},
	"grant_id":        {domain.CodeNoGrant, "grant"},
	"org_id":          {domain.CodeOrgNotFound, "team"},
	"email":           {domain.CodeMemberNotFound, "member or live invitation"},
}

// badPathValue answers a path value that breaks the text rule. An id that
// names an object cannot name one: the route answers as for any id that names
// nothing (another account's included). A name the request creates is a
// value like any other, refused naming it.
func badPathValue(pattern, name string) error {
	switch {
	case name == "grant_id" && strings.HasSuffix(pattern, "/use"):
		return app.NoGrantToUse()
	case name == "org_id" && strings.HasSuffix(pattern, "/accept"):
		return domain.Errorf(domain.CodeInvitationNotFound, "no pending invitation to this team for the caller's email")
	}
	if id, ok := missingIDs[name]; ok {
		return domain.NotFound(id.code, id.what)
	}
	return domain.Validation(domain.FieldError{Field: name, Message: domain.TextRuleMessage})
}

// badQueryValue answers a query parameter that breaks the text rule, with
// the route's own code for its parameters where it has one.
func badQueryValue(pattern, name string) error {
	if pattern == "GET /v1/grants/status" {
		return malformedQuery(name, domain.TextRuleMessage)
	}
	return domain.Validation(domain.FieldError{Field: name, Message: domain.TextRuleMessage})
}
