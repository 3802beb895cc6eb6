package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/auditchain/auditchain/internal/monitor"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
	"github.com/auditchain/auditchain/pkg/verify"
)

const chainUsage = `usage: auditchain chain <command> [flags]

commands:
  tip                  the last event's sequence and payload_hash
  verify               the service's check of the account's signed blocks
  proof EVENT_ID       an inclusion proof, checked here against the service key
  export [--from N] [--to N | --witness VKEY ... [--quorum N]]
                       the export (NDJSON) on stdout, for auditchain verify export
  public-key           the service's public key document (GET /v1/delegation/public-key)
`

const chainExportUsage = `usage: auditchain chain export [--from N] [--to N | --witness VKEY ... [--quorum N]] > export.ndjson

--from and --to are leaf positions (from inclusive, to exclusive; the whole
chain by default). With --witness, the export ends on the newest block that
--quorum of those witnesses cosigned, so that auditchain verify export with
the same --witness keys finds the quorum on an account that keeps appending
(a whole export ends on the block it seals, which the witnesses cosign only
at their next run).
`

// witnessedBlocksPage is how many blocks one request of newestWitnessedSize
// reads (the route's largest page); witnessedBlocksScanned bounds how far back
// it looks, so that keys no block carries end the scan with an answer.
// (Variables so that tests can make them small.)
var (
	witnessedBlocksPage    int64 = 1000
	witnessedBlocksScanned int64 = 10000
)

// newestWitnessedSize is the tree size of the account's newest block that
// quorum of ws cosigned, read from the newest block back (the cosignatures
// are checked here under the witnesses' keys; verify export checks the
// service's signature).
func newestWitnessedSize(ctx context.Context, c *client.Client, ws []verify.Witness, quorum int) (int64, error) {
	p, err := c.ConsistencyProof(ctx, 0, nil) // its second checkpoint is the newest block
	if err != nil {
		return 0, err
	}
	if p.SecondCheckpoint == nil {
		return 0, errors.New("chain export: the account has no block yet")
	}
	newest := p.SecondCheckpoint.Index
	oldest := max(newest-witnessedBlocksScanned+1, 0)
	for hi := newest; hi >= oldest; hi -= witnessedBlocksPage {
		lo := max(hi-witnessedBlocksPage+1, oldest)
		page, err := c.Blocks(ctx, &lo, int(hi-lo+1))
		if err != nil {
			return 0, err
		}
		// The highest block of the window that carries the quorum, in
		// whatever order the page lists them.
		var best *api.Block
		for i := range page.Blocks {
			b := &page.Blocks[i]
			if b.Index >= lo && b.Index <= hi && (best == nil || b.Index > best.Index) &&
				verify.CheckQuorum([]byte(b.Note), b.Cosignatures, ws, quorum).Met() {
				best = b
			}
		}
		if best != nil {
			return best.TreeSize, nil
		}
	}
	if oldest > 0 {
		return 0, fmt.Errorf("chain export: none of the newest %d blocks carries %d of the --witness keys' cosignatures (check the keys, or give --to SIZE)", newest-oldest+1, quorum)
	}
	return 0, fmt.Errorf("chain export: no block carries %d of the --witness keys' cosignatures yet (check the keys; the witness job cosigns the newest block every minute)", quorum)
}

const chainVerifyUsage = `usage: auditchain chain verify [--pin FILE [--service-key KEY] [--witness VKEY ... [--quorum N]]]

Without --pin, the service's own check of the account's signed blocks; exit 1
when it finds the chain invalid.

With --pin FILE, the check of auditchain monitor --once, here and offline:
the newest checkpoint must be signed by the key pinned in FILE and
consistent with the checkpoint pinned there (a consistency proof, checked
here); the pin then moves forward. FILE is created on first use (trust on
first use, or --service-key). A split view, a rollback or a bad signature
prints the evidence (both checkpoints, notes in full) and exits 4.
`

// errInvalidChain ends chain verify with exit 1 after its report.
var errInvalidChain = errors.New("the chain does not verify")

var chainVerbs = []verb{
	noArgVerb("tip", "usage: auditchain chain tip\n", (*client.Client).Tip),
	{"verify", chainVerifyUsage,
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			pin := fs.String("pin", "", "hold the newest checkpoint to the one pinned in FILE (auditchain monitor's state), and move the pin forward when consistent")
			pf := addPinFlags(fs)
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				if *pin != "" {
					return verifyPin(ctx, c, *pin, pf)
				}
				if *pf.serviceKey != "" || len(pf.witnessKeys) > 0 || *pf.quorum != 0 {
					return nil, usagef("chain verify: --service-key, --witness and --quorum go with --pin FILE")
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
	{"export", chainExportUsage,
		func(fs *flag.FlagSet) func(context.Context, *client.Client, []string) (any, error) {
			from := fs.Int64("from", -1, "first leaf position, inclusive (default: 0)")
			to := fs.Int64("to", -1, "leaf position to stop before (default: the newest block's size); a block's tree_size ends the export on that block")
			var witnessKeys multiFlag
			fs.Var(&witnessKeys, "witness", "a witness's note verifier key (repeatable): end the export on the newest block --quorum of them cosigned")
			quorum := fs.Int("quorum", 0, "cosignatures required of the --witness keys (default: all of them)")
			return func(ctx context.Context, c *client.Client, args []string) (any, error) {
				if err := noPositional(args); err != nil {
					return nil, err
				}
				ws, err := witnessesOf("chain export", witnessKeys, quorum)
				if err != nil {
					return nil, err
				}
				var f, t *int64
				if *from >= 0 {
					f = from
				}
				if *to >= 0 {
					t = to
				}
				if len(ws) > 0 {
					if t != nil {
						return nil, usagef("chain export: --to and --witness both say where the export ends; give one of them")
					}
					size, err := newestWitnessedSize(ctx, c, ws, *quorum)
					if err != nil {
						return nil, err
					}
					if f != nil && *f > size {
						return nil, fmt.Errorf("chain export: the newest witnessed block has tree_size %d, below --from %d", size, *f)
					}
					t = &size
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

// verifyPin is chain verify --pin: one monitor check against FILE.
func verifyPin(ctx context.Context, c *client.Client, file string, pf *pinFlags) (any, error) {
	o, err := pf.options("chain verify", "")
	if err != nil {
		return nil, err
	}
	m := &monitor.Monitor{Source: c, StatePath: file, Options: o}
	r, err := m.Once(ctx)
	if r == nil {
		return nil, err
	}
	if r.Alarm != nil {
		// The evidence is printed as JSON whatever the format: it is kept.
		var buf strings.Builder
		if perr := printMonitorResult(&buf, r, true); perr != nil {
			return nil, perr
		}
		if err != nil {
			err = fmt.Errorf("%w; and %v", alarmError{r.Alarm}, err)
		} else {
			err = alarmError{r.Alarm}
		}
		return humanText{text: buf.String(), json: r}, err
	}
	var buf strings.Builder
	if perr := printMonitorResult(&buf, r, false); perr != nil {
		return nil, perr
	}
	return humanText{text: buf.String(), json: r}, err
}

func chainCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return clientGroup(ctx, "chain", chainUsage, chainVerbs, args, getenv, stdout, stderr)
}
