package verify_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

// BenchmarkVerifyEventSignature is the signed append's largest CPU cost:
// canonicalise raw (RFC 8785) and check Ed25519.
func BenchmarkVerifyEventSignature(b *testing.B) {
	seed := make([]byte, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	raw := json.RawMessage(`{"tool_input":{"path":"/etc/hosts","flags":["-n"]},"cmd_hash":"sha256:00ff","n":42}`)
	canon, err := jcs.Transform(raw)
	if err != nil {
		b.Fatal(err)
	}
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, canon))
	pub := priv.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if err := verify.VerifyEventSignature(pub, raw, sig); err != nil {
			b.Fatal(err)
		}
	}
}

// The signature covers the canonical form of raw, whether raw arrives in it
// (checked without jcs) or not (canonicalised first).
func TestVerifyEventSignatureCanonicalAndNot(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := priv.Public().(ed25519.PublicKey)
	for _, tc := range []struct {
		name, raw, signed string
		want              error
	}{
		{"canonical raw", `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, nil},
		{"raw needing jcs", `{"b": "x", "a": 1.0}`, `{"a":1,"b":"x"}`, nil},
		{"absent raw signs null", ``, `null`, nil},
		{"signature over the non-canonical bytes", `{"b":"x","a":1}`, `{"b":"x","a":1}`, verify.ErrBadSignature},
		{"other content", `{"a":2,"b":"x"}`, `{"a":1,"b":"x"}`, verify.ErrBadSignature},
		{"invalid raw", `{"a":`, `{"a":`, verify.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(tc.signed)))
			if err := verify.VerifyEventSignature(pub, json.RawMessage(tc.raw), sig); err != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if err := verify.VerifyEventSignature(pub, json.RawMessage(`1`), "not base64"); err != verify.ErrBadSignature {
		t.Fatalf("malformed signature: got %v", err)
	}
}
