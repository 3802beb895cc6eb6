package witness

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// GenerateKey makes a witness key named name (a schema-less URL that
// identifies the witness, tlog-cosignature advises): skey is the note
// signer key (Ed25519, kept secret), vkey the verifier key logs and
// clients configure, of type 0x04, the Ed25519 cosignature/v1 type, so its
// key hash is the one the cosignature lines carry. This is what
// transparency-dev/witness's generate_keys does.
func GenerateKey(name string) (skey, vkey string, err error) {
	skey, vkey, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("witness key %q: %w", name, err)
	}
	vkey, err = fnote.VKeyToCosignatureV1(vkey)
	if err != nil {
		return "", "", err
	}
	return skey, vkey, nil
}

// NewSigner reads an skey (GenerateKey's) and returns its cosignature/v1
// signer (transparency-dev/formats') and its vkey (as GenerateKey printed
// it). Only Ed25519 keys are taken: the cosignature/v1 line that logs and
// verifiers here expect.
func NewSigner(skey string) (note.Signer, string, error) {
	skey = strings.TrimSpace(skey)
	fail := func() (note.Signer, string, error) {
		return nil, "", errors.New("witness key: not an Ed25519 note signer key (PRIVATE+KEY+<name>+<hash>+<base64>, as witness keygen writes)")
	}
	// PRIVATE+KEY+<name>+<hash>+<base64(type || 32-byte seed)>
	parts := strings.SplitN(skey, "+", 5) // base64 may hold "+"
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return fail()
	}
	key, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(key) != 1+ed25519.SeedSize || (key[0] != algEd25519 && key[0] != algEd25519CosignatureV1) {
		return fail()
	}
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		return nil, "", fmt.Errorf("witness key: %w", err)
	}
	pub := ed25519.NewKeyFromSeed(key[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return nil, "", err
	}
	if vkey, err = fnote.VKeyToCosignatureV1(vkey); err != nil {
		return nil, "", err
	}
	return s, vkey, nil
}

// Key types of signed-note keys (C2SP signed-note, tlog-cosignature).
const (
	algEd25519              = 0x01
	algEd25519CosignatureV1 = 0x04
)

// ReadSigner reads a key file (GenerateKey's skey on one line).
func ReadSigner(path string) (note.Signer, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	s, vkey, err := NewSigner(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return s, vkey, nil
}
