package app

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/verify"
)

// serviceKeySetting names the stored service identity key (its 32-byte seed).
const serviceKeySetting = "service_identity_key"

// LoadServiceKey returns the Ed25519 service identity that signs delegation
// bindings and chain checkpoints (Deps.ServiceKey). With --service-key-file
// (keyFile) the operator supplies it (a file holding the standard base64 of
// the 32-byte seed); otherwise it is created once from rnd, stored in st, and
// every replica and restart uses the same key (docs/operations.md "Service
// identity key").
func LoadServiceKey(ctx context.Context, st *store.Store, keyFile string, rnd io.Reader) (ed25519.PrivateKey, error) {
	return loadServiceKey(ctx, st, keyFile, rnd)
}

// ErrNoServiceKey is returned by ReadServiceKey on a store that holds no
// service key and without --service-key-file.
var ErrNoServiceKey = errors.New("the store holds no service key (serve creates it on its first start) and no --service-key-file was given")

// ReadServiceKey is LoadServiceKey for the commands that only read a store
// (admin check): it never creates a key, so checking a copy changes nothing.
func ReadServiceKey(ctx context.Context, st *store.Store, keyFile string) (ed25519.PrivateKey, error) {
	return loadServiceKey(ctx, st, keyFile, nil)
}

// loadServiceKey creates a missing key from rnd, or answers ErrNoServiceKey
// when rnd is nil.
func loadServiceKey(ctx context.Context, st *store.Store, keyFile string, rnd io.Reader) (ed25519.PrivateKey, error) {
	var seed []byte
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("service key file: %w", err)
		}
		seed, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, fmt.Errorf("service key file %s must hold the standard base64 of a 32-byte Ed25519 seed", keyFile)
		}
	} else if rnd == nil {
		var err error
		seed, err = st.Setting(ctx, serviceKeySetting)
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrNoServiceKey
		}
		if err != nil {
			return nil, fmt.Errorf("service key: %w", err)
		}
	} else {
		fresh := make([]byte, ed25519.SeedSize)
		if _, err := io.ReadFull(rnd, fresh); err != nil {
			return nil, err
		}
		var err error
		if seed, err = st.SettingOnce(ctx, serviceKeySetting, fresh); err != nil {
			return nil, fmt.Errorf("service key: %w", err)
		}
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("stored service key has %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// HasServiceKey reports whether the App was given the service identity.
func (a *App) HasServiceKey() bool { return a.serviceKey != nil }

// ServicePublicKey is the published half of the service identity.
func (a *App) ServicePublicKey() ed25519.PublicKey { return a.serviceKey.Public().(ed25519.PublicKey) }

// ServiceKeyID names the service key (verify.ServiceKeyID).
func (a *App) ServiceKeyID() string { return verify.ServiceKeyID(a.ServicePublicKey()) }
