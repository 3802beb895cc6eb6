package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"
)

// These tests mint tokens with their own small issuer (mint), written from
// CONTRACT.md rather than shared with internal/delegation, so the verifier is checked
// against the contract and internal/delegation's tests check IssueToken against the
// verifier.

// sampleGrant is a Grant record (SPEC.md "Grant record"), epoch included.
const sampleGrant = `{
  "grant_id": "g-8f3a2c71",
  "subagent": "coder",
  "parent_agent": "orchestrator",
  "allowed_tools": ["read_file", "shell"],
  "max_tool_calls": 25,
  "expires_at": "2026-03-02T12:00:00+00:00",
  "created_at": "2026-03-01T12:00:00+00:00",
  "action": "granted",
  "epoch": {
    "anchor": "2025-01-01", "date_utc": "2026-03-01", "epoch_index": 424, "quadrant": "q2",
    "scheme": "svc-epoch-v1",
    "phase": {"accumulated_phase": "14.357993", "cycle_number": 14, "epoch_index": 424, "scheme": "epoch-accumulation-v1"}
  }
}`

// key derives a deterministic key from a label, so failures are reproducible.
func key(label string) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, label)
	return ed25519.NewKeyFromSeed(seed)
}

var (
	serviceKey = key("service identity")
	orderKey   = key("order-bound key")
)

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func canonical(t *testing.T, doc []byte) []byte {
	t.Helper()
	c, err := jcs.Transform(doc)
	if err != nil {
		t.Fatalf("jcs: %v", err)
	}
	return c
}

// mint builds a token as a generic JSON object, so tests can change any part.
func mint(t *testing.T, grant string, order, service ed25519.PrivateKey) map[string]any {
	t.Helper()
	canonGrant := canonical(t, []byte(grant))
	var g struct {
		GrantID string `json:"grant_id"`
	}
	if err := json.Unmarshal(canonGrant, &g); err != nil {
		t.Fatal(err)
	}
	orderPub := b64(pub(order))
	keyID := ServiceKeyID(pub(service))
	binding := map[string]any{"grant_id": g.GrantID, "order_public_key": orderPub, "service_key_id": keyID}
	bindingJSON, _ := json.Marshal(binding)
	return map[string]any{
		"version":           DelegationVersion,
		"grant":             json.RawMessage(grant),
		"order_public_key":  orderPub,
		"order_signature":   b64(ed25519.Sign(order, canonGrant)),
		"binding":           binding,
		"binding_signature": b64(ed25519.Sign(service, canonical(t, bindingJSON))),
		"service_key_id":    keyID,
	}
}

