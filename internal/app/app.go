// Package app holds auditchain's use cases: each reads as the spec's rules.
// They write only through the write seam (package writer), one transaction
// with its effects at a time, and know nothing of the store's dialect; they
// turn store outcomes into domain errors, and are the single place where
// server-written chain events and notifications originate.
package app

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"time"

	"github.com/auditchain/auditchain/internal/app/writer"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/notify/webhook"
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

	// Hub delivers appended events to this process's stream listeners.
	Hub *stream.Hub
	// Dedup is the dedup gate's policy (cacheable tools and window).
	Dedup domain.DedupPolicy

	// ServiceKey is the service identity (LoadServiceKey).
	ServiceKey ed25519.PrivateKey
	// Mail sends the service's mail (--mail); Legal is the legal documents
	// served (built in, or --legal-dir).
	Mail  Mailer
	Legal *legal.Set

	// Egress delivers webhooks (SSRF-safe; --webhook-allow-private).
	Egress *webhook.Egress
	// WebhookBackoff is the wait before webhook attempt n+2 within a drain
	// (nil: 250 ms·2ⁿ); tests make it zero.
	WebhookBackoff func(n int) time.Duration

	// w is the write seam: every write of every use case goes through it.
	w *writer.Writer
	// gateCache and keyCache hold the gate's inputs per account and the
	// authenticated API keys. They exist only where this process is the
	// store's sole writer (SQLite); elsewhere they are nil and every read
	// goes to the database (docs/decisions/gate.md).
	gateCache *writer.ReadCache[gateKey, gateRead]
	keyCache  *writer.ReadCache[string, knownKey]
	// sessionCache holds authenticated sessions as keyCache keys, and
	// legalCache each account's unmet documents (--legal-enforce).
	sessionCache *writer.ReadCache[string, knownSession]
	legalCache   *writer.ReadCache[string, []string]
	// expiryNoticesPerWrite overrides the expiry jobs' transaction size
	// (0: expiryNoticesPerWrite); tests make it small.
	expiryNoticesPerWrite int
	// heal is this process's heal status cache and periodic tasks (heal_status.go, heal_task.go).
	heal healState
	// notices is this process's notification state (notify.go).
	notices notices
	// hooks is this process's webhook senders (webhook_drain.go).
	hooks webhookDrain
	// meter counts usage between flushes (usage.go).
	meter *meter
	// jobs is the built-in scheduler of the operator jobs (schedule.go).
	jobs jobState
	// leases are this replica's open streams (streams.go).
	leases streamLeases
	// throttles is this process's pruning of idle mail budgets (throttles.go).
	throttles throttleState
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
		Hub: stream.NewHub(stream.Options{}), Dedup: domain.DefaultDedupPolicy(), Legal: legal.Default(), notices: newNotices(), meter: newMeter()}
	a.Egress = webhook.NewEgress(webhook.Options{AllowPrivate: cfg.WebhookAllowPrivate})
	// Mail goes to the log until the caller gives a mailer (--mail).
	a.Mail, _ = mail.New("log", mail.Options{Log: log})
	// The writer reads the clock through a, so a test that sets a.Now sets it too.
	a.w = writer.New(st, writer.Options{Now: func() time.Time { return a.Now() }, Log: log, Hub: a.Hub,
		StatementTimeout: cfg.RequestTimeout})
	a.gateCache = writer.NewReadCache[gateKey, gateRead](a.w, gateCacheAccounts, gateCacheEntries)
	a.keyCache = writer.NewReadCache[string, knownKey](a.w, 1, keyCacheEntries)
	a.sessionCache = writer.NewReadCache[string, knownSession](a.w, 1, keyCacheEntries)
	a.legalCache = writer.NewReadCache[string, []string](a.w, gateCacheAccounts, 1)
	return a
}

// Ready reports whether the store answers (GET /v1/health).
func (a *App) Ready(ctx context.Context) error { return a.Store.Ping(ctx) }

// Unavailable reports whether err is the store failing for now (down,
// restarting, unreachable, out of disk: store.Unavailable), so that the
// request may succeed if retried and a write's outcome is unknown.
func Unavailable(err error) bool { return store.Unavailable(err) }

// StartBus connects stream fan-out across replicas (writer.StartBus): it
// returns once listening, and the listener runs until ctx ends.
func (a *App) StartBus(ctx context.Context, dsn string) error { return a.w.StartBus(ctx, dsn) }

// WatchStream marks userID as streamed by this replica before its stream
// reads the tip (writer.WatchStream); self is the stream being opened.
func (a *App) WatchStream(ctx context.Context, userID string, self *stream.Subscription) error {
	return a.w.WatchStream(ctx, userID, self)
}

// WriteStats reports what the write engine did (metrics).
func (a *App) WriteStats() writer.Stats { return a.w.Stats() }

// Close stops background work (periodic heal tasks, then the writer).
// Queued writes are answered.
func (a *App) Close() {
	a.StopHealTasks()
	a.stopStreamLeases()
	a.w.Close()
}

// Ticker is a background loop's clock (the mail sweep, the usage flush): C
// delivers ticks until Stop. Tests inject one and tick it by hand.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// NewRealTicker ticks on the real clock every d.
func NewRealTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }
