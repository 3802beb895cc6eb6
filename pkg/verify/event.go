// Package verify checks auditchain records offline: event payload hashes,
// signatures and links. It depends only on the standard library and an RFC 8785
// canonicaliser, so an auditor can vendor it without the service.
package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
)

// HashedEvent is exactly the object whose RFC 8785 canonical JSON is hashed into
// payload_hash (CONTRACT.md "The record"): absent fields are null and ts is the
// stored value. Server bookkeeping (api_key_id, user_id, machine_sequence, the
// X-SVC-Surface header) is deliberately outside it.
type HashedEvent struct {
	EventID      string          `json:"event_id"`
	EventType    string          `json:"event_type"`
	Sequence     int64           `json:"sequence"`
	PrevHash     *string         `json:"prev_hash"`
	Raw          json.RawMessage `json:"raw"`
	Decision     *string         `json:"decision"`
	Tool         *string         `json:"tool"`
	MachineID    *string         `json:"machine_id"`
	ParentID     *string         `json:"parent_id"`
	TS           *string         `json:"ts"`
	Signature    *string         `json:"signature"`
	SignatureKey *string         `json:"signature_key"`
}

// HashPrefix marks payload hashes (SPEC.md: form sha256:<hex>).
const HashPrefix = "sha256:"

// PayloadHash returns "sha256:" + hex(SHA-256(JCS(e))). It takes EventHash's
// direct canonical encoder, which TestEventHashMatchesCanonicalEvent and
// FuzzEventHash hold equal to CanonicalEvent, the reference.
func PayloadHash(e *HashedEvent) (string, error) {
	_, h, err := EventHash(e, nil)
	if err != nil {
		return "", err
	}
	return HashPrefix + hex.EncodeToString(h[:]), nil
}

// CanonicalEvent returns the RFC 8785 bytes that PayloadHash hashes.
func CanonicalEvent(e *HashedEvent) ([]byte, error) {
	c := *e
	if len(c.Raw) == 0 {
		c.Raw = json.RawMessage("null")
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return jcs.Transform(b)
}

// HashBytes decodes a "sha256:<hex>" payload hash into its 32 bytes (the Merkle leaf).
func HashBytes(h string) ([]byte, error) {
	if len(h) != len(HashPrefix)+64 || h[:len(HashPrefix)] != HashPrefix {
		return nil, fmt.Errorf("payload hash %q is not sha256:<64 hex>", h)
	}
	return hex.DecodeString(h[len(HashPrefix):])
}

// ErrBadSignature is returned when an event signature does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// VerifyEventSignature checks the CONTRACT.md event signature: standard base64
// Ed25519 over the RFC 8785 canonical bytes of raw (raw absent is JSON null).
func VerifyEventSignature(pub ed25519.PublicKey, raw json.RawMessage, signatureB64 string) error {
	msg, err := signedMessage(raw)
	if err != nil {
		return ErrBadSignature
	}
	return verifySignedMessage(pub, msg, signatureB64)
}

// signedMessage returns the bytes an event signature signs: the RFC 8785
// form of raw (null when absent). A raw that is already canonical — the usual
// case, as clients sign the canonical bytes and send them — is returned as it
// is: isCanonicalJSON accepts only input jcs.Transform leaves unchanged
// (FuzzIsCanonicalJSON), and skipping jcs saves most of the check's
// allocations and several microseconds.
func signedMessage(raw json.RawMessage) ([]byte, error) {
	switch {
	case len(raw) == 0:
		return []byte("null"), nil
	case isCanonicalJSON(raw):
		return raw, nil
	}
	return canonicalJSON(raw)
}

// verifySignedMessage checks a standard-base64 Ed25519 signature over msg,
// the canonical raw signedMessage returns; a weak key (CheckPublicKey)
// verifies nothing.
func verifySignedMessage(pub ed25519.PublicKey, msg []byte, signatureB64 string) error {
	sig, err := base64.StdEncoding.DecodeString(signatureB64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return ErrBadSignature
	}
	if !verifyEd25519(pub, msg, sig) {
		return ErrBadSignature
	}
	return nil
}

// ParsePublicKey decodes a standard-base64 32-byte Ed25519 public key and
// refuses a weak one (CheckPublicKey: small order, non-canonical, off the
// curve).
func ParsePublicKey(b64 string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("public_key is not standard base64")
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public_key must be %d bytes, got %d", ed25519.PublicKeySize, len(b))
	}
	if err := CheckPublicKey(b); err != nil {
		return nil, err
	}
	return ed25519.PublicKey(b), nil
}

// Fingerprint names a public key: "sha256:" + hex of SHA-256 over the raw key bytes.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return HashPrefix + hex.EncodeToString(sum[:])
}
