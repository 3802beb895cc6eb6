package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/auditchain/auditchain/internal/progress"
	"github.com/auditchain/auditchain/pkg/verify"
)

// exportReport is what `auditchain verify export` prints: the verifier's
// Report, with every continuity finding (gaps and breaks, judged in sequence
// order; empty arrays when none), and on failure the first failure by kind
// and place.
type exportReport struct {
	Valid                bool        `json:"valid"`
	UserID               string      `json:"user_id"`
	Origin               string      `json:"origin"`
	Events               int64       `json:"events"`
	Checkpoints          int64       `json:"checkpoints"`
	FirstSequence        int64       `json:"first_sequence"`
	LastSequence         int64       `json:"last_sequence"`
	FirstBlock           int64       `json:"first_block"`
	LastBlock            int64       `json:"last_block"`
	TreeSize             uint64      `json:"tree_size"`
	RootHash             verify.Hash `json:"root_hash"`
	SignedSize           uint64      `json:"signed_size"`
	SignaturesVerified   int64       `json:"signatures_verified"`
	UnverifiedSignatures int64       `json:"unverified_signatures"`
	// ApprovedCalls and ApprovalsUnchecked: docs/approvals.md "The offline proof".
	ApprovedCalls      int64          `json:"approved_calls"`
	ApprovalsUnchecked int64          `json:"approvals_unchecked"`
	Whole              bool           `json:"whole"`
	Gaps               []verify.Gap   `json:"gaps"`
	Breaks             []verify.Break `json:"breaks"`
	// Witnesses is the --witness check of the checkpoint the export ends
	// on; null without --witness.
	Witnesses *witnessCheck `json:"witnesses"`
	Failure   *exportFault  `json:"failure"`
}

// witnessCheck reports which of the --witness keys cosigned the checkpoint
// that covers the exported events, by name, and whether --quorum of them did.
type witnessCheck struct {
	Block    *int64   `json:"block"` // that checkpoint's index (null: none covers them)
	Required int      `json:"required"`
	Cosigned []string `json:"cosigned"`
	Missing  []string `json:"missing"`
	Met      bool     `json:"met"`
}

// exportFault locates the first failure: sequence for event failures, block
// for checkpoint failures (null when not applicable), and the export line.
type exportFault struct {
	Kind     string `json:"kind"`
	Sequence *int64 `json:"sequence"`
	Block    *int64 `json:"block"`
	Line     int64  `json:"line"`
	Error    string `json:"error"`
}

const verifyExportUsage = `usage: auditchain verify export FILE --service-key KEY [--witness VKEY ... [--quorum N]]

FILE is an export (GET /v1/chain/export), "-" for standard input. On a
terminal, stderr shows the lines read so far (--quiet: never).
KEY is the service's published public key: the standard base64 of its 32 bytes
(public_key of GET /v1/delegation/public-key), or the path of a file holding
either that base64 text or the whole GET /v1/delegation/public-key document.

--witness VKEY (repeatable) is a witness's note verifier key (cosignature/v1,
"<name>+<hash>+<base64>"); the checkpoint the export ends on must then carry
valid cosignatures of --quorum N of them (default: all given). The report's
"witnesses" names who cosigned and who is missing.

Prints a JSON report; exits non-zero unless the export verifies (and, with
--witness, the quorum is met).
`

