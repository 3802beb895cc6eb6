package client_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// countTips passes requests on and counts the tip reads.
type countTips struct{ reads atomic.Int32 }

func (c *countTips) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/chain/tip" {
		c.reads.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// AppendNext sends no place and reads no tip: the service numbers each
// event after whatever another writer appended, and the answer becomes the
// client's tip, which a following Append extends without a read.
func TestAppendNextNeedsNoTip(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "next@example.com")
		ctx := context.Background()
		tips := &countTips{}
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: tips}))
		other := newClient(t, s, token)
		for i := range 3 {
			res, err := c.AppendNext(ctx, client.Event{EventType: "tool_result", Raw: map[string]any{"i": i}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Event.Sequence != int64(2*i) {
				t.Fatalf("event %d at sequence %d", i, res.Event.Sequence)
			}
			if _, err := other.Append(ctx, client.Event{EventType: "note"}); err != nil {
				t.Fatal(err)
			}
		}
		// c keeps its last answer as its tip: Append extends it, no read.
		last, err := c.AppendNext(ctx, client.Event{EventType: "tool_result"})
		if err != nil || last.Event.Sequence != 6 {
			t.Fatalf("after another writer: %+v, %v", last, err)
		}
		res, err := c.Append(ctx, client.Event{EventType: "note"})
		if err != nil || res.Event.PrevHash == nil || *res.Event.PrevHash != last.Event.PayloadHash {
			t.Fatalf("Append after AppendNext: %+v, %v", res, err)
		}
		if n := tips.reads.Load(); n != 0 {
			t.Fatalf("%d tip reads", n)
		}
		checkChain(t, c, 8)
		if _, err := c.AppendNext(ctx, client.Event{}); err == nil {
			t.Fatal("AppendNext without an EventType was sent")
		}
	})
}

// An AppendNext whose answer is lost is resent unchanged, after another
// writer appended: the service answers with the event stored at the place
// the first attempt took, and the chain holds it once. A caller that sends
// the same event again in a later call, with its TS, gets the same answer.
func TestAppendNextWhoseAnswerWasLost(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "next-lost@example.com")
		ctx := context.Background()
		drop := loseFirstAnswerBehindAnotherWriter(t, s, token, "/v1/events/append")
		c := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: drop}),
			client.WithSleep(func(context.Context, time.Duration) error { return nil }))
		ev := client.Event{EventID: "evt-mine", EventType: "tool_result", Raw: map[string]any{"ok": true}, TS: str("2026-11-21T12:00:00+00:00")}
		res, err := c.AppendNext(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if drop.dropped.Load() != 1 || res.Event.EventID != "evt-mine" || res.Event.Sequence != 0 || res.Event.TS != "2026-11-21T12:00:00+00:00" {
			t.Fatalf("the resend answered %+v (dropped %d)", res.Event, drop.dropped.Load())
		}
		again, err := newClient(t, s, token).AppendNext(ctx, ev)
		if err != nil || again.Event.PayloadHash != res.Event.PayloadHash {
			t.Fatalf("the same event in a later call: %+v, %v", again, err)
		}
		evs := checkChain(t, c, 2)
		if evs[0].EventID != "evt-other" || evs[1].EventID != "evt-mine" {
			t.Fatalf("chain %v %v", evs[1].EventID, evs[0].EventID)
		}
	})
}

// AppendNext goes on once a client event took the tip to 2^52, where
// Append can no longer choose a sequence: the place is the service's.
func TestAppendNextAbove2To52(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "next-top@example.com")
		ctx := context.Background()
		c := newClient(t, s, token)
		const top = 1 << 52
		if b, err := c.AppendBatch(ctx, api.BatchRequest{Events: []api.EventInput{{EventID: new("evt-top"), EventType: new("note"), Sequence: new(int64(top))}}}); err != nil || b.Ingested != 1 {
			t.Fatalf("batch row at 2^52: %+v, %v", b, err)
		}
		res, err := c.AppendNext(ctx, client.Event{EventType: "tool_result", Raw: map[string]any{"exit": 0}})
		if err != nil || res.Event.Sequence != top+1 || res.Event.PrevHash == nil {
			t.Fatalf("AppendNext above 2^52: %+v, %v", res, err)
		}
		if _, err := c.Append(ctx, client.Event{EventType: "note"}); !client.IsCode(err, "validation_error") {
			t.Fatalf("Append above 2^52: %v", err)
		}
	})
}
