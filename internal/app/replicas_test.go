package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
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

// replicaPair is two App replicas over one fresh PostgreSQL database, on one
// test clock: writer appends, streamer serves streams.
type replicaPair struct {
	t                *testing.T
	ctx              context.Context
	dsn              string
	clk              *testClock
	writer, streamer *App
}

func newReplicaPair(t *testing.T) *replicaPair {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &replicaPair{t: t, ctx: ctx, dsn: storetest.DSN(t, storetest.Postgres),
		clk: &testClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}}
	replica := func() *App {
		a := New(storetest.Open(t, r.dsn), config.Config{DailyEventQuota: 1000, BatchRateLimit: 1000},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(a.Close)
		a.Now = r.clk.Now
		if err := a.LoadServiceKey(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.StartBus(ctx, r.dsn); err != nil {
			t.Fatal(err)
		}
		return a
	}
	r.writer, r.streamer = replica(), replica()
	return r
}

// testChain is an account's chain as its client keeps it.
type testChain struct {
	p    Principal
	prev *string
	seq  int64
}

// next is the event eventID that extends the chain as its client knows it
// (the chain is not advanced: append does that for events it stores).
func (c *testChain) next(eventID string) domain.EventInput {
	typ, seq := "tool_call", c.seq
	return domain.EventInput{EventID: &eventID, EventType: &typ, Sequence: &seq, PrevHash: c.prev, Raw: json.RawMessage(`{}`)}
}

func (r *replicaPair) newChain(email string) *testChain {
	r.t.Helper()
	acct, _, err := r.writer.CreateAccount(r.ctx, AccountRequest{Email: email})
	if err != nil {
		r.t.Fatal(err)
	}
	return &testChain{p: Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}}
}

// append appends the chain's next event through the writer (of machine, if
// not nil) and returns its event_id.
func (r *replicaPair) append(c *testChain, machine *string) string {
	r.t.Helper()
	id := fmt.Sprintf("evt-%d", c.seq)
	in := c.next(id)
	in.MachineID = machine
	res, err := r.writer.Append(r.ctx, c.p, in, "rest")
	if err != nil {
		r.t.Fatalf("append %s: %v", id, err)
	}
	h := res.Event.PayloadHash
	c.prev, c.seq = &h, c.seq+1
	return id
}

// A chain with gaps (SPEC.md accepts any higher sequence) stays on the
// optimistic path: the sequence's guess of the tree size is wrong, so the
// leaf's hashes take one more read, and the tree still verifies.
func TestOptimisticAppendOnAChainWithGaps(t *testing.T) {
	r := newReplicaPair(t)
	c := r.newChain("gaps@example.com")
	for _, seq := range []int64{0, 5, 10, 20, 21, 40} {
		c.seq = seq
		r.append(c, nil)
	}
	if o, l := r.writer.PGAppends(); o != 5 || l != 1 {
		t.Fatalf("PGAppends = %d optimistic, %d locked; want 5 and 1 (the first event)", o, l)
	}
	v, err := r.writer.VerifyChain(r.ctx, c.p)
	if err != nil || !v.Valid || v.TreeSize != 6 {
		t.Fatalf("chain verify: %+v, %v", v, err)
	}
}
