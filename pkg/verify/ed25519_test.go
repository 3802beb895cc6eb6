package verify_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

// point encodes a curve point by its y (little-endian) and the sign of x.
func point(y [32]byte, negX bool) []byte {
	if negX {
		y[31] |= 0x80
	}
	return y[:]
}

var (
	yOne   = [32]byte{0x01}
	yMinus = [32]byte{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	yZero = [32]byte{}
	y8    = [32]byte{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05}
	y8neg = [32]byte{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a}
	yP = [32]byte{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
	yP1 = [32]byte{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}
)

// torsionPoints are the eight points of small order: the identity, the
// point of order 2, the two of order 4 and the four of order 8.
var torsionPoints = map[string][]byte{
	"identity (AQAA…)":        point(yOne, false),
	"order 2":                 point(yMinus, false),
	"order 4 (the zero key)":  point(yZero, false),
	"order 4, negative x":     point(yZero, true),
	"order 8":                 point(y8, false),
	"order 8, negative x":     point(y8, true),
	"order 8, -y":             point(y8neg, false),
	"order 8, -y, negative x": point(y8neg, true),
}

// nonCanonical encode small-order points in another way.
var nonCanonical = map[string][]byte{
	"y = p (zero)":           point(yP, false),
	"y = p+1 (the identity)": point(yP1, false),
	"identity with x = -0":   point(yOne, true),
	"order 2 with x = -0":    point(yMinus, true),
}

// forged is the signature R = identity, S = 0: made without any private key.
func forged() []byte {
	sig := make([]byte, 64)
	sig[0] = 0x01
	return sig
}

func rawFor(i int) (json.RawMessage, []byte) {
	raw := json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
	canon, _ := jcs.Transform(raw)
	return raw, canon
}

// Under each point of small order crypto/ed25519 accepts the forged
// signature for some messages (for every message under the identity): the
// points are what they claim. The verifier refuses the keys and every
// signature under them.
func TestSmallOrderKeysVerifyNothing(t *testing.T) {
	sig := b64(forged())
	for name, pub := range torsionPoints {
		t.Run(name, func(t *testing.T) {
			if err := verify.CheckPublicKey(pub); !errors.Is(err, verify.ErrWeakKey) {
				t.Fatalf("CheckPublicKey = %v", err)
			}
			if _, err := verify.ParsePublicKey(b64(pub)); err == nil {
				t.Fatal("ParsePublicKey took it")
			}
			accepted := 0
			for i := range 64 {
				raw, canon := rawFor(i)
				if ed25519.Verify(pub, canon, forged()) {
					accepted++
				}
				if verify.VerifyEventSignature(pub, raw, sig) == nil {
					t.Fatalf("message %d: the forged signature verifies", i)
				}
			}
			if accepted == 0 || (name == "identity (AQAA…)" && accepted != 64) {
				t.Fatalf("crypto/ed25519 took the forged signature for %d of 64 messages: not a point of small order?", accepted)
			}
		})
	}
	if b64(torsionPoints["identity (AQAA…)"]) != "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" {
		t.Fatal("the identity is not the key of issue 18")
	}
	for name, pub := range nonCanonical {
		if err := verify.CheckPublicKey(pub); !errors.Is(err, verify.ErrWeakKey) {
			t.Errorf("%s: CheckPublicKey = %v", name, err)
		}
		raw, _ := rawFor(0)
		if verify.VerifyEventSignature(pub, raw, sig) == nil {
			t.Errorf("%s: the forged signature verifies", name)
		}
	}
}

// Keys of real key pairs are taken; about half of all 32-byte strings are no
// point of the curve and are refused.
func TestCheckPublicKeyOnTheCurve(t *testing.T) {
	for range 32 {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		if err := verify.CheckPublicKey(pub); err != nil {
			t.Fatalf("a generated key: %v", err)
		}
		raw, canon := rawFor(1)
		if err := verify.VerifyEventSignature(pub, raw, b64(ed25519.Sign(priv, canon))); err != nil {
			t.Fatalf("a real signature: %v", err)
		}
	}
	off := 0
	for range 400 {
		b := make([]byte, 32)
		rand.Read(b)
		if verify.CheckPublicKey(b) != nil {
			off++
		}
	}
	if off < 120 || off > 280 {
		t.Fatalf("%d of 400 random strings refused, want about half", off)
	}
}

// An export whose machine rotated to a small-order key, with events carrying
// the forged signature, fails offline verification: the verifier is not
// weaker than the service (crypto/ed25519 alone counted them verified).
func TestExportWithASmallOrderKeyFails(t *testing.T) {
	identity := torsionPoints["identity (AQAA…)"]
	c := chainRotatingTo(t, identity, func([]byte) []byte { return forged() })
	_, err := verify.VerifyExport(strings.NewReader(string(c.export(t, 0, int64(len(c.events))))), servicePub)
	if err == nil || !strings.Contains(err.Error(), "not a usable Ed25519 key") {
		t.Fatalf("VerifyExport = %v, want the weak key refused", err)
	}
}
