package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// The eight points of small order (the identity of issue 18 first, the
// all-zero key third), and small-order points encoded non-canonically.
var weakSigningKeys = []string{
	"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", // identity
	"7P///////////////////////////////////////38=", // order 2
	"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", // order 4: the all-zero key
	"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA=", // order 4
	"JuiVj8KyJ7BFw/SJ8u+Y8NXfrAXTxjM5sTgCiG1T/AU=", // order 8
	"JuiVj8KyJ7BFw/SJ8u+Y8NXfrAXTxjM5sTgCiG1T/IU=", // order 8
	"xxdqcD1N2E+6PAt2DRBnDyogU/osOczGTsf9d5KsA3o=", // order 8
	"xxdqcD1N2E+6PAt2DRBnDyogU/osOczGTsf9d5KsA/o=", // order 8
	"7f///////////////////////////////////////38=", // y = p: zero, non-canonical
	"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA=", // the identity with x = -0
}

// forgedSignature is R = identity, S = 0: made without any private key, it
// verifies under the identity for every message.
var forgedSignature = base64.StdEncoding.EncodeToString(append([]byte{1}, make([]byte, 63)...))

// Signing keys of small order are refused at registration, a machine-bound
// key registers only its own machine's key, and every registration is a
// machine.signing_key event naming the key it replaces (issue 18).
func TestSigningKeyRules(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		bound := e.key(user, api.CreateKeyRequest{Machine: new("build-9")})
		before := e.fingerprint()
		for _, weak := range weakSigningKeys {
			m := wantProblem(t, e.do("PUT", "/v1/machines/m1/signing-key", key, map[string]any{"public_key": weak}), 422, "validation_error")
			if !namesField(m, "public_key") {
				t.Fatalf("%s: %v", weak, m)
			}
		}
		pub1, _, _ := ed25519.GenerateKey(rand.Reader)
		m := wantProblem(t, e.do("PUT", "/v1/machines/other/signing-key", bound, map[string]any{"public_key": b64key(pub1)}), 403, "machine_mismatch")
		if m["machine"] != "build-9" {
			t.Fatalf("%v", m)
		}
		if e.fingerprint() != before {
			t.Fatal("a refused registration wrote")
		}

		// Registration and rotation, each on the chain.
		pub2, _, _ := ed25519.GenerateKey(rand.Reader)
		var events []store.Event
		for _, pub := range []ed25519.PublicKey{pub1, pub2} {
			if r := e.do("PUT", "/v1/machines/build-9/signing-key", bound, map[string]any{"public_key": b64key(pub)}); r.Status != 200 {
				t.Fatalf("register: %d %s", r.Status, r.Body)
			}
			tip := e.tip(key)
			ev, err := e.store.EventByID(context.Background(), nil, user, tip["event_id"].(string))
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
		for i, ev := range events {
			var raw map[string]any
			if err := json.Unmarshal(ev.Raw, &raw); err != nil {
				t.Fatal(err)
			}
			var replaces any
			if i == 1 {
				replaces = verify.Fingerprint(pub1)
			}
			pub := []ed25519.PublicKey{pub1, pub2}[i]
			by, _ := raw["registered_by"].(map[string]any)
			if ev.EventType != "machine.signing_key" || ev.MachineID != nil || raw["machine_id"] != "build-9" || raw["public_key"] != b64key(pub) ||
				raw["fingerprint"] != verify.Fingerprint(pub) || raw["replaces"] != replaces || by["machine"] != "build-9" {
				t.Fatalf("registration %d: %s %s", i, ev.EventType, ev.Raw)
			}
		}
	})
}

// A weak key stored before such keys were refused verifies nothing: the
// forged signature of issue 18 is refused with 401, saying why, and nothing
// is stored.
func TestAWeakStoredKeyVerifiesNothing(t *testing.T) {
	eachEnv(t, func(t *testing.T, e *env) {
		user, key := e.account("a@example.com")
		tx, err := e.store.WriteDB().BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		weak := weakSigningKeys[0]
		if err := e.store.InsertSigningKey(context.Background(), tx, store.SigningKey{UserID: user, MachineID: "m1", PublicKey: weak,
			Fingerprint: "sha256:weak", RegisteredAt: 1}, ""); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		m := wantProblem(t, e.do("POST", "/v1/events", key, ev("evt-0", 0, nil, "machine_id", "m1", "raw", map[string]any{"n": 1},
			"signature", forgedSignature)), 401, "event_signature_invalid")
		if d := m["detail"].(string); !strings.Contains(d, "not a usable Ed25519 key") {
			t.Fatalf("detail %q", d)
		}
		if e.tip(key)["event_count"] != float64(0) {
			t.Fatal("the forged event was stored")
		}
	})
}

func b64key(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }
