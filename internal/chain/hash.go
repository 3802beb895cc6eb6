// Package chain is the service side of the record's cryptography. The rules
// themselves live in the public pkg/verify, so the service and an offline
// verifier can never disagree about a hash or a signature.
package chain

import (
	"encoding/hex"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

// HashedEvent is the hashed part of an event; see verify.HashedEvent.
type HashedEvent = verify.HashedEvent

var (
	HashBytes            = verify.HashBytes
	VerifyEventSignature = verify.VerifyEventSignature
	ParsePublicKey       = verify.ParsePublicKey
	Fingerprint          = verify.Fingerprint
	ErrBadSignature      = verify.ErrBadSignature
)

// Canonical returns the RFC 8785 canonical form of a JSON document.
func Canonical(doc []byte) ([]byte, error) { return jcs.Transform(doc) }

// PayloadHash returns an event's payload_hash (CONTRACT.md "The record"). It
// takes verify.EventHash's direct canonical encoder, which a differential test
// and a fuzz target hold equal to verify.PayloadHash: on the append path
// marshalling the whole event and re-parsing it for RFC 8785 was the largest
// CPU cost of a batch row.
func PayloadHash(e *HashedEvent) (string, error) {
	_, h, err := verify.EventHash(e, nil)
	if err != nil {
		return "", err
	}
	return verify.HashPrefix + hex.EncodeToString(h[:]), nil
}
