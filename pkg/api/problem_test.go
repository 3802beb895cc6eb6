package api_test

import (
	"encoding/json"
	"testing"

	"github.com/auditchain/auditchain/pkg/api"
)

// A problem is one object: its members and Extra's, keys sorted, HTML left
// unescaped, and no member of Extra in place of a named one.
func TestProblemMarshalsOneObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    api.Problem
		want string
	}{
		{"bare", api.Problem{Type: "urn:auditchain:problem:not_found", Title: "Not Found", Status: 404, Detail: "no such key", Code: "not_found"},
			`{"code":"not_found","detail":"no such key","status":404,"title":"Not Found","type":"urn:auditchain:problem:not_found"}`},
		{"extra and errors", api.Problem{Type: "t", Title: "Unprocessable Entity", Status: 422, Detail: "sha256:<64 hex> & more", Code: "validation_error",
			Errors: []api.FieldError{{Field: "f", Message: "m"}}, Extra: map[string]any{"limit": 3, "code": "overridden", "a": nil}},
			`{"a":null,"code":"validation_error","detail":"sha256:<64 hex> & more","errors":[{"field":"f","message":"m"}],"limit":3,"status":422,"title":"Unprocessable Entity","type":"t"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			// json.Marshal re-escapes a marshaller's HTML; the server writes
			// through an encoder that does not (httpapi's encodeJSON).
			got, err := tc.p.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("MarshalJSON:\n got %s\nwant %s", got, tc.want)
			}
			var back api.Problem
			if err := json.Unmarshal(b, &back); err != nil || back.Code != tc.p.Code || back.Status != tc.p.Status || len(back.Errors) != len(tc.p.Errors) {
				t.Errorf("read back %+v (%v)", back, err)
			}
		})
	}
}
