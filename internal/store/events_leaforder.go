package store

// Reading an account's events in leaf order, the order of its Merkle tree
// (EventsFrom: exports, proofs, heal's scan).

import (
	"container/heap"
	"context"
	"database/sql"
	"errors"
	"math"
)

// leafReorderWindow bounds how far EventsFrom looks ahead for a row whose
// stored leaf_index is out of chain order.
const leafReorderWindow = 2000

// EventsFrom streams the account's events in leaf order from leaf index from,
// calling fn for each; it reads in pages so memory stays flat in chain length.
//
// An event stored at the tip took the next leaf, so those events are in leaf
// order when read by the key (account, sequence) (events_sequence.go); there is no
// leaf_index index (migration 007). The events a batch stored below the tip
// (below_tip, migration 014) are read in leaf order through their partial
// index, and the two are merged by leaf_index. The stored leaf_index is what
// orders the stream: a row whose leaf_index disagrees with its chain position
// (a tampered or damaged row) is held back, up to leafReorderWindow rows,
// until its leaf position comes, exactly as an ORDER BY leaf_index would
// deliver it, so the verifiers that consume this stream see the disagreement.
func (s *Store) EventsFrom(ctx context.Context, userID string, from int64, fn func(*Event) error) error {
	return s.eventsFrom(ctx, s.read, userID, from, fn)
}

// eventsFrom is EventsFrom through q (a transaction, for the tree's rebuild).
func (s *Store) eventsFrom(ctx context.Context, q Querier, userID string, from int64, fn func(*Event) error) error {
	const page = 2000
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return err
	}
	after := int64(math.MinInt64) // tip rows with sequence above this are still to read
	tipDone := false
	if from > 0 {
		seq, found, err := s.firstSequenceFromLeaf(ctx, q, userID, from)
		if err != nil {
			return err
		}
		after, tipDone = seq-1, !found
	}
	var tip []Event // rows of the sequence stream read and not yet held
	readTip := func() (*Event, error) {
		for len(tip) == 0 {
			if tipDone {
				return nil, nil
			}
			evs, err := s.queryEvents(ctx, q, userID, tipPageSQL(s.Dialect), account, after, page)
			if err != nil {
				return nil, err
			}
			tipDone = len(evs) < page
			if len(evs) > 0 {
				after = evs[len(evs)-1].Sequence
			}
			tip = evs
		}
		e := &tip[0]
		tip = tip[1:]
		return e, nil
	}
	belowFrom, belowDone := from, false
	var below []Event // rows stored below the tip, in leaf order
	peekBelow := func() (*Event, error) {
		if len(below) == 0 && !belowDone {
			evs, err := s.queryEvents(ctx, q, userID, `SELECT `+eventFields+` FROM events
				WHERE account = $1 AND below_tip IS NOT NULL AND leaf_index >= $2 ORDER BY leaf_index LIMIT $3`, account, belowFrom, page)
			if err != nil {
				return nil, err
			}
			belowDone = len(evs) < page
			if len(evs) > 0 {
				belowFrom = evs[len(evs)-1].LeafIndex + 1
			}
			below = evs
		}
		if len(below) == 0 {
			return nil, nil
		}
		return &below[0], nil
	}
	held := &leafHeap{}
	next := from // the leaf position to deliver next
	for {
		b, err := peekBelow()
		if err != nil {
			return err
		}
		var e *Event
		switch {
		case held.Len() > 0 && (*held)[0].LeafIndex <= next:
			e = heap.Pop(held).(*Event)
		case b != nil && b.LeafIndex <= next:
			e, below = b, below[1:]
		case held.Len() <= leafReorderWindow && !(tipDone && len(tip) == 0):
			t, err := readTip()
			if err != nil {
				return err
			}
			if t != nil && t.LeafIndex >= from {
				heap.Push(held, t)
			}
			continue
		case held.Len() > 0 && (b == nil || (*held)[0].LeafIndex < b.LeafIndex):
			e = heap.Pop(held).(*Event) // a leaf position is missing: go on past it
		case b != nil:
			e, below = b, below[1:]
		default:
			return nil
		}
		next = max(next, e.LeafIndex+1)
		if err := fn(e); err != nil {
			return err
		}
	}
}

// leafHeap orders held rows by stored leaf_index.
type leafHeap []*Event

func (h leafHeap) Len() int           { return len(h) }
func (h leafHeap) Less(i, j int) bool { return h[i].LeafIndex < h[j].LeafIndex }
func (h leafHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *leafHeap) Push(x any)        { *h = append(*h, x.(*Event)) }
func (h *leafHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// firstSequenceFromLeaf returns the sequence of the account's first event
// stored at the tip (in chain order; rows stored below it are left out)
// whose leaf_index is at least leaf; found is false when there is none. Among
// those events leaf_index grows with sequence, so this is a binary search
// over sequence values, each probe one lookup by the key (at most 64
// probes), through q (nil: the read pool).
func (s *Store) firstSequenceFromLeaf(ctx context.Context, q Querier, userID string, leaf int64) (seq int64, found bool, err error) {
	if q == nil {
		q = s.read
	}
	account, err := s.accountKey(ctx, q, userID)
	if err != nil {
		return 0, false, err
	}
	probe := func(atLeast int64) (int64, int64, bool, error) {
		var seq, leaf int64
		err := q.QueryRowContext(ctx, leafProbeSQL(s.Dialect), account, atLeast).Scan(&seq, &leaf)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, false, nil
		}
		return seq, leaf, err == nil, err
	}
	// f(x), the leaf_index of the first event with sequence ≥ x (infinite
	// when there is none), does not decrease in x: find the smallest x with
	// f(x) ≥ leaf.
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	for lo < hi {
		mid := lo + int64((uint64(hi)-uint64(lo))/2)
		at, l, ok, err := probe(mid)
		switch {
		case err != nil:
			return 0, false, err
		case !ok || l >= leaf:
			hi = mid
		case at == math.MaxInt64:
			return 0, false, nil
		default:
			lo = at + 1 // f is l < leaf on all of [mid, at]
		}
	}
	at, l, ok, err := probe(lo)
	if err != nil || !ok || l < leaf {
		return 0, false, err
	}
	return at, true, nil
}

// tipPageSQL reads the next page of the rows stored at the tip, in sequence
// order (eventsFrom).
func tipPageSQL(dialect Dialect) string {
	return bySequence(dialect, eventFields, `account = $1 AND sequence > $2 AND below_tip IS NULL`) +
		` ORDER BY sequence LIMIT $3`
}

// leafProbeSQL is firstSequenceFromLeaf's probe.
func leafProbeSQL(dialect Dialect) string {
	return bySequence(dialect, `sequence, leaf_index`, `account = $1 AND sequence >= $2 AND below_tip IS NULL`) +
		` ORDER BY sequence LIMIT 1`
}