func encode(t *testing.T, tok map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sentinels are the checks in the order VerifyToken reports them; failedChecks
// names those err matches.
var sentinels = []struct {
	name string
	err  error
}{
	{"malformed", ErrMalformedToken},
	{"order_signature", ErrOrderSignature},
	{"binding_signature", ErrBindingSignature},
	{"binding_mismatch", ErrBindingMismatch},
	{"service_key_mismatch", ErrServiceKeyMismatch},
}

func failedChecks(err error) []string {
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	return names
}

func TestVerifyTokenValid(t *testing.T) {
	raw := encode(t, mint(t, sampleGrant, orderKey, serviceKey))
	tok, err := VerifyToken(raw, pub(serviceKey))
	if err != nil {
		t.Fatalf("VerifyToken: %v", err)
	}
	want := DelegationBinding{GrantID: "g-8f3a2c71", OrderPublicKey: b64(pub(orderKey)), ServiceKeyID: ServiceKeyID(pub(serviceKey))}
	if diff := cmp.Diff(want, tok.Binding); diff != "" {
		t.Errorf("binding (-want +got):\n%s", diff)
	}
	if tok.Version != DelegationVersion || tok.ServiceKeyID != want.ServiceKeyID {
		t.Errorf("version %q service_key_id %q", tok.Version, tok.ServiceKeyID)
	}
	if !bytes.Equal(canonical(t, tok.Grant), canonical(t, []byte(sampleGrant))) {
		t.Errorf("grant = %s, want the sample grant", tok.Grant)
	}
}

// leafPaths lists every leaf of a JSON object as a path of keys.
func leafPaths(v any, prefix []string) [][]string {
	m, ok := v.(map[string]any)
	if !ok {
		return [][]string{prefix}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out [][]string
	for _, k := range keys {
		out = append(out, leafPaths(m[k], append(slices.Clone(prefix), k))...)
	}
	return out
}

func decodeGrant(t *testing.T) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(sampleGrant))
	d.UseNumber()
	var g map[string]any
	if err := d.Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

// changed returns a different value of the same JSON type.
func changed(t *testing.T, v any) any {
	switch v := v.(type) {
	case string:
		return v + "x"
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return json.Number(strconv.FormatInt(n+1, 10))
	case []any:
		return append(slices.Clone(v), "delete_repo")
	}
	t.Fatalf("no change defined for %T", v)
	return nil
}

// TestGrantChangeBreaksOnlyOrderCheck changes each field of the grant, nested
// epoch fields included, keeping the rest of the token as issued. Each change
// must break the order signature and nothing else; a changed grant_id also
// no longer matches the binding, which is the binding pinning the grant.
func TestGrantChangeBreaksOnlyOrderCheck(t *testing.T) {
	tok := mint(t, sampleGrant, orderKey, serviceKey)
	paths := leafPaths(decodeGrant(t), nil)
	if len(paths) < 15 {
		t.Fatalf("only %d grant leaves found; the sample grant lost fields", len(paths))
	}
	type change struct {
		name  string
		apply func(g map[string]any)
		want  []string
	}
	var changes []change
	for _, path := range paths {
		want := []string{"order_signature"}
		if len(path) == 1 && path[0] == "grant_id" {
			want = append(want, "binding_mismatch")
		}
		changes = append(changes, change{
			name: "change " + strings.Join(path, "."),
			apply: func(g map[string]any) {
				m := g
				for _, k := range path[:len(path)-1] {
					m = m[k].(map[string]any)
				}
				m[path[len(path)-1]] = changed(t, m[path[len(path)-1]])
			},
			want: want,
		})
	}
	for k := range decodeGrant(t) {
		if k == "grant_id" {
			continue
		}
		changes = append(changes, change{name: "remove " + k, apply: func(g map[string]any) { delete(g, k) }, want: []string{"order_signature"}})
	}
	changes = append(changes,
		change{name: "add a field", apply: func(g map[string]any) { g["admin"] = true }, want: []string{"order_signature"}},
		change{name: "null a field", apply: func(g map[string]any) { g["expires_at"] = nil }, want: []string{"order_signature"}},
		change{name: "add an epoch field", apply: func(g map[string]any) { g["epoch"].(map[string]any)["leap"] = 1 }, want: []string{"order_signature"}},
	)

	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			g := decodeGrant(t)
			c.apply(g)
			gb, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(canonical(t, gb), canonical(t, []byte(sampleGrant))) {
				t.Fatal("the change did not change the grant")
			}
			tampered := mapsClone(tok)
			tampered["grant"] = json.RawMessage(gb)
			_, err = VerifyToken(encode(t, tampered), pub(serviceKey))
			if diff := cmp.Diff(c.want, failedChecks(err)); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s\nerr: %v", diff, err)
			}
		})
	}
}

func mapsClone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		if b, ok := v.(map[string]any); ok {
			v = mapsClone(b)
		}
		c[k] = v
	}
	return c
}

func flip(t *testing.T, s string) string {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	return b64(b)
}

