package writer

import (
	"context"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/stream"
)

// subscribe opens a stream of userID on a, as the SSE handler does: subscribed,
// then marked.
func subscribe(t *testing.T, a *Writer, userID, keyID string) *stream.Subscription {
	t.Helper()
	sub, err := a.hub.Subscribe(userID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	if err := a.WatchStream(context.Background(), userID, sub); err != nil {
		t.Fatal(err)
	}
	return sub
}

// lapse ends the database's mark of u, as the stall would have.
func lapse(t *testing.T, ctx context.Context, a *Writer, u string) {
	if _, err := a.store.WriteDB().ExecContext(ctx, `UPDATE chain_heads SET listened_until = 0 WHERE user_id = $1`, u); err != nil {
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
	r := newReplicaPair(t)
	ctx, clk, streamer := r.ctx, r.clk, r.streamer
	c := r.newChain("a@example.com")
	r.append(c, nil)
	sub := subscribe(t, streamer, c.userID, "k") // coverage to T+60
	failed, stop := context.WithCancel(ctx)
	stop()
	clk.Advance(15 * time.Second)
	_ = streamer.tendListenMarks(failed) // one failed refresh (tolerated)
	clk.Advance(15 * time.Second)        // T+30: next turn
	var e1 string
	clk.Hook(func() { // right after tend's start := a.Now(): a 33 s stall
		clk.Advance(33 * time.Second)
		lapse(t, ctx, streamer, c.userID) // the database's mark ran out at ~T+60
		e1 = r.append(c, nil)             // E1 at T+61: not announced
	})
	if err := streamer.tendListenMarks(ctx); err != nil {
		t.Fatal(err)
	}
	r.append(c, nil) // E2, announced under the new mark
	wantCutBefore(t, sub, e1)
}

// Found in review: a stream opens after tend listed the streamed accounts and
// relies on a fresh mark; the process stalls 100 s and the mark lapses. Tend
// must not forget that account's coverage (it is streamed now), so the
// stream is cut rather than fed the next event on the strength of a new mark.
func TestStreamCutWhenItsAccountWasListedBeforeItOpened(t *testing.T) {
	r := newReplicaPair(t)
	ctx, clk, streamer := r.ctx, r.clk, r.streamer
	c, v := r.newChain("u@example.com"), r.newChain("v@example.com")
	r.append(c, nil)
	r.append(v, nil)
	subscribe(t, streamer, v.userID, "kv")         // keeps the refresh busy with v
	subscribe(t, streamer, c.userID, "k0").Close() // an earlier stream of u: u's coverage is fresh
	clk.Advance(5 * time.Second)
	var sub *stream.Subscription
	var e1 string
	clk.Hook(func() { // tend has listed the accounts to refresh (v only)
		var err error
		sub, err = streamer.hub.Subscribe(c.userID, "k")
		if err != nil {
			t.Error(err)
			return
		}
		if err := streamer.WatchStream(ctx, c.userID, sub); err != nil { // coverage fresh: no write
			t.Error(err)
		}
		clk.Advance(100 * time.Second) // the stall
		lapse(t, ctx, streamer, c.userID)
		e1 = r.append(c, nil) // not announced
	})
	// u's coverage has run out, but u is streamed by now: it must be cut,
	// not forgotten (the next turn would then renew u as if new).
	_ = streamer.tendListenMarks(ctx)
	defer sub.Close()
	_ = streamer.tendListenMarks(ctx)
	r.append(c, nil) // E2
	wantCutBefore(t, sub, e1)
}
