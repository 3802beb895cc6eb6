package httpapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/stream"
	"github.com/auditchain/auditchain/pkg/api"
)

// sseRecorder is a ResponseWriter the handler writes to while the test reads;
// it also answers http.ResponseController's Flush and SetWriteDeadline.
type sseRecorder struct {
	mu       sync.Mutex
	header   http.Header
	status   int
	body     strings.Builder
	deadline *time.Time
	hold     chan struct{} // when set, Write waits until it is closed: a slow client
}

func newSSERecorder() *sseRecorder { return &sseRecorder{header: http.Header{}} }

func (r *sseRecorder) Header() http.Header { return r.header }
func (r *sseRecorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = code
}
func (r *sseRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *sseRecorder) FlushError() error { return nil }
func (r *sseRecorder) SetWriteDeadline(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadline = &t
	return nil
}

// frames returns the complete frames written so far, each as its raw text
// without the blank line that ends it.
func (r *sseRecorder) frames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := strings.Split(r.body.String(), "\n\n")
	return parts[:len(parts)-1] // the last part is whatever follows the last complete frame
}

const testPing = 15 * time.Second

type streamRun struct {
	hub    *stream.Hub
	rec    *sseRecorder
	cancel context.CancelFunc // the client going away
	done   chan struct{}      // server shutdown
	err    chan error
}

// startStream runs the handler for user u1 in the current synctest bubble and
// waits until it is blocked waiting for something to send.
func startStream(t *testing.T, hub *stream.Hub) *streamRun {
	t.Helper()
	return startStreamWithTip(t, hub, nil)
}

func startStreamWithTip(t *testing.T, hub *stream.Hub, tip func(context.Context, *stream.Subscription) (streamFloor, error)) *streamRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &streamRun{hub: hub, rec: newSSERecorder(), cancel: cancel, done: make(chan struct{}), err: make(chan error, 1)}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/events/stream", nil)
	go func() { s.err <- serveEventStream(s.rec, req, hub, "u1", "key-1", testPing, time.Now, s.done, tip) }()
	synctest.Wait()
	return s
}

// On PostgreSQL the notification of an event committed just before the
// connection can arrive after the subscription. The number of events stored,
// read once the listener is registered, is the floor: such a late frame is
// not replayed, and every event stored after it is delivered — a batch row
// stored below the tip too, whose sequence is lower but whose leaf is later.
func TestStreamDropsFramesOfEventsStoredBeforeTheSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := stream.NewHub(stream.Options{})
		s := startStreamWithTip(t, hub, func(context.Context, *stream.Subscription) (streamFloor, error) {
			return streamFloor{leaves: 5, sequence: 4}, nil
		})
		publish(hub, "u1", 3) // committed before the connection, announced late
		publish(hub, "u1", 4)
		publish(hub, "u1", 5)
		hub.Publish("u1", stream.Frame{StreamEvent: api.StreamEvent{EventID: "evt-2", EventType: "tool_call", Sequence: 2}, Leaf: 6}) // stored below the tip
		// A replica that sends no leaf is judged by the sequence: 4 is old, 7 new.
		hub.Publish("u1", stream.Frame{StreamEvent: api.StreamEvent{EventID: "evt-4", EventType: "tool_call", Sequence: 4}, Leaf: stream.UnknownLeaf})
		hub.Publish("u1", stream.Frame{StreamEvent: api.StreamEvent{EventID: "evt-7", EventType: "tool_call", Sequence: 7}, Leaf: stream.UnknownLeaf})
		s.wantFrames(t, readyFrame, eventFrame(5), eventFrame(2), eventFrame(7))
		s.cancel()
		s.ended(t)
	})
}

func (s *streamRun) wantFrames(t *testing.T, want ...string) {
	t.Helper()
	synctest.Wait()
	if diff := cmp.Diff(want, s.rec.frames()); diff != "" {
		t.Fatalf("frames (-want +got):\n%s", diff)
	}
}

