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

// LoadServiceKey sets a.ServiceKey, the Ed25519 service identity that signs
// delegation bindings and chain checkpoints. With --service-key-file the
// operator supplies it (a file holding the standard base64 of the 32-byte seed);
// otherwise it is created once, stored in the database, and every replica and
// restart uses the same key (docs/operations.md "Service identity key").
func (a *App) LoadServiceKey(ctx context.Context) error {
	return a.loadServiceKey(ctx, true)
}

// ErrNoServiceKey is returned by ReadServiceKey on a store that holds no
// service key and without --service-key-file.
var ErrNoServiceKey = errors.New("the store holds no service key (serve creates it on its first start) and no --service-key-file was given")

// ReadServiceKey is LoadServiceKey for the commands that only read a store
// (admin check): it never creates a key, so checking a copy changes nothing.
func (a *App) ReadServiceKey(ctx context.Context) error {
	return a.loadServiceKey(ctx, false)
}

func (a *App) loadServiceKey(ctx context.Context, create bool) error {
	var seed []byte
	if path := a.Cfg.ServiceKeyFile; path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("service key file: %w", err)
		}
		seed, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(seed) != ed25519.SeedSize {
			return fmt.Errorf("service key file %s must hold the standard base64 of a 32-byte Ed25519 seed", path)
		}
	} else if !create {
		var err error
		seed, err = a.Store.Setting(ctx, serviceKeySetting)
		if errors.Is(err, store.ErrNotFound) {
			return ErrNoServiceKey
		}
		if err != nil {
			return fmt.Errorf("service key: %w", err)
		}
	} else {
		fresh := make([]byte, ed25519.SeedSize)
		if _, err := io.ReadFull(a.Rand, fresh); err != nil {
			return err
		}
		var err error
		if seed, err = a.Store.SettingOnce(ctx, serviceKeySetting, fresh); err != nil {
			return fmt.Errorf("service key: %w", err)
		}
	}
	if len(seed) != ed25519.SeedSize {
		return fmt.Errorf("stored service key has %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	a.ServiceKey = ed25519.NewKeyFromSeed(seed)
	return nil
}

// ServicePublicKey is the published half of the service identity.
func (a *App) ServicePublicKey() ed25519.PublicKey { return a.ServiceKey.Public().(ed25519.PublicKey) }

// ServiceKeyID names the service key (verify.ServiceKeyID).
func (a *App) ServiceKeyID() string { return verify.ServiceKeyID(a.ServicePublicKey()) }
