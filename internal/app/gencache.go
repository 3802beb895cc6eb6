package app

import "sync"

// genCache keeps, per key, a value read from committed state at a
// generation that names it (an account's approval rules, a machine's
// signing key: approvals_rules.go, signing_keys.go). Its users compare the
// generation with the one on the head they hold, so an entry out of date
// costs a read, never a wrong answer. It keeps at most limit keys, evicting
// an arbitrary one when full.
type genCache[K comparable, V any] struct {
	limit int
	mu    sync.Mutex
	m     map[K]genEntry[V]
}

type genEntry[V any] struct {
	gen   int64
	value V
}

// get returns the value kept for k and the generation it was read at.
func (c *genCache[K, V]) get(k K) (V, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.value, e.gen, ok
}

// put keeps v as k's value at gen, unless a later generation is kept.
func (c *genCache[K, V]) put(k K, gen int64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]genEntry[V])
	}
	old, ok := c.m[k]
	if ok && old.gen > gen {
		return // a later generation was kept first
	}
	if !ok && len(c.m) >= c.limit {
		for other := range c.m { // evict an arbitrary entry: map order is random
			delete(c.m, other)
			break
		}
	}
	c.m[k] = genEntry[V]{gen: gen, value: v}
}

// drop forgets k's value if it is the one kept at gen.
func (c *genCache[K, V]) drop(k K, gen int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok && e.gen == gen {
		delete(c.m, k)
	}
}
