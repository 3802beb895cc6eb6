// Package checkpoint seals chain blocks (CONTRACT.md "Integrity"): C2SP
// tlog-checkpoints over an account's Merkle tree, signed with the service
// identity Ed25519 key as C2SP signed notes, each linking to the previous
// block. The format and the verifying half are in pkg/verify (checkpoint.go),
// so an auditor needs only that package; this package only signs.
package checkpoint

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/auditchain/auditchain/pkg/verify"
)

// Signer signs one account's checkpoints: an Ed25519 note signer whose key
// name is the origin, so the note's signature line reads "— <origin> ...".
type Signer struct {
	origin string
	hash   uint32
	key    ed25519.PrivateKey
}

// NewSigner returns the signer for origin (see verify.Origin) with the service key.
func NewSigner(origin string, key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("checkpoint: service key must be %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	v, err := verify.CheckpointVerifier(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &Signer{origin: origin, hash: v.KeyHash(), key: key}, nil
}

// Name implements note.Signer.
func (s *Signer) Name() string { return s.origin }

// KeyHash implements note.Signer.
func (s *Signer) KeyHash() uint32 { return s.hash }

// Sign implements note.Signer.
func (s *Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

// Body returns the checkpoint text: origin, size and base64 root (C2SP
// tlog-checkpoint), then "prev <base64 BlockHash>" unless prev is nil.
func Body(origin string, size uint64, root [32]byte, prev *[32]byte) []byte {
	b := log.Checkpoint{Origin: origin, Size: size, Hash: root[:]}.Marshal()
	if prev != nil {
		b = append(b, verify.PrevLinePrefix...)
		b = append(b, verify.Hash(*prev).String()...)
		b = append(b, '\n')
	}
	return b
}

// SignBlock returns the signed note of a block: Body signed under the
// signer's origin. prevBlockHash is BlockHash of the previous block's signed
// note, nil for block 0. Ed25519 is deterministic, so the same inputs give the
// same bytes.
func (s *Signer) SignBlock(size uint64, root [32]byte, prevBlockHash *[32]byte) ([]byte, error) {
	msg, err := note.Sign(&note.Note{Text: string(Body(s.origin, size, root, prevBlockHash))}, s)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: sign: %w", err)
	}
	return msg, nil
}

// Block is a sealed block as the store keeps it.
type Block struct {
	Index    int64
	Size     uint64
	Root     verify.Hash
	PrevHash *verify.Hash // nil for block 0
	Note     []byte       // the signed note, verbatim
	Hash     verify.Hash  // BlockHash(Note), what the next block links to
}

// ErrShrink is returned when a block would cover fewer leaves than its predecessor.
var ErrShrink = errors.New("checkpoint: a block cannot cover fewer leaves than the previous one")

// Seal signs the block that follows prev (nil for the first block of an
// account) over the tree of the given size and root.
func (s *Signer) Seal(prev *Block, size uint64, root [32]byte) (Block, error) {
	b := Block{Size: size, Root: root}
	if prev != nil {
		if size < prev.Size {
			return Block{}, fmt.Errorf("%w: %d after %d", ErrShrink, size, prev.Size)
		}
		h := prev.Hash
		b.Index, b.PrevHash = prev.Index+1, &h
	}
	var link *[32]byte
	if b.PrevHash != nil {
		l := [32]byte(*b.PrevHash)
		link = &l
	}
	n, err := s.SignBlock(size, root, link)
	if err != nil {
		return Block{}, err
	}
	b.Note, b.Hash = n, verify.BlockHash(n)
	return b, nil
}
