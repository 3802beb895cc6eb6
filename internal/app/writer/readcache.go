package writer

import "sync"

// ReadCache memoises reads of state that only this process writes: on
// SQLite the embedded store has exactly one serving process (serve holds
// Store.LockServing; docs/decisions/gate.md "Status reads from memory"), so
// every write of that state passes through this Writer and can tell the
// cache (Invalidate).
//
// The cache is linearizable with respect to those writes, not merely
// "eventually fresh":
//   - a write calls begin (Invalidate) before its transaction commits and the
//     returned end after it committed (or failed); while any write of a scope is pending,
//     readers of that scope bypass the cache and store nothing, so no reader
//     can see a state older than one another reader already saw from the
//     database;
//   - end bumps the scope's generation and drops its entries, and a reader
//     stores what it read only if the generation it saw before reading is
//     still current, so a read that raced a write is never kept.
//
// Scopes are accounts (the gate's state) or one global scope (API keys).
// Memory is bounded: at most maxScopes scopes of maxEntries entries each; an
// overflow evicts idle scopes, which only costs a database read later.
type ReadCache[K comparable, V any] struct {
	mu         sync.Mutex
	scopes     map[string]*cacheScope[K, V]
	maxScopes  int
	maxEntries int
}

type cacheScope[K comparable, V any] struct {
	pending int    // writes begun and not yet ended
	gen     uint64 // bumped by every ended write
	entries map[K]V
}

// Ticket is what a reader that missed must hand back to Put: the scope and
// generation it saw before it read the database.
type Ticket[K comparable, V any] struct {
	scope *cacheScope[K, V]
	gen   uint64
	valid bool
}

// NewReadCache returns a cache of at most maxScopes scopes of maxEntries
// entries each, or nil (a cache that always misses) when w is not the
// store's sole writer: another replica's writes would not invalidate it.
func NewReadCache[K comparable, V any](w *Writer, maxScopes, maxEntries int) *ReadCache[K, V] {
	if !w.SoleWriter() {
		return nil
	}
	return newReadCache[K, V](maxScopes, maxEntries)
}

func newReadCache[K comparable, V any](maxScopes, maxEntries int) *ReadCache[K, V] {
	return &ReadCache[K, V]{scopes: map[string]*cacheScope[K, V]{}, maxScopes: maxScopes, maxEntries: maxEntries}
}

// Get returns the cached value of k in scope, or a ticket for Put after the
// caller read the value itself. A nil cache always misses.
func (c *ReadCache[K, V]) Get(scope string, k K) (V, Ticket[K, V], bool) {
	var zero V
	if c == nil {
		return zero, Ticket[K, V]{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.scopes[scope]
	if s == nil {
		c.evictIdleLocked()
		s = &cacheScope[K, V]{entries: map[K]V{}}
		c.scopes[scope] = s
	}
	if s.pending > 0 {
		return zero, Ticket[K, V]{}, false
	}
	if v, ok := s.entries[k]; ok {
		return v, Ticket[K, V]{}, true
	}
	return zero, Ticket[K, V]{scope: s, gen: s.gen, valid: true}, false
}

// Put keeps v for k if nothing was written to the scope since the ticket was
// taken and nothing is being written now.
func (c *ReadCache[K, V]) Put(scope string, t Ticket[K, V], k K, v V) {
	if c == nil || !t.valid {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.scopes[scope]
	if s != t.scope || s.gen != t.gen || s.pending > 0 {
		return
	}
	if len(s.entries) >= c.maxEntries {
		clear(s.entries)
	}
	s.entries[k] = v
}

// begin marks a write of scope as pending; call the returned function once the
// write committed or failed. A nil cache returns a no-op.
func (c *ReadCache[K, V]) begin(scope string) (end func()) {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	s := c.scopes[scope]
	if s == nil {
		c.evictIdleLocked()
		s = &cacheScope[K, V]{entries: map[K]V{}}
		c.scopes[scope] = s
	}
	s.pending++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			s.pending--
			s.gen++
			clear(s.entries)
			c.mu.Unlock()
		})
	}
}

// evictIdleLocked makes room for one more scope by dropping scopes no write is
// pending on (a pending scope must stay: its readers rely on it to bypass).
func (c *ReadCache[K, V]) evictIdleLocked() {
	if len(c.scopes) < c.maxScopes {
		return
	}
	excess := len(c.scopes) - c.maxScopes + 1 + c.maxScopes/8 // free a little headroom at once
	for name, s := range c.scopes {
		if excess == 0 {
			return
		}
		if s.pending == 0 {
			delete(c.scopes, name)
			excess--
		}
	}
}
