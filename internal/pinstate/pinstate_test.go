package pinstate

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/auditchain/auditchain/pkg/verify"
)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune(seed)), ed25519.SeedSize)))
}

// A pin reads back as written with the key that signed it, and is refused
// with any other key or once a byte of its text changed.
func TestSignOpen(t *testing.T) {
	k := key('a')
	pub := k.Public().(ed25519.PublicKey)
	want := State{ServiceKeyID: verify.ServiceKeyID(pub), PinnedAt: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), Accounts: []Account{
		{UserID: "0190f3a2-7c4e-7000-8000-00000000c0de", BlockIndex: 3, TreeSize: 3001, Root: verify.Hash{1}, BlockHash: verify.Hash{2}},
		{UserID: "0190f3a2-7c4e-7000-8000-00000000c0df", BlockIndex: 0, TreeSize: 1, Root: verify.Hash{3}, BlockHash: verify.Hash{4}},
	}}
	signed, err := Sign(want, k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(signed, pub)
	if err != nil {
		t.Fatal(err)
	}
	if got.ServiceKeyID != want.ServiceKeyID || !got.PinnedAt.Equal(want.PinnedAt) || len(got.Accounts) != 2 ||
		got.Accounts[0] != want.Accounts[0] || got.Accounts[1] != want.Accounts[1] {
		t.Fatalf("Open(Sign(s)) = %+v, want %+v", got, want)
	}

	other := key('b').Public().(ed25519.PublicKey)
	if _, err := Open(signed, other); !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), want.ServiceKeyID) {
		t.Errorf("Open with another key: %v, want ErrSignature naming the pin's key %s", err, want.ServiceKeyID)
	}
	edited := []byte(strings.Replace(string(signed), " 3001 ", " 3002 ", 1))
	if _, err := Open(edited, pub); !errors.Is(err, ErrSignature) {
		t.Errorf("Open of an edited pin: %v, want ErrSignature", err)
	}
	if _, err := Open([]byte("not a note"), pub); err == nil || errors.Is(err, ErrSignature) {
		t.Errorf("Open of garbage: %v, want a format error", err)
	}
}

// An empty pin (no account had a block) is a valid pin.
func TestSignOpenWithoutAccounts(t *testing.T) {
	k := key('c')
	signed, err := Sign(State{ServiceKeyID: "svc-x", PinnedAt: time.Unix(0, 0)}, k)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(signed, k.Public().(ed25519.PublicKey))
	if err != nil || len(s.Accounts) != 0 || s.ServiceKeyID != "svc-x" {
		t.Fatalf("Open of an empty pin: %+v %v", s, err)
	}
}
