package delegation_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/delegation"
	"github.com/auditchain/auditchain/pkg/verify"
)

// canonicalGrant is a Grant record written out by hand in RFC 8785 form: keys
// sorted by code unit at every level, no whitespace, integers plain.
const canonicalGrant = `{"action":"granted","allowed_tools":["read_file","shell"],` +
	`"created_at":"2026-03-01T12:00:00+00:00",` +
	`"epoch":{"anchor":"2025-01-01","date_utc":"2026-03-01","epoch_index":424,` +
	`"phase":{"accumulated_phase":"14.357993","cycle_number":14,"epoch_index":424,"scheme":"epoch-accumulation-v1"},` +
	`"quadrant":"q2","scheme":"svc-epoch-v1"},` +
	`"expires_at":"2026-03-02T12:00:00+00:00","grant_id":"g-8f3a2c71","max_tool_calls":25,` +
	`"parent_agent":"orchestrator","subagent":"coder"}`

// grantAsServed is the same grant in field order of SPEC.md, indented, as the
// grant response would marshal it.
const grantAsServed = `{
  "grant_id": "g-8f3a2c71",
  "subagent": "coder",
  "parent_agent": "orchestrator",
  "allowed_tools": ["read_file", "shell"],
  "max_tool_calls": 25,
  "expires_at": "2026-03-02T12:00:00+00:00",
  "created_at": "2026-03-01T12:00:00+00:00",
  "action": "granted",
  "epoch": {
    "anchor": "2025-01-01",
    "date_utc": "2026-03-01",
    "epoch_index": 424,
    "quadrant": "q2",
    "scheme": "svc-epoch-v1",
    "phase": {"accumulated_phase": "14.357993", "cycle_number": 14, "epoch_index": 424, "scheme": "epoch-accumulation-v1"}
  }
}`

func seededKey(label string) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, label)
	return ed25519.NewKeyFromSeed(seed)
}

var serviceKey = seededKey("service identity")

// fixedRand is a reader of the given bytes, repeated; tests use it as the
// order key's entropy.
func fixedRand(b byte) io.Reader { return bytes.NewReader(bytes.Repeat([]byte{b}, 64)) }

func issue(t *testing.T, grant string, r io.Reader) []byte {
	t.Helper()
	tok, err := delegation.IssueToken([]byte(grant), serviceKey, r)
	if err != nil {
		t.Fatalf("IssueToken: %v", err)
	}
	return tok
}

func TestIssueTokenVerifies(t *testing.T) {
	raw := issue(t, grantAsServed, fixedRand(7))
	tok, err := verify.VerifyToken(raw, serviceKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatalf("VerifyToken: %v\n%s", err, raw)
	}
	orderPub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey)
	want := verify.DelegationBinding{
		GrantID:        "g-8f3a2c71",
		OrderPublicKey: base64.StdEncoding.EncodeToString(orderPub),
		ServiceKeyID:   verify.ServiceKeyID(serviceKey.Public().(ed25519.PublicKey)),
	}
	if diff := cmp.Diff(want, tok.Binding); diff != "" {
		t.Errorf("binding (-want +got):\n%s", diff)
	}
	if string(tok.Grant) != canonicalGrant {
		t.Errorf("embedded grant = %s\nwant the canonical bytes %s", tok.Grant, canonicalGrant)
	}
	if tok.ServiceKeyID != want.ServiceKeyID || tok.Version != "svc-delegation-v1" {
		t.Errorf("service_key_id %q version %q", tok.ServiceKeyID, tok.Version)
	}
}

func TestIssueTokenLayout(t *testing.T) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(issue(t, grantAsServed, fixedRand(7)), &members); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(members))
	want := []string{"binding", "binding_signature", "grant", "order_public_key", "order_signature", "service_key_id", "version"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token members (-want +got):\n%s", diff)
	}
}

// TestIssueTokenOrderKeyFromRand: the injected reader decides the order key, one
// fresh key per token, and the private half appears nowhere in the token.
func TestIssueTokenOrderKeyFromRand(t *testing.T) {
	a1 := issue(t, grantAsServed, fixedRand(1))
	a2 := issue(t, grantAsServed, fixedRand(1))
	b := issue(t, grantAsServed, fixedRand(2))
	if !bytes.Equal(a1, a2) {
		t.Error("the same entropy gave two different tokens")
	}
	orderKeyOf := func(raw []byte) string {
		var tok verify.DelegationToken
		if err := json.Unmarshal(raw, &tok); err != nil {
			t.Fatal(err)
		}
		return tok.OrderPublicKey
	}
	if orderKeyOf(a1) == orderKeyOf(b) {
		t.Error("different entropy gave the same order key")
	}
	seed := bytes.Repeat([]byte{1}, 32)
	priv := ed25519.NewKeyFromSeed(seed)
	for _, secret := range [][]byte{seed, priv} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding} {
			if bytes.Contains(a1, []byte(enc.EncodeToString(secret))) {
				t.Fatal("the token carries the order private key")
			}
		}
		if bytes.Contains(a1, []byte(hex.EncodeToString(secret))) {
			t.Fatal("the token carries the order private key in hex")
		}
	}
}

