package merkle

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/pkg/verify"
)

const maxSize = 70

// leaf returns a deterministic 32-byte leaf, as a payload_hash would be.
func leaf(i int) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	s := sha256.Sum256(b[:])
	return s[:]
}

// build returns our store and transparency-dev's reference tree over the same leaves.
func build(t testing.TB, n int) (*HashStore, *testonly.Tree) {
	t.Helper()
	s := &HashStore{}
	ref := testonly.New(rfc6962.DefaultHasher)
	for i := range n {
		if err := s.Append(leaf(i)); err != nil {
			t.Fatal(err)
		}
		ref.AppendData(leaf(i))
	}
	return s, ref
}

func raw(hs []verify.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

func cooked(bs [][]byte) []verify.Hash {
	out := make([]verify.Hash, len(bs))
	for i := range bs {
		copy(out[i][:], bs[i])
	}
	return out
}

func TestRootsMatchReference(t *testing.T) {
	s, ref := build(t, maxSize)
	if got := s.Root(); got != verify.Hash(ref.Hash()) {
		t.Fatalf("root %x, reference %x", got, ref.Hash())
	}
	for n := int64(0); n <= maxSize; n++ {
		got, err := Root(n, s)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.HashAt(uint64(n)); got != verify.Hash(want) {
			t.Errorf("Root(%d) = %x, reference %x", n, got, want)
		}
		if n == 0 && got != verify.EmptyRoot {
			t.Errorf("empty root %x", got)
		}
		if c := StoredHashCount(n); n == s.Size() && c != int64(len(s.hashes)) {
			t.Errorf("StoredHashCount(%d) = %d, stored %d", n, c, len(s.hashes))
		}
	}
}

// TestProofsVerifyIndependently checks, for every size 1..70 and every index
// (sizes are small), that our proofs pass transparency-dev's verifier and
// pkg/verify, and that transparency-dev's proofs pass pkg/verify.
func TestProofsVerifyIndependently(t *testing.T) {
	s, ref := build(t, maxSize)
	h := rfc6962.DefaultHasher
	for size := int64(1); size <= maxSize; size++ {
		root, err := Root(size, s)
		if err != nil {
			t.Fatal(err)
		}
		for idx := int64(0); idx < size; idx++ {
			p, err := InclusionProof(idx, size, s)
			if err != nil {
				t.Fatal(err)
			}
			lh := verify.LeafHash(leaf(int(idx)))
			if err := proof.VerifyInclusion(h, uint64(idx), uint64(size), lh[:], raw(p), root[:]); err != nil {
				t.Errorf("inclusion %d in %d: transparency-dev rejects ours: %v", idx, size, err)
			}
			if err := verify.VerifyInclusion(uint64(idx), uint64(size), lh, p, root); err != nil {
				t.Errorf("inclusion %d in %d: pkg/verify rejects ours: %v", idx, size, err)
			}
			rp, err := ref.InclusionProof(uint64(idx), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.VerifyInclusion(uint64(idx), uint64(size), lh, cooked(rp), root); err != nil {
				t.Errorf("inclusion %d in %d: pkg/verify rejects reference: %v", idx, size, err)
			}
			if size > 1 {
				other := verify.LeafHash(leaf(int(idx) + 1000))
				if err := verify.VerifyInclusion(uint64(idx), uint64(size), other, p, root); !errors.Is(err, verify.ErrProof) {
					t.Errorf("inclusion %d in %d: wrong leaf accepted: %v", idx, size, err)
				}
			}
		}
		for n1 := int64(0); n1 <= size; n1++ {
			p, err := ConsistencyProof(n1, size, s)
			if err != nil {
				t.Fatal(err)
			}
			old, err := Root(n1, s)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(h, uint64(n1), uint64(size), raw(p), old[:], root[:]); err != nil {
				t.Errorf("consistency %d to %d: transparency-dev rejects ours: %v", n1, size, err)
			}
			if err := verify.VerifyConsistency(uint64(n1), uint64(size), p, old, root); err != nil {
				t.Errorf("consistency %d to %d: pkg/verify rejects ours: %v", n1, size, err)
			}
			rp, err := ref.ConsistencyProof(uint64(n1), uint64(size))
			if err != nil {
				t.Fatal(err)
			}
			if err := verify.VerifyConsistency(uint64(n1), uint64(size), cooked(rp), old, root); err != nil {
				t.Errorf("consistency %d to %d: pkg/verify rejects reference: %v", n1, size, err)
			}
			if n1 > 0 && n1 < size {
				bad := old
				bad[0] ^= 1
				if err := verify.VerifyConsistency(uint64(n1), uint64(size), p, bad, root); !errors.Is(err, verify.ErrProof) {
					t.Errorf("consistency %d to %d: wrong old root accepted: %v", n1, size, err)
				}
				if len(p) > 0 {
					if err := verify.VerifyConsistency(uint64(n1), uint64(size), p[:len(p)-1], old, root); err == nil {
						t.Errorf("consistency %d to %d: truncated proof accepted", n1, size)
					}
				}
			}
		}
	}
}

// TestFrontier checks the compact range against transparency-dev's compact
// package and that appending leaves to it yields every later root.
func TestFrontier(t *testing.T) {
	s, ref := build(t, maxSize)
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	for start := int64(0); start <= maxSize; start++ {
		hs, err := Frontier(start, s)
		if err != nil {
			t.Fatal(err)
		}
		cr := rf.NewEmptyRange(0)
		for i := range start {
			lh := verify.LeafHash(leaf(int(i)))
			if err := cr.Append(lh[:], nil); err != nil {
				t.Fatal(err)
			}
		}
		if want := cooked(cr.Hashes()); !equal(want, hs) {
			t.Fatalf("Frontier(%d) = %x, compact range %x", start, hs, want)
		}
		f, err := verify.NewFrontier(uint64(start), hs)
		if err != nil {
			t.Fatal(err)
		}
		for n := start; n <= maxSize; n++ {
			if got, want := f.Root(), verify.Hash(ref.HashAt(uint64(n))); got != want {
				t.Fatalf("frontier from %d at %d: root %x, want %x", start, n, got, want)
			}
			if n < maxSize {
				f.Append(verify.LeafHash(leaf(int(n))))
			}
		}
	}
}

func equal(a, b []verify.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAppendLeafRejects(t *testing.T) {
	s := &HashStore{}
	for _, tc := range []struct {
		name string
		n    int64
		leaf []byte
	}{
		{"hex string instead of bytes", 0, []byte("sha256:00")},
		{"empty leaf", 0, nil},
		{"negative index", -1, leaf(0)},
		{"missing earlier hashes", 1, leaf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := AppendLeaf(tc.n, tc.leaf, s); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := InclusionProof(3, 3, s); err == nil {
		t.Error("inclusion of an index outside the tree accepted")
	}
	if _, err := ConsistencyProof(4, 3, s); err == nil {
		t.Error("consistency to a smaller tree accepted")
	}
}

func BenchmarkAppendLeaf(b *testing.B) {
	s := &HashStore{}
	l := leaf(1)
	for b.Loop() {
		hs, err := AppendLeaf(s.leaves, l, s)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Store(hs); err != nil {
			b.Fatal(err)
		}
	}
}

// recordingReader records every index AppendLeaf asks for.
type recordingReader struct {
	s    *HashStore
	read []int64
}

func (r *recordingReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	r.read = append(r.read, indexes...)
	return r.s.ReadHashes(indexes)
}

// The optimistic PostgreSQL append reads AppendReads(n) ahead with the head;
// if it named fewer indexes than AppendLeaf reads, every such append would
// fall back to the locked path, and if it named others the read would be waste.
func TestAppendReadsAreWhatAppendLeafReads(t *testing.T) {
	s := &HashStore{}
	for n := range int64(1100) {
		r := &recordingReader{s: s}
		hs, err := AppendLeaf(n, leaf(int(n)), r)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendReads(n); !slices.Equal(got, r.read) {
			t.Fatalf("AppendReads(%d) = %v, AppendLeaf read %v", n, got, r.read)
		}
		if err := s.Store(hs); err != nil {
			t.Fatal(err)
		}
	}
}
