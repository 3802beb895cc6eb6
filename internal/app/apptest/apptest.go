// Package apptest builds the App of a test over a real store, as storetest
// opens the store: the one way every package's tests make an App.
package apptest

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/legal"
	"github.com/auditchain/auditchain/internal/notify/webhook"
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
	// stream fan-out across replicas (Loops.Bus; PostgreSQL), as serve
	// does, until the test ends.
	Bus string
	// Mail sends the App's mail (nil: the log transport, into Log).
	Mail app.Mailer
	// Legal is the legal documents served (nil: the built-in set).
	Legal *legal.Set
	// WebhookBackoff is the wait before webhook attempt n+2 within a drain
	// (nil: the service's).
	WebhookBackoff func(n int) time.Duration
	// Egress delivers webhooks (nil: as the configuration says).
	Egress *webhook.Egress
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

// AppConfig is the configuration of the App New builds: Config adjusted by
// o.Config. An HTTP server over that App takes it too.
func (o Options) AppConfig(tb testing.TB) config.Config {
	tb.Helper()
	cfg := Config(tb)
	if o.Config != nil {
		o.Config(&cfg)
	}
	return cfg
}

// Logger is where the App New builds logs: o.Log, or nowhere.
func (o Options) Logger() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// New returns an App over st, with its service identity loaded, closed when
// the test ends (before st, which storetest.Open closes later).
func New(tb testing.TB, st *store.Store, o Options) *app.App {
	tb.Helper()
	cfg := o.AppConfig(tb)
	ctx := context.Background()
	key, err := app.LoadServiceKey(ctx, st, cfg.ServiceKeyFile, rand.Reader)
	if err != nil {
		tb.Fatalf("service key: %v", err)
	}
	a := app.New(app.Deps{Store: st, Config: cfg, Log: o.Logger(), Now: o.Now, ServiceKey: key, Mail: o.Mail, Legal: o.Legal,
		WebhookBackoff: o.WebhookBackoff, Egress: o.Egress})
	tb.Cleanup(a.Close)
	if o.Bus != "" {
		if err := a.Start(ctx, app.Loops{Bus: o.Bus}); err != nil {
			tb.Fatal(err)
		}
	}
	return a
}
