// Package stream is the live feed behind GET /v1/events/stream (SPEC.md "Live
// stream"): a Hub that fans frames out to this replica's subscribers, and a Bus
// that carries frames to every replica's Hub (in-process, or PostgreSQL
// LISTEN/NOTIFY). Decisions: docs/decisions/stream.md.
package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/auditchain/auditchain/pkg/api"
)

// Frame is one SSE `event` frame (SPEC.md "Live stream"): the data clients
// see (pkg/api.StreamEvent) and the event's leaf.
type Frame struct {
	api.StreamEvent
	// Leaf is the event's Merkle leaf, its position in the order events
	// were stored: not sent to clients, it tells a stream which events
	// were stored after it began (a batch row below the tip has a lower
	// sequence but a later leaf). UnknownLeaf when the sender did not say.
	Leaf int64 `json:"-"`
}

// UnknownLeaf is the Leaf of a frame whose sender did not give one (a
// replica older than the field): a stream judges it by its sequence.
const UnknownLeaf = -1

// Message is a published Frame with its JSON, encoded once per Publish and
// shared by every subscriber: Data is read-only.
type Message struct {
	Frame Frame
	Data  []byte
}

// ErrTooManyStreams is returned by Subscribe when the key already holds its
// cap of concurrent streams (answered 429 too_many_streams).
var ErrTooManyStreams = errors.New("too many concurrent streams for this key")

// Defaults of Options.
const (
	DefaultBuffer    = 256
	DefaultMaxPerKey = 16
)

// Options tunes a Hub; zero fields take the defaults.
type Options struct {
	// Buffer is how many frames a subscriber may fall behind before it is
	// marked lagged.
	Buffer int
	// MaxPerKey caps concurrent subscriptions per key id.
	MaxPerKey int
}

// Hub fans frames out to the subscribers of each account on this replica.
// Publish never blocks: each subscription has a bounded buffer, and a
// subscriber that lets it fill up is cut off as lagged (see Subscription).
type Hub struct {
	buffer    int
	maxPerKey int

	// mu guards users, perKey, n and every account's subs slice. Publish and
	// Resync hold it shared and serialise per account on account.mu;
	// Subscribe and Close hold it exclusively.
	mu     sync.RWMutex
	users  map[string]*account
	perKey map[string]int
	n      int
}

type account struct {
	mu   sync.Mutex // serialises deliveries to subs, so each sees Publish order
	subs []*Subscription
}

// NewHub returns an empty Hub.
func NewHub(o Options) *Hub {
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.MaxPerKey <= 0 {
		o.MaxPerKey = DefaultMaxPerKey
	}
	return &Hub{buffer: o.Buffer, maxPerKey: o.MaxPerKey, users: map[string]*account{}, perKey: map[string]int{}}
}

// MaxPerKey is the cap on concurrent subscriptions per key id.
func (h *Hub) MaxPerKey() int { return h.maxPerKey }

// Len is the number of open subscriptions.
func (h *Hub) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.n
}

// Accounts lists the accounts with at least one open subscription.
func (h *Hub) Accounts() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]string, 0, len(h.users))
	for u := range h.users {
		out = append(out, u)
	}
	return out
}

// Subscription receives the frames published for one account from the moment
// Subscribe returns; nothing earlier is replayed.
type Subscription struct {
	hub    *Hub
	userID string
	keyID  string
	ch     chan *Message

	idx    int  // position in account.subs; guarded by hub.mu
	closed bool // guarded by hub.mu (exclusive)
	// lagged is written under account.mu before ch is closed; C's consumer
	// may read it once ch is closed.
	lagged atomic.Bool
}

// Subscribe opens a subscription to userID's frames, counted against keyID's
// cap (a session id for session callers). The caller must Close it.
func (h *Hub) Subscribe(userID, keyID string) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.perKey[keyID] >= h.maxPerKey {
		return nil, ErrTooManyStreams
	}
	a := h.users[userID]
	if a == nil {
		a = &account{}
		h.users[userID] = a
	}
	s := &Subscription{hub: h, userID: userID, keyID: keyID, ch: make(chan *Message, h.buffer), idx: len(a.subs)}
	a.subs = append(a.subs, s)
	h.perKey[keyID]++
	h.n++
	return s, nil
}

// C delivers the account's frames in Publish order. It is closed when the
// subscription lagged (its buffer overflowed, or a Resync said frames may have
// been lost): everything delivered before the close is a gap-free run, and the
// consumer must then tell its client to re-read from its last sequence. C is
// never closed by Close.
func (s *Subscription) C() <-chan *Message { return s.ch }

// Lagged reports whether frames were lost after the last one C delivered.
func (s *Subscription) Lagged() bool { return s.lagged.Load() }

// Close ends the subscription and frees its slot; it is idempotent.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	a := h.users[s.userID]
	last := a.subs[len(a.subs)-1]
	a.subs[s.idx], last.idx = last, s.idx
	a.subs[len(a.subs)-1] = nil
	a.subs = a.subs[:len(a.subs)-1]
	if len(a.subs) == 0 {
		delete(h.users, s.userID)
	}
	if h.perKey[s.keyID]--; h.perKey[s.keyID] == 0 {
		delete(h.perKey, s.keyID)
	}
	h.n--
}

// lag cuts s off: later frames are not delivered, and C closes after the ones
// already buffered. Called with the account's mu held.
func (s *Subscription) lag() {
	if s.lagged.Swap(true) {
		return
	}
	close(s.ch)
}

// Publish delivers f to every subscription of userID without ever blocking: a
// subscription whose buffer is full is marked lagged and gets nothing more.
// Frames reach each subscriber in the order of Publish calls, so callers
// publish in commit order.
func (h *Hub) Publish(userID string, f Frame) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	a := h.users[userID]
	if a == nil {
		return
	}
	data := frameJSON(f)
	m := &Message{Frame: f, Data: data}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.subs {
		if s.lagged.Load() {
			continue
		}
		select {
		case s.ch <- m:
		default:
			s.lag()
		}
	}
}

// Resync marks every subscription of userID lagged: frames for it may have
// been lost upstream (see PGBus), so its clients must re-read.
func (h *Hub) Resync(userID string) { h.ResyncExcept(userID, nil) }

// ResyncExcept is Resync sparing keep (nil: none), a subscription that is
// known to have received nothing yet.
func (h *Hub) ResyncExcept(userID string, keep *Subscription) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if a := h.users[userID]; a != nil {
		a.lagAllExcept(keep)
	}
}

// ResyncAll marks every subscription lagged, for when the whole feed may have
// missed frames (the cross-replica listener lost its connection).
func (h *Hub) ResyncAll() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, a := range h.users {
		a.lagAllExcept(nil)
	}
}

func (a *account) lagAllExcept(keep *Subscription) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.subs {
		if s != keep {
			s.lag()
		}
	}
}

// frameJSON is f's JSON, without HTML escaping (the stream is JSON, never
// HTML). f holds strings and integers only: encoding cannot fail.
func frameJSON(f Frame) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(f)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
