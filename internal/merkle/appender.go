package merkle

import (
	"fmt"
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"
)

// Appender appends a run of consecutive leaves to a tree whose frontier it
// holds: the roots of the perfect subtrees that make up the tree, largest
// first (FrontierIndexes). Each leaf's stored hashes come from that frontier
// alone, so a batch of leaves is hashed without reading anything but the
// frontier once (and without AppendLeaf's reader calls and maps). It yields
// exactly what AppendLeaf does, leaf after leaf (TestAppenderMatchesAppendLeaf).
type Appender struct {
	n        int64       // leaves in the tree
	frontier []tlog.Hash // one per set bit of n, largest subtree first
}

// NewAppender starts from the tree of n leaves whose frontier is the hashes at
// FrontierIndexes(n), in that order.
func NewAppender(n int64, frontier []tlog.Hash) (*Appender, error) {
	if n < 0 {
		return nil, fmt.Errorf("merkle: negative tree size %d", n)
	}
	if want := bits.OnesCount64(uint64(n)); len(frontier) != want {
		return nil, fmt.Errorf("merkle: a tree of %d leaves has a frontier of %d hashes, got %d", n, want, len(frontier))
	}
	return &Appender{n: n, frontier: append([]tlog.Hash(nil), frontier...)}, nil
}

// Size is the number of leaves appended so far, the next leaf's index.
func (a *Appender) Size() int64 { return a.n }

// Append adds the next leaf (the 32 bytes of a payload_hash) and appends its
// stored hashes to out: the leaf hash at StoredHashIndex(0, n), then the root
// of each subtree the leaf completes, at the following indexes.
func (a *Appender) Append(out []StoredHash, leaf []byte) ([]StoredHash, error) {
	if len(leaf) != LeafSize {
		return out, fmt.Errorf("%w: got %d bytes", ErrLeafSize, len(leaf))
	}
	idx := tlog.StoredHashIndex(0, a.n)
	h := tlog.RecordHash(leaf)
	out = append(out, StoredHash{Index: idx, Hash: h})
	// Leaf n closes one subtree per trailing 1 bit of n: each joins the
	// smallest frontier subtree, which is its left sibling.
	for k := bits.TrailingZeros64(^uint64(a.n)); k > 0; k-- {
		last := len(a.frontier) - 1
		h = tlog.NodeHash(a.frontier[last], h)
		a.frontier = a.frontier[:last]
		idx++
		out = append(out, StoredHash{Index: idx, Hash: h})
	}
	a.frontier = append(a.frontier, h)
	a.n++
	return out, nil
}
