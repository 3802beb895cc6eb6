package writer

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/internal/merkle"
	"github.com/auditchain/auditchain/internal/store"
)

// The optimistic append (PostgreSQL; docs/decisions/postgres-append.md): a
// client event without a machine is checked against the head read without a
// lock, or remembered from this replica's last append of the account
// (headcache.go), and stored by one statement whose compare-and-set on the
// head gates every write (store.AppendEvent without a transaction), sent
// with other accounts' appends in one statement where they meet
// (pgbatch.go). It ends cleanly when the event is stored, or when Place
// refuses it against a head read from the database (a refusal needs no
// lock: on a hot account most attempts end there). Anything else — the head
// moved, the quota or the event_id refused the event (the statement then
// writes nothing), the tree needs building — goes the locked way, which
// orders the append against the others and tells those outcomes apart.
//
// Events of a machine always take the locked path: its signing key is
// checked again there under the head's lock, which a key registration also
// takes; the unlocked statement's snapshot could miss a key registered
// meanwhile.
type optimistic struct {
	w     *Writer
	heads headCache
	batch *pgBatcher
	// byPath counts client appends by the path that stored (or refused)
	// them (Stats).
	byPath struct{ optimistic, locked atomic.Int64 }
}

func newOptimistic(w *Writer, timeout time.Duration) *optimistic {
	return &optimistic{w: w, batch: newPGBatcher(w.store, timeout, pgBatchWorkers, pgBatchQueue)}
}

func (o *optimistic) close() { o.batch.close() }

// append tries a without the head's lock. done is true when it is answered:
// stored, or refused by Place against a head read from the database.
func (o *optimistic) append(ctx context.Context, a Append) (Appended, bool, error) {
	userID := a.Event.UserID
	if cached, ok := o.heads.get(userID); ok {
		out, done, err := o.try(ctx, a, cached.head, cached)
		if err != nil || done {
			if done {
				o.heads.hits.Add(1)
			}
			return out, done, err
		}
		o.heads.stale.Add(1)
		// The head moved since this replica's last append (another replica
		// or path appended), or the event does not extend the cached head:
		// read the head and decide against it.
		o.heads.drop(userID)
	}
	// Clients number their events 0, 1, 2…, so the head usually holds as
	// many events as the new sequence: read that leaf's hashes ahead, and the
	// frontier the head cache keeps after it.
	guess := a.Event.Sequence
	head, hashes, err := o.w.store.HeadForAppend(ctx, userID, append(store.LeafReads(guess), merkle.FrontierIndexes(guess)...))
	if err != nil || head.Empty() {
		return Appended{}, false, err
	}
	// A lost compare-and-set goes to the locked path. Reading the head again
	// instead (the event then fails continuity, answered without the lock)
	// fed a hot account's retry storm (docs/performance.md).
	return o.try(ctx, a, head, hashes)
}

// try is append against head, read from the database or the head cache
// (hashes is then the cached frontier). From the cache, done false means the
// cached head was not the account's head.
func (o *optimistic) try(ctx context.Context, a Append, head store.Head, hashes merkle.HashReader) (Appended, bool, error) {
	_, fromCache := hashes.(cachedHead)
	if err := a.Place(ctx, head, nil); err != nil {
		if fromCache {
			return Appended{}, false, nil // the cache answers nothing: read the head
		}
		return Appended{}, true, err
	}
	e := *a.Event
	e.LeafIndex = head.EventCount
	// One more read when the guess was wrong (a chain with gaps). The
	// cached frontier needs no check that the tree is there: this replica's
	// append built on it.
	reads := store.LeafReads(e.LeafIndex)
	if fromCache {
		reads = merkle.AppendReads(e.LeafIndex)
	}
	if _, err := hashes.ReadHashes(reads); errors.Is(err, store.ErrMissingHash) {
		return Appended{}, false, nil // the tree is incomplete: the locked path builds it
	} else if err != nil {
		return Appended{}, false, err
	}
	newHashes, err := o.w.store.LeafRows(ctx, nil, &e, hashes)
	if err != nil {
		return Appended{}, false, err
	}
	sa := store.Append{Event: &e, Expect: head, Quota: a.Quota, Hashes: newHashes}
	if err := o.w.notification(&e, &sa.NotifyChannel, &sa.NotifyPayload); err != nil {
		return Appended{}, false, err
	}
	if fromCache && e.LeafIndex > 0 {
		// Rows lost since this replica's last append must be rebuilt before
		// the tree grows on them (the locked path does).
		check := store.TreeCheckIndex(e.LeafIndex)
		sa.TreeCheck = &check
	}
	out, err := o.batch.submit(ctx, sa)
	if err != nil || !out.Stored() {
		return Appended{}, false, err
	}
	o.heads.put(e.UserID, headAfter(head, &e), hashes, newHashes)
	if sa.NotifyChannel == "" {
		o.w.hub.Publish(e.UserID, FrameOf(&e))
	}
	*a.Event = e
	return Appended{Event: e, QuotaUsed: out.QuotaUsed}, true, nil
}
