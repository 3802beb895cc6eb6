package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store/storetest"
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
// replica streams its account: not before any stream opened, at once after
// one opened on another replica (whether the append took the optimistic or
// the locked path), not once the mark lapsed — and then the streaming
// replica's next refresh cuts its listeners off as lagged, so they re-read
// what was appended unannounced, and renews the mark.
func TestAppendsAreAnnouncedOnlyWhileTheAccountIsStreamed(t *testing.T) {
	dsn := storetest.DSN(t, storetest.Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	replica := func() *App {
		a := New(storetest.Open(t, dsn), config.Config{DailyEventQuota: 1000, BatchRateLimit: 1000},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(a.Close)
		if err := a.LoadServiceKey(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.StartBus(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		return a
	}
	writer, streamer := replica(), replica()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+stream.Channel); err != nil {
		t.Fatal(err)
	}
	watch := &notifications{conn: conn}

	acct, _, err := writer.CreateAccount(ctx, AccountRequest{Email: "listen@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{UserID: acct.UserID, KeyID: "k", Kind: "api_key"}
	var prev *string
	seq := int64(0)
	appendEvent := func(machine *string) string {
		t.Helper()
		id, typ := fmt.Sprintf("evt-%d", seq), "tool_call"
		s := seq
		res, err := writer.Append(ctx, p, domain.EventInput{EventID: &id, EventType: &typ, Sequence: &s, PrevHash: prev,
			MachineID: machine, Raw: json.RawMessage(`{}`)}, "rest")
		if err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
		h := res.Event.PayloadHash
		prev, seq = &h, seq+1
		return id
	}
	machine := "m"

	appendEvent(nil)
	appendEvent(nil)
	if got := watch.announced(t); len(got) != 0 {
		t.Fatalf("announced with no stream open: %v", got)
	}

	sub, err := streamer.Hub.Subscribe(p.UserID, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := streamer.WatchStream(ctx, p.UserID); err != nil {
		t.Fatal(err)
	}
	optimistic, locked := appendEvent(nil), appendEvent(&machine)
	if got := watch.announced(t); fmt.Sprint(got) != fmt.Sprint([]string{optimistic, locked}) {
		t.Fatalf("announced while streamed: %v, want [%s %s]", got, optimistic, locked)
	}
	for _, want := range []string{optimistic, locked} {
		select {
		case m := <-sub.C():
			if m.Frame.EventID != want {
				t.Fatalf("the streaming replica got %s, want %s", m.Frame.EventID, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the streaming replica never got %s", want)
		}
	}

	// The mark lapses (as if the streaming replica stalled past its TTL).
	if _, err := writer.Store.WriteDB().ExecContext(ctx, `UPDATE chain_heads SET listened_until = 0 WHERE user_id = $1`, p.UserID); err != nil {
		t.Fatal(err)
	}
	appendEvent(nil)
	if got := watch.announced(t); len(got) != 0 {
		t.Fatalf("announced after the mark lapsed: %v", got)
	}
	if err := streamer.refreshListenMarks(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-sub.C():
		if open || !sub.Lagged() {
			t.Fatal("the refresh after a lapsed mark did not cut the stream off as lagged")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refresh after a lapsed mark did not cut the stream off")
	}
	renewed := appendEvent(nil)
	if got := watch.announced(t); fmt.Sprint(got) != fmt.Sprint([]string{renewed}) {
		t.Fatalf("announced after the refresh: %v, want [%s]", got, renewed)
	}
}
