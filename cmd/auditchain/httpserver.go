package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// listenerLimits bound what one client can hold of a listener: slow headers,
// slow bodies, slow readers and idle keep-alives (docs/reliability.md).
type listenerLimits struct {
	read, write    time.Duration
	maxHeaderBytes int
}

// newHTTPServer is the http.Server that serve and witness serve both run.
// Requests do not inherit ctx's cancellation: on SIGTERM in-flight requests
// finish (Shutdown waits for them) rather than being cancelled with no answer.
func newHTTPServer(ctx context.Context, h http.Handler, log *slog.Logger, lim listenerLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    lim.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}

// serveUntilDone serves ln until ctx ends, then shuts down gracefully within
// timeout: new connections are refused and in-flight requests finish.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
