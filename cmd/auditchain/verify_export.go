package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	Failure            *exportFault   `json:"failure"`
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

const verifyExportUsage = `usage: auditchain verify export FILE --service-key KEY

FILE is an export (GET /v1/chain/export), "-" for standard input. On a
terminal, stderr shows the lines read so far (--quiet: never).
KEY is the service's published public key: the standard base64 of its 32 bytes
(public_key of GET /v1/delegation/public-key), or the path of a file holding
either that base64 text or the whole GET /v1/delegation/public-key document.

Prints a JSON report; exits non-zero unless the export verifies.
`

// verifyExportCmd is `auditchain verify export FILE --service-key KEY`: it
// checks an export offline (pkg/verify.VerifyExport) and prints a JSON report
// on stdout; on failure it also names the failure on stderr and returns an
// error, so the process exits non-zero. FILE "-" reads standard input.
func verifyExportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	file, pub, quiet, err := verifyArgs("export", verifyExportUsage, args, stdout, stderr)
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

func describeFault(f *exportFault) string {
	switch {
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