func TestIssueTokenErrors(t *testing.T) {
	tests := []struct {
		name    string
		grant   string
		service ed25519.PrivateKey
		rand    io.Reader
		wantErr error // nil: any error
	}{
		{name: "not JSON", grant: "grant", service: serviceKey, rand: fixedRand(1)},
		{name: "not an object", grant: `["g-1"]`, service: serviceKey, rand: fixedRand(1)},
		{name: "null", grant: `null`, service: serviceKey, rand: fixedRand(1)},
		{name: "no grant_id", grant: `{"subagent":"coder"}`, service: serviceKey, rand: fixedRand(1)},
		{name: "empty grant_id", grant: `{"grant_id":""}`, service: serviceKey, rand: fixedRand(1)},
		{name: "grant_id differently cased", grant: `{"Grant_ID":"g-1"}`, service: serviceKey, rand: fixedRand(1)},
		{name: "duplicate key", grant: `{"grant_id":"g-1","grant_id":"g-2"}`, service: serviceKey, rand: fixedRand(1)},
		{name: "service key too short", grant: canonicalGrant, service: serviceKey[:32], rand: fixedRand(1)},
		{name: "entropy runs out", grant: canonicalGrant, service: serviceKey,
			rand: bytes.NewReader(make([]byte, 31)), wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := delegation.IssueToken([]byte(tt.grant), tt.service, tt.rand)
			if err == nil {
				t.Fatalf("IssueToken succeeded: %s", tok)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestTokenVerifiesWithOnlyEd25519 is what an auditor without this codebase
// does (docs/delegation-tokens.md): fetch the service key, then check both
// signatures with plain Ed25519 over canonical bytes built by hand. No JCS
// library and no package verify are used below the issuing line.
func TestTokenVerifiesWithOnlyEd25519(t *testing.T) {
	raw := issue(t, grantAsServed, fixedRand(9)) // the service's side

	// GET /v1/delegation/public-key, as the service answers it.
	servicePub := serviceKey.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(servicePub)
	publicKeyDoc := `{"key_id":"svc-` + hex.EncodeToString(sum[:])[:16] +
		`","algorithm":"ed25519","public_key":"` + base64.StdEncoding.EncodeToString(servicePub) + `"}`

	// The auditor's side.
	var pk struct {
		KeyID     string `json:"key_id"`
		Algorithm string `json:"algorithm"`
		PublicKey string `json:"public_key"`
	}
	if err := json.Unmarshal([]byte(publicKeyDoc), &pk); err != nil {
		t.Fatal(err)
	}
	var tok struct{ Version, OrderPublicKey, OrderSignature, BindingSignature, ServiceKeyID string }
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		t.Fatal(err)
	}
	for name, dst := range map[string]*string{
		"version": &tok.Version, "order_public_key": &tok.OrderPublicKey, "order_signature": &tok.OrderSignature,
		"binding_signature": &tok.BindingSignature, "service_key_id": &tok.ServiceKeyID,
	} {
		if err := json.Unmarshal(members[name], dst); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	mustB64 := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	if pk.Algorithm != "ed25519" || tok.Version != "svc-delegation-v1" || tok.ServiceKeyID != pk.KeyID {
		t.Fatalf("algorithm %q, version %q, token key %q, published key %q", pk.Algorithm, tok.Version, tok.ServiceKeyID, pk.KeyID)
	}
	if got := string(members["grant"]); got != canonicalGrant {
		t.Errorf("embedded grant\n%s\nis not the hand-canonicalised\n%s", got, canonicalGrant)
	}

	// 1. order_signature: Ed25519 by order_public_key over JCS(grant).
	if !ed25519.Verify(mustB64(tok.OrderPublicKey), []byte(canonicalGrant), mustB64(tok.OrderSignature)) {
		t.Error("order_signature does not verify over the hand-canonicalised grant")
	}
	// 2. binding_signature: Ed25519 by the service key over JCS(binding), the
	//    three members in sorted order.
	binding := `{"grant_id":"g-8f3a2c71","order_public_key":"` + tok.OrderPublicKey +
		`","service_key_id":"` + pk.KeyID + `"}`
	if !bytes.Equal(bytes.TrimSpace(members["binding"]), []byte(binding)) {
		t.Errorf("binding in the token\n%s\nis not\n%s", members["binding"], binding)
	}
	if !ed25519.Verify(mustB64(pk.PublicKey), []byte(binding), mustB64(tok.BindingSignature)) {
		t.Error("binding_signature does not verify over the hand-built binding")
	}
	// A changed grant fails check 1 the same way.
	forged := strings.Replace(canonicalGrant, `"max_tool_calls":25`, `"max_tool_calls":26`, 1)
	if ed25519.Verify(mustB64(tok.OrderPublicKey), []byte(forged), mustB64(tok.OrderSignature)) {
		t.Error("order_signature verifies over a changed grant")
	}
}
