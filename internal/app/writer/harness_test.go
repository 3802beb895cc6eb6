package writer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/store/storetest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/verify"
)

// testClock is a settable clock for replicas whose goroutines read it. A
// hook, when set, runs once right after the next Now returns: a test places a
// stall (advance the clock, let the database move on) at an exact point of
// the code under test.
type testClock struct {
	mu   sync.Mutex
	now  time.Time
	hook func()
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	t, h := c.now, c.hook
	c.hook = nil
	c.mu.Unlock()
	if h != nil {
		defer h()
	}
	return t
}

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func (c *testClock) Hook(f func())           { c.mu.Lock(); c.hook = f; c.mu.Unlock() }

// replicaPair is two Writers (replicas) over one fresh PostgreSQL database,
// on one test clock: writer appends, streamer serves streams.
type replicaPair struct {
	t                *testing.T
	ctx              context.Context
	dsn              string
	clk              *testClock
	writer, streamer *Writer
}

func newReplicaPair(t *testing.T) *replicaPair {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &replicaPair{t: t, ctx: ctx, dsn: storetest.DSN(t, storetest.Postgres),
		clk: &testClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}}
	replica := func() *Writer {
		w := New(storetest.Open(t, r.dsn), Options{Now: r.clk.Now})
		t.Cleanup(w.Close)
		if err := w.StartBus(ctx, r.dsn); err != nil {
			t.Fatal(err)
		}
		return w
	}
	r.writer, r.streamer = replica(), replica()
	return r
}

// testChain is an account's chain as its client keeps it.
type testChain struct {
	userID string
	prev   *string
	seq    int64
}

func (r *replicaPair) newChain(name string) *testChain {
	var b [8]byte
	rand.Read(b[:])
	return &testChain{userID: name + "-" + hex.EncodeToString(b[:])}
}

// testDay and testLimit are the quota client events of the tests charge.
const (
	testDay   = "2026-11-22"
	testLimit = 1000
)

// next is the event eventID that extends the chain as its client knows it,
// its payload_hash computed (the chain is not advanced: append does that for
// events it stores).
func (c *testChain) next(eventID string) *store.Event {
	e := &store.Event{StoredEvent: api.StoredEvent{Event: api.Event{UserID: c.userID, Sequence: c.seq, EventID: eventID,
		EventType: "tool_call", PrevHash: c.prev, TS: "2026-11-22T12:00:00.000000+00:00", Surface: "rest"},
		Raw: json.RawMessage(`{}`)}}
	h, err := verify.PayloadHash(&verify.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence,
		PrevHash: e.PrevHash, Raw: e.Raw, MachineID: e.MachineID, TS: &e.TS})
	if err != nil {
		panic(err)
	}
	e.PayloadHash = h
	return e
}

// notAtTip refuses an event that does not extend the head, naming the head.
type notAtTip struct{ head store.Head }

func (e *notAtTip) Error() string {
	return fmt.Sprintf("the event does not extend the head at %d (%v)", e.head.LastSequence, e.head.LastHash)
}

// clientAppend is e as a client's append: charged, and placed only at the
// head it extends (the continuity rule of SPEC.md, reduced to what the
// engine must respect).
func clientAppend(e *store.Event) Append {
	return Append{Event: e, Quota: &store.Quota{Day: testDay, Limit: testLimit}, Locked: e.MachineID != nil,
		Place: func(_ context.Context, head store.Head, _ store.Querier) error {
			if (head.LastHash == nil) != (e.PrevHash == nil) || (e.PrevHash != nil && *e.PrevHash != *head.LastHash) ||
				e.Sequence <= head.LastSequence {
				return &notAtTip{head: head}
			}
			return nil
		}}
}

// appendVia appends the chain's next event through w (of machine, if not
// nil), advances the chain and returns its event_id.
func (r *replicaPair) appendVia(w *Writer, c *testChain, machine *string) string {
	r.t.Helper()
	id := fmt.Sprintf("evt-%d", c.seq)
	e := c.next(id)
	if machine != nil {
		e.MachineID = machine
		h, err := verify.PayloadHash(&verify.HashedEvent{EventID: e.EventID, EventType: e.EventType, Sequence: e.Sequence,
			PrevHash: e.PrevHash, Raw: e.Raw, MachineID: e.MachineID, TS: &e.TS})
		if err != nil {
			r.t.Fatal(err)
		}
		e.PayloadHash = h
	}
	out, err := w.Append(r.ctx, clientAppend(e))
	if err != nil {
		r.t.Fatalf("append %s: %v", id, err)
	}
	h := out.Event.PayloadHash
	c.prev, c.seq = &h, c.seq+1
	return id
}

// append is appendVia the writer replica.
func (r *replicaPair) append(c *testChain, machine *string) string {
	r.t.Helper()
	return r.appendVia(r.writer, c, machine)
}

// intact checks that the account's chain holds n events, each linked to the
// one before in stored order, its head at the last, and that its stored
// Merkle tree is the tree of their payload hashes: what the engine must
// leave whatever raced it.
func intact(t *testing.T, st *store.Store, userID string, n int64) {
	t.Helper()
	ctx := context.Background()
	head, err := st.Head(ctx, userID)
	if err != nil || head.EventCount != n {
		t.Fatalf("head of %s: %+v, %v; want %d events", userID, head, err, n)
	}
	ref := &merkle.HashStore{}
	var prev *string
	err = st.EventsFrom(ctx, userID, 0, func(e *store.Event) error {
		if (prev == nil) != (e.PrevHash == nil) || (prev != nil && *prev != *e.PrevHash) {
			return fmt.Errorf("event %d does not link to the one before", e.Sequence)
		}
		leaf, err := verify.HashBytes(e.PayloadHash)
		if err != nil {
			return err
		}
		h := e.PayloadHash
		prev = &h
		return ref.Append(leaf)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ref.Size() != n || prev == nil || *prev != *head.LastHash {
		t.Fatalf("%s: %d events stored, the last %v; the head says %d, %v", userID, ref.Size(), prev, n, *head.LastHash)
	}
	root, err := merkle.Root(n, st.HashReader(ctx, nil, userID))
	if err != nil || root != ref.Root() {
		t.Fatalf("%s: stored tree's root %x (%v), the events' %x", userID, root, err, ref.Root())
	}
}

// A chain with gaps (SPEC.md accepts any higher sequence) stays on the
// optimistic path: the sequence's guess of the tree size is wrong, so the
// leaf's hashes take one more read, and the tree is still whole.
func TestOptimisticAppendOnAChainWithGaps(t *testing.T) {
	r := newReplicaPair(t)
	c := r.newChain("gaps")
	for _, seq := range []int64{0, 5, 10, 20, 21, 40} {
		c.seq = seq
		r.append(c, nil)
	}
	if s := r.writer.Stats(); s.OptimisticAppends != 5 || s.LockedAppends != 1 {
		t.Fatalf("appends = %d optimistic, %d locked; want 5 and 1 (the first event)", s.OptimisticAppends, s.LockedAppends)
	}
	intact(t, r.writer.store, c.userID, 6)
}

// errorAs is errors.As for a test's refusal types.
func errorAs[T error](err error) (T, bool) {
	var target T
	ok := errors.As(err, &target)
	return target, ok
}
