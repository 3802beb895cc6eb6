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
// stream reads the tip, and keeps the marks of its streamed accounts ahead of
// the database's clock.
const (
	listenMarkTTL = 60 * time.Second
	// listenMarkRefresh is how often the marks are extended; a mark lapses
	// only if three refreshes in a row fail or run late.
	listenMarkRefresh = 15 * time.Second
)

// listenMarks holds, per account this replica marked, when it last wrote the
// mark (this process's clock): a stream opening on an account marked moments
// ago needs no write.
type listenMarks struct {
	mu sync.Mutex
	at map[string]time.Time
}

// WatchStream marks userID as streamed by this replica before its stream reads
// the tip: an event committed after the mark is announced, and one committed
// before it is at or below the tip the stream then reads, which the stream
// does not replay (SPEC.md "Live stream"). Nothing to do on SQLite, where the
// one process announces every event to its Hub.
func (a *App) WatchStream(ctx context.Context, userID string) error {
	if a.PGBus == nil {
		return nil
	}
	m := &a.marks
	m.mu.Lock()
	at, ok := m.at[userID]
	m.mu.Unlock()
	if ok && a.Now().Sub(at) < listenMarkRefresh {
		return nil
	}
	// A lapsed earlier mark is no concern here: this stream reads the tip
	// after the mark, and a stream open during the lapse is cut off by the
	// next refresh.
	if _, err := a.Store.MarkListened(ctx, []string{userID}, listenMarkTTL); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[string]time.Time{}
	}
	m.at[userID] = a.Now()
	return nil
}

// refreshListenMarks extends the marks of every account this replica streams
// and forgets the others. An account whose mark had lapsed before the new one
// was written may have had events appended unannounced: its streams are cut
// off as lagged, so their clients re-read (as after a lost LISTEN connection).
// Only accounts this replica had marked count: a stream whose WatchStream is
// still running has not read its tip yet and misses nothing.
func (a *App) refreshListenMarks(ctx context.Context) error {
	accounts := a.Hub.Accounts()
	m := &a.marks
	if len(accounts) == 0 {
		m.mu.Lock()
		m.at = nil
		m.mu.Unlock()
		return nil
	}
	lapsed, err := a.Store.MarkListened(ctx, accounts, listenMarkTTL)
	if err != nil {
		return err
	}
	now := a.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range lapsed {
		if _, marked := m.at[u]; marked {
			a.Hub.Resync(u)
		}
	}
	at := make(map[string]time.Time, len(accounts))
	for _, u := range accounts {
		at[u] = now
	}
	m.at = at
	return nil
}

// keepListenMarks runs refreshListenMarks every listenMarkRefresh until ctx
// ends. (Tests call refreshListenMarks directly.)
func (a *App) keepListenMarks(ctx context.Context) {
	t := time.NewTicker(listenMarkRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.refreshListenMarks(ctx); err != nil && ctx.Err() == nil {
				a.Log.Warn("stream: extending the marks of streamed accounts failed; retrying", "err", err)
			}
		}
	}
}
