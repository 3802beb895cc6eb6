package verify

// Continuity of a chain judged in sequence order, whatever order its events
// arrive in (SPEC.md "Heal records"). Batch ingest may store an event with
// any unused sequence, below or above the tip, so the Merkle tree's leaf
// order (the order an export lists events in) need not be sequence order;
// links and gaps are still judged between sequence numbers. The definitions
// are those of the service's heal scan, which reports the same Gap and Break.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Gap is a maximal run of missing sequence numbers [MissingFrom, MissingTo].
// AfterSequence is the present sequence just below it (MissingFrom-1), null
// when the run starts at 0.
type Gap struct {
	AfterSequence *int64 `json:"after_sequence"`
	MissingFrom   int64  `json:"missing_from"`
	MissingTo     int64  `json:"missing_to"`
}

// Break is an event whose prev_hash is not the payload_hash of the event
// with the previous sequence number (both present). ExpectedPrevHash is that
// payload_hash, null for sequence 0, which must have prev_hash null.
type Break struct {
	Sequence         int64   `json:"sequence"`
	EventID          string  `json:"event_id"`
	ExpectedPrevHash *string `json:"expected_prev_hash"`
	FoundPrevHash    *string `json:"found_prev_hash"`
}

// Finding is one gap or break (exactly one of the two is set) and the
// position the caller gave for the event it is attached to: for a gap the
// present event just above the hole (sequence MissingTo+1), for a break the
// event at Break.Sequence.
type Finding struct {
	Gap   *Gap
	Break *Break
	Pos   int64
}

// Sequence is where a finding sorts: a gap's MissingFrom, a break's Sequence.
func (f Finding) Sequence() int64 {
	if f.Gap != nil {
		return f.Gap.MissingFrom
	}
	return f.Break.Sequence
}

// Errors of Continuity.Add and Seed.
var (
	// ErrDuplicateSequence: a sequence was added twice. A store holds one
	// event per sequence, so two events with one sequence are tampering.
	ErrDuplicateSequence = errors.New("sequence repeats")
	ErrNegativeSequence  = errors.New("sequence is negative")
)

// Continuity judges the links and gaps of a chain whose events are added
// in any order, as a sort by sequence followed by one scan would:
//
//   - a link is judged only between adjacent sequence numbers s-1 and s that
//     are both present: s's prev_hash must be s-1's payload_hash (a null
//     prev_hash is a Break too); sequence 0 must have prev_hash null;
//   - across a hole no link is judged: the hole is the finding, a Gap;
//   - for a full chain sequences start at 0: a lowest sequence above 0
//     leaves a Gap with AfterSequence null. A fragment (NewFragmentContinuity)
//     does not judge the run below the lowest sequence it knows, whose
//     events may sit at leaves outside the fragment;
//   - adding a sequence twice is ErrDuplicateSequence.
//
// Memory is proportional to the disorder, not to the chain: it keeps the
// holes below the highest sequence added (each with the payload_hash of the
// event just below it and the event_id and prev_hash of the event just
// above it), the payload_hash of the highest event, and the breaks found.
// Events added in sequence order keep no hole at all (a fragment keeps one,
// the unjudged run below its lowest sequence) and allocate nothing.
//
// Gaps are final only once every event has been added: a hole may still be
// filled by a later Add. Breaks are final when found.
type Continuity struct {
	fragment bool
	started  bool
	max      int64
	// maxPayload is the payload_hash of the event at max, in a buffer
	// reused from event to event (no allocation in sequence order).
	maxPayload []byte
	holes      holeSet
	breaks     []Finding
}

// hole is a run [from, to] of missing sequences below the highest one added.
type hole struct {
	from, to int64
	// open marks a fragment's run below its lowest sequence (from is 0):
	// never a finding, and the event at from-1 is not known.
	open bool
	// below is the payload_hash of the event at from-1 (when from > 0 and !open).
	below string
	// above is the event at to+1.
	above border
}

// border is what a hole keeps of the event just above it.
type border struct {
	id   string
	prev *string
	// seed: its prev_hash is not known, so its link is not judged.
	seed bool
	pos  int64
}

// NewContinuity returns a tracker for a whole chain, which starts at sequence 0.
func NewContinuity() *Continuity { return &Continuity{} }

