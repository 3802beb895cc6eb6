package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// tev is one event fed to a Continuity in the tests.
type tev struct {
	seq     int64
	id      string
	prev    *string
	payload string
	seed    bool
	pos     int64
}

func strp(s string) *string { return &s }
func i64p(n int64) *int64   { return &n }

func ph(n int64) string { return fmt.Sprintf("sha256:%064x", n+1000) }

// ev is event seq linked to seq-1 (prev nil for 0).
func ev(seq int64) tev {
	e := tev{seq: seq, id: fmt.Sprintf("evt-%d", seq), payload: ph(seq), pos: 100 + seq}
	if seq > 0 {
		e.prev = strp(ph(seq - 1))
	}
	return e
}

func (e tev) withPrev(p *string) tev { e.prev = p; return e }

func seedOf(seq int64) tev { return tev{seq: seq, payload: ph(seq), seed: true, pos: 1} }

func feed(c *Continuity, e tev) error {
	if e.seed {
		return c.Seed(e.seq, e.payload, e.pos)
	}
	return c.Add(e.seq, e.id, e.prev, e.payload, e.pos)
}

// naive sorts the events and scans them once, as the heal scan does.
func naive(evs []tev, fragment bool) []Finding {
	s := slices.SortedFunc(slices.Values(evs), func(x, y tev) int { return cmpInt64(x.seq, y.seq) })
	var gaps, breaks []Finding
	for i, e := range s {
		if e.seq == 0 && !e.seed && e.prev != nil {
			breaks = append(breaks, Finding{Break: &Break{Sequence: 0, EventID: e.id, FoundPrevHash: e.prev}, Pos: e.pos})
		}
		if i == 0 {
			if e.seq > 0 && !fragment {
				gaps = append(gaps, Finding{Gap: &Gap{MissingFrom: 0, MissingTo: e.seq - 1}, Pos: e.pos})
			}
			continue
		}
		p := s[i-1]
		switch {
		case e.seq > p.seq+1:
			gaps = append(gaps, Finding{Gap: &Gap{AfterSequence: i64p(p.seq), MissingFrom: p.seq + 1, MissingTo: e.seq - 1}, Pos: e.pos})
		case !e.seed && (e.prev == nil || *e.prev != p.payload):
			breaks = append(breaks, Finding{Break: &Break{Sequence: e.seq, EventID: e.id, ExpectedPrevHash: strp(p.payload), FoundPrevHash: e.prev}, Pos: e.pos})
		}
	}
	out := append(gaps, breaks...)
	slices.SortStableFunc(out, func(x, y Finding) int { return cmpInt64(x.Sequence(), y.Sequence()) })
	return out
}

func gapsOf(fs []Finding) []Gap {
	out := []Gap{}
	for _, f := range fs {
		if f.Gap != nil {
			out = append(out, *f.Gap)
		}
	}
	return out
}

func breaksOf(fs []Finding) []Break {
	out := []Break{}
	for _, f := range fs {
		if f.Break != nil {
			out = append(out, *f.Break)
		}
	}
	return out
}

