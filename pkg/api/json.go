package api

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal as the service writes JSON: without HTML
// escaping, since the API answers JSON, never HTML ("<", ">" and "&" are
// written as they are: a detail reads sha256:<64 lowercase hex>, not
// sha256:\u003c64...).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
