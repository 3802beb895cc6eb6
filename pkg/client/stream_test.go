package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/httpapi/httpapitest"
	"github.com/auditchain/auditchain/pkg/client"
)

// cutAfterFirstEvent passes requests to the real server; the first stream
// response is cut once it has carried one event frame, as a dropped
// connection would.
type cutAfterFirstEvent struct{ streams atomic.Int32 }

func (c *cutAfterFirstEvent) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/events/stream" || c.streams.Add(1) != 1 {
		return resp, err
	}
	resp.Body = &cutBody{ReadCloser: resp.Body}
	return resp, nil
}

type cutBody struct {
	io.ReadCloser
	seen strings.Builder
	cut  bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.cut {
		return 0, errors.New("connection reset (test)")
	}
	n, err := b.ReadCloser.Read(p)
	b.seen.Write(p[:n])
	if i := strings.Index(b.seen.String(), "event: event\n"); i >= 0 && strings.Contains(b.seen.String()[i:], "\n\n") {
		b.cut = true
	}
	return n, err
}

// The stream reader reconnects after the service's retry: hint and delivers
// what was appended while it was away, then the live events, each once and
// in order.
func TestStreamReconnectsAndResumes(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		_, token := s.Account(t, "stream@example.com")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		writer := newClient(t, s, token)
		var waits []time.Duration
		// While the reader waits to reconnect, two events are appended: the
		// live stream never carries them.
		sleep := client.WithSleep(func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			for _, id := range []string{"evt-b0", "evt-c0"} {
				if _, err := writer.Append(ctx, client.Event{EventID: id, EventType: "note"}); err != nil {
					return err
				}
			}
			return nil
		})
		cut := &cutAfterFirstEvent{}
		reader := newClient(t, s, token, client.WithHTTPClient(&http.Client{Transport: cut}), sleep)
		var got []string
		var resumed []bool
		readies := 0
		err := reader.Stream(ctx, func(m client.StreamMessage) error {
			switch m.Kind {
			case "ready":
				readies++
				if m.Reconnected != (readies > 1) {
					t.Errorf("ready %d: Reconnected %v", readies, m.Reconnected)
				}
				if readies == 1 {
					_, err := writer.Append(ctx, client.Event{EventID: "evt-a0", EventType: "note"})
					return err
				}
			case "event":
				got = append(got, m.Event.EventID)
				resumed = append(resumed, m.Resumed)
				switch m.Event.EventID {
				case "evt-c0":
					_, err := writer.Append(ctx, client.Event{EventID: "evt-d0", EventType: "note"})
					return err
				case "evt-d0":
					return client.ErrStopStream
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != "evt-a0 evt-b0 evt-c0 evt-d0" {
			t.Fatalf("delivered %v", got)
		}
		if want := []bool{false, true, true, false}; !slices.Equal(resumed, want) {
			t.Fatalf("resumed %v, want %v", resumed, want)
		}
		if len(waits) != 1 || waits[0] != 3*time.Second {
			t.Fatalf("waited %v before reconnecting, want the service's retry: 3000 once", waits)
		}
		if cut.streams.Load() != 2 || readies != 2 {
			t.Fatalf("%d connections, %d readies", cut.streams.Load(), readies)
		}
	})
}

// A refused stream is an error at once, not a reconnection loop.
func TestStreamRefusalIsReturned(t *testing.T) {
	eachServer(t, func(t *testing.T, s *httpapitest.Server) {
		c := newClient(t, s, "ak_not_a_key")
		err := c.Stream(context.Background(), func(client.StreamMessage) error { return nil })
		var pe *client.Error
		if !errors.As(err, &pe) || pe.Status != 401 {
			t.Fatalf("%v", err)
		}
	})
}
