// Chain blocks (CONTRACT.md "Integrity"): a block is a C2SP tlog-checkpoint
// signed by the service identity as a C2SP signed note, and every block after
// the first names the hash of the one before it. This file is the verifying
// half; internal/checkpoint signs.
//
// A block's signed note is
//
//	auditchain/<user_id>                      origin (see Origin)
//	<tree size, decimal>
//	<root hash, standard base64>
//	prev <standard base64 of BlockHash(previous block)>   absent in block 0
//	                                           (blank line)
//	— auditchain/<user_id> <base64(key hash || Ed25519 signature)>
//
// The signing key's note name is the origin, so the verifier key for one
// account is "<origin>+<hash>+<base64(0x01 || public key)>", derived from
// the published service public key by CheckpointVerifierKey. The prev line is
// a C2SP extension line, so the signature covers the link and generic C2SP
// tooling (transparency-dev/formats log.ParseCheckpoint) still parses the
// checkpoint.
package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// OriginPrefix starts every checkpoint origin.
const OriginPrefix = "auditchain/"

// Origin is the checkpoint origin, and the note key name, of an account's
// log: "auditchain/<user_id>". It names the service and the account; which
// deployment is named by the key that signs it.
func Origin(userID string) string { return OriginPrefix + userID }

// PrevLinePrefix starts the extension line that links a block to the one before.
const PrevLinePrefix = "prev "

// Checkpoint is a parsed, verified block.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   Hash
	// Prev is BlockHash of the previous block; nil only for block 0.
	Prev *Hash
	// Extensions holds any other extension lines, in order, for forward compatibility.
	Extensions []string
	// Body is the signed text (the checkpoint without its signature lines).
	Body string
}

// Sentinel causes wrapped by checkpoint errors.
var (
	ErrCheckpointMalformed = errors.New("checkpoint is malformed")
	ErrCheckpointSignature = errors.New("checkpoint signature does not verify")
	ErrCheckpointOrigin    = errors.New("checkpoint origin is not the expected one")
)

// BlockHash is the hash by which the next block links to this one: SHA-256
// over the complete signed note bytes (body, blank line and signature lines)
// exactly as stored and exported.
func BlockHash(signedNote []byte) Hash { return sha256.Sum256(signedNote) }

// CheckpointVerifierKey returns the signed-note verifier key of the service
// key for one account's origin: "<origin>+<hash>+<base64(0x01 || pub)>".
func CheckpointVerifierKey(origin string, servicePub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(origin, servicePub)
}

// CheckpointVerifier returns a note.Verifier for one account's checkpoints.
func CheckpointVerifier(origin string, servicePub ed25519.PublicKey) (note.Verifier, error) {
	if len(servicePub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("service public key must be %d bytes, got %d", ed25519.PublicKeySize, len(servicePub))
	}
	vkey, err := CheckpointVerifierKey(origin, servicePub)
	if err != nil {
		return nil, fmt.Errorf("origin %q cannot name a note key: %w", origin, err)
	}
	return note.NewVerifier(vkey)
}

// OpenCheckpoint verifies the service signature on a signed checkpoint note
// and parses it, requiring the given origin. Errors wrap
// ErrCheckpointSignature (no valid service signature), ErrCheckpointOrigin or
// ErrCheckpointMalformed. Signatures by other keys (witnesses) are ignored.
func OpenCheckpoint(signedNote []byte, servicePub ed25519.PublicKey, origin string) (Checkpoint, error) {
	v, err := CheckpointVerifier(origin, servicePub)
	if err != nil {
		return Checkpoint{}, err
	}
	return openCheckpoint(signedNote, v, origin)
}

func openCheckpoint(signedNote []byte, v note.Verifier, origin string) (Checkpoint, error) {
	n, err := note.Open(signedNote, note.VerifierList(v))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			// Parsed, but not signed by this key under this origin's name:
			// tell a wrong origin apart from a wrong or missing signature.
			if cp, perr := ParseCheckpointBody(unverified.Note.Text); perr == nil && cp.Origin != origin {
				return Checkpoint{}, fmt.Errorf("%w: got %q, want %q", ErrCheckpointOrigin, cp.Origin, origin)
			}
			return Checkpoint{}, fmt.Errorf("%w: no signature by the service key for %q", ErrCheckpointSignature, origin)
		case errors.As(err, &invalid):
			return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpointSignature, err)
		default:
			return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpointMalformed, err)
		}
	}
	cp, err := ParseCheckpointBody(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if cp.Origin != origin {
		return Checkpoint{}, fmt.Errorf("%w: got %q, want %q", ErrCheckpointOrigin, cp.Origin, origin)
	}
	return cp, nil
}

