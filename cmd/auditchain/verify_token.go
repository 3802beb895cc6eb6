package main

// `auditchain verify token FILE --service-key KEY` checks a delegation token
// offline (CONTRACT.md "Delegation tokens"; recipe in docs/delegation-tokens.md).
// It is a thin wrapper around verify.VerifyToken that prints a JSON report and
// fails naming each check that did not pass.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/auditchain/auditchain/pkg/verify"
)

const verifyTokenUsage = `usage: auditchain verify token FILE --service-key KEY

FILE holds a delegation token: the "delegation" object of a POST /v1/grants
response, or that whole response.
KEY is the service's published public key: the standard base64 of its 32 bytes
(public_key of GET /v1/delegation/public-key), or the path of a file holding
either that base64 text or the whole GET /v1/delegation/public-key document.

Prints a JSON report; exits non-zero unless every check passes.
`

// The checks, in the order VerifyToken runs them (docs/delegation-tokens.md).
const (
	checkFormat           = "format"
	checkOrderSignature   = "order_signature"
	checkBindingSignature = "binding_signature"
	checkBindingMatch     = "binding_match"
	checkServiceKeyID     = "service_key_id"
)

type tokenCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// tokenReport is what verify token prints.
type tokenReport struct {
	Valid        bool            `json:"valid"`
	File         string          `json:"file"`
	ServiceKeyID string          `json:"service_key_id"` // of the key given
	Checks       []tokenCheck    `json:"checks"`
	Failed       []string        `json:"failed"`
	GrantID      string          `json:"grant_id,omitempty"`
	Grant        json.RawMessage `json:"grant,omitempty"` // the signed grant, when it verified
}

func verifyTokenCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	file, pub, _, err := verifyArgs("token", verifyTokenUsage, args, stdout, stderr)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("verify token: %w", err)
	}

	rep := checkToken(tokenOf(data), pub)
	rep.File = file
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return err
	}
	if !rep.Valid {
		return fmt.Errorf("verify token: %s does not verify: failed %s", file, strings.Join(rep.Failed, ", "))
	}
	return nil
}

// checkToken runs verify.VerifyToken and reports each check by name.
func checkToken(token []byte, pub ed25519.PublicKey) tokenReport {
	rep := tokenReport{ServiceKeyID: verify.ServiceKeyID(pub), Failed: []string{}}
	tok, err := verify.VerifyToken(token, pub)
	if errors.Is(err, verify.ErrMalformedToken) || (err != nil && !errors.As(err, new(*verify.TokenError))) {
		rep.Checks = []tokenCheck{{Check: checkFormat, Detail: err.Error()}}
		rep.Failed = []string{checkFormat}
		return rep
	}
	rep.Checks = []tokenCheck{{Check: checkFormat, OK: true}}
	var te *verify.TokenError
	errors.As(err, &te)
	for _, c := range []struct {
		name     string
		sentinel error
	}{
		{checkOrderSignature, verify.ErrOrderSignature},
		{checkBindingSignature, verify.ErrBindingSignature},
		{checkBindingMatch, verify.ErrBindingMismatch},
		{checkServiceKeyID, verify.ErrServiceKeyMismatch},
	} {
		check := tokenCheck{Check: c.name, OK: true}
		if te != nil {
			for _, f := range te.Failures {
				if errors.Is(f, c.sentinel) {
					check.OK, check.Detail = false, f.Error()
					rep.Failed = append(rep.Failed, c.name)
				}
			}
		}
		rep.Checks = append(rep.Checks, check)
	}
	if tok != nil {
		rep.Valid, rep.Grant, rep.GrantID = true, tok.Grant, tok.Binding.GrantID
	}
	return rep
}

// tokenOf accepts a token or a whole grant response (its "delegation" member).
func tokenOf(data []byte) []byte {
	var resp struct {
		Delegation json.RawMessage `json:"delegation"`
	}
	if json.Unmarshal(data, &resp) == nil && len(resp.Delegation) > 0 && !bytes.Equal(resp.Delegation, []byte("null")) {
		return resp.Delegation
	}
	return data
}