// NewFragmentContinuity returns a tracker for part of a chain (an export
// starting at a leaf above 0): missing sequences below the lowest one it
// knows are not a finding. Seed it with the event just before the fragment.
func NewFragmentContinuity() *Continuity { return &Continuity{fragment: true} }

// Add records the event at sequence seq; pos is the caller's position of
// the event (VerifyExport passes its export line), reported back by
// Findings. Add keeps no reference to its arguments.
func (c *Continuity) Add(seq int64, eventID string, prevHash *string, payloadHash string, pos int64) error {
	return c.add(seq, border{id: eventID, prev: prevHash, pos: pos}, payloadHash)
}

// Seed records an event known only by its sequence and payload_hash (a
// fragment's event at leaf start-1): links to it are judged, its own link
// to the sequence below it is not. It may be added before or after others.
func (c *Continuity) Seed(seq int64, payloadHash string, pos int64) error {
	return c.add(seq, border{seed: true, pos: pos}, payloadHash)
}

func (c *Continuity) add(seq int64, ev border, payload string) error {
	if seq < 0 {
		return fmt.Errorf("%w: %d", ErrNegativeSequence, seq)
	}
	switch {
	case !c.started:
		c.started = true
		c.genesis(seq, ev)
		if seq > 0 {
			c.holes.push(hole{from: 0, to: seq - 1, open: c.fragment, above: ev.retain()})
		}
	case seq > c.max:
		if seq == c.max+1 {
			// Compared in place first: the common case copies nothing.
			if !ev.seed && (ev.prev == nil || *ev.prev != string(c.maxPayload)) {
				c.link(seq, ev, string(c.maxPayload))
			}
		} else {
			c.holes.push(hole{from: c.max + 1, to: seq - 1, below: string(c.maxPayload), above: ev.retain()})
		}
	default:
		ci, i, ok := c.holes.find(seq)
		if !ok {
			return fmt.Errorf("%w: %d", ErrDuplicateSequence, seq)
		}
		h := c.holes.chunks[ci][i]
		if seq == 0 {
			c.genesis(seq, ev)
		} else if seq == h.from && !h.open {
			c.link(seq, ev, h.below)
		}
		if seq == h.to {
			c.link(seq+1, h.above, payload)
		}
		var repl [2]hole
		n := 0
		if seq > h.from { // the run below seq stays, now bordered by this event
			repl[n] = hole{from: h.from, to: seq - 1, open: h.open, below: h.below, above: ev.retain()}
			n++
		}
		if seq < h.to { // the run above seq is judged from now on
			repl[n] = hole{from: seq + 1, to: h.to, below: clone(payload), above: h.above}
			n++
		}
		c.holes.replace(ci, i, repl[:n])
		return nil
	}
	c.max = seq
	c.maxPayload = append(c.maxPayload[:0], payload...)
	return nil
}

// genesis judges sequence 0: its prev_hash must be null.
func (c *Continuity) genesis(seq int64, ev border) {
	if seq == 0 && !ev.seed && ev.prev != nil {
		c.breaks = append(c.breaks, Finding{Break: &Break{Sequence: 0, EventID: clone(ev.id), FoundPrevHash: clonePtr(ev.prev)}, Pos: ev.pos})
	}
}

// link judges the event ev at seq against the payload_hash of seq-1.
func (c *Continuity) link(seq int64, ev border, expected string) {
	if ev.seed || (ev.prev != nil && *ev.prev == expected) {
		return
	}
	want := strings.Clone(expected)
	c.breaks = append(c.breaks, Finding{Break: &Break{Sequence: seq, EventID: clone(ev.id), ExpectedPrevHash: &want,
		FoundPrevHash: clonePtr(ev.prev)}, Pos: ev.pos})
}

// retain copies the strings a hole keeps, so they do not pin the caller's
// buffers (an export line, for instance).
func (b border) retain() border {
	b.id, b.prev = clone(b.id), clonePtr(b.prev)
	return b
}

func clone(s string) string { return strings.Clone(s) }

func clonePtr(s *string) *string {
	if s == nil {
		return nil
	}
	c := clone(*s)
	return &c
}

// Gaps returns the holes below the highest sequence added, by sequence;
// never nil.
func (c *Continuity) Gaps() []Gap {
	out := []Gap{}
	c.holes.each(func(h *hole) {
		if !h.open {
			out = append(out, h.gap())
		}
	})
	return out
}