// TestTokenTampering changes the parts around the grant; want lists the failed
// checks in the order VerifyToken reports them.
func TestTokenTampering(t *testing.T) {
	otherOrder := key("another order key")
	otherService := key("another service")
	forgedGrant := strings.Replace(sampleGrant, `"max_tool_calls": 25`, `"max_tool_calls": 25000`, 1)

	tests := []struct {
		name       string
		tamper     func(tok map[string]any)
		verifyWith ed25519.PublicKey // nil: the service key
		want       []string
	}{
		{name: "untouched", tamper: func(map[string]any) {}},
		{name: "grant reformatted: spaces and key order do not matter",
			tamper: func(tok map[string]any) {
				var g map[string]any
				_ = json.Unmarshal([]byte(sampleGrant), &g)
				b, _ := json.MarshalIndent(g, "", "\t")
				tok["grant"] = json.RawMessage(b)
			}},

		// order_public_key: the order signature no longer verifies under it; the
		// binding either names the old key (mismatch) or, if changed too, no
		// longer carries the service's signature. The order check is reported first.
		{name: "order_public_key replaced",
			tamper: func(tok map[string]any) { tok["order_public_key"] = b64(pub(otherOrder)) },
			want:   []string{"order_signature", "binding_mismatch"}},
		{name: "order_public_key replaced in token and binding",
			tamper: func(tok map[string]any) {
				tok["order_public_key"] = b64(pub(otherOrder))
				tok["binding"].(map[string]any)["order_public_key"] = b64(pub(otherOrder))
			},
			want: []string{"order_signature", "binding_signature"}},
		{name: "order_signature changed",
			tamper: func(tok map[string]any) { tok["order_signature"] = flip(t, tok["order_signature"].(string)) },
			want:   []string{"order_signature"}},

		// Forgeries that re-sign a changed grant with a key of their own.
		{name: "forged grant re-signed with own order key, token and binding updated",
			tamper: func(tok map[string]any) {
				f := mint(t, forgedGrant, otherOrder, serviceKey)
				tok["grant"], tok["order_signature"], tok["order_public_key"] = f["grant"], f["order_signature"], f["order_public_key"]
				tok["binding"].(map[string]any)["order_public_key"] = f["order_public_key"]
			},
			want: []string{"binding_signature"}},
		{name: "forged grant re-signed with own order key, binding untouched",
			tamper: func(tok map[string]any) {
				f := mint(t, forgedGrant, otherOrder, serviceKey)
				tok["grant"], tok["order_signature"], tok["order_public_key"] = f["grant"], f["order_signature"], f["order_public_key"]
			},
			want: []string{"binding_mismatch"}},
		{name: "grant, order key and signature of another genuine token",
			tamper: func(tok map[string]any) {
				f := mint(t, strings.Replace(sampleGrant, "g-8f3a2c71", "g-0000beef", 1), otherOrder, serviceKey)
				tok["grant"], tok["order_signature"], tok["order_public_key"] = f["grant"], f["order_signature"], f["order_public_key"]
			},
			want: []string{"binding_mismatch"}},

		// The binding: any change breaks its signature, and it no longer matches.
		{name: "binding.grant_id changed",
			tamper: func(tok map[string]any) { tok["binding"].(map[string]any)["grant_id"] = "g-0000beef" },
			want:   []string{"binding_signature", "binding_mismatch"}},
		{name: "binding.order_public_key changed",
			tamper: func(tok map[string]any) { tok["binding"].(map[string]any)["order_public_key"] = b64(pub(otherOrder)) },
			want:   []string{"binding_signature", "binding_mismatch"}},
		{name: "binding.service_key_id changed",
			tamper: func(tok map[string]any) { tok["binding"].(map[string]any)["service_key_id"] = "svc-0000000000000000" },
			want:   []string{"binding_signature", "binding_mismatch"}},
		{name: "binding_signature changed",
			tamper: func(tok map[string]any) { tok["binding_signature"] = flip(t, tok["binding_signature"].(string)) },
			want:   []string{"binding_signature"}},
		{name: "binding_signature by another key",
			tamper: func(tok map[string]any) {
				tok["binding_signature"] = mint(t, sampleGrant, orderKey, otherService)["binding_signature"]
			},
			want: []string{"binding_signature"}},

		// The service key.
		{name: "service_key_id changed",
			tamper: func(tok map[string]any) { tok["service_key_id"] = ServiceKeyID(pub(otherService)) },
			want:   []string{"binding_mismatch", "service_key_mismatch"}},
		{name: "verified with another service key",
			tamper: func(map[string]any) {}, verifyWith: pub(otherService),
			want: []string{"binding_signature", "service_key_mismatch"}},
		{name: "issued by another service",
			tamper: func(tok map[string]any) {
				for k, v := range mint(t, sampleGrant, orderKey, otherService) {
					tok[k] = v
				}
			},
			want: []string{"binding_signature", "service_key_mismatch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := mint(t, sampleGrant, orderKey, serviceKey)
			tt.tamper(tok)
			verifyWith := tt.verifyWith
			if verifyWith == nil {
				verifyWith = pub(serviceKey)
			}
			got, err := VerifyToken(encode(t, tok), verifyWith)
			if diff := cmp.Diff(tt.want, failedChecks(err)); diff != "" {
				t.Fatalf("failed checks (-want +got):\n%s\nerr: %v", diff, err)
			}
			if tt.want == nil {
				if got == nil {
					t.Fatal("VerifyToken returned no token")
				}
				return
			}
			if got != nil {
				t.Error("VerifyToken returned a token that failed")
			}
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("error %T, want *TokenError", err)
			}
			var order []string
			for _, f := range te.Failures {
				order = append(order, failedChecks(f)...)
			}
			if diff := cmp.Diff(tt.want, order); diff != "" {
				t.Errorf("failure order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerifyTokenMalformed(t *testing.T) {
	valid := func() map[string]any { return mint(t, sampleGrant, orderKey, serviceKey) }
	with := func(member string, value any) []byte {
		tok := valid()
		tok[member] = value
		return encode(t, tok)
	}
	without := func(member string) []byte {
		tok := valid()
		delete(tok, member)
		return encode(t, tok)
	}
	withBinding := func(edit func(b map[string]any)) []byte {
		tok := valid()
		edit(tok["binding"].(map[string]any))
		return encode(t, tok)
	}
	sig := valid()["order_signature"].(string)
	orderPub := valid()["order_public_key"].(string)
	if !strings.ContainsAny(orderPub, "+/") {
		t.Fatal("the fixed order key must contain + or / for the base64url case")
	}

	tests := []struct {
		name  string
		token []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("delegation")},
		{"array", []byte(`[]`)},
		{"null", []byte(`null`)},
		{"duplicate member", bytes.Replace(encode(t, valid()), []byte(`{"binding"`), []byte(`{"version":"x","binding"`), 1)},
		{"unknown member", with("expires", "never")},
		{"unknown version", with("version", "svc-delegation-v2")},
		{"version not a string", with("version", 1)},
		{"version null", with("version", nil)},
		{"grant is a string", with("grant", sampleGrant)},
		{"grant is null", with("grant", nil)},
		{"grant is an array", with("grant", []any{})},
		{"grant without grant_id", with("grant", json.RawMessage(`{"subagent":"coder"}`))},
		{"grant_id not a string", with("grant", json.RawMessage(`{"grant_id":7}`))},
		{"grant_id empty", with("grant", json.RawMessage(`{"grant_id":""}`))},
		{"grant with a duplicate key", with("grant", json.RawMessage(`{"grant_id":"g-1","subagent":"a","subagent":"b"}`))},
		{"order_public_key not base64", with("order_public_key", "not base64!")},
		{"order_public_key 31 bytes", with("order_public_key", b64(make([]byte, 31)))},
		{"order_public_key base64url", with("order_public_key", strings.NewReplacer("+", "-", "/", "_").Replace(orderPub))},
		{"order_public_key with a line break", with("order_public_key", orderPub[:20]+"\n"+orderPub[20:])},
		{"order_signature unpadded", with("order_signature", strings.TrimRight(sig, "="))},
		{"order_signature 63 bytes", with("order_signature", b64(make([]byte, 63)))},
		{"binding_signature not a string", with("binding_signature", 42)},
		{"binding_signature 2 bytes", with("binding_signature", b64([]byte{1, 2}))},
		{"binding not an object", with("binding", "g-8f3a2c71")},
		{"binding with an extra member", withBinding(func(b map[string]any) { b["scope"] = "all" })},
		{"binding without grant_id", withBinding(func(b map[string]any) { delete(b, "grant_id") })},
		{"binding member not a string", withBinding(func(b map[string]any) { b["grant_id"] = 7 })},
		{"binding member differently cased", withBinding(func(b map[string]any) { b["Grant_ID"] = b["grant_id"]; delete(b, "grant_id") })},
		{"service_key_id null", with("service_key_id", nil)},
	}
	for _, m := range tokenMembers {
		tests = append(tests, struct {
			name  string
			token []byte
		}{"missing " + m, without(m)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := VerifyToken(tt.token, pub(serviceKey))
			if diff := cmp.Diff([]string{"malformed"}, failedChecks(err)); diff != "" {
				t.Errorf("failed checks (-want +got):\n%s\nerr: %v", diff, err)
			}
			if got != nil {
				t.Error("VerifyToken returned a token")
			}
		})
	}
}

func TestVerifyTokenBadServiceKey(t *testing.T) {
	raw := encode(t, mint(t, sampleGrant, orderKey, serviceKey))
	for _, k := range []ed25519.PublicKey{nil, make([]byte, 31), make([]byte, 64)} {
		if _, err := VerifyToken(raw, k); err == nil {
			t.Errorf("VerifyToken with a %d-byte service key succeeded", len(k))
		}
	}
}

func TestServiceKeyID(t *testing.T) {
	// SHA-256 of 32 zero bytes is 66687aadf862bd77….
	if got, want := ServiceKeyID(make([]byte, 32)), "svc-66687aadf862bd77"; got != want {
		t.Errorf("ServiceKeyID(zero key) = %q, want %q", got, want)
	}
	form := regexp.MustCompile(`^svc-[0-9a-f]{16}$`)
	for i := range 20 {
		id := ServiceKeyID(pub(key(fmt.Sprint("k", i))))
		if !form.MatchString(id) {
			t.Errorf("ServiceKeyID = %q, want svc-<16 hex>", id)
		}
	}
	if ServiceKeyID(pub(serviceKey)) == ServiceKeyID(pub(key("another service"))) {
		t.Error("two keys share an id")
	}
}

func TestCanonicalBinding(t *testing.T) {
	got, err := CanonicalBinding(DelegationBinding{GrantID: "g-1", OrderPublicKey: "AAAA+/==", ServiceKeyID: "svc-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"grant_id":"g-1","order_public_key":"AAAA+/==","service_key_id":"svc-0123456789abcdef"}`
	if string(got) != want {
		t.Errorf("CanonicalBinding = %s\nwant %s", got, want)
	}
}
