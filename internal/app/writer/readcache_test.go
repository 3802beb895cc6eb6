package writer

import (
	"fmt"
	"testing"
)

func TestReadCacheKeepsOnlyReadsNoWriteRaced(t *testing.T) {
	miss := func(c *ReadCache[string, int]) (int, bool) { v, _, ok := c.Get("a", "k"); return v, ok }

	tests := []struct {
		name    string
		run     func(c *ReadCache[string, int])
		wantHit bool
	}{
		{"a read stored with a current ticket is served", func(c *ReadCache[string, int]) {
			_, tk, _ := c.Get("a", "k")
			c.Put("a", tk, "k", 1)
		}, true},
		{"a write ended after the ticket was taken: the read is not kept", func(c *ReadCache[string, int]) {
			_, tk, _ := c.Get("a", "k")
			c.begin("a")()
			c.Put("a", tk, "k", 1)
		}, false},
		{"a write pending when the read is stored: not kept", func(c *ReadCache[string, int]) {
			_, tk, _ := c.Get("a", "k")
			c.begin("a") // never ends within this step
			c.Put("a", tk, "k", 1)
		}, false},
		{"a write ended after the entry was stored drops it", func(c *ReadCache[string, int]) {
			_, tk, _ := c.Get("a", "k")
			c.Put("a", tk, "k", 1)
			c.begin("a")()
		}, false},
		{"a write of another scope changes nothing", func(c *ReadCache[string, int]) {
			_, tk, _ := c.Get("a", "k")
			c.Put("a", tk, "k", 1)
			c.begin("b")()
		}, true},
		{"a ticket taken while a write was pending is never honoured", func(c *ReadCache[string, int]) {
			end := c.begin("a")
			_, tk, _ := c.Get("a", "k")
			end()
			c.Put("a", tk, "k", 1)
		}, false},
		{"ending a write twice counts once", func(c *ReadCache[string, int]) {
			end := c.begin("a")
			end()
			end()
			_, tk, _ := c.Get("a", "k")
			c.Put("a", tk, "k", 1)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newReadCache[string, int](10, 10)
			tt.run(c)
			if v, hit := miss(c); hit != tt.wantHit || (hit && v != 1) {
				t.Fatalf("get after the steps = (%d, %v), want hit %v", v, hit, tt.wantHit)
			}
		})
	}
}

func TestReadCacheBypassedWhileAWriteIsPending(t *testing.T) {
	c := newReadCache[string, int](10, 10)
	_, tk, _ := c.Get("a", "k")
	c.Put("a", tk, "k", 1)
	end := c.begin("a")
	if _, _, hit := c.Get("a", "k"); hit {
		t.Fatal("a pending write must make readers go to the database")
	}
	end()
	if _, _, hit := c.Get("a", "k"); hit {
		t.Fatal("the write's end must drop what was cached before it")
	}
}

func TestReadCacheIsBounded(t *testing.T) {
	c := newReadCache[string, int](4, 3)
	pending := c.begin("busy") // a scope with a pending write must survive eviction
	for i := range 100 {
		scope := fmt.Sprint("s", i)
		for k := range 10 {
			_, tk, _ := c.Get(scope, fmt.Sprint(k))
			c.Put(scope, tk, fmt.Sprint(k), k)
		}
	}
	c.mu.Lock()
	scopes := len(c.scopes)
	_, busy := c.scopes["busy"]
	for name, s := range c.scopes {
		if len(s.entries) > 3 {
			t.Errorf("scope %s holds %d entries, bound is 3", name, len(s.entries))
		}
	}
	c.mu.Unlock()
	if scopes > 4 {
		t.Errorf("%d scopes cached, bound is 4", scopes)
	}
	if !busy {
		t.Error("the scope with a pending write was evicted")
	}
	pending()
	var nilCache *ReadCache[string, int]
	if _, _, hit := nilCache.Get("a", "k"); hit {
		t.Error("a nil cache must always miss")
	}
	nilCache.begin("a")()
}
