package mcpserver

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/auditchain/auditchain/pkg/api"
	"github.com/auditchain/auditchain/pkg/client"
)

// What the proxy writes on the chain itself, after the call: each call's
// tool_result, and the tool_call of a call --fail-open let through while
// the service could not be reached. They wait in order and are sent in
// order, so a tool_result never reaches the record before its tool_call.

// ResultDelay is how long a tool_result waits for the next call to carry
// it before the proxy sends it alone.
const ResultDelay = 50 * time.Millisecond

const maxRetryDelay = 5 * time.Second

// maxWaitingRecords bounds the records kept while the service cannot take
// them; beyond it the oldest are dropped, and logged.
const maxWaitingRecords = 4096

// record is an event waiting to be written.
type record struct {
	api.ToolResult
	// call marks the tool_call of a call let through by --fail-open
	// (decision allow); the others are tool_results.
	call bool
}

func (r record) event() client.Event {
	ev := client.Event{EventID: *r.EventID, EventType: api.EventToolResult, Tool: r.Tool, ParentID: r.ParentID, Raw: r.Raw}
	if r.call {
		allow := api.DecisionAllow
		ev.EventType, ev.Decision = api.EventToolCall, &allow
	}
	return ev
}

// recordQueue keeps the records of a proxy until the service has them: each
// tool_result goes with the next call's request (one commit for both), or
// after ResultDelay without a call, on its own.
type recordQueue struct {
	svc Service
	log *slog.Logger

	mu       sync.Mutex
	waiting  []record
	flushing *time.Timer // armed while records wait
	closed   bool        // Close began: records are sent at once
	// retryIn is the wait before the next lone send: ResultDelay, doubled
	// after each failure up to maxRetryDelay while the service is away.
	retryIn time.Duration
	sending sync.Mutex // held while records are sent alone
}

// add keeps r and makes sure it is sent after ResultDelay if no call comes.
func (q *recordQueue) add(r record) {
	q.mu.Lock()
	q.waiting = append(q.waiting, r)
	if !q.closed {
		q.armLocked()
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	q.send(false)
}

// armLocked arms the timer that sends the waiting records alone, unless it
// is armed (q.mu held).
func (q *recordQueue) armLocked() {
	if q.flushing != nil || len(q.waiting) == 0 {
		return
	}
	if over := len(q.waiting) - maxWaitingRecords; over > 0 {
		q.log.Error("mcp proxy: records dropped: the service has not taken them", "dropped", over)
		q.waiting = slices.Delete(q.waiting, 0, over)
	}
	q.flushing = time.AfterFunc(cmp.Or(q.retryIn, ResultDelay), func() {
		q.mu.Lock()
		q.flushing = nil
		q.mu.Unlock()
		q.send(true)
	})
}

// takeResults hands the leading tool_results (at most the service's bound)
// to a call; a fail-open tool_call waiting stops them, as it goes alone and
// first.
func (q *recordQueue) takeResults() []api.ToolResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for n < len(q.waiting) && n < api.MaxToolCallResults && !q.waiting[n].call {
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]api.ToolResult, n)
	for i := range n {
		out[i] = q.waiting[i].ToolResult
	}
	q.waiting = q.waiting[n:]
	return out
}

// requeueResults puts back results a call could not deliver, ahead of the
// others, and arms the timer: the timer that was armed for them may have
// fired while the call was under way.
func (q *recordQueue) requeueResults(rs []api.ToolResult) {
	back := make([]record, len(rs))
	for i, r := range rs {
		back[i] = record{ToolResult: r}
	}
	q.requeue(back)
}

func (q *recordQueue) requeue(rs []record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(slices.Clone(rs), q.waiting...)
	q.armLocked()
}

// send appends the waiting records one by one, in order, each numbered by
// the service at the tip (POST /v1/events/append), so a tip a client's own
// events took to 2^52 stops none of them. A record the service could not
// take is kept with those after it, and with retry set tried again after
// retryIn, which doubles with each failure up to maxRetryDelay; without
// retry (Flush, at exit) it is logged, and so are the tool_results of a
// tool_call that could not be written, which are not sent (their parent is
// not on the record).
func (q *recordQueue) send(retry bool) {
	q.sending.Lock()
	defer q.sending.Unlock()
	q.mu.Lock()
	rs := q.waiting
	q.waiting = nil
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		if len(q.waiting) == 0 || q.flushing == nil {
			q.retryIn = 0
		}
		q.mu.Unlock()
	}()
	var lost map[string]bool // tool_calls not written
	for i, r := range rs {
		if r.ParentID != nil && lost[*r.ParentID] {
			q.log.Warn("mcp proxy: a tool_result is not recorded: its fail-open tool_call could not be", "event_id", *r.EventID)
			continue
		}
		_, err := q.svc.AppendNext(context.Background(), r.event())
		switch {
		case client.IsCode(err, "event_id_conflict"):
			// A call that failed to answer carried it after all: it is on
			// the record, stamped with that call's time.
			q.log.Info("mcp proxy: a record was on the chain already", "event_id", *r.EventID)
		case err != nil && retry:
			q.log.Warn("mcp proxy: recording failed; it is tried again", "event_id", *r.EventID, "err", err)
			q.mu.Lock()
			q.retryIn = min(2*cmp.Or(q.retryIn, ResultDelay), maxRetryDelay)
			q.mu.Unlock()
			q.requeue(rs[i:])
			return
		case err != nil:
			q.log.Warn("mcp proxy: recording failed", "event_id", *r.EventID, "err", err)
			if r.call {
				if lost == nil {
					lost = map[string]bool{}
				}
				lost[*r.EventID] = true
			}
		}
	}
}

// flush sends every record waiting (or logs why one could not be sent)
// before it returns; with closing set, records added later are sent at
// once.
func (q *recordQueue) flush(closing bool) {
	q.mu.Lock()
	q.closed = q.closed || closing
	if q.flushing != nil {
		q.flushing.Stop()
		q.flushing = nil
	}
	q.mu.Unlock()
	q.send(false)
}

// canonicalHash is the SHA-256 (hex) of the RFC 8785 form of JSON b.
func canonicalHash(b []byte) (string, error) {
	c, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// ResultHash is what the proxy records as result_sha256: the canonical hash
// of the tool result as the upstream server sent it (the JSON-RPC result
// object: content, structuredContent, isError, _meta, …), which a verifier
// holding the result recomputes.
func ResultHash(result json.RawMessage) (string, error) { return canonicalHash(result) }

// ArgumentsHash is what the proxy records as arguments_sha256: the
// canonical hash of the call's arguments ({} when absent).
func ArgumentsHash(args json.RawMessage) (string, error) { return canonicalHash(args) }

// ResultEventID is the event_id of the tool_result of the call callID:
// derived, so a retried append of the result is the same event.
func ResultEventID(callID string) string {
	sum := sha256.Sum256([]byte("tool_result:" + callID))
	return "evt-" + hex.EncodeToString(sum[:16])
}

func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt-" + hex.EncodeToString(b[:])
}
