package app

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// A machine's event is checked against the machine's signing key twice:
// before the write (preverify), so that Ed25519, the largest CPU cost of an
// append, is not paid on the writer; and under the head's lock, which a key
// registration also takes (recheckSignature), in case the key changed in
// between. Each check read signing_keys: two queries per append, 9 % of the
// server's CPU under load (issue #39, docs/performance.md).
//
// The head row carries the account's signing keys generation (migration
// 038; store.InsertSigningKey bumps it in the registration's transaction),
// so a generation names one set of keys, on any replica. So:
//
//   - preverify takes the machine's key and the generation from memory, or
//     reads both from committed state in one statement and keeps them; a
//     signature the kept key refuses is checked again against the key read
//     anew (the machine may have a new key), so a kept key never refuses;
//   - under the lock, a head at the generation preverify used means the
//     key it verified with (or the absence of one) is still the machine's:
//     nothing is read. Any other generation, or one not known, reads the key
//     in the transaction as before and drops the kept entry, so that the
//     next preverify reads it again.
//
// An entry is only ever filled from committed state, so a generation it
// names has committed with those keys: a registration that rolled back
// leaves nothing behind. A stale entry costs a read under the lock, never a
// wrong answer.

// signingKeyCacheEntries bounds the machines whose key is kept.
const signingKeyCacheEntries = 16384

// keptKey is a machine's current key, or its absence (found false).
type keptKey struct {
	found bool
	key   store.SigningKey
}

// machineRef names a machine of an account: the key of the kept keys.
type machineRef struct{ userID, machineID string }

// verifiedWith is what preverify checked an event against: the key's
// fingerprint ("" when the machine had no key) at a signing keys generation.
type verifiedWith struct {
	fingerprint string
	gen         int64
}

// preverify checks in's signature against the machine's current key, if
// any, as known at a generation (above).
func (a *App) preverify(ctx context.Context, userID string, in *api.EventInput) (verifiedWith, error) {
	if in.MachineID == nil {
		return verifiedWith{}, nil
	}
	ref := machineRef{userID, *in.MachineID}
	if k, gen, ok := a.signingKeys.get(ref); ok {
		v, err := checkAgainst(k, gen, in)
		if err == nil {
			return v, nil
		}
		// The kept key may have been replaced: a client signs with its new
		// key as soon as the registration answered. Only a key read now may
		// refuse the event.
		a.signingKeys.drop(ref, gen)
	}
	key, found, gen, err := a.store.SigningKeyAtGen(ctx, userID, *in.MachineID)
	if err != nil {
		return verifiedWith{}, err
	}
	k := keptKey{found: found, key: key}
	a.signingKeys.put(ref, gen, k)
	return checkAgainst(k, gen, in)
}

// checkAgainst verifies in's signature by k, the machine's key (or its
// absence) at gen.
func checkAgainst(k keptKey, gen int64, in *api.EventInput) (verifiedWith, error) {
	if !k.found {
		return verifiedWith{gen: gen}, nil
	}
	return verifiedWith{fingerprint: k.key.Fingerprint, gen: gen}, verifySignature(k.key, in)
}

// recheckSignature, under the head's lock (which a key registration also
// takes), verifies in again if the machine's key is no longer the one
// preverify used.
func (a *App) recheckSignature(ctx context.Context, q store.Querier, head store.Head, userID string, in *api.EventInput, v verifiedWith) error {
	if head.SigningKeysGen != 0 && head.SigningKeysGen == v.gen {
		return nil // the account's keys are the ones preverify saw
	}
	a.signingKeys.drop(machineRef{userID, *in.MachineID}, v.gen)
	k, err := a.store.CurrentSigningKey(ctx, q, userID, *in.MachineID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if v.fingerprint != "" { // the key vanished between check and lock: keys are never deleted
			return fmt.Errorf("signing key of %s disappeared", *in.MachineID)
		}
		return nil
	case err != nil:
		return err
	case k.Fingerprint != v.fingerprint:
		return verifySignature(k, in)
	}
	return nil
}

var (
	errSignature = &domain.Error{Code: domain.CodeSignatureInvalid,
		Detail: "this machine registered a signing key and the event's signature does not verify over raw"}
	errWeakSigningKey = &domain.Error{Code: domain.CodeSignatureInvalid,
		Detail: "this machine's registered signing key is not a usable Ed25519 key (small order or non-canonical): no signature verifies under it; register a new key"}
	errSignatureMissing = &domain.Error{Code: domain.CodeSignatureInvalid,
		Detail: "the event carries no signature: this machine registered a signing key, so each of its events must carry one " +
			"(standard base64 Ed25519 over the RFC 8785 bytes of raw)"}
)

func verifySignature(k store.SigningKey, in *api.EventInput) error {
	if in.Signature == nil {
		return errSignatureMissing.With("machine_id", k.MachineID)
	}
	pub, err := verify.ParsePublicKey(k.PublicKey)
	if err != nil {
		// A key stored before weak keys were refused verifies nothing.
		return errWeakSigningKey.With("machine_id", k.MachineID)
	}
	if verify.VerifyEventSignature(ed25519.PublicKey(pub), in.Raw, *in.Signature) != nil {
		return errSignature.With("machine_id", k.MachineID)
	}
	return nil
}
