package bench

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/verify"
)

func TestCanonicalEventMatchesVerifier(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	pool := newRawPool(priv)
	for i, raw := range pool.raws[:3] {
		canon, err := jcs.Transform(raw)
		if err != nil || string(canon) != string(raw) {
			t.Fatalf("raw %d is not canonical: %s vs %s (%v)", i, raw, canon, err)
		}
		if err := verify.VerifyEventSignature(pub, raw, string(pool.sigs[i])); err != nil {
			t.Fatalf("raw %d signature: %v", i, err)
		}
	}
	prev := []byte("sha256:" + "ab12000000000000000000000000000000000000000000000000000000000000")
	for _, e := range []eventSpec{
		{id: []byte("evt-x-1-0"), seq: 0, raw: pool.raws[0], tool: "bash", decision: "allow"},
		{id: []byte("evt-x-1-7"), seq: 7, prevHash: prev, raw: pool.raws[1], tool: "grep", decision: "deny",
			machine: "bench-m", sig: pool.sigs[1], ts: "2026-01-02T03:04:05.123456+00:00"},
	} {
		got := appendCanonical(nil, &e)
		var he verify.HashedEvent
		if err := json.Unmarshal(got, &he); err != nil {
			t.Fatalf("our bytes do not decode: %v\n%s", err, got)
		}
		want, err := verify.CanonicalEvent(&he)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("canonical mismatch\n got %s\nwant %s", got, want)
		}
		h, _ := verify.PayloadHash(&he)
		if string(appendHashOf(nil, got)) != h {
			t.Fatalf("hash %s, verifier %s", appendHashOf(nil, got), h)
		}
	}
}
