package verify

import (
	"crypto/ed25519"
	"errors"
	"math/big"
)

// Ed25519 keys a signature may be trusted under.
//
// crypto/ed25519.Verify checks [S]B = R + [k]A for any A that decodes,
// including the eight points of small order: under the identity point
// (AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=) the signature R = identity,
// S = 0 verifies for every message, made without any private key; under the
// others it does for one message in two, four or eight. A verifier must
// refuse such keys, and keys whose encoding is not the canonical one (a y
// coordinate of p or more), which name the same points; the service refuses
// them at registration and every signature check here refuses them too, so
// an offline verifier is never weaker than the service (issue 18).

// ErrWeakKey is returned for an Ed25519 public key of small order, with a
// non-canonical encoding, or off the curve.
var ErrWeakKey = errors.New("public_key is not a usable Ed25519 key: a point of small order, a non-canonical encoding, or no point of the curve")

// smallOrderY are the y coordinates (little-endian, sign bit clear) of the
// eight points of small order: y = 1 (the identity), p-1 (order 2), 0 (two
// points of order 4), and the y of the four points of order 8 and its
// negation.
var smallOrderY = [][32]byte{
	{0x01},
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	{},
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
}

// weakKey reports whether pub is not 32 bytes, encodes y non-canonically
// (y >= p = 2^255-19), or is a point of small order: the checks every
// signature verification runs (byte comparisons, no arithmetic).
func weakKey(pub []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return true
	}
	var y [32]byte
	copy(y[:], pub)
	y[31] &= 0x7f
	if y[31] == 0x7f && y[0] >= 0xed && allFF(y[1:31]) {
		return true // y >= p
	}
	for _, s := range smallOrderY {
		if y == s {
			return true
		}
	}
	return false
}

func allFF(b []byte) bool {
	for _, c := range b {
		if c != 0xff {
			return false
		}
	}
	return true
}

var (
	fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	// curveD is -121665/121666 mod p.
	curveD = func() *big.Int {
		d := new(big.Int).ModInverse(big.NewInt(121666), fieldP)
		d.Mul(d, big.NewInt(-121665))
		return d.Mod(d, fieldP)
	}()
)

// CheckPublicKey returns ErrWeakKey unless pub is a canonical encoding of a
// point of the curve that is not of small order: what a signing key must be.
func CheckPublicKey(pub []byte) error {
	if weakKey(pub) {
		return ErrWeakKey
	}
	// On the curve: x² = (y² - 1) / (d·y² + 1) must have a root mod p (and
	// x = 0 only with the sign bit clear; such y are of small order above).
	le := make([]byte, 32)
	for i := range 32 {
		le[31-i] = pub[i]
	}
	le[0] &= 0x7f
	y := new(big.Int).SetBytes(le)
	y2 := new(big.Int).Mul(y, y)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	v := new(big.Int).Mul(curveD, y2)
	v.Add(v, big.NewInt(1)).Mod(v, fieldP)
	x2 := new(big.Int).ModInverse(v, fieldP)
	if x2 == nil {
		return ErrWeakKey
	}
	x2.Mul(x2, u).Mod(x2, fieldP)
	if x2.Sign() != 0 && big.Jacobi(x2, fieldP) != 1 {
		return ErrWeakKey
	}
	return nil
}

// verifyEd25519 is ed25519.Verify that also refuses a weak key.
func verifyEd25519(pub ed25519.PublicKey, msg, sig []byte) bool {
	return !weakKey(pub) && ed25519.Verify(pub, msg, sig)
}
