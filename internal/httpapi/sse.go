package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/stream"
	"github.com/auditchain/auditchain/pkg/api"
)

// streamWriteGrace bounds how long one burst of stream frames may take to write.
const streamWriteGrace = 30 * time.Second

// codeTooManyStreams answers a key that already holds its cap of open
// streams on this replica (the hub's count; the store's leases count them
// across replicas: app.TakeStreamSlot).
const codeTooManyStreams = app.CodeTooManyStreams

// eventStreamHandler is GET /v1/events/stream for the authenticated caller,
// pinging every ping. done is closed when the server shuts down: http.Server.Shutdown waits for
// handlers but does not cancel their requests, so streams must end on it.
func eventStreamHandler(a *app.App, ping time.Duration, done <-chan struct{}) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		p := principal(r)
		release, err := a.TakeStreamSlot(r.Context(), p)
		if err != nil {
			return err
		}
		defer release()
		// The number of events stored, read once the listener is registered,
		// is the floor below which frames are dropped: on PostgreSQL the
		// notification of an event committed just before the connection can
		// arrive after the subscription, and nothing from before the
		// connection may be replayed (SPEC.md "Live stream"). No event is
		// lost: one committed after the read takes a later leaf. (Leaves, not
		// sequences: a batch row stored below the tip after the read has a
		// lower sequence, and is still new.)
		//
		// On PostgreSQL the account is marked as streamed first: only events
		// committed after the mark are announced to this replica, and those
		// take later leaves than the count read after it. (If the read then
		// fails, the mark stays: a minute of announcements nobody needs.)
		tip := func(ctx context.Context, sub *stream.Subscription) (streamFloor, error) {
			if err := a.WatchStream(ctx, p.UserID, sub); err != nil {
				return streamFloor{}, err
			}
			tip, err := a.ChainTip(ctx, p)
			fl := streamFloor{leaves: tip.EventCount, sequence: -1} // -1: an empty chain
			if tip.Sequence != nil {
				fl.sequence = *tip.Sequence
			}
			return fl, err
		}
		// The hub's cap is per credential: a key's id, or a session's (a
		// session has no key id, and "" would put every session of the
		// replica under one cap).
		return serveEventStream(w, r, a.Hub(), p.UserID, p.Identity(), ping, a.Now, done, tip)
	}
}

// streamFloor is what the account stored when a stream began: frames of
// earlier events are not sent. leaves counts the events (a frame of a leaf
// below it is earlier); sequence is the tip's, for a frame whose sender gave
// no leaf (stream.UnknownLeaf).
type streamFloor struct{ leaves, sequence int64 }

// before reports whether f's event was stored before the floor.
func (fl streamFloor) before(f *stream.Frame) bool {
	if f.Leaf == stream.UnknownLeaf {
		return f.Sequence <= fl.sequence
	}
	return f.Leaf < fl.leaves
}

// serveEventStream is the live stream of SPEC.md "Live stream": `retry: 3000`
// and a `ready` frame, then an `event` frame per published Frame and a `ping`
// (Unix seconds) after every ping interval with nothing else sent. Nothing from
// before the subscription is replayed. When the subscription lags it sends
// `lagged` with the last sequence this connection delivered and the leaf to
// re-read from, and ends the response, so the client reconnects and re-reads
// what it missed (docs/decisions/stream.md). It returns when the client goes
// away or done closes; its listener is dropped either way.
//
// tip, when not nil, reads what the account stores; it runs after the
// subscription is registered, and frames of events stored before are not
// sent.
func serveEventStream(w http.ResponseWriter, r *http.Request, hub *stream.Hub, userID, keyID string,
	ping time.Duration, now func() time.Time, done <-chan struct{}, tip func(context.Context, *stream.Subscription) (streamFloor, error)) error {
	sub, err := hub.Subscribe(userID, keyID)
	if errors.Is(err, stream.ErrTooManyStreams) {
		return (&domain.Error{Code: codeTooManyStreams,
			Detail: fmt.Sprintf("this key already holds %d open streams; close one first", hub.MaxPerKey())}).
			With("limit", hub.MaxPerKey())
	}
	if err != nil {
		return err
	}
	defer sub.Close()
	floor := streamFloor{leaves: math.MinInt64, sequence: math.MinInt64}
	if tip != nil {
		if floor, err = tip(r.Context(), sub); err != nil {
			return err
		}
	}

	rc := http.NewResponseController(w)
	// The server's WriteTimeout would cut every stream, so each burst of frames
	// gets its own deadline instead: a client that stops reading without
	// closing the connection fails the write after streamWriteGrace, and its
	// goroutine, connection and stream slot are freed.
	arm := func() error {
		err := rc.SetWriteDeadline(time.Now().Add(streamWriteGrace))
		if errors.Is(err, http.ErrNotSupported) {
			return nil
		}
		return err
	}
	if err := arm(); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold frames back
	w.WriteHeader(http.StatusOK)

	// After the header is sent a failed write means the client is gone: the
	// handler just returns, there is nobody to answer.
	ready, _ := api.Marshal(struct {
		UserID string `json:"user_id"`
	}{userID})
	if writeFrame(w, "retry: 3000\nevent: ready", ready) != nil || rc.Flush() != nil {
		return nil
	}
	timer := time.NewTimer(ping)
	defer timer.Stop()
	var last *int64     // sequence of the last event frame sent
	var nextLeaf *int64 // the leaf after the last event frame sent (or the floor's), when known
	if floor.leaves >= 0 {
		nextLeaf = &floor.leaves
	}
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-done:
			return nil
		case <-timer.C:
			if arm() != nil || writeFrame(w, "event: ping", strconv.AppendInt(nil, now().Unix(), 10)) != nil || rc.Flush() != nil {
				return nil
			}
			timer.Reset(ping)
		case m, ok := <-sub.C():
			// Write everything already buffered, then flush once.
			if arm() != nil {
				return nil
			}
		drain:
			for ok {
				if !floor.before(&m.Frame) {
					if writeFrame(w, "event: event", m.Data) != nil {
						return nil
					}
					last = &m.Frame.Sequence
					nextLeaf = nil
					if m.Frame.Leaf != stream.UnknownLeaf {
						n := m.Frame.Leaf + 1
						nextLeaf = &n
					}
				}
				select {
				case m, ok = <-sub.C():
				default:
					break drain
				}
			}
			if !ok {
				// next_leaf: what this connection missed starts there, in
				// the order events were stored (GET /v1/chain/export?from=).
				lagged, _ := api.Marshal(api.StreamLagged{LastSequence: last, NextLeaf: nextLeaf})
				_ = writeFrame(w, "event: lagged", lagged)
				_ = rc.Flush()
				return nil
			}
			if rc.Flush() != nil {
				return nil
			}
			timer.Reset(ping)
		}
	}
}

// writeFrame writes one SSE frame: head lines, then data (single-line JSON or
// digits, so one data line suffices), then the blank line ending the frame.
// The pieces go straight into the response's buffer: one frame reaches every
// listener of the account, so a buffer built per frame would be garbage made
// once per listener (docs/performance.md "Stream listeners").
func writeFrame(w io.Writer, head string, data []byte) error {
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\ndata: "); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n\n")
	return err
}
