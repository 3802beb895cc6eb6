package witness

import (
	"bufio"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/pkg/verify"
)

// Logs is what the witness witnesses: the logs it was configured with, each
// an origin and the verifier keys it trusts for it (tlog-witness: "Each
// witness is configured with a list of supported log public keys"), and the
// auditchain services whose every account log it witnesses.
//
// An auditchain service creates an account log, origin "auditchain/<user_id>",
// whenever an account is created, and signs it with its one service key
// under the origin's name (pkg/verify CheckpointVerifierKey). Listing every
// origin would need a witness restart per account, so a service is trusted
// as a family: any origin "auditchain/<uuid>" (a canonical, lowercase UUID,
// which every user_id is) whose checkpoint the service key signs under that
// origin's name. Only the UUID form is accepted so that no other note the
// service key signs (the pin-state note, "auditchain/pin-state") is taken
// for a log (docs/witness.md).
type Logs struct {
	static   map[string][]note.Verifier
	services []ed25519.PublicKey
}

// NewLogs returns an empty configuration.
func NewLogs() *Logs { return &Logs{static: map[string][]note.Verifier{}} }

// AddLog trusts vkey for the log whose origin is the key's name, or origin
// when not empty. Any key type transparency-dev/formats' note.NewVerifier
// reads is accepted (Ed25519, ECDSA, RFC 6962 STH). Several keys may be
// given for one origin (a key rotation): a checkpoint signed by any of them
// is accepted.
func (l *Logs) AddLog(origin, vkey string) error {
	v, err := fnote.NewVerifier(vkey)
	if err != nil {
		return fmt.Errorf("log key %q: %w", vkey, err)
	}
	if origin == "" {
		origin = v.Name()
	}
	if strings.ContainsAny(origin, "\n") || origin == "" {
		return fmt.Errorf("log origin %q: must be one non-empty line", origin)
	}
	l.static[origin] = append(l.static[origin], v)
	return nil
}

// AddLogFile reads a log list: one log per line, "VKEY" (the origin is the
// key's name) or "ORIGIN VKEY"; blank lines and lines starting with # are
// skipped.
func (l *Logs) AddLogFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		var err error
		switch len(fields) {
		case 1:
			err = l.AddLog("", fields[0])
		case 2:
			err = l.AddLog(fields[0], fields[1])
		default:
			err = errors.New(`want "VKEY" or "ORIGIN VKEY"`)
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// AddService trusts an auditchain service key for every origin
// "auditchain/<uuid>" (see Logs).
func (l *Logs) AddService(pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("service key: %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	l.services = append(l.services, pub)
	return nil
}

// ParseServiceKey reads an auditchain service public key given as a vkey
// of an Ed25519 note key (any name: an account's checkpoint verifier key,
// say; only the key is kept) or as the standard base64 of the 32-byte key
// (GET /v1/delegation/public-key's public_key).
func ParseServiceKey(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(b), nil
	}
	// note.NewVerifier checks the name, the key hash and the Ed25519 type
	// (0x01 then 32 bytes); the key is then the text after the second "+".
	if _, err := note.NewVerifier(s); err != nil {
		return nil, fmt.Errorf("service key %q: neither the standard base64 of a 32-byte Ed25519 key nor an Ed25519 vkey: %w", s, err)
	}
	_, rest, _ := strings.Cut(s, "+")
	_, key64, _ := strings.Cut(rest, "+")
	b, _ := base64.StdEncoding.DecodeString(key64)
	return ed25519.PublicKey(b[1:]), nil
}

// Len is the number of configured logs and services.
func (l *Logs) Len() int { return len(l.static) + len(l.services) }

// verifiers returns the keys trusted for origin, or nil when the origin is
// not witnessed here.
func (l *Logs) verifiers(origin string) []note.Verifier {
	if vs, ok := l.static[origin]; ok {
		return vs
	}
	if len(l.services) == 0 || !isServiceOrigin(origin) {
		return nil
	}
	vs := make([]note.Verifier, 0, len(l.services))
	for _, pub := range l.services {
		v, err := verify.CheckpointVerifier(origin, pub)
		if err != nil {
			return nil
		}
		vs = append(vs, v)
	}
	return vs
}

// isServiceOrigin reports whether origin is "auditchain/" and a canonical
// lowercase UUID.
func isServiceOrigin(origin string) bool {
	id, ok := strings.CutPrefix(origin, verify.OriginPrefix)
	if !ok || len(id) != 36 {
		return false
	}
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}
