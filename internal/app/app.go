// Package app holds auditchain's use cases. It owns transactions, turns store
// failures into domain errors, and is the single place where server-written
// chain events, notifications and stream frames originate.
package app

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/internal/stream"
)

// App wires the use cases to their dependencies. Time and randomness are
// injected so tests control them.
type App struct {
	Store *store.Store
	Cfg   config.Config
	Now   func() time.Time
	Rand  io.Reader
	Log   *slog.Logger

	// Hub delivers appended events to this process's stream listeners. PGBus,
	// when set (PostgreSQL), carries them to every replica's Hub via NOTIFY.
	Hub   *stream.Hub
	PGBus *stream.PGBus
	// Dedup is the dedup gate's policy (cacheable tools and window).
	Dedup domain.DedupPolicy

	// ServiceKey is the service identity (LoadServiceKey).
	ServiceKey ed25519.PrivateKey

	// NewTicker makes the periodic heal task's ticker (nil: NewRealTicker);
	// tests inject one they tick by hand.
	NewTicker func(time.Duration) Ticker

	// group is the SQLite group committer (nil on PostgreSQL).
	group *groupCommitter
	// gateCache and keyCache hold the gate's inputs per account and the
	// authenticated API keys (readcache.go). They exist only where this
	// process is the store's one writer (SQLite); on PostgreSQL other replicas
	// write too, so every read goes to the database (docs/decisions/gate.md).
	gateCache *readCache[gateKey, gateRead]
	keyCache  *readCache[string, knownKey]
	// heal is this process's heal status cache and periodic tasks (heal.go).
	heal healState
	// marks are the accounts this replica streams (PostgreSQL; listenmarks.go).
	marks listenMarks
	// pgBatch sends optimistic appends in shared statements (PostgreSQL;
	// pgbatch.go).
	pgBatch *pgBatcher
	// heads is the optimistic append's head cache (PostgreSQL; headcache.go).
	heads headCache
	// pgAppends counts client appends on PostgreSQL by path (PGAppends).
	pgAppends struct{ optimistic, locked atomic.Int64 }
}

// Bounds of the read caches: at most this many accounts with this many cached
// gate reads each (a read is a sub-agent's few candidate grants), and this many
// API keys.
const (
	gateCacheAccounts = 10_000
	gateCacheEntries  = 256
	keyCacheEntries   = 100_000
)

// New returns an App with the real clock and crypto/rand unless overridden.
func New(st *store.Store, cfg config.Config, log *slog.Logger) *App {
	a := &App{Store: st, Cfg: cfg, Now: time.Now, Rand: rand.Reader, Log: log,
		Hub: stream.NewHub(stream.Options{}), Dedup: domain.DefaultDedupPolicy()}
	if st.Dialect == store.SQLite {
		a.group = newGroupCommitter(a, groupQueueSize)
		a.gateCache = newReadCache[gateKey, gateRead](gateCacheAccounts, gateCacheEntries)
		a.keyCache = newReadCache[string, knownKey](1, keyCacheEntries)
	} else {
		a.pgBatch = newPGBatcher(st, cmp.Or(cfg.RequestTimeout, 15*time.Second), pgBatchWorkers, pgBatchQueue)
	}
	return a
}

// Ready reports whether the store answers (GET /v1/health).
func (a *App) Ready(ctx context.Context) error { return a.Store.Ping(ctx) }

// StartBus connects stream fan-out across replicas. On PostgreSQL every replica
// LISTENs on one channel and appends NOTIFY inside their transactions; on SQLite
// (one process) the in-process Hub is all there is. It returns once listening,
// and the listener runs until ctx ends.
func (a *App) StartBus(ctx context.Context, dsn string) error {
	if a.Store.Dialect != store.Postgres {
		return nil
	}
	a.PGBus = stream.NewPGBus(a.Store.WriteDB(), dsn, a.Hub, a.Log)
	a.PGBus.Vouch = a.vouchAnnounced
	go a.PGBus.Listen(ctx)
	go a.keepListenMarks(ctx)
	select {
	case <-a.PGBus.Ready():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
