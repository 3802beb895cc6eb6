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
	"net/http"
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

// App wires the use cases to their dependencies, given once to New and
// never changed after (Deps). Time and randomness are injected so tests
// control them.
type App struct {
	store *store.Store
	cfg   config.Config
	now   func() time.Time
	rand  io.Reader
	log   *slog.Logger

	// hub delivers appended events to this process's stream listeners.
	hub *stream.Hub
	// dedup is the dedup gate's policy (cacheable tools and window).
	dedup domain.DedupPolicy

	// serviceKey is the service identity (LoadServiceKey).
	serviceKey ed25519.PrivateKey
	// mail sends the service's mail (--mail); legal is the legal documents
	// served (built in, or --legal-dir).
	mail  Mailer
	legal *legal.Set

	// egress delivers webhooks (SSRF-safe; --webhook-allow-private).
	egress *webhook.Egress
	// witnesses are the configured witnesses (--witness; nil: none).
	witnesses *witnessSet
	// webhookBackoff is the wait before webhook attempt n+2 within a drain;
	// tests make it zero.
	webhookBackoff func(n int) time.Duration

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
	// rules holds accounts' approval rules by generation, on every store:
	// the generation read with the head keeps it exact across replicas
	// (approvals_rules.go).
	rules genCache[string, []store.ApprovalRule]
	// signingKeys holds machines' signing keys by generation, on every
	// store (signing_keys.go).
	signingKeys genCache[machineRef, keptKey]
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
	// loops stops the background loops (supervisor.go).
	loops supervisor
}

// Bounds of the read caches: at most this many accounts with this many cached
// gate reads each (a read is a sub-agent's few candidate grants), and this many
// API keys.
const (
	gateCacheAccounts = 10_000
	gateCacheEntries  = 256
	keyCacheEntries   = 100_000
)

// Deps are what an App is built from. Store and Config are required; every
// other field has the default `auditchain serve` uses without the flag that
// sets it.
type Deps struct {
	Store  *store.Store
	Config config.Config
	// Log receives the App's logs (nil: discarded).
	Log *slog.Logger
	// Now is the clock (nil: time.Now); Rand the randomness (nil: crypto/rand).
	Now  func() time.Time
	Rand io.Reader
	// ServiceKey is the service identity (LoadServiceKey); nil for an App
	// that signs nothing (the admin commands).
	ServiceKey ed25519.PrivateKey
	// Mail sends the service's mail (--mail; nil: the log transport, into Log).
	Mail Mailer
	// Legal is the legal documents served (--legal-dir; nil: the built-in set).
	Legal *legal.Set
	// WebhookBackoff is the wait before webhook attempt n+2 within a drain
	// (nil: 250 ms·2ⁿ).
	WebhookBackoff func(n int) time.Duration
	// Egress delivers webhooks (nil: the SSRF-safe egress that
	// --webhook-allow-private configures).
	Egress *webhook.Egress
	// WitnessHTTP submits checkpoints to the configured witnesses (nil: a
	// plain client with witnessclient.Timeout; witnesses are operator-
	// trusted, so not the webhooks' egress).
	WitnessHTTP *http.Client
}

// New returns the App of d. Nothing of it changes afterwards: a different
// dependency is a different App.
func New(d Deps) *App {
	a := &App{store: d.Store, cfg: d.Config, now: d.Now, rand: d.Rand, log: d.Log, serviceKey: d.ServiceKey,
		mail: d.Mail, legal: d.Legal, webhookBackoff: d.WebhookBackoff, egress: d.Egress,
		hub: stream.NewHub(stream.Options{}), dedup: domain.DefaultDedupPolicy(), notices: newNotices(), meter: newMeter()}
	a.rules.limit, a.signingKeys.limit = ruleCacheAccounts, signingKeyCacheEntries
	if a.now == nil {
		a.now = time.Now
	}
	if a.rand == nil {
		a.rand = rand.Reader
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.mail == nil {
		a.mail, _ = mail.New(mail.ProviderLog, mail.Options{Log: a.log})
	}
	if a.legal == nil {
		a.legal = legal.Default()
	}
	if a.webhookBackoff == nil {
		a.webhookBackoff = defaultWebhookBackoff
	}
	if a.egress == nil {
		a.egress = webhook.NewEgress(webhook.Options{AllowPrivate: a.cfg.WebhookAllowPrivate})
	}
	if len(a.cfg.Witnesses) > 0 {
		// config.Parse checked every key; a Config built by hand with a
		// bad one gets no witnesses, and says so.
		set, err := newWitnessSet(a.cfg.Witnesses, a.cfg.WitnessQuorum, d.WitnessHTTP)
		if err != nil {
			a.log.Error("witnesses ignored", "err", err)
		} else {
			a.witnesses = set
		}
	}
	a.w = writer.New(a.store, writer.Options{Now: a.now, Log: a.log, Hub: a.hub, StatementTimeout: a.cfg.RequestTimeout})
	a.gateCache = writer.NewReadCache[gateKey, gateRead](a.w, gateCacheAccounts, gateCacheEntries)
	a.keyCache = writer.NewReadCache[string, knownKey](a.w, 1, keyCacheEntries)
	a.sessionCache = writer.NewReadCache[string, knownSession](a.w, 1, keyCacheEntries)
	a.legalCache = writer.NewReadCache[string, []string](a.w, gateCacheAccounts, 1)
	// The loops every App may run, started by requests: stopped after
	// Start's (supervisor).
	a.loops.log = a.log
	a.loops.onStop("stream lease renewer", a.stopStreamLeases)
	a.loops.onStop("periodic heal tasks", a.heal.stopAll)
	return a
}

// Now is the App's clock: the HTTP layer's deadlines and stream pings read
// the time the use cases do.
func (a *App) Now() time.Time { return a.now() }

// Hub is this process's stream fan-out (GET /v1/stream subscribes to it).
func (a *App) Hub() *stream.Hub { return a.hub }

// Ready reports whether the store answers (GET /v1/health).
func (a *App) Ready(ctx context.Context) error { return a.store.Ping(ctx) }

// Unavailable reports whether err is the store failing for now (down,
// restarting, unreachable, out of disk: store.Unavailable), so that the
// request may succeed if retried and a write's outcome is unknown.
func Unavailable(err error) bool { return store.Unavailable(err) }

// WatchStream marks userID as streamed by this replica before its stream
// reads the tip (writer.WatchStream); self is the stream being opened.
func (a *App) WatchStream(ctx context.Context, userID string, self *stream.Subscription) error {
	return a.w.WatchStream(ctx, userID, self)
}

// WriteStats reports what the write engine did (metrics).
func (a *App) WriteStats() writer.Stats { return a.w.Stats() }

// Close is the App's one shutdown path: it stops every background loop in
// the supervisor's order, each once it has finished what it was doing, then
// the writer, which answers the writes still queued. Closing again does
// nothing.
func (a *App) Close() {
	a.loops.stop()
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

// StoreEngine names the store's engine, "sqlite" or "postgres" (GET /v1/health).
func (a *App) StoreEngine() string { return string(a.store.Dialect) }

// StoreStats are the store's counters that metrics report.
type StoreStats struct {
	// IOFaults counts SQLite connections given up after a storage fault,
	// WAL checkpoints' included; WALCheckpoints the checkpoints run off the
	// writer; WALFrames the WAL frames (pages) the writer's commits wrote.
	IOFaults, WALCheckpoints, WALFrames int64
	// Batch* count optimistic append batches on PostgreSQL that rolled
	// back, by reason.
	BatchRefusals, BatchDeadlocks, BatchLockTimeouts, BatchOther int64
}

// StoreStats reads the store's counters.
func (a *App) StoreStats() StoreStats {
	s := StoreStats{IOFaults: a.store.IOFaults() + a.store.WALCheckpointFaults(), WALCheckpoints: a.store.WALCheckpoints(),
		WALFrames: a.store.WALFramesWritten()}
	s.BatchRefusals, s.BatchDeadlocks, s.BatchLockTimeouts, s.BatchOther = a.store.BatchFallbacks()
	return s
}

// MailStats reads the mailer's counters; false for a mailer without them.
func (a *App) MailStats() (mail.Stats, bool) {
	m, ok := a.mail.(interface{ Stats() mail.Stats })
	if !ok {
		return mail.Stats{}, false
	}
	return m.Stats(), true
}
