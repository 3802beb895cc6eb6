// Package openapidoc parses and validates the OpenAPI document (with
// kin-openapi) for the tests that check responses against it and for the
// generator of api/openapi.json. The service itself does not import it: it
// serves the generated JSON, so that no command of the binary pays the
// parser's start-up cost (a hook runs before every tool call of an agent).
package openapidoc

import (
	"context"
	"fmt"

	"github.com/auditchain/auditchain/api"
	"github.com/getkin/kin-openapi/openapi3"
)

// Load parses and validates api/openapi.yaml.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPIYAML())
	if err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	return doc, nil
}
