package merkle

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// An Appender started from the frontier of any tree size yields, leaf after
// leaf, exactly the stored hashes AppendLeaf computes from the stored tree,
// and its tree's root is the reference root.
func TestAppenderMatchesAppendLeaf(t *testing.T) {
	const leaves = 300
	full := &HashStore{}
	for i := range leaves {
		if err := full.Append(leaf(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, start := range []int64{0, 1, 2, 3, 7, 8, 13, 64, 255, 256} {
		frontier, err := full.ReadHashes(FrontierIndexes(start))
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewAppender(start, frontier)
		if err != nil {
			t.Fatal(err)
		}
		prefix := &HashStore{leaves: start, hashes: slices.Clone(full.hashes[:StoredHashCount(start)])}
		for n := start; n < start+40 && n < leaves; n++ {
			want, err := AppendLeaf(n, leaf(int(n)), prefix)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Append(nil, leaf(int(n)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("from %d leaves, leaf %d: Appender gave %v, AppendLeaf %v", start, n, got, want)
			}
			if err := prefix.Store(want); err != nil {
				t.Fatal(err)
			}
			if a.Size() != n+1 {
				t.Fatalf("Size() = %d after leaf %d", a.Size(), n)
			}
		}
		if _, ref := build(t, int(a.Size())); prefix.Root() != [32]byte(ref.Hash()) {
			t.Fatalf("from %d leaves: root of %d differs from the reference", start, a.Size())
		}
	}
}

func TestAppenderRejects(t *testing.T) {
	if _, err := NewAppender(5, make([]tlog.Hash, 1)); err == nil {
		t.Error("a frontier of 1 hash accepted for a tree of 5 leaves (two subtrees)")
	}
	if _, err := NewAppender(-1, nil); err == nil {
		t.Error("a negative tree size accepted")
	}
	a, err := NewAppender(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(nil, []byte("sha256:00")); !errors.Is(err, ErrLeafSize) {
		t.Errorf("a leaf of the wrong size: %v, want ErrLeafSize", err)
	}
	if a.Size() != 0 {
		t.Errorf("a refused leaf grew the tree to %d", a.Size())
	}
}

func BenchmarkAppender(b *testing.B) {
	a, err := NewAppender(0, nil)
	if err != nil {
		b.Fatal(err)
	}
	l := leaf(1)
	out := make([]StoredHash, 0, 64)
	for b.Loop() {
		if out, err = a.Append(out[:0], l); err != nil {
			b.Fatal(err)
		}
	}
}
