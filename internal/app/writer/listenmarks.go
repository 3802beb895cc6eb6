package writer

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/stream"
)

// On PostgreSQL an append announces itself to the other replicas with NOTIFY
// only while some replica marks its account as streamed (chain_heads.
// listened_until, store.MarkListened): every notifying commit of the database
// is serialised on one lock held through its WAL flush, so announcing every
// event capped all appends near 1,000/s (docs/decisions/stream.md, "Who is
// notified").
//
// A replica marks an account when a stream of it opens, before the stream
// reads the tip, and extends the marks of the accounts it streams. It keeps,
// per account, until when its own mark stands ("coverage"), and never lets a
// stream receive a frame after a moment its coverage did not reach — a moment
// whose events may have gone unannounced:
//   - a notification that arrives while the coverage has run out resyncs the
//     account's streams instead of being delivered (vouchAnnounced);
//   - a new mark written after the coverage ran out resyncs the streams
//     before the coverage is extended (cover);
//   - a replica whose refreshes fail cuts its streams while the coverage still
//     runs (tendListenMarks), so they end before any lapse.
//
// Resynced streams are cut off as lagged and their clients re-read.
const (
	listenMarkTTL = 60 * time.Second
	// listenMarkRefresh is how often the marks are extended.
	listenMarkRefresh = 15 * time.Second
	// listenMarkTimeout bounds one MarkListened statement.
	listenMarkTimeout = 5 * time.Second
	// listenMarkChunk is how many accounts one refresh statement marks: a
	// slow chunk fails alone.
	listenMarkChunk = 500
	// listenMarkMargin: a replica whose own mark of an account has less than
	// this left after it tends its marks cuts that account's streams off. It
	// exceeds one refresh interval plus one statement's time, so with turns
	// on time the cut comes before the mark lapses (three refreshes in a row
	// must fail first). A late turn (a stall, or many chunks) may still let a
	// mark lapse: vouchAnnounced and cover then keep the frames out.
	listenMarkMargin = listenMarkRefresh + 2*listenMarkTimeout
)

// listenMarks holds, per account this replica marked, until when its own
// mark stands: the start of the successful MarkListened that wrote it plus
// the TTL (the database computed the mark later, so it stands at least that
// long).
type listenMarks struct {
	mu      sync.Mutex
	covered map[string]time.Time
}

// stands reports whether a coverage until still holds at t. Both the
// monotonic and the wall clock must agree: the monotonic one is immune to
// clock steps but stops while a virtual machine is suspended, when the
// database's clock (a wall clock) runs on.
func stands(until, t time.Time) bool {
	return until.After(t) && until.Round(0).After(t.Round(0))
}

// cover records that a MarkListened that started at start and had
// committed by end stood for accounts. An account whose earlier coverage did
// not reach end may have had events appended unannounced before the new mark
// took effect: its streams are resynced first, under the lock vouchAnnounced
// takes, so no frame is delivered to them on the strength of the new mark —
// all but self, the stream whose WatchStream wrote this mark and which has
// not read its tip yet. (end, not start plus the statement's timeout: the
// timeout runs on the monotonic clock, which a suspended machine stops.)
func (w *Writer) cover(accounts []string, start, end time.Time, self *stream.Subscription) {
	until := start.Add(listenMarkTTL)
	m := &w.marks
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.covered == nil {
		m.covered = map[string]time.Time{}
	}
	for _, u := range accounts {
		old, ok := m.covered[u]
		if ok && !stands(old, end) {
			w.hub.ResyncExcept(u, self)
		}
		if !ok || until.After(old) {
			m.covered[u] = until
		}
	}
}

// vouchAnnounced is PGBus.Vouch: false when this replica marked the account
// but its coverage has run out, so an event before the notification being
// delivered may not have been announced. An account without an entry has no
// stream that read its tip yet (WatchStream covers before the tip is read):
// the frame is delivered, and such a stream drops it as at or below its tip.
func (w *Writer) vouchAnnounced(userID string) bool {
	now := w.now()
	w.marks.mu.Lock()
	defer w.marks.mu.Unlock()
	until, ok := w.marks.covered[userID]
	return !ok || stands(until, now)
}

// WatchStream marks userID as streamed by this replica before its stream reads
// the tip: an event committed after the mark is announced, and one committed
// before it is at or below the tip the stream then reads, which the stream
// does not replay (SPEC.md "Live stream"). No write when this replica's mark
// was written within the last refresh interval. Nothing to do on SQLite,
// where the one process announces every event to its Hub.
//
// self is the stream being opened, already subscribed: it is not resynced
// if the account's earlier coverage had run out (cover).
func (w *Writer) WatchStream(ctx context.Context, userID string, self *stream.Subscription) error {
	if w.bus == nil {
		return nil
	}
	start := w.now()
	w.marks.mu.Lock()
	covered := w.marks.covered[userID]
	w.marks.mu.Unlock()
	if stands(covered, start.Add(listenMarkTTL-listenMarkRefresh)) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, listenMarkTimeout)
	defer cancel()
	if err := w.store.MarkListened(ctx, []string{userID}, listenMarkTTL); err != nil {
		return err
	}
	w.cover([]string{userID}, start, w.now(), self)
	return nil
}

// tendListenMarks extends the marks of every account this replica streams
// (cover resyncs any whose coverage had run out), then cuts off the streams
// of any account whose coverage has less than listenMarkMargin left (the
// refreshes failed: database unreachable), before its mark could lapse, and
// forgets expired entries of accounts it no longer streams. The accounts
// streamed are read again under the lock that deletes entries, so an entry
// is never dropped while a stream that relied on it is open. It returns the
// first refresh error, after the cut.
func (w *Writer) tendListenMarks(ctx context.Context) error {
	var firstErr error
	for chunk := range slices.Chunk(w.hub.Accounts(), listenMarkChunk) {
		start := w.now()
		rctx, cancel := context.WithTimeout(ctx, listenMarkTimeout)
		err := w.store.MarkListened(rctx, chunk, listenMarkTTL)
		cancel()
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		w.cover(chunk, start, w.now(), nil)
	}
	var cut []string
	w.marks.mu.Lock()
	now := w.now()
	soon := now.Add(listenMarkMargin)
	streamed := map[string]bool{}
	for _, u := range w.hub.Accounts() {
		streamed[u] = true
	}
	for u, until := range w.marks.covered {
		switch {
		case streamed[u] && !stands(until, soon):
			cut = append(cut, u)
		case !streamed[u] && !stands(until, now):
			delete(w.marks.covered, u)
		}
	}
	w.marks.mu.Unlock()
	for _, u := range cut {
		w.hub.Resync(u)
	}
	return firstErr
}

// keepListenMarks runs tendListenMarks every listenMarkRefresh until ctx
// ends. (Tests call tendListenMarks directly.)
func (w *Writer) keepListenMarks(ctx context.Context) {
	t := time.NewTicker(listenMarkRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.tendListenMarks(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("stream: extending the marks of streamed accounts failed; retrying", "err", err)
			}
		}
	}
}
