package app

import (
	"context"
	"sync"
	"time"
)

// On PostgreSQL an append announces itself to the other replicas with NOTIFY
// only while some replica marks its account as streamed (chain_heads.
// listened_until, store.MarkListened): every notifying commit of the database
// is serialised on one lock held through its WAL flush, so announcing every
// event capped all appends near 1,000/s (docs/decisions/stream.md, "Who is
// notified"). A replica marks an account when a stream of it opens, before the
// stream reads the tip, extends the marks of the accounts it streams, and cuts
// its streams of an account off (lagged) before its own mark could lapse.
const (
	listenMarkTTL = 60 * time.Second
	// listenMarkRefresh is how often the marks are extended.
	listenMarkRefresh = 15 * time.Second
	// listenMarkTimeout bounds one refresh.
	listenMarkTimeout = 5 * time.Second
	// listenMarkMargin: a replica whose own mark of an account has less than
	// this left after it tends its marks cuts that account's streams off. It
	// exceeds one refresh interval plus one refresh's time, so the cut comes
	// before the mark lapses; with the TTL above, two refreshes in a row must
	// fail first.
	listenMarkMargin = listenMarkRefresh + 2*listenMarkTimeout
)

// listenMarks holds, per account this replica marked, until when its own
// mark is known to stand, on this process's clock: the time a successful
// MarkListened started plus the TTL (the database computed the mark later
// than that, so it stands at least as long).
type listenMarks struct {
	mu      sync.Mutex
	covered map[string]time.Time
}

// cover records that marks written by a statement started at start stand for
// accounts; it never shortens what a later statement recorded.
func (m *listenMarks) cover(accounts []string, start time.Time) {
	until := start.Add(listenMarkTTL)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.covered == nil {
		m.covered = map[string]time.Time{}
	}
	for _, u := range accounts {
		if until.After(m.covered[u]) {
			m.covered[u] = until
		}
	}
}

// WatchStream marks userID as streamed by this replica before its stream reads
// the tip: an event committed after the mark is announced, and one committed
// before it is at or below the tip the stream then reads, which the stream
// does not replay (SPEC.md "Live stream"). No write when this replica marked
// the account within the last refresh interval. Nothing to do on SQLite,
// where the one process announces every event to its Hub.
func (a *App) WatchStream(ctx context.Context, userID string) error {
	if a.PGBus == nil {
		return nil
	}
	start := a.Now()
	a.marks.mu.Lock()
	covered := a.marks.covered[userID]
	a.marks.mu.Unlock()
	if covered.Sub(start) > listenMarkTTL-listenMarkRefresh {
		return nil
	}
	if err := a.Store.MarkListened(ctx, []string{userID}, listenMarkTTL); err != nil {
		return err
	}
	a.marks.cover([]string{userID}, start)
	return nil
}

// tendListenMarks extends the marks of every account this replica streams,
// then cuts off (lagged) the streams of any account whose mark this replica
// cannot vouch for, so their clients re-read rather than miss an event
// silently:
//   - its mark may have lapsed before this refresh took effect (this turn
//     came late: the process stalled), whatever the refresh's outcome;
//   - or it has less than listenMarkMargin left (the refreshes failed:
//     database unreachable), so it could lapse before the next turn.
//
// An account whose WatchStream has not finished yet has no earlier mark and
// is judged by the second rule only. It returns the refresh's error, after
// the cut.
func (a *App) tendListenMarks(ctx context.Context) error {
	accounts := a.Hub.Accounts()
	start := a.Now()
	a.marks.mu.Lock()
	before := make(map[string]time.Time, len(accounts))
	for _, u := range accounts {
		if until, ok := a.marks.covered[u]; ok {
			before[u] = until
		}
	}
	a.marks.mu.Unlock()
	var err error
	if len(accounts) > 0 {
		rctx, cancel := context.WithTimeout(ctx, listenMarkTimeout)
		err = a.Store.MarkListened(rctx, accounts, listenMarkTTL)
		cancel()
		if err == nil {
			a.marks.cover(accounts, start)
		}
	}
	now := a.Now()
	streamed := make(map[string]bool, len(accounts))
	for _, u := range accounts {
		streamed[u] = true
	}
	var cut []string
	a.marks.mu.Lock()
	for u, until := range a.marks.covered {
		prev, marked := before[u]
		switch {
		case streamed[u] && marked && prev.Before(start.Add(listenMarkTimeout)):
			cut = append(cut, u)
		case streamed[u] && until.Sub(now) < listenMarkMargin:
			cut = append(cut, u)
		case !streamed[u] && !until.After(now):
			delete(a.marks.covered, u)
		}
	}
	a.marks.mu.Unlock()
	for _, u := range cut {
		a.Hub.Resync(u)
	}
	return err
}

// keepListenMarks runs tendListenMarks every listenMarkRefresh until ctx
// ends. (Tests call tendListenMarks directly.)
func (a *App) keepListenMarks(ctx context.Context) {
	t := time.NewTicker(listenMarkRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.tendListenMarks(ctx); err != nil && ctx.Err() == nil {
				a.Log.Warn("stream: extending the marks of streamed accounts failed; retrying", "err", err)
			}
		}
	}
}