func TestContinuityTable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fragment bool
		events   []tev
		gaps     []Gap
		breaks   []Break
		err      error // of the last event
	}{
		{name: "in order, linked", events: []tev{ev(0), ev(1), ev(2), ev(3)}},
		{name: "empty"},
		{name: "reverse order, linked", events: []tev{ev(3), ev(2), ev(1), ev(0)}},
		{name: "any order, linked", events: []tev{ev(2), ev(0), ev(3), ev(1), ev(4)}},
		{name: "full chain starting above 0", events: []tev{ev(3), ev(4)},
			gaps: []Gap{{MissingFrom: 0, MissingTo: 2}}},
		{name: "genesis with a prev_hash", events: []tev{ev(0).withPrev(strp(ph(7))), ev(1)},
			breaks: []Break{{Sequence: 0, EventID: "evt-0", FoundPrevHash: strp(ph(7))}}},
		{name: "hole in the middle, link across it not judged", events: []tev{ev(0), ev(1), ev(4).withPrev(strp(ph(9))), ev(5)},
			gaps: []Gap{{AfterSequence: i64p(1), MissingFrom: 2, MissingTo: 3}}},
		{name: "null prev_hash after a present event", events: []tev{ev(0), ev(1).withPrev(nil)},
			breaks: []Break{{Sequence: 1, EventID: "evt-1", ExpectedPrevHash: strp(ph(0))}}},
		{name: "break found when the hole below closes", events: []tev{ev(0), ev(2).withPrev(strp(ph(9))), ev(1)},
			breaks: []Break{{Sequence: 2, EventID: "evt-2", ExpectedPrevHash: strp(ph(1)), FoundPrevHash: strp(ph(9))}}},
		{name: "break found when the hole above closes", events: []tev{ev(0), ev(2), ev(1).withPrev(strp(ph(9)))},
			breaks: []Break{{Sequence: 1, EventID: "evt-1", ExpectedPrevHash: strp(ph(0)), FoundPrevHash: strp(ph(9))}}},
		{name: "hole split, both ends judged", events: []tev{ev(0), ev(6), ev(3).withPrev(strp(ph(8))), ev(2), ev(5)},
			gaps:   []Gap{{AfterSequence: i64p(0), MissingFrom: 1, MissingTo: 1}, {AfterSequence: i64p(3), MissingFrom: 4, MissingTo: 4}},
			breaks: []Break{{Sequence: 3, EventID: "evt-3", ExpectedPrevHash: strp(ph(2)), FoundPrevHash: strp(ph(8))}}},
		{name: "repeat of the highest", events: []tev{ev(0), ev(1), ev(1)}, err: ErrDuplicateSequence},
		{name: "below the highest, in a hole: not a repeat", events: []tev{ev(0), ev(3), ev(1)},
			gaps: []Gap{{AfterSequence: i64p(1), MissingFrom: 2, MissingTo: 2}}},
		{name: "repeat of a filled hole", events: []tev{ev(0), ev(3), ev(1), ev(1)}, err: ErrDuplicateSequence},
		{name: "repeat of the lowest", events: []tev{ev(2), ev(3), ev(2)}, err: ErrDuplicateSequence},
		{name: "negative", events: []tev{ev(0), {seq: -1}}, err: ErrNegativeSequence},
		{name: "fragment seeded, linked", fragment: true, events: []tev{seedOf(11), ev(12), ev(13)}},
		{name: "fragment first link broken", fragment: true, events: []tev{seedOf(11), ev(12).withPrev(strp(ph(9))), ev(13)},
			breaks: []Break{{Sequence: 12, EventID: "evt-12", ExpectedPrevHash: strp(ph(11)), FoundPrevHash: strp(ph(9))}}},
		{name: "fragment, nothing judged below its lowest", fragment: true, events: []tev{ev(5).withPrev(strp(ph(1))), ev(7)},
			gaps: []Gap{{AfterSequence: i64p(5), MissingFrom: 6, MissingTo: 6}}},
		{name: "fragment seed in the middle, its own link not judged", fragment: true,
			events: []tev{seedOf(10), ev(8), ev(12), ev(9)},
			gaps:   []Gap{{AfterSequence: i64p(10), MissingFrom: 11, MissingTo: 11}}},
		{name: "fragment seed after the events", fragment: true,
			events: []tev{ev(12).withPrev(strp(ph(3))), ev(13), seedOf(11)},
			breaks: []Break{{Sequence: 12, EventID: "evt-12", ExpectedPrevHash: strp(ph(11)), FoundPrevHash: strp(ph(3))}}},
		{name: "fragment holding sequence 0", fragment: true, events: []tev{ev(2), ev(0).withPrev(strp(ph(5)))},
			gaps:   []Gap{{AfterSequence: i64p(0), MissingFrom: 1, MissingTo: 1}},
			breaks: []Break{{Sequence: 0, EventID: "evt-0", FoundPrevHash: strp(ph(5))}}},
		{name: "fragment event repeats the seed", fragment: true, events: []tev{seedOf(11), ev(12), ev(11)}, err: ErrDuplicateSequence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewContinuity()
			if tc.fragment {
				c = NewFragmentContinuity()
			}
			for i, e := range tc.events {
				err := feed(c, e)
				if i == len(tc.events)-1 && tc.err != nil {
					if !errors.Is(err, tc.err) {
						t.Fatalf("last Add = %v, want %v", err, tc.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Add(%d) = %v", e.seq, err)
				}
			}
			want := naive(tc.events, tc.fragment)
			if tc.gaps == nil {
				tc.gaps = []Gap{}
			}
			if tc.breaks == nil {
				tc.breaks = []Break{}
			}
			if got := c.Gaps(); !reflect.DeepEqual(got, tc.gaps) || !reflect.DeepEqual(gapsOf(want), tc.gaps) {
				t.Fatalf("gaps %s, naive %s, want %s", js(got), js(gapsOf(want)), js(tc.gaps))
			}
			if got := c.Breaks(); !reflect.DeepEqual(got, tc.breaks) || !reflect.DeepEqual(breaksOf(want), tc.breaks) {
				t.Fatalf("breaks %s, naive %s, want %s", js(got), js(breaksOf(want)), js(tc.breaks))
			}
			if got := c.Findings(); !reflect.DeepEqual(got, want) && len(want) > 0 {
				t.Fatalf("findings %s, want %s", js(got), js(want))
			}
		})
	}
}