// ended checks the handler returned nil and dropped its listener.
func (s *streamRun) ended(t *testing.T) {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-s.err:
		if err != nil {
			t.Fatalf("handler returned %v", err)
		}
	default:
		t.Fatal("handler still running")
	}
	if n := s.hub.Len(); n != 0 {
		t.Fatalf("hub holds %d listeners after the stream ended", n)
	}
}

const readyFrame = "retry: 3000\nevent: ready\ndata: {\"user_id\":\"u1\"}"

func pingFrame() string { return "event: ping\ndata: " + strconv.FormatInt(time.Now().Unix(), 10) }

func eventFrame(seq int64) string {
	return `event: event` + "\n" + `data: {"event_id":"evt-` + strconv.FormatInt(seq, 10) +
		`","event_type":"tool_call","sequence":` + strconv.FormatInt(seq, 10) + `,"tool":null,"decision":null,"machine_id":null}`
}

// publish announces the event seq of a chain stored in sequence order (its
// leaf is its sequence).
func publish(hub *stream.Hub, user string, seq int64) {
	hub.Publish(user, stream.Frame{StreamEvent: api.StreamEvent{EventID: "evt-" + strconv.FormatInt(seq, 10), EventType: "tool_call", Sequence: seq}, Leaf: seq})
}

func TestStreamHeadersAndReadyFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startStream(t, stream.NewHub(stream.Options{}))
		s.wantFrames(t, readyFrame)
		if got := s.rec.header.Get("Content-Type"); got != "text/event-stream" {
			t.Errorf("Content-Type = %q", got)
		}
		if got := s.rec.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control = %q", got)
		}
		if s.rec.status != http.StatusOK {
			t.Errorf("status = %d", s.rec.status)
		}
		// Not the server's WriteTimeout, and never unbounded: each burst of
		// frames must be written within streamWriteGrace of now.
		if want := time.Now().Add(streamWriteGrace); s.rec.deadline == nil || !s.rec.deadline.Equal(want) {
			t.Errorf("write deadline = %v; want now + %v (%v)", s.rec.deadline, streamWriteGrace, want)
		}
		if s.hub.Len() != 1 {
			t.Errorf("hub listeners = %d, want 1", s.hub.Len())
		}
		s.cancel()
		s.ended(t)
	})
}

func TestStreamPingsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startStream(t, stream.NewHub(stream.Options{}))
		time.Sleep(testPing - time.Second)
		s.wantFrames(t, readyFrame)
		time.Sleep(time.Second)
		ping1 := pingFrame()
		s.wantFrames(t, readyFrame, ping1)
		time.Sleep(testPing)
		s.wantFrames(t, readyFrame, ping1, pingFrame())
		s.cancel()
		s.ended(t)
	})
}

func TestStreamEventsAsPublishedAndPingReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := stream.NewHub(stream.Options{})
		s := startStream(t, hub)
		time.Sleep(10 * time.Second)
		publish(hub, "u1", 7)
		publish(hub, "u2", 99) // another account's event never shows
		publish(hub, "u1", 8)
		s.wantFrames(t, readyFrame, eventFrame(7), eventFrame(8))
		// The events reset the ping timer: no ping 15 s after ready, only 15 s after the events.
		time.Sleep(testPing - time.Second)
		s.wantFrames(t, readyFrame, eventFrame(7), eventFrame(8))
		time.Sleep(time.Second)
		s.wantFrames(t, readyFrame, eventFrame(7), eventFrame(8), pingFrame())
		s.cancel()
		s.ended(t)
	})
}

func TestStreamDoesNotReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := stream.NewHub(stream.Options{})
		publish(hub, "u1", 1) // before the connection
		s := startStream(t, hub)
		publish(hub, "u1", 2)
		s.wantFrames(t, readyFrame, eventFrame(2))
		s.cancel()
		s.ended(t)
	})
}

func TestStreamLaggedEndsWithLastSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := stream.NewHub(stream.Options{Buffer: 2})
		s := startStream(t, hub)
		hold := make(chan struct{})
		s.rec.mu.Lock()
		s.rec.hold = hold
		s.rec.mu.Unlock()
		publish(hub, "u1", 1)
		synctest.Wait() // the handler took 1 and is stuck writing it
		for seq := range int64(3) {
			publish(hub, "u1", seq+2) // 2 and 3 are buffered; 4 overflows
		}
		close(hold)
		// Everything buffered before the overflow is still delivered, then lagged.
		s.wantFrames(t, readyFrame, eventFrame(1), eventFrame(2), eventFrame(3), "event: lagged\ndata: {\"last_sequence\":3,\"next_leaf\":4}")
		s.ended(t)
	})
}

func TestStreamLaggedBeforeAnyEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := stream.NewHub(stream.Options{})
		s := startStream(t, hub)
		hub.Resync("u1")
		s.wantFrames(t, readyFrame, "event: lagged\ndata: {\"last_sequence\":null,\"next_leaf\":null}")
		s.ended(t)
	})
}

func TestStreamEndsOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startStream(t, stream.NewHub(stream.Options{}))
		close(s.done)
		s.ended(t)
		s.cancel()
	})
}

func TestStreamPerKeyCap(t *testing.T) {
	hub := stream.NewHub(stream.Options{MaxPerKey: 1})
	held, err := hub.Subscribe("u1", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	rec := newSSERecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/events/stream", nil)
	err = serveEventStream(rec, req, hub, "u1", "key-1", testPing, time.Now, nil, nil)
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != "too_many_streams" || statusOf[de.Code] != http.StatusTooManyRequests || de.Extra["limit"] != 1 {
		t.Fatalf("err = %#v; want 429 too_many_streams with limit 1", err)
	}
	if rec.status != 0 || rec.body.Len() != 0 {
		t.Fatalf("wrote %d %q before failing", rec.status, rec.body.String())
	}
	if hub.Len() != 1 {
		t.Fatalf("hub listeners = %d, want 1", hub.Len())
	}
}

// The handler over a real connection: the client closing it drops the listener.
func TestStreamOverHTTPClientDisconnect(t *testing.T) {
	hub := stream.NewHub(stream.Options{})
	handled := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled <- serveEventStream(&statusWriter{ResponseWriter: w}, r, hub, "u1", "key-1", testPing, time.Now, nil, nil)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len(readyFrame)+2)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != readyFrame+"\n\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	publish(hub, "u1", 5)
	buf = make([]byte, len(eventFrame(5))+2)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != eventFrame(5)+"\n\n" {
		t.Fatalf("read %q, %v", buf, err)
	}
	cancel()
	select {
	case err := <-handled:
		if err != nil {
			t.Fatalf("handler returned %v", err)
		}
	case <-time.After(10 * time.Second): // a failure deadline, not a pause
		t.Fatal("the handler was still running 10 s after the client left")
	}
	if n := hub.Len(); n != 0 {
		t.Fatalf("hub holds %d listeners after the client left", n)
	}
}

// One published frame is written to every listener of the account: writing it
// must not allocate per listener (the garbage was the peak RSS of 5,000 streams).
func TestWriteFrameDoesNotAllocate(t *testing.T) {
	var buf strings.Builder
	data := []byte(`{"event_id":"evt-1","sequence":1}`)
	if err := writeFrame(&buf, "event: event", data); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "event: event\ndata: "+string(data)+"\n\n"; got != want {
		t.Fatalf("frame %q, want %q", got, want)
	}
	w := bufioDiscard()
	if n := testing.AllocsPerRun(100, func() { _ = writeFrame(w, "event: event", data) }); n != 0 {
		t.Fatalf("writeFrame allocates %v times per frame", n)
	}
}

// bufioDiscard stands for the response writer: a buffer in front of the connection.
func bufioDiscard() io.Writer { return bufio.NewWriterSize(io.Discard, 4096) }
