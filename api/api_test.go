package api_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/auditchain/auditchain/api"
	"github.com/auditchain/auditchain/api/openapidoc"
)

// The served JSON is the YAML as maintained: it is regenerated with
// `go generate ./api` after every change to openapi.yaml.
func TestOpenAPIJSONIsGenerated(t *testing.T) {
	doc, err := openapidoc.Load()
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	served := api.OpenAPIJSON()
	var a, b any
	if err := json.Unmarshal(fromYAML, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(served, &b); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("api/openapi.json is not generated from the current api/openapi.yaml: run `go generate ./api` and commit the result")
	}
}