// Findings carry the position of the event they are attached to.
func TestContinuityPositions(t *testing.T) {
	c := NewContinuity()
	for _, e := range []tev{ev(0), ev(4), ev(2).withPrev(nil), ev(1)} {
		if err := feed(c, e); err != nil {
			t.Fatal(err)
		}
	}
	got := c.Findings()
	want := []Finding{
		{Break: &Break{Sequence: 2, EventID: "evt-2", ExpectedPrevHash: strp(ph(1))}, Pos: 102},
		{Gap: &Gap{AfterSequence: i64p(2), MissingFrom: 3, MissingTo: 3}, Pos: 104},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %s, want %s", js(got), js(want))
	}
	if g, ok := c.FirstGap(); !ok || g.MissingFrom != 3 {
		t.Fatalf("FirstGap = %+v %v", g, ok)
	}
	if m, ok := c.Max(); !ok || m != 4 {
		t.Fatalf("Max = %d %v", m, ok)
	}
}

// randomHistory is a random subset of 0..n-1 with random links: about two
// thirds correct, the rest null or another event's payload_hash.
func randomHistory(r *rand.Rand, n int64, density float64) []tev {
	var evs []tev
	for s := range n {
		if r.Float64() >= density {
			continue
		}
		e := ev(s)
		switch r.IntN(6) {
		case 0:
			e.prev = nil
		case 1:
			e.prev = strp(ph(r.Int64N(n + 2)))
		}
		if s == 0 && r.IntN(2) == 0 {
			e.prev = nil
		}
		evs = append(evs, e)
	}
	return evs
}

// The property: fed in any order, a Continuity finds exactly what sorting
// and scanning finds, whatever the history.
func TestContinuityMatchesSortThenScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for round := range rounds {
		n := int64(1 + r.IntN(80))
		if round%50 == 0 {
			n = 3000 // enough holes to split and drop chunks of the hole set
		}
		evs := randomHistory(r, n, []float64{0.3, 0.7, 0.95, 1}[r.IntN(4)])
		fragment := r.IntN(3) == 0
		if fragment && len(evs) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(evs))
			evs[i] = seedOf(evs[i].seq)
		}
		perm := slices.Clone(evs)
		switch r.IntN(4) {
		case 0: // sequence order
		case 1:
			slices.Reverse(perm)
		default:
			r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		c := NewContinuity()
		if fragment {
			c = NewFragmentContinuity()
		}
		for _, e := range perm {
			if err := feed(c, e); err != nil {
				t.Fatalf("round %d: Add(%d): %v", round, e.seq, err)
			}
			checkHoleSet(t, &c.holes)
		}
		want := naive(evs, fragment)
		if got := c.Findings(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d (fragment %v, %d events):\n got %s\nwant %s", round, fragment, len(evs), js(got), js(want))
		}
		if !reflect.DeepEqual(c.Gaps(), gapsOf(want)) || !reflect.DeepEqual(c.Breaks(), breaksOf(want)) {
			t.Fatalf("round %d: Gaps/Breaks differ from Findings", round)
		}
		// Any sequence fed again is a repeat, wherever it falls.
		if len(evs) > 0 {
			e := evs[r.IntN(len(evs))]
			if err := feed(c, e); !errors.Is(err, ErrDuplicateSequence) {
				t.Fatalf("round %d: sequence %d again: %v", round, e.seq, err)
			}
		}
	}
}

// checkHoleSet holds the hole set's invariants: chunks non-empty and
// bounded, holes sorted, disjoint and not adjacent, counted.
func checkHoleSet(t *testing.T, s *holeSet) {
	t.Helper()
	n, last := 0, int64(-2)
	for _, ch := range s.chunks {
		if len(ch) == 0 || len(ch) > 2*holeChunk {
			t.Fatalf("chunk of %d holes", len(ch))
		}
		for _, h := range ch {
			if h.from > h.to || h.from <= last+1 {
				t.Fatalf("hole [%d,%d] after %d", h.from, h.to, last)
			}
			last = h.to
			n++
		}
	}
	if n != s.n {
		t.Fatalf("hole set counts %d, holds %d", s.n, n)
	}
}