// ParseCheckpointBody parses the text of a checkpoint WITHOUT checking any
// signature: origin, decimal size, base64 root, then extension lines, of
// which at most one is the prev link. Use OpenCheckpoint for anything trusted.
func ParseCheckpointBody(text string) (Checkpoint, error) {
	if !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, fmt.Errorf("%w: text does not end in a newline", ErrCheckpointMalformed)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("%w: %d lines, need origin, size and root", ErrCheckpointMalformed, len(lines))
	}
	cp := Checkpoint{Origin: lines[0], Body: text}
	if cp.Origin == "" {
		return Checkpoint{}, fmt.Errorf("%w: empty origin", ErrCheckpointMalformed)
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: size %q", ErrCheckpointMalformed, lines[1])
	}
	cp.Size = size
	if err := cp.Root.UnmarshalText([]byte(lines[2])); err != nil {
		return Checkpoint{}, fmt.Errorf("%w: root: %v", ErrCheckpointMalformed, err)
	}
	for _, l := range lines[3:] {
		if l == "" {
			return Checkpoint{}, fmt.Errorf("%w: empty extension line", ErrCheckpointMalformed)
		}
		if rest, ok := strings.CutPrefix(l, PrevLinePrefix); ok {
			if cp.Prev != nil {
				return Checkpoint{}, fmt.Errorf("%w: two prev lines", ErrCheckpointMalformed)
			}
			var prev Hash
			if err := prev.UnmarshalText([]byte(rest)); err != nil {
				return Checkpoint{}, fmt.Errorf("%w: prev: %v", ErrCheckpointMalformed, err)
			}
			cp.Prev = &prev
			continue
		}
		cp.Extensions = append(cp.Extensions, l)
	}
	return cp, nil
}

// BlockVerifier checks a sequence of blocks in order — signature, origin, the
// prev link, and sizes that never shrink — keeping only the last block's hash
// and size. GET /v1/chain/verify and VerifyExport both use it; errors are
// *Error with the block index and kind KindCheckpointSignature or
// KindBlockLink. Comparing each block's root with the tree is the caller's
// part (KindMerkleRoot).
type BlockVerifier struct {
	origin   string
	verifier note.Verifier
	started  bool
	next     int64
	prevHash Hash
	prevSize uint64
}

// NewBlockVerifier returns a verifier for one account's blocks.
func NewBlockVerifier(origin string, servicePub ed25519.PublicKey) (*BlockVerifier, error) {
	v, err := CheckpointVerifier(origin, servicePub)
	if err != nil {
		return nil, err
	}
	return &BlockVerifier{origin: origin, verifier: v}, nil
}

// Next verifies the block with the given index. The first block seen may have
// any index (a fragment starts mid-chain) but index 0 must carry no prev link;
// each later block must have the next index and link to the block before.
func (b *BlockVerifier) Next(index int64, signedNote []byte) (Checkpoint, error) {
	fail := func(kind Kind, err error) (Checkpoint, error) {
		return Checkpoint{}, &Error{Kind: kind, Sequence: -1, Block: index, Err: err}
	}
	cp, err := openCheckpoint(signedNote, b.verifier, b.origin)
	switch {
	case errors.Is(err, ErrCheckpointOrigin):
		return fail(KindCheckpointOrigin, err)
	case err != nil:
		return fail(KindCheckpointSignature, err)
	}
	switch {
	case index < 0:
		return fail(KindBlockLink, fmt.Errorf("negative block index"))
	case index == 0 && cp.Prev != nil:
		return fail(KindBlockLink, fmt.Errorf("block 0 links to a previous block"))
	case index > 0 && cp.Prev == nil:
		return fail(KindBlockLink, fmt.Errorf("block %d has no prev link", index))
	case b.started && index != b.next:
		return fail(KindBlockLink, fmt.Errorf("block %d follows block %d", index, b.next-1))
	case b.started && *cp.Prev != b.prevHash:
		return fail(KindBlockLink, fmt.Errorf("prev link %s is not the hash %s of block %d", cp.Prev, b.prevHash, index-1))
	case b.started && cp.Size < b.prevSize:
		return fail(KindBlockLink, fmt.Errorf("tree size %d is below block %d's size %d", cp.Size, index-1, b.prevSize))
	}
	b.started = true
	b.next = index + 1
	b.prevHash = BlockHash(signedNote)
	b.prevSize = cp.Size
	return cp, nil
}
