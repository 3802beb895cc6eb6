package verify

// Delegation tokens (CONTRACT.md "Delegation tokens"; byte layout and recipe in
// docs/delegation-tokens.md). A token carries two plain Ed25519 checks that run
// offline with the published service key:
//
//   - order_signature: by a fresh per-grant ("order-bound") key, over JCS(grant);
//   - binding_signature: by the service identity key, over JCS(binding), where
//     binding = {grant_id, order_public_key, service_key_id}.
//
// The first says the grant bytes are the ones the order key signed; the second
// says the service vouches that this order key belongs to this grant id. Neither
// alone is enough: anyone can sign a forged grant with a key of their own, and
// the consistency checks tie the binding to the grant and key actually present.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"
)

// DelegationVersion is the only token version this verifier knows.
const DelegationVersion = "svc-delegation-v1"

// The checks VerifyToken runs. A failed token error matches (errors.Is) every
// check that failed, so callers and tests can tell them apart.
var (
	// ErrMalformedToken: not a v1 token at all (bad JSON, missing or unknown
	// members, wrong types, bad base64, wrong key or signature length, unknown
	// version). No signature check is attempted.
	ErrMalformedToken = errors.New("malformed delegation token")
	// ErrOrderSignature: order_signature does not verify under order_public_key
	// over JCS(grant), so the grant is not the one the order key signed.
	ErrOrderSignature = errors.New("order signature does not verify over the grant")
	// ErrBindingSignature: binding_signature does not verify under the service
	// key over JCS(binding).
	ErrBindingSignature = errors.New("binding signature does not verify under the service key")
	// ErrBindingMismatch: the binding names another grant id, order key or
	// service key id than the token carries.
	ErrBindingMismatch = errors.New("binding does not match the token")
	// ErrServiceKeyMismatch: the token's service_key_id is not the id of the
	// service key the caller verifies with.
	ErrServiceKeyMismatch = errors.New("token names another service key")
)

// DelegationBinding is what the service identity signs: it binds one order key
// to one grant id under one service key.
type DelegationBinding struct {
	GrantID        string `json:"grant_id"`
	OrderPublicKey string `json:"order_public_key"`
	ServiceKeyID   string `json:"service_key_id"`
}

// DelegationToken is the token as it travels (the `delegation` member of a
// grant response). Grant is the Grant record's JSON, kept opaque so that every
// byte of it, present and future fields alike, is covered by order_signature.
// Keys and signatures are standard base64.
type DelegationToken struct {
	Version          string            `json:"version"`
	Grant            json.RawMessage   `json:"grant"`
	OrderPublicKey   string            `json:"order_public_key"`
	OrderSignature   string            `json:"order_signature"`
	Binding          DelegationBinding `json:"binding"`
	BindingSignature string            `json:"binding_signature"`
	ServiceKeyID     string            `json:"service_key_id"`
}

// TokenError lists every check that failed, in the order VerifyToken runs them:
// order signature, binding signature, binding consistency, service key id.
// errors.Is matches each listed sentinel.
type TokenError struct {
	Failures []error
}

func (e *TokenError) Error() string {
	msgs := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		msgs[i] = f.Error()
	}
	return "delegation token does not verify: " + strings.Join(msgs, "; ")
}

func (e *TokenError) Unwrap() []error { return e.Failures }

// ServiceKeyID names a service identity key: "svc-" followed by the first 16
// lowercase hex digits (8 bytes) of SHA-256 over the 32 raw key bytes. The same
// id is the key_id of GET /v1/delegation/public-key and every token's
// service_key_id. It names a key; it does not authenticate one — the binding
// signature does.
func ServiceKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "svc-" + hex.EncodeToString(sum[:8])
}

// CanonicalBinding returns JCS(binding), the bytes binding_signature signs. For
// three string members this is
// {"grant_id":"…","order_public_key":"…","service_key_id":"…"}.
func CanonicalBinding(b DelegationBinding) ([]byte, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// tokenMembers are exactly the members of a v1 token.
var tokenMembers = []string{"version", "grant", "order_public_key", "order_signature", "binding", "binding_signature", "service_key_id"}

// VerifyToken checks a delegation token against the service's published
// public key, offline. It returns the token only when every check passes:
//
//  1. order_signature verifies under order_public_key over JCS(grant);
//  2. binding_signature verifies under servicePublicKey over JCS(binding);
//  3. binding.grant_id equals grant.grant_id, binding.order_public_key equals
//     order_public_key, and binding.service_key_id equals service_key_id;
//  4. service_key_id equals ServiceKeyID(servicePublicKey).
//
// All four run even after one fails, and the *TokenError lists the failures in
// that order, so a changed order_public_key reports ErrOrderSignature first.
// A token that cannot be read as v1 fails with ErrMalformedToken alone.
func VerifyToken(token []byte, servicePublicKey ed25519.PublicKey) (*DelegationToken, error) {
	if len(servicePublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("service public key must be %d bytes, got %d", ed25519.PublicKeySize, len(servicePublicKey))
	}
	p, err := parseToken(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformedToken, err)
	}

	var failures []error
	if !verifyEd25519(p.orderKey, p.canonicalGrant, p.orderSig) {
		failures = append(failures, ErrOrderSignature)
	}
	if !verifyEd25519(servicePublicKey, p.canonicalBinding, p.bindingSig) {
		failures = append(failures, ErrBindingSignature)
	}
	b := p.tok.Binding
	var mismatched []string
	if b.GrantID != p.grantID {
		mismatched = append(mismatched, fmt.Sprintf("grant_id %q, grant has %q", b.GrantID, p.grantID))
	}
	if b.OrderPublicKey != p.tok.OrderPublicKey {
		mismatched = append(mismatched, "order_public_key differs from the token's")
	}
	if b.ServiceKeyID != p.tok.ServiceKeyID {
		mismatched = append(mismatched, fmt.Sprintf("service_key_id %q, token has %q", b.ServiceKeyID, p.tok.ServiceKeyID))
	}
	if len(mismatched) > 0 {
		failures = append(failures, fmt.Errorf("%w: binding %s", ErrBindingMismatch, strings.Join(mismatched, "; ")))
	}
	if want := ServiceKeyID(servicePublicKey); p.tok.ServiceKeyID != want {
		failures = append(failures, fmt.Errorf("%w: token has %q, the key given is %q", ErrServiceKeyMismatch, p.tok.ServiceKeyID, want))
	}
	if len(failures) > 0 {
		return nil, &TokenError{Failures: failures}
	}
	return &p.tok, nil
}

