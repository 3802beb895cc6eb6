// Package witness is a transparency-log witness (C2SP tlog-witness,
// https://c2sp.org/tlog-witness): it keeps, per log origin, the latest
// checkpoint it cosigned, and cosigns a new checkpoint of a log it is
// configured for only when the log's signature verifies and a consistency
// proof shows the new tree extends that one. Its cosignatures are C2SP
// tlog-cosignature "cosignature/v1" note signatures made by
// transparency-dev/formats' note signer (docs/witness.md).
//
// What it proves: that no two checkpoints it cosigned for one origin
// disagree (a split view or a rollback shown to this witness is refused);
// not that the log's entries are right.
package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"
	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/pkg/verify"
)

// MaxProofLines is the most consistency proof lines a request may carry
// (tlog-witness: "The client MUST NOT send more than 63").
const MaxProofLines = 63

// The refusals of add-checkpoint, each the status tlog-witness names
// (see Status). A ConflictError is the 409.
var (
	// ErrBadRequest: the body is not an add-checkpoint request, or the old
	// size is above the checkpoint's (400).
	ErrBadRequest = errors.New("bad request")
	// ErrUnknownLog: the checkpoint's origin is not a log this witness is
	// configured for (404).
	ErrUnknownLog = errors.New("unknown log origin")
	// ErrNoLogSignature: no signature by a key trusted for the origin, or one
	// such signature does not verify (403).
	ErrNoLogSignature = errors.New("no valid signature by the log's key")
	// ErrNotConsistent: the proof does not prove the checkpoint extends the
	// last one cosigned, or an equal size has another root, or a size 0
	// checkpoint has a root other than the empty tree's (422).
	ErrNotConsistent = errors.New("checkpoint is not consistent with the one last cosigned")
)

// ConflictError is the 409 of tlog-witness: the request's old size is not
// the size of the latest checkpoint the witness cosigned for the origin
// (Size; 0 when it never cosigned one).
type ConflictError struct {
	Origin string
	Old    uint64
	Size   uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("old size %d is not %d, the size last cosigned for %s", e.Old, e.Size, e.Origin)
}

// Witness answers add-checkpoint requests.
type Witness struct {
	logs     *Logs
	signer   note.Signer
	verifier note.Verifier
	state    *State
	// Now stamps the evidence kept of a refused checkpoint; time.Now when
	// nil.
	Now func() time.Time
}

// New returns a witness that cosigns with signer, whose vkey is vkey
// (NewSigner's two answers), the logs in logs, keeping its records in state.
func New(signer note.Signer, vkey string, logs *Logs, state *State) (*Witness, error) {
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return nil, fmt.Errorf("witness vkey: %w", err)
	}
	if v.Name() != signer.Name() || v.KeyHash() != signer.KeyHash() {
		return nil, fmt.Errorf("witness vkey %q is not the signer's key", vkey)
	}
	return &Witness{logs: logs, signer: signer, verifier: v, state: state}, nil
}

// Verifier is the witness's own cosignature verifier.
func (w *Witness) Verifier() note.Verifier { return w.verifier }

// addRequest is an add-checkpoint body.
type addRequest struct {
	old        uint64
	proof      []verify.Hash
	checkpoint []byte
}

// parseAddRequest reads "old <size>\n", up to 63 base64 hash lines, an
// empty line and the checkpoint (tlog-witness "add-checkpoint").
func parseAddRequest(body []byte) (addRequest, error) {
	var req addRequest
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	size, isOld := strings.CutPrefix(string(line), "old ")
	if !ok || !isOld {
		return req, fmt.Errorf("%w: the body must start with the line \"old <size>\"", ErrBadRequest)
	}
	old, err := strconv.ParseUint(size, 10, 64)
	if err != nil || strconv.FormatUint(old, 10) != size {
		return req, fmt.Errorf("%w: old size %q is not a decimal without leading zeroes", ErrBadRequest, size)
	}
	req.old = old
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return req, fmt.Errorf("%w: no empty line between the proof and the checkpoint", ErrBadRequest)
		}
		if len(line) == 0 {
			break
		}
		if len(req.proof) == MaxProofLines {
			return req, fmt.Errorf("%w: more than %d proof lines", ErrBadRequest, MaxProofLines)
		}
		var h verify.Hash
		if err := h.UnmarshalText(line); err != nil {
			return req, fmt.Errorf("%w: proof line %d: %v", ErrBadRequest, len(req.proof)+1, err)
		}
		req.proof = append(req.proof, h)
	}
	if len(rest) == 0 {
		return req, fmt.Errorf("%w: no checkpoint after the empty line", ErrBadRequest)
	}
	req.checkpoint = rest
	return req, nil
}

// maxAttempts bounds the retries of a request whose record another request
// changed between reading and writing while leaving its size (an equal-size
// resubmission, cosigned again with a newer time).
const maxAttempts = 4

