package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/auditchain/auditchain/pkg/api"
)

// The live stream (GET /v1/events/stream, docs/decisions/stream.md). The
// service replays nothing from before a connection and sends no `id:`
// lines, so a reconnecting reader cannot ask it to resume (Last-Event-ID);
// the reader resumes itself: after the new connection's `ready` it reads the
// events above the last sequence it delivered (search, newest first) and
// delivers them first, then the live frames, each event once.

// StreamMessage is what Stream delivers.
type StreamMessage struct {
	// Kind is "ready" (a connection is listening: anything appended from now
	// on is delivered) or "event".
	Kind  string
	Event api.StreamEvent
	// Resumed marks an event read after a reconnection, which the live
	// stream missed while disconnected.
	Resumed bool
	// Reconnected is set on the "ready" of every connection but the first.
	Reconnected bool
}

// ErrStopStream, returned by a Stream callback, ends Stream with a nil error.
var ErrStopStream = errors.New("client: stop the stream")

// defaultStreamRetry is the reconnect wait until the service sends retry:.
const defaultStreamRetry = 3 * time.Second

// Stream delivers the account's live events to fn until ctx ends or fn
// returns an error (ErrStopStream: a clean stop). A dropped connection (or a
// `lagged` frame) is reconnected after the service's `retry:` hint, and the
// events appended meanwhile at the tip are read and delivered (Resumed)
// before the live ones. A refusal (401, 403, …) ends it with an *Error; a
// 429 too_many_streams is also returned: this key holds too many streams.
func (c *Client) Stream(ctx context.Context, fn func(StreamMessage) error) error {
	s := &streamReader{c: c, fn: fn, retry: defaultStreamRetry}
	for {
		err := s.connect(ctx)
		if errors.Is(err, ErrStopStream) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var pe *Error
		var fe *callbackError
		if errors.As(err, &pe) || errors.As(err, &fe) {
			return err
		}
		if serr := c.sleep(ctx, s.retry); serr != nil {
			return serr
		}
	}
}

// callbackError is an error of the caller's callback, returned as it is.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

type streamReader struct {
	c     *Client
	fn    func(StreamMessage) error
	retry time.Duration
	// last is the highest sequence delivered (nil before any).
	last *int64
	// resumed holds the event ids delivered by the last catch-up read: the
	// live frames right after it may repeat them.
	resumed     map[string]bool
	connections int
}

func (s *streamReader) deliver(m StreamMessage) error {
	if err := s.fn(m); err != nil {
		if errors.Is(err, ErrStopStream) {
			return err
		}
		return &callbackError{err}
	}
	return nil
}

// connect reads one connection to its end.
func (s *streamReader) connect(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := s.c.open(ctx, request{method: http.MethodGet, path: "/v1/events/stream", idempotent: true})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	s.connections++
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := s.frame(ctx, event, data); err != nil {
				return err
			}
			event, data = "", ""
		case strings.HasPrefix(line, "retry:"):
			if ms, err := strconv.Atoi(strings.TrimSpace(line[len("retry:"):])); err == nil && ms >= 0 {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			if data != "" {
				data += "\n"
			}
			data += strings.TrimPrefix(line[len("data:"):], " ")
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("client: stream: %w", err)
	}
	return errors.New("client: the stream ended")
}

func (s *streamReader) frame(ctx context.Context, event, data string) error {
	switch event {
	case "ready":
		if err := s.deliver(StreamMessage{Kind: "ready", Reconnected: s.connections > 1}); err != nil {
			return err
		}
		if s.last != nil {
			return s.catchUp(ctx)
		}
	case "event":
		var e api.StreamEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("client: stream frame: %w", err)
		}
		if s.resumed[e.EventID] {
			return nil
		}
		s.seen(e.Sequence)
		return s.deliver(StreamMessage{Kind: "event", Event: e})
	case "lagged":
		// The service fell behind this connection and ends it after this
		// frame; so does the reader, and the reconnection's catch-up reads
		// what it missed from the last sequence delivered.
		var l api.StreamLagged
		if err := json.Unmarshal([]byte(data), &l); err != nil {
			return fmt.Errorf("client: stream frame: %w", err)
		}
		return fmt.Errorf("client: the stream lagged after sequence %s", seqText(l.LastSequence))
	}
	return nil
}

// seqText is a sequence for a message ("none" for nil).
func seqText(seq *int64) string {
	if seq == nil {
		return "none"
	}
	return strconv.FormatInt(*seq, 10)
}

func (s *streamReader) seen(seq int64) {
	if s.last == nil || seq > *s.last {
		s.last = &seq
	}
}

// catchUp delivers, oldest first, the events stored above the last sequence
// delivered.
func (s *streamReader) catchUp(ctx context.Context) error {
	var missed []api.Event
	limit := 1000
	req := api.SearchRequest{Limit: &limit}
	for {
		page, err := s.c.Search(ctx, req)
		if err != nil {
			return err
		}
		done := page.NextCursor == nil
		for _, e := range page.Results {
			if e.Sequence <= *s.last {
				done = true
				break
			}
			missed = append(missed, e)
		}
		if done {
			break
		}
		req.Cursor = page.NextCursor
	}
	s.resumed = make(map[string]bool, len(missed))
	for i := len(missed) - 1; i >= 0; i-- {
		e := missed[i]
		s.resumed[e.EventID] = true
		s.seen(e.Sequence)
		if err := s.deliver(StreamMessage{Kind: "event", Resumed: true, Event: e.Stream()}); err != nil {
			return err
		}
	}
	return nil
}
