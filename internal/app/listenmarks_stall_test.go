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
	"github.com/auditchain/auditchain/internal/stream"
)

type hookClock struct {
	mu   sync.Mutex
	now  time.Time
	hook func() // run once, after the next Now returns its value
}

func (c *hookClock) Now() time.Time {
	c.mu.Lock()
	t, h := c.now, c.hook
	c.hook = nil
	c.mu.Unlock()
	if h != nil {
		defer h()
	}
	return t
}
func (c *hookClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }
func (c *hookClock) Hook(f func())           { c.mu.Lock(); c.hook = f; c.mu.Unlock() }

func stallSetup(t *testing.T) (ctx context.Context, clk *hookClock, writer, streamer *App, newChain func(string) *stallChain, appendEvent func(*stallChain) (string, int64)) {
	dsn := storetest.DSN(t, storetest.Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clk = &hookClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	replica := func() *App {
		a := New(storetest.Open(t, dsn), config.Config{DailyEventQuota: 1000, BatchRateLimit: 1000},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(a.Close)
		a.Now = clk.Now
		if err := a.LoadServiceKey(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.StartBus(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		return a
	}
	writer, streamer = replica(), replica()
	newChain = func(email string) *stallChain {
		acct, _, err := writer.CreateAccount(ctx, AccountRequest{Email: email})
		if err != nil {
			t.Fatal(err)
		}
		return &stallChain{p: Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}}
	}
	appendEvent = func(c *stallChain) (string, int64) {
		id, typ, seq := fmt.Sprintf("evt-%d", c.seq), "tool_call", c.seq
		res, err := writer.Append(ctx, c.p, domain.EventInput{EventID: &id, EventType: &typ, Sequence: &seq, PrevHash: c.prev,
			Raw: json.RawMessage(`{}`)}, "rest")
		if err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
		h := res.Event.PayloadHash
		c.prev, c.seq = &h, c.seq+1
		return id, seq
	}
	return
}

type stallChain struct {
	p    Principal
	prev *string
	seq  int64
}

// lapse ends the database's mark of u, as the stall would have.
func lapse(t *testing.T, ctx context.Context, a *App, u string) {
	if _, err := a.Store.WriteDB().ExecContext(ctx, `UPDATE chain_heads SET listened_until = 0 WHERE user_id = $1`, u); err != nil {
		t.Fatal(err)
	}
}

// wantCutBefore requires sub to be cut off as lagged rather than deliver a
// frame past gap, an event it never received.
func wantCutBefore(t *testing.T, sub *stream.Subscription, gap string) {
	t.Helper()
	select {
	case m, ok := <-sub.C():
		if ok {
			t.Fatalf("the stream delivered %s (sequence %d) without ever delivering %s, and was not cut off", m.Frame.EventID, m.Frame.Sequence, gap)
		}
		if !sub.Lagged() {
			t.Fatal("the stream ended without being marked lagged")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the stream was neither cut off nor given a frame after missing %s", gap)
	}
}

// Found in review: tend reads its start, then the process stalls 33 s before
// MarkListened runs; the previous refresh had failed, so the old mark lapsed
// during the stall and an event went unannounced. The refresh that then
// succeeds must cut the stream (its old coverage did not reach the moment
// the new mark committed), not let it go on with the next event.
func TestStreamCutWhenAStallPrecedesTheRefreshStatement(t *testing.T) {
	ctx, clk, _, streamer, newChain, appendEvent := stallSetup(t)
	c := newChain("a@example.com")
	appendEvent(c)
	sub, _ := streamer.Hub.Subscribe(c.p.UserID, "k")
	defer sub.Close()
	if err := streamer.WatchStream(ctx, c.p.UserID, sub); err != nil { // coverage T+60
		t.Fatal(err)
	}
	failed, stop := context.WithCancel(ctx)
	stop()
	clk.Advance(15 * time.Second)
	_ = streamer.tendListenMarks(failed) // one failed refresh (tolerated)
	clk.Advance(15 * time.Second)        // T+30: next turn
	var e1 string
	clk.Hook(func() { // right after tend's start := a.Now(): a 33 s stall
		clk.Advance(33 * time.Second)
		lapse(t, ctx, streamer, c.p.UserID) // the database's mark ran out at ~T+60
		e1, _ = appendEvent(c)              // E1 at T+61: not announced
	})
	if err := streamer.tendListenMarks(ctx); err != nil {
		t.Fatal(err)
	}
	e2, _ := appendEvent(c) // announced under the new mark
	_ = e2
	wantCutBefore(t, sub, e1)
}

// Found in review: a stream opens after tend listed the streamed accounts and
// relies on a fresh mark; the process stalls 100 s and the mark lapses. Tend
// must not forget that account's coverage (it is streamed now), so the
// stream is cut rather than fed the next event on the strength of a new mark.
func TestStreamCutWhenItsAccountWasListedBeforeItOpened(t *testing.T) {
	ctx, clk, _, streamer, newChain, appendEvent := stallSetup(t)
	c, v := newChain("u@example.com"), newChain("v@example.com")
	appendEvent(c)
	appendEvent(v)
	vs, _ := streamer.Hub.Subscribe(v.p.UserID, "kv") // keeps tend's accounts non-empty
	defer vs.Close()
	if err := streamer.WatchStream(ctx, v.p.UserID, vs); err != nil {
		t.Fatal(err)
	}
	old, _ := streamer.Hub.Subscribe(c.p.UserID, "k0") // an earlier stream of u, closed
	if err := streamer.WatchStream(ctx, c.p.UserID, old); err != nil {
		t.Fatal(err)
	}
	old.Close()
	clk.Advance(5 * time.Second)
	var sub *stream.Subscription
	var e1 string
	clk.Hook(func() { // tend has taken its Accounts() snapshot (v only)
		var err error
		sub, err = streamer.Hub.Subscribe(c.p.UserID, "k")
		if err != nil {
			t.Error(err)
			return
		}
		if err := streamer.WatchStream(ctx, c.p.UserID, sub); err != nil { // coverage fresh: no write
			t.Error(err)
		}
		clk.Advance(100 * time.Second) // the stall
		lapse(t, ctx, streamer, c.p.UserID)
		e1, _ = appendEvent(c) // not announced
	})
	_ = streamer.tendListenMarks(ctx) // deletes u's entry: expired, not in the snapshot
	defer sub.Close()
	_ = streamer.tendListenMarks(ctx) // marks u; cover sees no entry
	appendEvent(c)
	wantCutBefore(t, sub, e1)
}
