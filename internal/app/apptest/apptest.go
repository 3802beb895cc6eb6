// Package apptest builds the App of a test over a real store, as storetest
// opens the store: the one way every package's tests make an App.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/store"
)

// Options adjust the App New builds; the zero value is the service's
// defaults on the real clock, with logs discarded.
type Options struct {
	// Config adjusts the configuration, which starts as `auditchain serve`
	// with no flags and no environment parses it.
	Config func(*config.Config)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives the App's logs (discarded when nil).
	Log *slog.Logger
	// Bus, when not empty, is the store's data source: the App joins the
	// stream fan-out across replicas (App.StartBus; PostgreSQL), as serve
	// does, until the test ends.
	Bus string
	// Mail sends the App's mail (nil: the log transport, into Log).
	Mail app.Mailer
}

// Config is the configuration of `auditchain serve` with no flags and no
// environment.
func Config(tb testing.TB) config.Config {
	tb.Helper()
	cfg, err := config.Parse(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return cfg
}

// New returns an App over st, with its service identity loaded, closed when
// the test ends (before st, which storetest.Open closes later).
func New(tb testing.TB, st *store.Store, o Options) *app.App {
	tb.Helper()
	cfg := Config(tb)
	if o.Config != nil {
		o.Config(&cfg)
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := app.New(st, cfg, log)
	tb.Cleanup(a.Close)
	if o.Now != nil {
		a.Now = o.Now
	}
	if o.Mail != nil {
		a.Mail = o.Mail
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	if err := a.LoadServiceKey(ctx); err != nil {
		tb.Fatalf("service key: %v", err)
	}
	if o.Bus != "" {
		if err := a.StartBus(ctx, o.Bus); err != nil {
			tb.Fatalf("stream bus: %v", err)
		}
	}
	return a
}