func (h *hole) gap() Gap {
	g := Gap{MissingFrom: h.from, MissingTo: h.to}
	if h.from > 0 {
		after := h.from - 1
		g.AfterSequence = &after
	}
	return g
}

// Breaks returns the breaks found so far, by sequence; never nil.
func (c *Continuity) Breaks() []Break {
	out := make([]Break, 0, len(c.breaks))
	for _, f := range c.sortedBreaks() {
		out = append(out, *f.Break)
	}
	return out
}

func (c *Continuity) sortedBreaks() []Finding {
	return slices.SortedFunc(slices.Values(c.breaks), func(x, y Finding) int {
		return cmpInt64(x.Break.Sequence, y.Break.Sequence)
	})
}

// Findings returns the gaps and breaks by sequence, each with the position
// of the event it is attached to.
func (c *Continuity) Findings() []Finding {
	var gaps []Finding
	c.holes.each(func(h *hole) {
		if !h.open {
			g := h.gap()
			gaps = append(gaps, Finding{Gap: &g, Pos: h.above.pos})
		}
	})
	breaks := c.sortedBreaks()
	out := make([]Finding, 0, len(gaps)+len(breaks))
	for len(gaps) > 0 || len(breaks) > 0 {
		if len(breaks) == 0 || (len(gaps) > 0 && gaps[0].Sequence() < breaks[0].Sequence()) {
			out, gaps = append(out, gaps[0]), gaps[1:]
		} else {
			out, breaks = append(out, breaks[0]), breaks[1:]
		}
	}
	return out
}

// FirstGap returns the lowest gap so far.
func (c *Continuity) FirstGap() (Gap, bool) {
	var g Gap
	found := false
	c.holes.each(func(h *hole) {
		if !found && !h.open {
			g, found = h.gap(), true
		}
	})
	return g, found
}

// Max returns the highest sequence added (seed included); ok is false
// before the first.
func (c *Continuity) Max() (seq int64, ok bool) { return c.max, c.started }

func cmpInt64(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// holeSet keeps holes sorted by sequence in chunks of at most 2*holeChunk,
// so finding, splitting and closing a hole cost O(log n + holeChunk) even
// when a chain in random order leaves a hole between most of its events.
type holeSet struct {
	chunks [][]hole
	n      int
}

const holeChunk = 64

// push adds a hole above every hole held.
func (s *holeSet) push(h hole) {
	if k := len(s.chunks); k == 0 || len(s.chunks[k-1]) >= holeChunk {
		s.chunks = append(s.chunks, make([]hole, 0, holeChunk))
	}
	k := len(s.chunks) - 1
	s.chunks[k] = append(s.chunks[k], h)
	s.n++
}

// find locates the hole holding seq.
func (s *holeSet) find(seq int64) (ci, i int, ok bool) {
	ci = sort.Search(len(s.chunks), func(k int) bool {
		ch := s.chunks[k]
		return ch[len(ch)-1].to >= seq
	})
	if ci == len(s.chunks) {
		return 0, 0, false
	}
	ch := s.chunks[ci]
	i = sort.Search(len(ch), func(k int) bool { return ch[k].to >= seq })
	return ci, i, ch[i].from <= seq
}

// replace puts hs (zero, one or two holes, in order) in place of hole (ci, i).
func (s *holeSet) replace(ci, i int, hs []hole) {
	ch := s.chunks[ci]
	s.n += len(hs) - 1
	switch len(hs) {
	case 0:
		ch = slices.Delete(ch, i, i+1)
		if len(ch) == 0 {
			s.chunks = slices.Delete(s.chunks, ci, ci+1)
			return
		}
	case 1:
		ch[i] = hs[0]
	default:
		ch[i] = hs[0]
		ch = slices.Insert(ch, i+1, hs[1])
		if len(ch) > 2*holeChunk {
			tail := append(make([]hole, 0, holeChunk), ch[holeChunk:]...)
			clear(ch[holeChunk:])
			ch = ch[:holeChunk]
			s.chunks = slices.Insert(s.chunks, ci+1, tail)
		}
	}
	s.chunks[ci] = ch
}

func (s *holeSet) each(fn func(*hole)) {
	for _, ch := range s.chunks {
		for i := range ch {
			fn(&ch[i])
		}
	}
}