// parsedToken is a token read strictly, with the bytes the checks need.
type parsedToken struct {
	tok              DelegationToken
	grantID          string
	canonicalGrant   []byte
	canonicalBinding []byte
	orderKey         ed25519.PublicKey
	orderSig         []byte
	bindingSig       []byte
}

// parseToken reads exactly the v1 layout. It is strict so that what an auditor
// canonicalises by hand is what was checked: duplicate keys anywhere, unknown
// or missing members, non-canonical base64 and a binding that is not exactly
// three strings are all refused.
func parseToken(token []byte) (*parsedToken, error) {
	// JCS refuses invalid JSON and duplicate object keys at any depth, so no
	// two readers of the same token can see different members.
	if _, err := jcs.Transform(token); err != nil {
		return nil, fmt.Errorf("not canonicalisable JSON: %v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(token, &members); err != nil || members == nil {
		return nil, errors.New("not a JSON object")
	}
	for _, name := range tokenMembers {
		if _, ok := members[name]; !ok {
			return nil, fmt.Errorf("member %s is missing", name)
		}
	}
	for name := range members {
		if !slices.Contains(tokenMembers, name) {
			return nil, fmt.Errorf("unknown member %q", name)
		}
	}

	var p parsedToken
	str := func(name string, dst *string) error {
		if err := json.Unmarshal(members[name], dst); err != nil || bytes.Equal(bytes.TrimSpace(members[name]), []byte("null")) {
			return fmt.Errorf("%s must be a string", name)
		}
		return nil
	}
	for name, dst := range map[string]*string{
		"version": &p.tok.Version, "order_public_key": &p.tok.OrderPublicKey, "order_signature": &p.tok.OrderSignature,
		"binding_signature": &p.tok.BindingSignature, "service_key_id": &p.tok.ServiceKeyID,
	} {
		if err := str(name, dst); err != nil {
			return nil, err
		}
	}
	if p.tok.Version != DelegationVersion {
		return nil, fmt.Errorf("version %q is not %s", p.tok.Version, DelegationVersion)
	}

	// The grant: any JSON object with a string grant_id; every other member is
	// opaque and covered by the order signature through JCS.
	p.tok.Grant = members["grant"]
	var grant map[string]json.RawMessage
	if err := json.Unmarshal(p.tok.Grant, &grant); err != nil || grant == nil {
		return nil, errors.New("grant must be a JSON object")
	}
	if err := json.Unmarshal(grant["grant_id"], &p.grantID); err != nil || p.grantID == "" {
		return nil, errors.New("grant.grant_id must be a non-empty string")
	}
	var err error
	if p.canonicalGrant, err = jcs.Transform(p.tok.Grant); err != nil {
		return nil, fmt.Errorf("grant: %v", err)
	}

	// The binding: exactly {grant_id, order_public_key, service_key_id}, all
	// strings. Its signature is checked over JCS of the bytes as sent; decoding
	// and re-canonicalising must give the same bytes, or the binding had extra,
	// differently-cased or non-string members.
	if p.canonicalBinding, err = jcs.Transform(members["binding"]); err != nil {
		return nil, fmt.Errorf("binding: %v", err)
	}
	if err := json.Unmarshal(members["binding"], &p.tok.Binding); err != nil {
		return nil, errors.New("binding must be an object of three strings")
	}
	if again, err := CanonicalBinding(p.tok.Binding); err != nil || !bytes.Equal(again, p.canonicalBinding) {
		return nil, errors.New("binding must be exactly {grant_id, order_public_key, service_key_id}, all strings")
	}

	if p.orderKey, err = decodeB64("order_public_key", p.tok.OrderPublicKey, ed25519.PublicKeySize); err != nil {
		return nil, err
	}
	if p.orderSig, err = decodeB64("order_signature", p.tok.OrderSignature, ed25519.SignatureSize); err != nil {
		return nil, err
	}
	if p.bindingSig, err = decodeB64("binding_signature", p.tok.BindingSignature, ed25519.SignatureSize); err != nil {
		return nil, err
	}
	return &p, nil
}

// decodeB64 decodes canonical standard base64 of exactly n bytes. Canonical
// (re-encoding gives the same string) because keys are compared as strings
// between the token and its binding.
func decodeB64(name, s string, n int) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("%s is not canonical standard base64", name)
	}
	if len(b) != n {
		return nil, fmt.Errorf("%s must be %d bytes, got %d", name, n, len(b))
	}
	return b, nil
}
