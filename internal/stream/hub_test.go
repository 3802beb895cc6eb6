package stream

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/google/go-cmp/cmp"
)

func frame(seq int64) Frame {
	return Frame{StreamEvent: api.StreamEvent{EventID: fmt.Sprintf("evt-%04x", seq), EventType: "tool_call", Sequence: seq}}
}

// drain takes everything buffered in s without waiting; closed reports
// whether C was closed after those frames.
func drain(s *Subscription) (seqs []int64, closed bool) {
	for {
		select {
		case m, ok := <-s.C():
			if !ok {
				return seqs, true
			}
			seqs = append(seqs, m.Frame.Sequence)
		default:
			return seqs, false
		}
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func mustSubscribe(t testing.TB, h *Hub, user, key string) *Subscription {
	t.Helper()
	s, err := h.Subscribe(user, key)
	if err != nil {
		t.Fatalf("Subscribe(%q, %q): %v", user, key, err)
	}
	return s
}

func TestFanOutToEverySubscriberInOrder(t *testing.T) {
	h := NewHub(Options{MaxPerKey: 1000})
	var subs []*Subscription
	for i := range 200 {
		subs = append(subs, mustSubscribe(t, h, "u1", fmt.Sprint("k", i%20)))
	}
	for seq := range int64(10) {
		h.Publish("u1", frame(seq))
	}
	for i, s := range subs {
		got, closed := drain(s)
		if diff := cmp.Diff(seqRange(0, 9), got); diff != "" || closed {
			t.Fatalf("subscriber %d: closed=%v, frames (-want +got):\n%s", i, closed, diff)
		}
	}
}

func TestMessageCarriesFrameJSON(t *testing.T) {
	h := NewHub(Options{})
	s := mustSubscribe(t, h, "u1", "k")
	defer s.Close()
	tool, decision := "read_file", "allow"
	h.Publish("u1", Frame{StreamEvent: api.StreamEvent{EventID: "evt-01", EventType: "tool_call", Sequence: 7, Tool: &tool, Decision: &decision}})
	m := <-s.C()
	want := `{"event_id":"evt-01","event_type":"tool_call","sequence":7,"tool":"read_file","decision":"allow","machine_id":null}`
	if string(m.Data) != want {
		t.Fatalf("Data = %s\nwant   %s", m.Data, want)
	}
}

func TestAccountsAreIsolated(t *testing.T) {
	h := NewHub(Options{})
	a := mustSubscribe(t, h, "alice", "ka")
	b := mustSubscribe(t, h, "bob", "kb")
	h.Publish("alice", frame(1))
	h.Publish("bob", frame(2))
	h.Publish("carol", frame(3)) // nobody listens: dropped, no state kept
	if got, _ := drain(a); !cmp.Equal(got, []int64{1}) {
		t.Errorf("alice got %v, want [1]", got)
	}
	if got, _ := drain(b); !cmp.Equal(got, []int64{2}) {
		t.Errorf("bob got %v, want [2]", got)
	}
}

// A subscriber that never reads must not slow Publish: run inside a synctest
// bubble, a Publish that blocked would be reported as a deadlock at once.
func TestStuckSubscriberNeverBlocksPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub(Options{})
		stuck := mustSubscribe(t, h, "u1", "k1")
		fast := mustSubscribe(t, h, "u1", "k2")
		var got []int64
		for seq := range int64(10_000) {
			h.Publish("u1", frame(seq))
			m := <-fast.C()
			got = append(got, m.Frame.Sequence)
		}
		if diff := cmp.Diff(seqRange(0, 9_999), got); diff != "" {
			t.Fatalf("fast subscriber (-want +got):\n%s", diff)
		}
		if fast.Lagged() {
			t.Error("the fast subscriber was marked lagged")
		}
		seqs, closed := drain(stuck)
		if diff := cmp.Diff(seqRange(0, DefaultBuffer-1), seqs); diff != "" || !closed || !stuck.Lagged() {
			t.Fatalf("stuck subscriber: closed=%v lagged=%v, frames (-want +got):\n%s", closed, stuck.Lagged(), diff)
		}
	})
}

func TestOverflowKeepsAGapFreePrefixThenCloses(t *testing.T) {
	h := NewHub(Options{Buffer: 4})
	s := mustSubscribe(t, h, "u1", "k")
	for seq := range int64(6) {
		h.Publish("u1", frame(seq))
	}
	got, closed := drain(s)
	if !cmp.Equal(got, []int64{0, 1, 2, 3}) || !closed || !s.Lagged() {
		t.Fatalf("got %v closed=%v lagged=%v; want [0 1 2 3], closed, lagged", got, closed, s.Lagged())
	}
	h.Publish("u1", frame(6)) // a lagged subscription is skipped, not sent to (closed channel)
	if h.Len() != 1 {
		t.Fatalf("Len = %d; a lagged subscription keeps its slot until Close", h.Len())
	}
	s.Close()
	if h.Len() != 0 {
		t.Fatalf("Len after Close = %d", h.Len())
	}
}

