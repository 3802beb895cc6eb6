package app

import (
	"context"
	"testing"

	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// Under the head's lock, a head at the generation preverify used is trusted
// without a read: recheckSignature then touches no store (this App has
// none, so a read would panic). Any other generation, or one not known on
// either side (0), must read the key.
func TestRecheckReadsNothingAtTheGenerationPreverifyUsed(t *testing.T) {
	machine := "m1"
	in := &api.EventInput{MachineID: &machine}
	a := &App{}
	for _, v := range []verifiedWith{{gen: 1}, {fingerprint: "sha256:ab", gen: 7}} {
		if err := a.recheckSignature(context.Background(), nil, store.Head{SigningKeysGen: v.gen}, "u1", in, v); err != nil {
			t.Errorf("head at the generation of %+v: %v", v, err)
		}
	}
	for _, c := range []struct {
		head int64
		v    verifiedWith
	}{{0, verifiedWith{gen: 0}}, {2, verifiedWith{gen: 1}}, {0, verifiedWith{gen: 3}}, {3, verifiedWith{gen: 0}}} {
		read := func() (read bool) {
			defer func() { read = recover() != nil }()
			a.recheckSignature(context.Background(), nil, store.Head{SigningKeysGen: c.head}, "u1", in, c.v)
			return false
		}()
		if !read {
			t.Errorf("head at generation %d, preverify at %d: the key was not read", c.head, c.v.gen)
		}
	}
}
