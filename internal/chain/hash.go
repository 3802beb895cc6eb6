// Package chain is the service side of the record's cryptography. The rules
// themselves live in the public pkg/verify, so the service and an offline
// verifier can never disagree about a hash or a signature.
package chain

import (
	"encoding/hex"

	"github.com/auditchain/auditchain/pkg/verify"
)

// PayloadHash returns an event's payload_hash (CONTRACT.md "The record"). It
// takes verify.EventHash's direct canonical encoder, which a differential test
// and a fuzz target hold equal to verify.PayloadHash: on the append path
// marshalling the whole event and re-parsing it for RFC 8785 was the largest
// CPU cost of a batch row.
func PayloadHash(e *verify.HashedEvent) (string, error) {
	_, h, err := verify.EventHash(e, nil)
	if err != nil {
		return "", err
	}
	return verify.HashPrefix + hex.EncodeToString(h[:]), nil
}
