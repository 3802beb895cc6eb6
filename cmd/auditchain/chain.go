package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"

	"github.com/auditchain/auditchain/pkg/client"
)

const chainUsage = `usage: auditchain chain <command> [flags]

commands:
  tip                  the last event's sequence and payload_hash
  verify               the service's check of the account's signed blocks
  proof EVENT_ID       an inclusion proof, checked here against the service key
  export [--from N] [--to N]
                       the export (NDJSON) on stdout, for auditchain verify export
  public-key           the service's public key document (GET /v1/delegation/public-key)
`

// errInvalidChain ends chain verify with exit 1 after its report.
var errInvalidChain = errors.New("the chain does not verify")

var chainVerbs = []verb{
	noArgVerb("tip", "usage: auditchain chain tip\n", (*client.Client).Tip),
	{"verify", "usage: auditchain chain verify\n\nExit 1 when the service finds the chain invalid.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				v, err := c.VerifyChain(ctx)
				if err == nil && !v.Valid {
					return v, errInvalidChain
				}
				return v, err
			}
		}},
	{"proof", "usage: auditchain chain proof EVENT_ID\n\nReads the event's inclusion proof and checks it against the latest signed\ncheckpoint and the service's public key.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				id, err := oneArg(args, "EVENT_ID")
				if err != nil {
					return nil, err
				}
				pub, err := c.ServicePublicKey(ctx)
				if err != nil {
					return nil, err
				}
				return c.VerifyInclusion(ctx, id, pub)
			}
		}},
	{"export", "usage: auditchain chain export [--from N] [--to N] > export.ndjson\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			from := fs.Int64("from", -1, "first sequence (default: the first)")
			to := fs.Int64("to", -1, "last sequence (default: the last)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				var f, t *int64
				if *from >= 0 {
					f = from
				}
				if *to >= 0 {
					t = to
				}
				w, done := exportProgress(ctx, c, f, t, verbStdout(ctx))
				defer done()
				return nil, c.Export(ctx, f, t, w)
			}
		}},
	{"public-key", "usage: auditchain chain public-key > service-key.json\n\nThe file is a --service-key for auditchain verify token and verify export.\n",
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				doc, err := c.DelegationPublicKey(ctx)
				if err != nil {
					return nil, err
				}
				// JSON either way: the output is a key file.
				b, err := json.MarshalIndent(doc, "", "  ")
				return humanText{text: string(b) + "\n", json: doc}, err
			}
		}},
}

func chainCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "chain", chainUsage, chainVerbs, args, getenv, stdout, stderr)
}