// verifyExportCmd is `auditchain verify export FILE --service-key KEY`: it
// checks an export offline (pkg/verify.VerifyExport) and prints a JSON report
// on stdout; on failure it also names the failure on stderr and returns an
// error, so the process exits non-zero. FILE "-" reads standard input.
func verifyExportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var witnessKeys multiFlag
	var quorum int
	file, pub, quiet, err := verifyArgs("export", verifyExportUsage, args, stdout, stderr, func(fs *flag.FlagSet) {
		fs.Var(&witnessKeys, "witness", "a witness's note verifier key (repeatable): the checkpoint covering the exported events must carry its cosignature")
		fs.IntVar(&quorum, "quorum", 0, "cosignatures required of the --witness keys (default: all of them)")
	})
	if err != nil {
		return err
	}
	witnesses, err := witnessesOf("verify export", witnessKeys, &quorum)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}

	// On a terminal, the lines read so far: a long export takes seconds.
	line := progress.Start(stderr, progress.IsTerminal(stderr) && !quiet,
		progress.Options{Label: "verify export", Unit: "lines read"})
	rep, verr := verify.VerifyExport(&lineCounter{r: in, line: line}, pub)
	line.Done()
	out := exportReport{Valid: verr == nil, UserID: rep.UserID, Origin: rep.Origin, Events: rep.Events, Checkpoints: rep.Checkpoints,
		FirstSequence: rep.FirstSequence, LastSequence: rep.LastSequence, FirstBlock: rep.FirstBlock, LastBlock: rep.LastBlock,
		TreeSize: rep.TreeSize, RootHash: rep.RootHash, SignedSize: rep.SignedSize,
		SignaturesVerified: rep.SignaturesVerified, UnverifiedSignatures: rep.UnverifiedSignatures,
		ApprovedCalls: rep.ApprovedCalls, ApprovalsUnchecked: rep.ApprovalsUnchecked,
		Whole: rep.Whole, Gaps: rep.Gaps, Breaks: rep.Breaks}
	if out.Gaps == nil {
		out.Gaps = []verify.Gap{}
	}
	if out.Breaks == nil {
		out.Breaks = []verify.Break{}
	}
	var ve *verify.Error
	switch {
	case verr == nil:
	case errors.As(verr, &ve):
		out.Failure = &exportFault{Kind: string(ve.Kind), Line: ve.Line, Error: verr.Error()}
		if ve.Sequence >= 0 {
			out.Failure.Sequence = &ve.Sequence
		}
		if ve.Block >= 0 {
			out.Failure.Block = &ve.Block
		}
	default: // an unreadable file or similar: no report to print
		return fmt.Errorf("verify export: %w", verr)
	}
	if len(witnesses) > 0 {
		out.Witnesses = checkWitnessQuorum(rep.CoveringCheckpoint, witnesses, quorum)
		if verr == nil && !out.Witnesses.Met {
			q := verify.Quorum{Required: quorum, Cosigned: out.Witnesses.Cosigned, Missing: out.Witnesses.Missing}
			verr = errors.New(q.Error())
			if rep.CoveringCheckpoint == nil {
				verr = fmt.Errorf("%w: no checkpoint covers the exported events (events follow the last one)", verr)
			}
			out.Valid = false
			out.Failure = &exportFault{Kind: string(verify.KindWitnessQuorum), Block: out.Witnesses.Block, Error: verr.Error()}
		}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	if verr != nil {
		fmt.Fprintln(stderr, "export does not verify:", verr)
		return fmt.Errorf("verify export: %s", describeFault(out.Failure))
	}
	return nil
}

// witnessesOf parses the --witness keys and settles --quorum: all of them
// by default, and 1..len otherwise.
func witnessesOf(cmd string, keys []string, quorum *int) ([]verify.Witness, error) {
	if len(keys) == 0 {
		if *quorum != 0 {
			return nil, usagef("%s: --quorum needs --witness keys", cmd)
		}
		return nil, nil
	}
	ws := make([]verify.Witness, 0, len(keys))
	names := map[string]bool{}
	for _, k := range keys {
		w, err := verify.NewWitness(k)
		if err != nil {
			return nil, usagef("%s: --witness: %v", cmd, err)
		}
		if names[w.Name] {
			return nil, usagef("%s: --witness: two keys named %q", cmd, w.Name)
		}
		names[w.Name] = true
		ws = append(ws, w)
	}
	if *quorum == 0 {
		*quorum = len(ws)
	}
	if *quorum < 1 || *quorum > len(ws) {
		return nil, usagef("%s: --quorum must be between 1 and the %d --witness keys", cmd, len(ws))
	}
	return ws, nil
}

// checkWitnessQuorum checks the cosignatures the export carries on the
// checkpoint that covers its events (verify.Report.CoveringCheckpoint; none:
// nothing is cosigned) against the witnesses.
func checkWitnessQuorum(covering *verify.ExportCheckpoint, ws []verify.Witness, quorum int) *witnessCheck {
	var q verify.Quorum
	c := &witnessCheck{Required: quorum}
	if covering != nil {
		q = verify.CheckQuorum([]byte(covering.Note), covering.Cosignatures, ws, quorum)
		c.Block = &covering.Block
	} else {
		q = verify.CheckQuorum(nil, nil, ws, quorum)
	}
	c.Cosigned, c.Missing, c.Met = q.Cosigned, q.Missing, q.Met()
	return c
}

func describeFault(f *exportFault) string {
	switch {
	case f.Kind == string(verify.KindWitnessQuorum):
		return f.Error
	case f.Sequence != nil:
		return fmt.Sprintf("%s at sequence %d", f.Kind, *f.Sequence)
	case f.Block != nil:
		return fmt.Sprintf("%s at block %d", f.Kind, *f.Block)
	default:
		return fmt.Sprintf("%s at line %d", f.Kind, f.Line)
	}
}

// lineCounter passes a reader through, counting on line the lines read.
type lineCounter struct {
	r    io.Reader
	line *progress.Line
}

func (c *lineCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if k := bytes.Count(p[:n], []byte{'\n'}); k > 0 {
		c.line.Add(int64(k))
	}
	return n, err
}
