// Merkle tree verification (CONTRACT.md "Integrity"): the account chain is an
// RFC 6962 tree whose leaf data are the events' payload_hash bytes. This file
// holds everything an outside verifier needs: the hash functions, the RFC 9162
// proof checks, and the Frontier that streams a tree root in constant memory.
//
// The proof checks are written out from RFC 9162 §2.1.3.2 and §2.1.4.2 rather
// than wrapping golang.org/x/mod/sumdb/tlog, so that the service (which proves
// with tlog) and the verifier are two implementations checked against each
// other and against github.com/transparency-dev/merkle in the tests.

package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
)

// Hash is a SHA-256 tree hash. In JSON and in checkpoints it is standard base64.
type Hash [sha256.Size]byte

// String returns the standard base64 form.
func (h Hash) String() string { return base64.StdEncoding.EncodeToString(h[:]) }

// MarshalText encodes h as standard base64.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes standard base64 of exactly 32 bytes.
func (h *Hash) UnmarshalText(b []byte) error {
	var buf [sha256.Size + 2]byte
	if len(b) != base64.StdEncoding.EncodedLen(sha256.Size) {
		return fmt.Errorf("hash %.60q is not standard base64 of 32 bytes", b)
	}
	n, err := base64.StdEncoding.Decode(buf[:], b)
	if err != nil || n != sha256.Size {
		return fmt.Errorf("hash %q is not standard base64 of 32 bytes", b)
	}
	copy(h[:], buf[:n])
	return nil
}

// EmptyRoot is the root of the empty tree: SHA-256 of the empty string (RFC 6962 §2.1).
var EmptyRoot = Hash(sha256.Sum256(nil))

// LeafHash is the RFC 6962 leaf hash SHA-256(0x00 || leaf). For the account
// chain leaf is the 32 bytes of an event's payload_hash (see HashBytes), so a
// leaf hash is SHA-256(0x00 || SHA-256(JCS(event))).
func LeafHash(leaf []byte) Hash {
	if len(leaf) == sha256.Size {
		var buf [1 + sha256.Size]byte
		copy(buf[1:], leaf)
		return sha256.Sum256(buf[:])
	}
	h := sha256.New()
	h.Write([]byte{0x00})
	h.Write(leaf)
	var out Hash
	h.Sum(out[:0])
	return out
}

// NodeHash is the RFC 6962 interior hash SHA-256(0x01 || left || right).
func NodeHash(left, right Hash) Hash {
	var buf [1 + 2*sha256.Size]byte
	buf[0] = 0x01
	copy(buf[1:], left[:])
	copy(buf[1+sha256.Size:], right[:])
	return sha256.Sum256(buf[:])
}

// ErrProof is wrapped by every proof that does not verify.
var ErrProof = errors.New("merkle proof does not verify")

// VerifyInclusion checks an RFC 9162 inclusion proof (audit path, leaf to
// root) that the leaf with leafHash sits at index in the tree of size size
// whose root is root.
func VerifyInclusion(index, size uint64, leafHash Hash, proof []Hash, root Hash) error {
	if index >= size {
		return fmt.Errorf("%w: index %d is outside a tree of size %d", ErrProof, index, size)
	}
	fn, sn := index, size-1
	r := leafHash
	for _, p := range proof {
		if sn == 0 {
			return fmt.Errorf("%w: inclusion proof for %d in %d is too long", ErrProof, index, size)
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = NodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return fmt.Errorf("%w: inclusion proof for %d in %d is too short", ErrProof, index, size)
	}
	if r != root {
		return fmt.Errorf("%w: inclusion of %d in %d: root mismatch", ErrProof, index, size)
	}
	return nil
}

// VerifyConsistency checks an RFC 9162 consistency proof that the tree of
// size1 with root1 is a prefix of the tree of size2 with root2. Every tree is
// consistent with the empty tree (size1 0, empty proof); equal sizes need an
// empty proof and equal roots.
func VerifyConsistency(size1, size2 uint64, proof []Hash, root1, root2 Hash) error {
	switch {
	case size1 > size2:
		return fmt.Errorf("%w: consistency from %d to smaller %d", ErrProof, size1, size2)
	case size1 == size2:
		if len(proof) != 0 {
			return fmt.Errorf("%w: consistency between equal sizes needs an empty proof", ErrProof)
		}
		if root1 != root2 {
			return fmt.Errorf("%w: roots of equal size %d differ", ErrProof, size1)
		}
		return nil
	case size1 == 0:
		if len(proof) != 0 {
			return fmt.Errorf("%w: consistency from the empty tree needs an empty proof", ErrProof)
		}
		return nil
	case len(proof) == 0:
		return fmt.Errorf("%w: empty consistency proof from %d to %d", ErrProof, size1, size2)
	}
	path := proof
	if size1&(size1-1) == 0 { // size1 is a power of two: its root is a node of the new tree
		path = append([]Hash{root1}, proof...)
	}
	fn, sn := size1-1, size2-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return fmt.Errorf("%w: consistency proof from %d to %d is too long", ErrProof, size1, size2)
		}
		if fn&1 == 1 || fn == sn {
			fr = NodeHash(c, fr)
			sr = NodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = NodeHash(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return fmt.Errorf("%w: consistency proof from %d to %d is too short", ErrProof, size1, size2)
	}
	if fr != root1 || sr != root2 {
		return fmt.Errorf("%w: consistency from %d to %d: root mismatch", ErrProof, size1, size2)
	}
	return nil
}

// Frontier is the compact range [0, Size) of the tree: the roots of its
// perfect subtrees, largest (leftmost) first, one per set bit of Size. It is
// all a streaming verifier keeps of the tree — at most 64 hashes whatever the
// chain length — and appending leaves to it yields the root of every later
// size. A fragment export starts from the frontier at its first leaf index.
type Frontier struct {
	size   uint64
	hashes []Hash
}

// NewFrontier returns the frontier of a tree of the given size from its
// perfect-subtree hashes, largest first (as produced by merkle.Frontier).
func NewFrontier(size uint64, hashes []Hash) (*Frontier, error) {
	if len(hashes) != bits.OnesCount64(size) {
		return nil, fmt.Errorf("a frontier of size %d has %d hashes, got %d", size, bits.OnesCount64(size), len(hashes))
	}
	f := &Frontier{size: size, hashes: make([]Hash, len(hashes), 64)}
	copy(f.hashes, hashes)
	return f, nil
}

// Size is the number of leaves appended so far.
func (f *Frontier) Size() uint64 { return f.size }

// Hashes returns a copy of the perfect-subtree hashes, largest first.
func (f *Frontier) Hashes() []Hash { return append([]Hash(nil), f.hashes...) }

// Append adds the leaf with the given leaf hash (see LeafHash).
func (f *Frontier) Append(leafHash Hash) {
	f.hashes = append(f.hashes, leafHash)
	// Each trailing one bit of the old size completes a perfect subtree.
	for s := f.size; s&1 == 1; s >>= 1 {
		n := len(f.hashes)
		f.hashes[n-2] = NodeHash(f.hashes[n-2], f.hashes[n-1])
		f.hashes = f.hashes[:n-1]
	}
	f.size++
}

// Root returns the RFC 6962 root of the tree of Size leaves.
func (f *Frontier) Root() Hash {
	n := len(f.hashes)
	if n == 0 {
		return EmptyRoot
	}
	r := f.hashes[n-1]
	for i := n - 2; i >= 0; i-- {
		r = NodeHash(f.hashes[i], r)
	}
	return r
}
