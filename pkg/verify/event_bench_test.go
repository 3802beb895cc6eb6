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
