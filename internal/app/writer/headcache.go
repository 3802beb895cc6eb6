package writer

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
)

// maxCachedHeads bounds the head cache: an entry is a head and its Merkle
// frontier (at most 63 hashes, usually about log2 of the chain's length), so
// the cache stays under a few MB whatever the number of accounts.
const maxCachedHeads = 4096

// headCache remembers, per account, the head this replica's last optimistic
// append left and the Merkle frontier of that head's tree
// (docs/decisions/postgres-append.md "The head cache"). The next optimistic
// append of the account then needs no read before its write: the write's
// compare-and-set on the head row (event_count, last_sequence, last_hash)
// tells whether another replica or path appended since, and a lost
// compare-and-set drops the entry and reads the head as before.
//
// An entry can be trusted this far because a chain is append-only: the
// account's first n events never change, so the head and the tree of size n
// are the same whoever reads them, and the frontier hashes of the tree of n
// leaves are exactly what appending leaf n needs. No entry is ever answered
// from: a continuity failure against a cached head reads the head again.
type headCache struct {
	mu sync.Mutex
	m  map[string]cachedHead
	// hits counts appends stored against a cached head, stale the cached
	// heads found not to be the account's head (HeadCache).
	hits, stale atomic.Int64
}

type cachedHead struct {
	head store.Head
	// frontier holds the stored hashes of merkle.FrontierIndexes(head.EventCount).
	frontier map[int64]tlog.Hash
}

func (c *headCache) get(userID string) (cachedHead, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[userID]
	return h, ok
}

func (c *headCache) drop(userID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, userID)
}

// put records the head after appending the leaf head.EventCount-1, whose
// tree's frontier is taken from the frontier before it (prev) and the hashes
// the append wrote.
func (c *headCache) put(userID string, head store.Head, prev merkle.HashReader, written []merkle.StoredHash) {
	idx := merkle.FrontierIndexes(head.EventCount)
	frontier := make(map[int64]tlog.Hash, len(idx))
	for _, h := range written {
		frontier[h.Index] = h.Hash
	}
	var fromPrev []int64
	for _, i := range idx {
		if _, ok := frontier[i]; !ok {
			fromPrev = append(fromPrev, i)
		}
	}
	if len(fromPrev) > 0 {
		hs, err := prev.ReadHashes(fromPrev)
		if err != nil {
			c.drop(userID)
			return
		}
		for k, i := range fromPrev {
			frontier[i] = hs[k]
		}
	}
	for i := range frontier {
		if !slices.Contains(idx, i) {
			delete(frontier, i)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedHead)
	}
	old, ok := c.m[userID]
	if ok && old.head.EventCount >= head.EventCount {
		return // a later append of the account was recorded first
	}
	makeRoom(c.m, userID, maxCachedHeads)
	c.m[userID] = cachedHead{head: head, frontier: frontier}
}

// ReadHashes serves the frontier (merkle.HashReader): appending leaf n reads
// only hashes of the frontier of the tree of n leaves (merkle.AppendReads).
func (h cachedHead) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for k, i := range indexes {
		hash, ok := h.frontier[i]
		if !ok {
			return nil, fmt.Errorf("%w: %d is not in the cached frontier of %d leaves", store.ErrMissingHash, i, h.head.EventCount)
		}
		out[k] = hash
	}
	return out, nil
}
