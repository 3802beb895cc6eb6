// Package merkle maintains an account's RFC 6962 tree (CONTRACT.md
// "Integrity") in the stored-hash form of golang.org/x/mod/sumdb/tlog, which a
// SQL store persists as plain rows: appending leaf n writes the hashes
// AppendLeaf returns at their stored-hash indexes, and every root and proof is
// then computed by reading at most O(log n) of those rows back.
//
// Leaf definition: leaf n is the 32 raw bytes of the payload_hash of the n-th
// event stored for the account (append order, which is sequence order while
// the chain is continuous); its leaf hash is SHA-256(0x00 || those 32 bytes).
// The package is pure: the store supplies a HashReader and persists results.
package merkle

import (
	"errors"
	"fmt"
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/pkg/verify"
)

// LeafSize is the length of a leaf: the bytes of a sha256 payload_hash.
const LeafSize = 32

// HashReader is what the store implements: ReadHashes returns, in order, the
// stored hashes at the given stored-hash indexes (tlog.StoredHashIndex), or an
// error; it must never return fewer hashes than asked for. Reads are issued in
// increasing index order and should be served inside the transaction that
// appends, so a root is never computed over a half-written tree.
type HashReader = tlog.HashReader

// StoredHash is one row to persist: the hash at a stored-hash index.
type StoredHash struct {
	Index int64
	Hash  [32]byte
}

// ErrLeafSize is returned for a leaf that is not exactly LeafSize bytes, which
// usually means the "sha256:<hex>" string was passed instead of its bytes.
var ErrLeafSize = errors.New("merkle leaf must be the 32 bytes of a payload_hash")

// AppendLeaf returns the hashes to persist when leaf n (0-based; the tree then
// has n+1 leaves) is appended: the leaf hash first, at StoredHashIndex(0, n),
// then one hash per subtree the leaf completes, at consecutive indexes. It
// reads at most log2(n) earlier hashes from r. On average two hashes per leaf.
func AppendLeaf(n int64, leaf []byte, r HashReader) ([]StoredHash, error) {
	if len(leaf) != LeafSize {
		return nil, fmt.Errorf("%w: got %d bytes", ErrLeafSize, len(leaf))
	}
	if n < 0 {
		return nil, fmt.Errorf("merkle: negative leaf index %d", n)
	}
	hs, err := tlog.StoredHashes(n, leaf, r)
	if err != nil {
		return nil, fmt.Errorf("merkle: append leaf %d: %w", n, err)
	}
	first := tlog.StoredHashIndex(0, n)
	out := make([]StoredHash, len(hs))
	for i, h := range hs {
		out[i] = StoredHash{Index: first + int64(i), Hash: h}
	}
	return out, nil
}

// AppendReads returns the stored-hash indexes AppendLeaf(n, …) reads, in the
// order it asks for them: the roots of the complete subtrees leaf n closes —
// the smallest ones of the tree of n leaves, one per trailing 1 bit of n. A
// caller can read them ahead, in the same round trip as the tree size.
func AppendReads(n int64) []int64 {
	f := FrontierIndexes(n)
	return f[len(f)-bits.TrailingZeros64(uint64(n+1)):]
}

// StoredHashCount is the number of stored hashes of a tree with n leaves: the
// hashes a store holds for an account once n leaves were appended (one per
// row on PostgreSQL, in runs of up to four on SQLite).
func StoredHashCount(n int64) int64 { return tlog.StoredHashCount(n) }

// Root returns the root hash of the tree of size n (EmptyRoot for 0).
func Root(n int64, r HashReader) (verify.Hash, error) {
	h, err := tlog.TreeHash(n, r)
	if err != nil {
		return verify.Hash{}, fmt.Errorf("merkle: root of %d: %w", n, err)
	}
	return verify.Hash(h), nil
}

// InclusionProof returns the RFC 6962 audit path, leaf to root, proving that
// leaf index is in the tree of size treeSize; check it with verify.VerifyInclusion.
func InclusionProof(index, treeSize int64, r HashReader) ([]verify.Hash, error) {
	if index < 0 || index >= treeSize {
		return nil, fmt.Errorf("merkle: leaf %d is not in a tree of size %d", index, treeSize)
	}
	p, err := tlog.ProveRecord(treeSize, index, r)
	if err != nil {
		return nil, fmt.Errorf("merkle: inclusion of %d in %d: %w", index, treeSize, err)
	}
	return toHashes(p), nil
}

// ConsistencyProof returns the RFC 6962 consistency proof that the tree of
// size n1 is a prefix of the tree of size n2 (empty when n1 is 0 or n1 == n2);
// check it with verify.VerifyConsistency.
func ConsistencyProof(n1, n2 int64, r HashReader) ([]verify.Hash, error) {
	if n1 < 0 || n1 > n2 {
		return nil, fmt.Errorf("merkle: no consistency proof from %d to %d", n1, n2)
	}
	if n1 == 0 || n1 == n2 {
		return []verify.Hash{}, nil
	}
	p, err := tlog.ProveTree(n2, n1, r)
	if err != nil {
		return nil, fmt.Errorf("merkle: consistency %d to %d: %w", n1, n2, err)
	}
	return toHashes(p), nil
}

// FrontierIndexes returns the stored-hash indexes of the perfect subtrees
// that make up [0, n), largest first: one per set bit of n.
func FrontierIndexes(n int64) []int64 {
	var idx []int64
	var lo int64
	for l := 62; l >= 0; l-- {
		if n&(1<<l) != 0 {
			idx = append(idx, tlog.StoredHashIndex(l, lo>>l))
			lo += 1 << l
		}
	}
	return idx
}

// Frontier returns the compact range of the tree of size n (largest subtree
// first), the starting state verify.NewFrontier needs for a fragment export
// beginning at leaf n.
func Frontier(n int64, r HashReader) ([]verify.Hash, error) {
	if n < 0 {
		return nil, fmt.Errorf("merkle: negative tree size %d", n)
	}
	idx := FrontierIndexes(n)
	if len(idx) == 0 {
		return []verify.Hash{}, nil
	}
	hs, err := r.ReadHashes(idx)
	if err != nil {
		return nil, fmt.Errorf("merkle: frontier of %d: %w", n, err)
	}
	if len(hs) != len(idx) {
		return nil, fmt.Errorf("merkle: ReadHashes(%d indexes) = %d hashes", len(idx), len(hs))
	}
	return toHashes(hs), nil
}

func toHashes(hs []tlog.Hash) []verify.Hash {
	out := make([]verify.Hash, len(hs))
	for i, h := range hs {
		out[i] = verify.Hash(h)
	}
	return out
}
