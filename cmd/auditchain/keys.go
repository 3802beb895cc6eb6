package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

const keysUsage = `usage: auditchain keys <command> [flags]

commands:
  create [--scopes a,b] [--machine M] [--label L] [--expires-at T]
                       create an API key (the token is shown once)
  list                 the account's keys
  revoke KEY_ID        revoke a key
`

var keyVerbs = []verb{
	{"create", "usage: auditchain keys create [--scopes a,b] [--machine M] [--label L] [--expires-at T]\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			scopes := fs.String("scopes", "", "comma-separated scopes (empty: unscoped)")
			machine := fs.String("machine", "", "machine label")
			label := fs.String("label", "", "key label")
			expires := fs.String("expires-at", "", "expiry (ISO-8601 with a UTC offset)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				req := api.CreateKeyRequest{Machine: optString(*machine), Label: optString(*label), ExpiresAt: optString(*expires)}
				if *scopes != "" {
					req.Scopes = strings.Split(*scopes, ",")
				}
				return c.CreateKey(ctx, req)
			}
		}},
	noArgVerb("list", "usage: auditchain keys list\n", (*client.Client).Keys),
	idVerb("revoke", "KEY_ID", "usage: auditchain keys revoke KEY_ID\n", (*client.Client).RevokeKey),
}

const machinesUsage = `usage: auditchain machines <command> [flags]

commands:
  keygen FILE          write a new Ed25519 signing key (base64 seed) to FILE (offline)
  register --machine M --sign-key FILE
                       register FILE's public key for machine M
  list                 machines, their events and keys
`

var machineVerbs = []verb{
	{"register", "usage: auditchain machines register --machine M --sign-key FILE\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			// --machine and --sign-key are the client options' flags.
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				m, key := fs.Lookup("machine").Value.String(), fs.Lookup("sign-key").Value.String()
				if m == "" || key == "" {
					return nil, usagef("machines register needs --machine and --sign-key")
				}
				priv, err := readSigningKey(key)
				if err != nil {
					return nil, err
				}
				return c.RegisterSigningKey(ctx, m, priv.Public().(ed25519.PublicKey))
			}
		}},
	noArgVerb("list", "usage: auditchain machines list\n", (*client.Client).Machines),
}

// clientOptions adds the signing flags every verb takes: with --sign-key
// FILE and --machine M, appends are signed by M's key.
func clientOptions(fs *flag.FlagSet) func() ([]client.Option, error) {
	key := fs.String("sign-key", "", "Ed25519 signing key file (machines keygen) to sign appends with")
	machine := fs.String("machine", "", "the machine_id the signing key is registered for")
	return func() ([]client.Option, error) {
		if *key == "" {
			return nil, nil
		}
		if *machine == "" {
			return nil, usagef("--sign-key needs --machine")
		}
		priv, err := readSigningKey(*key)
		if err != nil {
			return nil, err
		}
		return []client.Option{client.WithSigner(*machine, priv)}, nil
	}
}

// readSigningKey reads a key file: the standard base64 of a 32-byte seed.
func readSigningKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sign-key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("--sign-key %s: want the standard base64 of a %d-byte Ed25519 seed", path, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func keysCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "keys", keysUsage, keyVerbs, args, getenv, stdout, stderr)
}

// machinesCmd adds keygen, which needs no service, to the client verbs.
func machinesCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	subs := clientSubs(ctx, "machines", machineVerbs, getenv, stdout, stderr)
	subs["keygen"] = func(args []string) error { return keygenCmd(args, stdout, stderr) }
	return group("machines", machinesUsage, args, stdout, stderr, subs)
}

// keygenCmd is `auditchain machines keygen FILE`.
func keygenCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("machines keygen", "usage: auditchain machines keygen FILE\n\nWrites a new Ed25519 seed (standard base64) to FILE, readable by you only,\nand prints its public key.\n")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	file, err := oneArg(rest, "FILE")
	if err != nil {
		return err
	}
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("machines keygen: %w", err)
	}
	_, err = fmt.Fprintln(f, base64.StdEncoding.EncodeToString(seed))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("machines keygen: %w", err)
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	_, err = fmt.Fprintf(stdout, "public_key: %s\n", base64.StdEncoding.EncodeToString(pub))
	return err
}