func TestResync(t *testing.T) {
	h := NewHub(Options{})
	a1 := mustSubscribe(t, h, "alice", "k")
	a2 := mustSubscribe(t, h, "alice", "k")
	b := mustSubscribe(t, h, "bob", "k2")
	h.Publish("alice", frame(1))
	h.Resync("alice")
	for _, s := range []*Subscription{a1, a2} {
		if got, closed := drain(s); !cmp.Equal(got, []int64{1}) || !closed || !s.Lagged() {
			t.Errorf("alice: got %v closed=%v lagged=%v", got, closed, s.Lagged())
		}
	}
	if _, closed := drain(b); closed || b.Lagged() {
		t.Error("Resync(alice) cut off bob")
	}
	h.ResyncAll()
	if _, closed := drain(b); !closed || !b.Lagged() {
		t.Error("ResyncAll did not cut off bob")
	}
}

func TestPerKeyCap(t *testing.T) {
	h := NewHub(Options{MaxPerKey: 3})
	var subs []*Subscription
	for range 3 {
		subs = append(subs, mustSubscribe(t, h, "u1", "k1"))
	}
	if _, err := h.Subscribe("u1", "k1"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("4th stream on k1: err = %v, want ErrTooManyStreams", err)
	}
	other := mustSubscribe(t, h, "u1", "k2") // the cap is per key
	subs[0].Close()
	subs[0].Close() // idempotent: frees one slot, not two
	again := mustSubscribe(t, h, "u1", "k1")
	if _, err := h.Subscribe("u1", "k1"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("after one Close the key had two free slots: err = %v", err)
	}
	for _, s := range append(subs[1:], other, again) {
		s.Close()
	}
	if h.Len() != 0 || len(h.users) != 0 || len(h.perKey) != 0 {
		t.Fatalf("after closing all: Len=%d users=%d keys=%d", h.Len(), len(h.users), len(h.perKey))
	}
}

func TestCloseRemovesOnlyThatSubscription(t *testing.T) {
	h := NewHub(Options{})
	s := make([]*Subscription, 5)
	for i := range s {
		s[i] = mustSubscribe(t, h, "u1", "k")
	}
	s[1].Close()
	s[4].Close()
	h.Publish("u1", frame(1))
	for i, sub := range s {
		got, _ := drain(sub)
		want := []int64{1}
		if i == 1 || i == 4 {
			want = nil
		}
		if !cmp.Equal(got, want) {
			t.Errorf("subscriber %d got %v, want %v", i, got, want)
		}
	}
}

// Run with -race: Publish, Subscribe, Close and Resync from many goroutines.
func TestConcurrentUse(t *testing.T) {
	h := NewHub(Options{Buffer: 8, MaxPerKey: 1000})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			user := fmt.Sprint("u", w%2)
			for i := range 200 {
				s, err := h.Subscribe(user, "k")
				if err != nil {
					t.Error(err)
					return
				}
				h.Publish(user, frame(int64(i)))
				if i%50 == 0 {
					h.Resync(user)
				}
				drain(s)
				s.Close()
			}
		})
	}
	wg.Wait()
	if h.Len() != 0 {
		t.Fatalf("Len = %d after every subscription closed", h.Len())
	}
}

// TestMemoryPerSubscription bounds the hub's share of a listener's memory
// (docs/performance.md target: ~30 KB per listener including the connection).
func TestMemoryPerSubscription(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const n = 5000
	h := NewHub(Options{MaxPerKey: n})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = mustSubscribe(t, h, "u1", "k")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (after.HeapAlloc - before.HeapAlloc) / n
	t.Logf("hub memory per subscription: %d bytes", per)
	if per > 4096 {
		t.Errorf("hub memory per subscription = %d bytes, want ≤ 4096", per)
	}
	runtime.KeepAlive(subs)
}

// BenchmarkFanOut5000 measures one event reaching 5,000 subscribers, each
// drained by its own goroutine as the SSE handlers do (network writes excluded).
func BenchmarkFanOut5000(b *testing.B) {
	const n = 5000
	h := NewHub(Options{MaxPerKey: n})
	var got sync.WaitGroup
	var stop sync.WaitGroup
	for range n {
		s := mustSubscribe(b, h, "u1", "k")
		stop.Go(func() {
			for range s.C() {
				got.Done()
			}
		})
	}
	var seq int64
	for b.Loop() {
		got.Add(n)
		seq++
		h.Publish("u1", frame(seq))
		got.Wait()
	}
	h.ResyncAll() // closes every C, ending the drainers
	stop.Wait()
}

// BenchmarkPublish5000 is the publisher's share: the time an append spends
// handing one frame to 5,000 subscribers.
func BenchmarkPublish5000(b *testing.B) {
	const n = 5000
	h := NewHub(Options{MaxPerKey: n, Buffer: 1024})
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = mustSubscribe(b, h, "u1", "k")
	}
	var seq int64
	for b.Loop() {
		seq++
		h.Publish("u1", frame(seq))
		if seq%1000 == 0 {
			b.StopTimer()
			for _, s := range subs {
				drain(s)
			}
			b.StartTimer()
		}
	}
}
