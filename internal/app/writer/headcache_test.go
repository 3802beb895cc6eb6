package writer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
)

// memTree is a complete tree of stored hashes in memory: what an account's
// merkle_hashes rows hold.
type memTree map[int64]tlog.Hash

func (m memTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := m[idx]
		if !ok {
			return nil, fmt.Errorf("%w: %d", store.ErrMissingHash, idx)
		}
		out[i] = h
	}
	return out, nil
}

func testLeaf(n int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h := sha256.Sum256(b[:])
	return h[:]
}

// The cache's frontier after every append is exactly the stored hashes the
// tree holds at merkle.FrontierIndexes, and appending from it writes the
// same rows as appending from the whole tree: whether the entry was first
// filled from a read of the store (at any size) or kept from append to
// append.
func TestHeadCacheKeepsTheTreesFrontier(t *testing.T) {
	for _, start := range []int64{0, 1, 2, 3, 7, 8, 63, 64, 65} {
		t.Run(fmt.Sprintf("from %d", start), func(t *testing.T) {
			tree := memTree{}
			for n := range start {
				hs, err := merkle.AppendLeaf(n, testLeaf(n), tree)
				if err != nil {
					t.Fatal(err)
				}
				for _, h := range hs {
					tree[h.Index] = h.Hash
				}
			}
			var c headCache
			var reader merkle.HashReader = tree // the first append reads the store
			for n := start; n < start+300; n++ {
				hs, err := merkle.AppendLeaf(n, testLeaf(n), reader)
				if err != nil {
					t.Fatalf("append leaf %d from the cached frontier: %v", n, err)
				}
				want, err := merkle.AppendLeaf(n, testLeaf(n), tree)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(hs) != fmt.Sprint(want) {
					t.Fatalf("leaf %d: rows from the cache %v, from the tree %v", n, hs, want)
				}
				for _, h := range hs {
					tree[h.Index] = h.Hash
				}
				c.put("u", store.Head{EventCount: n + 1}, reader, hs)
				got, ok := c.get("u")
				if !ok {
					t.Fatalf("leaf %d: no entry", n)
				}
				idx := merkle.FrontierIndexes(n + 1)
				if len(got.frontier) != len(idx) {
					t.Fatalf("size %d: frontier of %d hashes, want %d", n+1, len(got.frontier), len(idx))
				}
				for _, i := range idx {
					if got.frontier[i] != tree[i] {
						t.Fatalf("size %d: frontier hash %d differs from the tree's", n+1, i)
					}
				}
				reader = got
			}
		})
	}
}

// An entry is never replaced by an older head (two appends of one account
// recorded out of order), a failed frontier read drops the entry, and the
// cache holds at most maxCachedHeads accounts.
func TestHeadCacheKeepsTheLaterHeadAndItsBound(t *testing.T) {
	var c headCache
	tree := memTree{}
	for n := range int64(3) {
		hs, _ := merkle.AppendLeaf(n, testLeaf(n), tree)
		for _, h := range hs {
			tree[h.Index] = h.Hash
		}
	}
	c.put("u", store.Head{EventCount: 3}, tree, nil)
	c.put("u", store.Head{EventCount: 2}, tree, nil)
	if got, _ := c.get("u"); got.head.EventCount != 3 {
		t.Fatalf("entry at %d events after an older put; want 3", got.head.EventCount)
	}
	c.put("u", store.Head{EventCount: 4}, memTree{}, nil) // the frontier of 4 cannot be read
	if _, ok := c.get("u"); ok {
		t.Fatal("an entry whose frontier could not be read was kept")
	}
	if _, err := (cachedHead{frontier: map[int64]tlog.Hash{}}).ReadHashes([]int64{5}); !errors.Is(err, store.ErrMissingHash) {
		t.Fatalf("reading outside the cached frontier: %v, want ErrMissingHash", err)
	}
	for i := range maxCachedHeads + 10 {
		c.put(fmt.Sprint("acct-", i), store.Head{EventCount: 1}, tree, nil)
	}
	if n := len(c.m); n != maxCachedHeads {
		t.Fatalf("%d cached heads, want the bound %d", n, maxCachedHeads)
	}
}

// A replica's cached head goes stale when another replica appends: the next
// append through it reads the head again and is stored, and an event that
// extends the stale head is refused with the database's head, never the
// cached one.
func TestCachedHeadMovedByAnotherReplica(t *testing.T) {
	r := newReplicaPair(t)
	c := r.newChain("stale@example.com")
	for range 4 {
		r.append(c, nil) // 0 locked, 1 read and cached, 2 and 3 from the cache
	}
	if hits, stale := cacheStats(r.writer); hits != 2 || stale != 0 {
		t.Fatalf("HeadCache = %d hits, %d stale; want 2 and 0", hits, stale)
	}
	staleTip := c.prev
	// The other replica appends event 4.
	other := &replicaPair{t: t, ctx: r.ctx, writer: r.streamer}
	other.append(c, nil)
	r.append(c, nil) // event 5, through the replica whose cache says 4 events
	if hits, stale := cacheStats(r.writer); hits != 2 || stale != 1 {
		t.Fatalf("HeadCache = %d hits, %d stale; want 2 and 1", hits, stale)
	}
	r.append(c, nil) // event 6 from the refreshed cache
	if hits, _ := cacheStats(r.writer); hits != 3 {
		t.Fatalf("HeadCache hits = %d after the refresh, want 3", hits)
	}

	other.append(c, nil) // event 7 elsewhere: the writer's cache is stale again
	late := c.next("evt-late")
	late.PrevHash = staleTip
	_, err := r.writer.Append(r.ctx, clientAppend(late))
	refusal, ok := errorAs[*notAtTip](err)
	if !ok {
		t.Fatalf("append on a stale tip: %v, want it refused", err)
	}
	if got := refusal.head.LastHash; got == nil || *got != *c.prev {
		t.Fatalf("refused against the head %v, want the database's tip %s", got, *c.prev)
	}
	intact(t, r.writer.store, c.userID, 8)
}

// Clients on both replicas racing on one account, each retrying on 409 from
// the head it is told: every acknowledged event is stored once, in one
// linked chain whose tree verifies — whatever the caches believed.
func TestCachedHeadsUnderRacingReplicas(t *testing.T) {
	r := newReplicaPair(t)
	c := r.newChain("race@example.com")
	r.append(c, nil)
	const workers, each = 6, 12
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		a := r.writer
		if w%2 == 1 {
			a = r.streamer
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("evt-w%d-%d", w, i)
				for {
					tip, err := a.store.Head(r.ctx, c.userID)
					if err != nil {
						errs <- err
						return
					}
					at := &testChain{userID: c.userID, prev: tip.LastHash, seq: tip.LastSequence + 1}
					_, err = a.Append(r.ctx, clientAppend(at.next(id)))
					if _, refused := errorAs[*notAtTip](err); refused {
						continue // another worker appended first
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	intact(t, r.writer.store, c.userID, 1+workers*each)
	hits, _ := cacheStats(r.writer)
	hits2, _ := cacheStats(r.streamer)
	t.Logf("cache hits: %d and %d of %d appends", hits, hits2, workers*each)
}

// cacheStats is w's head cache hits and stale entries.
func cacheStats(w *Writer) (hits, stale int64) {
	s := w.Stats()
	return s.HeadCacheHits, s.HeadCacheStale
}
