package stream

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

func TestEncodeNotification(t *testing.T) {
	f := frame(1)
	f.Leaf = 5 // the frame's leaf rides beside the frame, whose JSON clients see
	got, err := encodeNotification("u1", f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"user_id":"u1","frame":{"event_id":"evt-0001","event_type":"tool_call","sequence":1,"tool":null,"decision":null,"machine_id":null},"leaf":5}`
	if got != want {
		t.Errorf("payload = %s\nwant      %s", got, want)
	}
	// Delivered, the frame has its leaf back; a notification without one
	// (an older replica's) is past any stream's floor.
	h := NewHub(Options{})
	sub := mustSubscribe(t, h, "u1", "k")
	b := &PGBus{hub: h}
	b.deliver(got)
	b.deliver(`{"user_id":"u1","frame":{"event_id":"evt-0002","event_type":"tool_call","sequence":2,"tool":null,"decision":null,"machine_id":null}}`)
	for _, wantLeaf := range []int64{5, UnknownLeaf} {
		if m := <-sub.C(); m.Frame.Leaf != wantLeaf {
			t.Errorf("delivered frame %s with leaf %d, want %d", m.Frame.EventID, m.Frame.Leaf, wantLeaf)
		}
	}
	big := frame(2)
	big.EventID = strings.Repeat("x", maxPayload)
	if got, err := encodeNotification("u1", big); err != nil || got != `{"user_id":"u1","resync":true}` {
		t.Errorf("oversized frame: payload %q, err %v; want a resync notice", got, err)
	}
	if _, err := encodeNotification(strings.Repeat("u", maxPayload), frame(1)); err == nil {
		t.Error("an oversized user id was accepted")
	}
}

// replica is one Hub fed by a PGBus with its own listening connection.
type replica struct {
	hub     *Hub
	bus     *PGBus
	appName string
}

func pgURL(t *testing.T) string {
	u := os.Getenv("AUDITCHAIN_TEST_POSTGRES")
	if u == "" {
		t.Skip("AUDITCHAIN_TEST_POSTGRES is not set (a postgres:// URL); skipping the LISTEN/NOTIFY tests")
	}
	return u
}

func startReplica(t *testing.T, ctx context.Context, wg *sync.WaitGroup, base, name string) *replica {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	appName := "auditchain-test-" + name + "-" + rand.Text()[:8]
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()
	r := &replica{hub: NewHub(Options{}), appName: appName}
	r.bus = NewPGBus(u.String(), r.hub, nil)
	r.bus.minBackoff = 10 * time.Millisecond
	wg.Go(func() {
		if err := r.bus.Listen(ctx); err != nil {
			t.Errorf("Listen: %v", err)
		}
	})
	waitFor(t, r.bus.Ready(), name+" listening")
	return r
}

// waitFor bounds a wait on something that must happen; it is a failure
// deadline, not a pause.
func waitFor[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// notify sends f as a writer does: pg_notify with the bus's channel and
// payload, in a statement of q's (a transaction of its own when q is the
// database).
func notify(t *testing.T, ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, bus *PGBus, userID string, f Frame) {
	t.Helper()
	channel, payload, err := bus.Notification(userID, f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, s *Subscription, what string) Frame {
	t.Helper()
	m := waitFor(t, s.C(), what)
	if m == nil {
		t.Fatalf("%s: subscription closed (lagged=%v)", what, s.Lagged())
	}
	return m.Frame
}

func TestPGBusAcrossReplicas(t *testing.T) {
	base := pgURL(t)
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	a := startReplica(t, ctx, &wg, base, "a")
	b := startReplica(t, ctx, &wg, base, "b")

	// Other tests may share the database and the channel: a random account
	// keeps their frames out of ours.
	user := "user-" + rand.Text()
	onA := mustSubscribe(t, a.hub, user, "k")
	onB := mustSubscribe(t, b.hub, user, "k")
	other := mustSubscribe(t, b.hub, user+"-other", "k")

	t.Run("a frame notified by one replica reaches both, once", func(t *testing.T) {
		notify(t, ctx, db, a.bus, user, frame(1))
		notify(t, ctx, db, a.bus, user, frame(2))
		for name, s := range map[string]*Subscription{"origin": onA, "other replica": onB} {
			if f := next(t, s, name); f.Sequence != 1 {
				t.Errorf("%s: first frame %d, want 1", name, f.Sequence)
			}
			// Had the origin also published locally, its second frame would be a duplicate 1.
			if f := next(t, s, name); f.Sequence != 2 {
				t.Errorf("%s: second frame %d, want 2", name, f.Sequence)
			}
		}
	})

	t.Run("a notification in a transaction is delivered on commit only", func(t *testing.T) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		notify(t, ctx, tx, b.bus, user, frame(10))
		rolledBack, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		notify(t, ctx, rolledBack, b.bus, user, frame(11))
		if err := rolledBack.Rollback(); err != nil {
			t.Fatal(err)
		}
		// Committed while tx is still open: it must arrive first.
		notify(t, ctx, db, b.bus, user, frame(9))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		notify(t, ctx, db, b.bus, user, frame(12))
		for name, s := range map[string]*Subscription{"a": onA, "b": onB} {
			var got []int64
			for range 3 {
				got = append(got, next(t, s, name).Sequence)
			}
			if want := []int64{9, 10, 12}; !slices.Equal(got, want) {
				t.Errorf("%s got %v, want %v (commit order, rolled-back 11 never sent)", name, got, want)
			}
		}
	})

	t.Run("an oversized frame resyncs the account's listeners", func(t *testing.T) {
		big := frame(20)
		big.EventID = strings.Repeat("e", maxPayload)
		notify(t, ctx, db, a.bus, user, big)
		for name, s := range map[string]*Subscription{"a": onA, "b": onB} {
			if m := waitFor(t, s.C(), name+" resync"); m != nil || !s.Lagged() {
				t.Errorf("%s: got %v lagged=%v, want closed and lagged", name, m, s.Lagged())
			}
		}
		if other.Lagged() {
			t.Error("another account's listener was resynced")
		}
	})

	t.Run("the listener reconnects and resyncs after its connection drops", func(t *testing.T) {
		var killed int
		err := db.QueryRowContext(ctx,
			`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, b.appName).Scan(&killed)
		if err != nil || killed != 1 {
			t.Fatalf("terminate b's listener: killed %d, err %v", killed, err)
		}
		// Once b listens again, everything it held is cut off as lagged.
		if m := waitFor(t, other.C(), "resync after reconnect"); m != nil || !other.Lagged() {
			t.Fatalf("got %v lagged=%v, want closed and lagged", m, other.Lagged())
		}
		s := mustSubscribe(t, b.hub, user, "k2")
		notify(t, ctx, db, a.bus, user, frame(30))
		if f := next(t, s, "after reconnect"); f.Sequence != 30 {
			t.Errorf("got %d, want 30", f.Sequence)
		}
	})
}