// Events in sequence order keep nothing but the highest payload_hash: no
// hole (a fragment: the one unjudged run below it), and no allocation.
func TestContinuityInOrderConstant(t *testing.T) {
	for _, fragment := range []bool{false, true} {
		c := NewContinuity()
		start := int64(0)
		if fragment {
			c, start = NewFragmentContinuity(), 5000
		}
		maxHoles := 0
		if fragment {
			maxHoles = 1
		}
		for s := start; s < start+100_000; s++ {
			e := ev(s)
			if err := c.Add(e.seq, e.id, e.prev, e.payload, e.pos); err != nil {
				t.Fatal(err)
			}
			if c.holes.n > maxHoles || len(c.holes.chunks) > maxHoles || len(c.breaks) != 0 || cap(c.maxPayload) > 128 {
				t.Fatalf("fragment %v, after %d: %d holes in %d chunks, %d breaks, buffer %d",
					fragment, s, c.holes.n, len(c.holes.chunks), len(c.breaks), cap(c.maxPayload))
			}
		}
	}
	// Add alone, on prepared events.
	c := NewContinuity()
	payloads := make([]string, 2002)
	for i := range payloads {
		payloads[i] = ph(int64(i))
	}
	next := int64(0)
	add := func() {
		var prev *string
		if next > 0 {
			prev = &payloads[next-1]
		}
		if err := c.Add(next, "evt", prev, payloads[next], next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	add()
	if allocs := testing.AllocsPerRun(2000, add); allocs != 0 {
		t.Fatalf("%v allocations per in-order Add", allocs)
	}
}

// A chain in reverse order keeps one hole (below its lowest sequence), and
// a chain with a bounded disorder a bounded number of holes.
func TestContinuityMemoryFollowsDisorder(t *testing.T) {
	c := NewContinuity()
	for s := int64(50_000); s >= 0; s-- {
		e := ev(s)
		if err := feed(c, e); err != nil {
			t.Fatal(err)
		}
		if c.holes.n > 1 {
			t.Fatalf("reverse order: %d holes at %d", c.holes.n, s)
		}
	}
	if len(c.Findings()) != 0 {
		t.Fatalf("reverse order: %s", js(c.Findings()))
	}
	// Every block of 8 consecutive sequences shuffled: at most 8 holes.
	r := rand.New(rand.NewPCG(3, 4))
	c = NewContinuity()
	for base := int64(0); base < 50_000; base += 8 {
		block := []int64{0, 1, 2, 3, 4, 5, 6, 7}
		r.Shuffle(len(block), func(i, j int) { block[i], block[j] = block[j], block[i] })
		for _, d := range block {
			if err := feed(c, ev(base+d)); err != nil {
				t.Fatal(err)
			}
			if c.holes.n > 8 {
				t.Fatalf("shuffled blocks: %d holes at %d", c.holes.n, base+d)
			}
		}
	}
	if len(c.Findings()) != 0 {
		t.Fatalf("shuffled blocks: %s", js(c.Findings()))
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzContinuity feeds events described by the input (two bytes each: a
// sequence below 64 and how its prev_hash links) and holds the findings to
// sort-then-scan's, and a repeat to ErrDuplicateSequence.
func FuzzContinuity(f *testing.F) {
	f.Add(false, []byte{0, 0, 1, 0, 2, 0})
	f.Add(true, []byte{5, 0, 3, 1, 9, 2, 4, 0, 3, 0})
	f.Add(false, []byte{7, 3, 0, 0, 6, 1, 2, 2, 1, 0})
	f.Fuzz(func(t *testing.T, fragment bool, in []byte) {
		c := NewContinuity()
		if fragment {
			c = NewFragmentContinuity()
		}
		seen := map[int64]bool{}
		var evs []tev
		for i := 0; i+1 < len(in); i += 2 {
			e := ev(int64(in[i] % 64))
			switch in[i+1] % 5 {
			case 1:
				e.prev = nil
			case 2:
				e.prev = strp(ph(int64(in[i+1])))
			case 3:
				if fragment {
					e = seedOf(e.seq)
				}
			}
			err := feed(c, e)
			if seen[e.seq] {
				if !errors.Is(err, ErrDuplicateSequence) {
					t.Fatalf("sequence %d again: %v", e.seq, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Add(%d): %v", e.seq, err)
			}
			seen[e.seq] = true
			evs = append(evs, e)
			checkHoleSet(t, &c.holes)
		}
		want := naive(evs, fragment)
		if got := c.Findings(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("got %s\nwant %s", js(got), js(want))
		}
	})
}
