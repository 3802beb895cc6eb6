package merkle

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/pkg/verify"
)

// HashStore is an in-memory tree: the stored hashes in one dense slice, so
// stored-hash index i is hashes[i]. The service keeps the same rows in SQL;
// this is the reference the tests hold them to (merkle's own, the store's and
// the writer's), so it is not in a _test file: tests of other packages use it.
type HashStore struct {
	leaves int64
	hashes []tlog.Hash
}

// Size is the number of leaves appended.
func (s *HashStore) Size() int64 { return s.leaves }

// ReadHashes implements HashReader.
func (s *HashStore) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= int64(len(s.hashes)) {
			return nil, fmt.Errorf("merkle: stored hash %d not present (have %d)", idx, len(s.hashes))
		}
		out[i] = s.hashes[idx]
	}
	return out, nil
}

// Append appends the next leaf and stores its hashes, as the service does in
// the transaction that stores the event.
func (s *HashStore) Append(leaf []byte) error {
	hs, err := AppendLeaf(s.leaves, leaf, s)
	if err != nil {
		return err
	}
	return s.Store(hs)
}

// Store persists rows returned by AppendLeaf for the next leaf. Rows must
// continue the dense index sequence, as a store's primary key would enforce.
func (s *HashStore) Store(rows []StoredHash) error {
	for _, r := range rows {
		if r.Index != int64(len(s.hashes)) {
			return fmt.Errorf("merkle: stored hash %d out of order (next is %d)", r.Index, len(s.hashes))
		}
		s.hashes = append(s.hashes, r.Hash)
	}
	s.leaves++
	return nil
}

// Root returns the root of the current tree.
func (s *HashStore) Root() verify.Hash {
	h, err := Root(s.leaves, s)
	if err != nil {
		panic(err) // every index below StoredHashCount(leaves) is present
	}
	return h
}
