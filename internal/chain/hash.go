// Package chain is the service side of the record's cryptography. The rules
// themselves live in the public pkg/verify, so the service and an offline
// verifier can never disagree about a hash or a signature.
package chain

import (
	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

// HashedEvent is the hashed part of an event; see verify.HashedEvent.
type HashedEvent = verify.HashedEvent

var (
	PayloadHash          = verify.PayloadHash
	HashBytes            = verify.HashBytes
	VerifyEventSignature = verify.VerifyEventSignature
	ParsePublicKey       = verify.ParsePublicKey
	Fingerprint          = verify.Fingerprint
	ErrBadSignature      = verify.ErrBadSignature
)

// Canonical returns the RFC 8785 canonical form of a JSON document.
func Canonical(doc []byte) ([]byte, error) { return jcs.Transform(doc) }
