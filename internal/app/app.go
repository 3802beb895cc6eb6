// Package app holds auditchain's use cases. It owns transactions, turns store
// failures into domain errors, and is the single place where server-written
// chain events, notifications and stream frames originate.
package app

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"time"

	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store"
)

// App wires the use cases to their dependencies. Time and randomness are
// injected so tests control them.
type App struct {
	Store *store.Store
	Cfg   config.Config
	Now   func() time.Time
	Rand  io.Reader
	Log   *slog.Logger
}

// New returns an App with the real clock and crypto/rand unless overridden.
func New(st *store.Store, cfg config.Config, log *slog.Logger) *App {
	return &App{Store: st, Cfg: cfg, Now: time.Now, Rand: rand.Reader, Log: log}
}

// Ready reports whether the store answers (GET /v1/health).
func (a *App) Ready(ctx context.Context) error { return a.Store.Ping(ctx) }
