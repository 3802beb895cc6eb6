package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/auditchain/auditchain/internal/stream"
)

// notifications watches the stream channel as a third party would, to tell
// which appends were announced.
type notifications struct {
	conn *pgx.Conn
}

// announced appends a sentinel after everything committed so far and returns
// the event ids announced before it: PostgreSQL delivers notifications in
// commit order, so nothing announced earlier can arrive after the sentinel.
func (n *notifications) announced(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.conn.Exec(ctx, `SELECT pg_notify($1, 'sentinel')`, stream.Channel); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		msg, err := n.conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for notifications: %v", err)
		}
		if msg.Payload == "sentinel" {
			return ids
		}
		var p struct {
			Frame struct {
				EventID string `json:"event_id"`
			} `json:"frame"`
		}
		if err := json.Unmarshal([]byte(msg.Payload), &p); err != nil {
			t.Fatalf("notification %q: %v", msg.Payload, err)
		}
		ids = append(ids, p.Frame.EventID)
	}
}

// On PostgreSQL an append is announced to the other replicas only while a
// replica marks its account as streamed: not before any stream opened, not
// under an expired mark, and at once after a stream opened on another replica
// (whether the append took the optimistic or the locked path). A replica
// keeps its streams while its refreshes extend its mark, and cuts them off as
// lagged before its own mark could lapse when the refreshes fail — whatever
// other replicas do — so a client re-reads instead of missing events.
func TestAppendsAreAnnouncedOnlyWhileTheAccountIsStreamed(t *testing.T) {
	r := newReplicaPair(t)
	ctx, clk, writer, streamer := r.ctx, r.clk, r.writer, r.streamer
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+stream.Channel); err != nil {
		t.Fatal(err)
	}
	watch := &notifications{conn: conn}
	newChain, appendEvent := r.newChain, r.append
	wantAnnounced := func(want ...string) {
		t.Helper()
		if got := watch.announced(t); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("announced %v, want %v", got, want)
		}
	}
	machine := "m"

	// No stream anywhere, then an expired mark: nothing is announced.
	quiet := newChain("quiet@example.com")
	appendEvent(quiet, nil)
	appendEvent(quiet, nil)
	if err := writer.store.MarkListened(ctx, []string{quiet.userID}, -time.Second); err != nil {
		t.Fatal(err)
	}
	appendEvent(quiet, nil)
	appendEvent(quiet, &machine)
	wantAnnounced()

	// A stream opens on the other replica.
	c := newChain("listen@example.com")
	appendEvent(c, nil)
	sub := subscribe(t, streamer, c.userID, "k")
	receive := func(sub *stream.Subscription, want string) {
		t.Helper()
		select {
		case m, ok := <-sub.C():
			if !ok || m.Frame.EventID != want {
				t.Fatalf("the stream got %v (open %v), want %s", m, ok, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the stream never got %s", want)
		}
	}
	optimistic, locked := appendEvent(c, nil), appendEvent(c, &machine)
	wantAnnounced(optimistic, locked)
	receive(sub, optimistic)
	receive(sub, locked)
	// The first event of each chain (no head row yet) and the events of a
	// machine took the locked path, every other one the optimistic path.
	if s := writer.Stats(); s.OptimisticAppends != 3 || s.LockedAppends != 4 {
		t.Fatalf("appends = %d optimistic, %d locked; want 3 and 4", s.OptimisticAppends, s.LockedAppends)
	}

	// A second stream within the refresh interval writes no mark.
	var mark, again int64
	readMark := func(dst *int64) {
		t.Helper()
		if err := writer.store.DB().QueryRowContext(ctx, `SELECT listened_until FROM chain_heads WHERE user_id = $1`, c.userID).Scan(dst); err != nil {
			t.Fatal(err)
		}
	}
	readMark(&mark)
	clk.Advance(5 * time.Second)
	if err := streamer.WatchStream(ctx, c.userID, nil); err != nil {
		t.Fatal(err)
	}
	readMark(&again)
	if again != mark {
		t.Fatalf("a stream opened 5 s after the mark wrote it again: %d then %d", mark, again)
	}

	// Refreshes on time keep the stream: 50 s after the mark, one succeeds.
	clk.Advance(45 * time.Second)
	if err := streamer.tendListenMarks(ctx); err != nil {
		t.Fatal(err)
	}
	still := appendEvent(c, nil)
	wantAnnounced(still)
	receive(sub, still)

	// Then the refreshes fail (a cancelled context stands for an unreachable
	// database). Another replica's stream keeps the database's mark fresh,
	// but 45 s after its own last mark the streaming replica cannot vouch
	// for the next 25 s and cuts its stream off, before its mark could lapse.
	subscribe(t, writer, c.userID, "k2")
	failed, stop := context.WithCancel(ctx)
	stop()
	clk.Advance(30 * time.Second)
	if err := streamer.tendListenMarks(failed); err == nil {
		t.Fatal("a refresh on a cancelled context succeeded")
	}
	select {
	case _, open := <-sub.C():
		t.Fatalf("the stream was cut off with 30 s of its mark left (frame %v)", open)
	default:
	}
	clk.Advance(15 * time.Second)
	if err := streamer.tendListenMarks(failed); err == nil {
		t.Fatal("a refresh on a cancelled context succeeded")
	}
	wantCut := func(sub *stream.Subscription, why string) {
		t.Helper()
		select {
		case _, open := <-sub.C():
			if open || !sub.Lagged() {
				t.Fatalf("%s: the stream got a frame instead of being cut off as lagged", why)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the stream was not cut off", why)
		}
	}
	wantCut(sub, "15 s of its replica's mark left")

	// A replica that stalled past its own mark cuts its streams at its next
	// turn even though that turn's refresh succeeds: events appended while
	// the mark had lapsed may not have been announced.
	late := subscribe(t, streamer, c.userID, "k3")
	clk.Advance(70 * time.Second)
	if err := streamer.tendListenMarks(ctx); err != nil {
		t.Fatal(err)
	}
	wantCut(late, "a turn 70 s after the mark")

	// The same stall, but a new stream on the same replica renews the mark
	// before any turn: the stream that relied on the lapsed mark is cut, the
	// new one keeps going and gets the next event.
	stalled := subscribe(t, streamer, c.userID, "k4")
	clk.Advance(70 * time.Second)
	fresh := subscribe(t, streamer, c.userID, "k5")
	wantCut(stalled, "a new stream renewed a lapsed mark")
	next := appendEvent(c, nil)
	wantAnnounced(next)
	receive(fresh, next)

	// The same stall, and a notification arrives before anything renews the
	// mark: it is not delivered; the stream is cut instead.
	clk.Advance(70 * time.Second)
	unvouched := appendEvent(c, nil)
	wantAnnounced(unvouched) // the database's mark (real clock) still stands
	wantCut(fresh, "a notification after the replica's mark ran out")
}
