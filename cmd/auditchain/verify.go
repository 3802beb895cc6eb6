package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

const verifyUsage = `usage: auditchain verify <command> FILE --service-key KEY

commands:
  token   check a delegation token (a grant's "delegation") offline
  export  check an exported chain (GET /v1/chain/export) offline

KEY is the service's public key: the standard base64 of its 32 bytes, or a
file holding that text or the whole GET /v1/delegation/public-key answer.
"auditchain verify COMMAND --help" says more.
`

// verifyCmd runs offline checks; each needs only the file and the published
// service key (GET /v1/delegation/public-key), never the service.
func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return group("verify", verifyUsage, args, stdout, stderr, map[string]func([]string) error{
		"token":  func(args []string) error { return verifyTokenCmd(ctx, args, stdout, stderr) },
		"export": func(args []string) error { return verifyExportCmd(ctx, args, stdout, stderr) },
	})
}

// verifyArgs parses a verify command's line: one FILE and --service-key,
// flags before or after FILE; it returns FILE and the key. extra defines a
// command's own flags on the set before it is parsed.
func verifyArgs(name, synopsis string, args []string, stdout, stderr io.Writer, extra ...func(*flag.FlagSet)) (string, ed25519.PublicKey, bool, error) {
	fs := newFlags("verify "+name, synopsis)
	for _, f := range extra {
		f(fs)
	}
	keyArg := fs.String("service-key", "", "the service public key: standard base64, or a file holding it or the GET /v1/delegation/public-key answer")
	fs.Bool("json", true, "the report is JSON either way (accepted like the client verbs' --json)")
	quiet := fs.Bool("quiet", false, "no progress line on stderr (drawn only when stderr is a terminal)")
	files, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return "", nil, false, err
	}
	if len(files) != 1 || *keyArg == "" {
		fs.SetOutput(stderr)
		fs.Usage()
		return "", nil, false, usagef("verify %s needs one FILE and --service-key KEY", name)
	}
	pub, err := readServiceKey(*keyArg)
	if err != nil {
		return "", nil, false, fmt.Errorf("verify %s: --service-key: %w", name, err)
	}
	return files[0], pub, *quiet, nil
}

// readServiceKey reads KEY: standard base64 of 32 bytes, else a file holding
// that text or the GET /v1/delegation/public-key document. verify token and
// verify export both read it this one way.
func readServiceKey(arg string) (ed25519.PublicKey, error) {
	if pub, err := parseServiceKey(strings.TrimSpace(arg)); err == nil {
		return pub, nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("%q is neither the standard base64 of a 32-byte Ed25519 key nor a readable file", arg)
	}
	text := strings.TrimSpace(string(data))
	if !strings.HasPrefix(text, "{") {
		pub, err := parseServiceKey(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arg, err)
		}
		return pub, nil
	}
	var doc api.DelegationPublicKey
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("%s: not a public-key document: %w", arg, err)
	}
	if doc.Algorithm != "" && doc.Algorithm != "ed25519" {
		return nil, fmt.Errorf("%s: algorithm %q, want ed25519", arg, doc.Algorithm)
	}
	pub, err := parseServiceKey(doc.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%s: public_key: %w", arg, err)
	}
	if doc.KeyID != "" && doc.KeyID != verify.ServiceKeyID(pub) {
		return nil, fmt.Errorf("%s: key_id %q is not the id of its public_key (%s)", arg, doc.KeyID, verify.ServiceKeyID(pub))
	}
	return pub, nil
}

func parseServiceKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("must be the standard base64 of a %d-byte Ed25519 public key", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
