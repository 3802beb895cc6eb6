// Package delegation issues delegation tokens (CONTRACT.md "Delegation
// tokens"). The layout and the checks are pkg/verify's; this package only
// signs. docs/delegation-tokens.md describes the bytes for auditors.
package delegation

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

// IssueToken returns the delegation token JSON for one grant: grantJSON is the
// Grant record as the grant response shows it (epoch included), service is the
// service identity key, and rand supplies the 32-byte seed of the order-bound
// key (crypto/rand.Reader in the service; a fixed reader in tests).
//
// The embedded grant is JCS(grantJSON), exactly the bytes order_signature
// signs, so a grant re-serialised elsewhere still verifies and the token shows
// the signed bytes as they are.
//
// The order-bound private key is wiped once the grant is signed and never
// stored or returned. It exists to sign one grant: the binding signature ties
// its public half to that grant id, so a second signature by it would be
// worthless to an honest issuer and, if it leaked, valuable to a forger, who
// could sign a changed grant under a key the service has bound. Nothing ever
// needs it again, so there is nothing to keep.
func IssueToken(grantJSON []byte, service ed25519.PrivateKey, rand io.Reader) ([]byte, error) {
	if len(service) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("issue token: service key must be %d bytes, got %d", ed25519.PrivateKeySize, len(service))
	}
	grant, err := jcs.Transform(grantJSON)
	if err != nil {
		return nil, fmt.Errorf("issue token: grant is not canonicalisable JSON: %w", err)
	}
	grantID, err := tokenGrantID(grant)
	if err != nil {
		return nil, fmt.Errorf("issue token: %w", err)
	}

	// ed25519.GenerateKey ignores its reader from Go 1.26 on, so the seed is
	// read here and the key derived from it: the injected rand decides the key.
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, fmt.Errorf("issue token: order key entropy: %w", err)
	}
	order := ed25519.NewKeyFromSeed(seed)
	clear(seed)
	orderPub := base64.StdEncoding.EncodeToString(order[ed25519.SeedSize:])
	orderSig := ed25519.Sign(order, grant)
	clear(order)

	binding := verify.DelegationBinding{
		GrantID:        grantID,
		OrderPublicKey: orderPub,
		ServiceKeyID:   verify.ServiceKeyID(service.Public().(ed25519.PublicKey)),
	}
	canonBinding, err := verify.CanonicalBinding(binding)
	if err != nil {
		return nil, fmt.Errorf("issue token: binding: %w", err)
	}
	tok := verify.DelegationToken{
		Version:          verify.DelegationVersion,
		Grant:            grant,
		OrderPublicKey:   orderPub,
		OrderSignature:   base64.StdEncoding.EncodeToString(orderSig),
		Binding:          binding,
		BindingSignature: base64.StdEncoding.EncodeToString(ed25519.Sign(service, canonBinding)),
		ServiceKeyID:     binding.ServiceKeyID,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the grant byte-identical to what was signed
	if err := enc.Encode(tok); err != nil {
		return nil, fmt.Errorf("issue token: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// tokenGrantID reads grant_id with an exact, case-sensitive key, as
// verify.VerifyToken does.
func tokenGrantID(grant []byte) (string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(grant, &members); err != nil || members == nil {
		return "", errors.New("grant must be a JSON object")
	}
	var id string
	if err := json.Unmarshal(members["grant_id"], &id); err != nil || id == "" {
		return "", errors.New("grant.grant_id must be a non-empty string")
	}
	return id, nil
}
