// Package api embeds the OpenAPI 3.1 document of the service: openapi.yaml
// as maintained, and openapi.json generated from it (`go generate ./api`),
// which GET /v1/openapi.json serves. TestOpenAPIJSONIsGenerated fails when
// the two drift.
package api

import _ "embed"

//go:generate go run ./internal/genjson

//go:embed openapi.yaml
var openapiYAML []byte

//go:embed openapi.json
var openapiJSON []byte

// OpenAPIYAML is the document as maintained.
func OpenAPIYAML() []byte { return openapiYAML }

// OpenAPIJSON is the document served at GET /v1/openapi.json, checked when
// generated and by TestOpenAPIJSONIsGenerated.
func OpenAPIJSON() []byte { return openapiJSON }
