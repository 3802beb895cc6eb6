// Command genjson writes api/openapi.json, the document the service serves,
// from api/openapi.yaml after validating it: `go generate ./api`.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/auditchain/auditchain/api/openapidoc"
)

func main() {
	doc, err := openapidoc.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile("openapi.json", append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