// AddCheckpoint runs one add-checkpoint request (its body) and returns the
// cosignature: note signature lines, each "— <witness name> <base64>\n".
// Errors wrap ErrBadRequest, ErrUnknownLog, ErrNoLogSignature or
// ErrNotConsistent, or are a *ConflictError; any other error is the
// witness's own (its state).
func (w *Witness) AddCheckpoint(ctx context.Context, body []byte) ([]byte, error) {
	req, err := parseAddRequest(body)
	if err != nil {
		return nil, err
	}
	originLine, _, _ := bytes.Cut(req.checkpoint, []byte("\n"))
	origin := string(originLine)
	trusted := w.logs.verifiers(origin)
	if trusted == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownLog, origin)
	}
	// note.Open ignores signatures by unknown keys, and fails when none of
	// the trusted keys signed or when one of their signatures is bad, as
	// tlog-witness asks.
	n, err := note.Open(req.checkpoint, note.VerifierList(trusted...))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoLogSignature, origin, err)
		}
		return nil, fmt.Errorf("%w: checkpoint: %v", ErrBadRequest, err)
	}
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	var root verify.Hash
	if len(cp.Hash) != len(root) {
		return nil, fmt.Errorf("%w: root hash of %d bytes, want %d", ErrBadRequest, len(cp.Hash), len(root))
	}
	copy(root[:], cp.Hash)
	if req.old > cp.Size {
		return nil, fmt.Errorf("%w: old size %d is above the checkpoint's size %d", ErrBadRequest, req.old, cp.Size)
	}
	if cp.Size == 0 && root != verify.EmptyRoot {
		return nil, fmt.Errorf("%w: a checkpoint of size 0 must have the empty tree's root", ErrNotConsistent)
	}
	for range maxAttempts {
		last, err := w.state.Get(ctx, origin)
		if err != nil {
			return nil, err
		}
		if req.old != last.Size {
			return nil, &ConflictError{Origin: origin, Old: req.old, Size: last.Size}
		}
		// From the size last cosigned (0: nothing, an empty proof) to the
		// new one; equal sizes need equal roots and an empty proof.
		// The verified log signatures (tlog-witness: the witness serves
		// them with its cosignature to monitors).
		logSigned, err := note.Sign(&note.Note{Text: n.Text, Sigs: n.Sigs})
		if err != nil {
			return nil, err
		}
		if err := verify.VerifyConsistency(last.Size, cp.Size, req.proof, last.Root, root); err != nil {
			err = fmt.Errorf("%w: %s from %d to %d: %v", ErrNotConsistent, origin, last.Size, cp.Size, err)
			if kerr := w.keepSplitView(ctx, last, cp.Size, root, logSigned); kerr != nil {
				// Still the 422 it is; the handler logs the request whole.
				err = fmt.Errorf("%w; keeping it as evidence failed: %v", err, kerr)
			}
			return nil, err
		}
		cosigned, err := note.Sign(&note.Note{Text: n.Text, Sigs: n.Sigs}, w.signer)
		if err != nil {
			return nil, fmt.Errorf("witness: cosign: %w", err)
		}
		err = w.state.advance(ctx, last, Record{Origin: origin, Size: cp.Size, Root: root, Checkpoint: cosigned})
		if errors.Is(err, errStale) {
			continue // read again: a conflict now, or an equal-size race
		}
		if err != nil {
			return nil, err
		}
		return cosigned[len(logSigned):], nil
	}
	last, err := w.state.Get(ctx, origin)
	if err != nil {
		return nil, err
	}
	return nil, &ConflictError{Origin: origin, Old: req.old, Size: last.Size}
}

// keepSplitView keeps a checkpoint the log's key signed with the size of
// last, the record it was held to, and another root, as evidence beside
// last (State.keepEvidence), before the refusal is answered. Any other
// refusal keeps nothing: an equal root refused for a non-empty proof, or a
// larger size whose proof failed, proves nothing against the log.
func (w *Witness) keepSplitView(ctx context.Context, last Record, size uint64, root verify.Hash, logSigned []byte) error {
	if !last.found || size != last.Size || root == last.Root {
		return nil
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	return w.state.keepEvidence(ctx, Evidence{Origin: last.Origin, ReceivedAt: now().UTC(), Kind: EvidenceSameSizeOtherRoot,
		TreeSize: size, Submitted: string(logSigned), Cosigned: string(last.Checkpoint)})
}

// Checkpoint returns the latest checkpoint cosigned for the origin whose
// OriginHash is originHash, with the log's verified signatures and the
// cosignature; ok is false when the witness never cosigned one.
func (w *Witness) Checkpoint(ctx context.Context, originHash string) ([]byte, bool, error) {
	r, err := w.state.GetByHash(ctx, originHash)
	if err != nil || !r.found {
		return nil, false, err
	}
	return r.Checkpoint, true, nil
}
