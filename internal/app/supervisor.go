package app

// The supervisor: every background loop of the App runs under it, and
// Close stops them all on one path, in one order.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Loops are the background loops Start runs (serve runs them all).
type Loops struct {
	// Bus, when not empty, is the store's data source: stream fan-out across
	// replicas (PostgreSQL LISTEN/NOTIFY; on SQLite the hub is all there is).
	Bus string
	// MailSweep runs the mailer: queued email goes out after each commit that
	// queues some and on every tick, for rows a crash or another replica
	// left queued (nil: no mailer).
	MailSweep Ticker
	// UsageFlush runs the usage meter's flush on every tick, and once more
	// when it stops (nil: the counts stay in memory).
	UsageFlush Ticker
	// Scheduler runs the operator jobs on their cadence (CONTRACT.md
	// "Operator jobs"; --scheduler), and the webhook senders their drains
	// start.
	Scheduler bool
}

// Start runs the loops l names and returns once they run (the bus
// listening). They run until Close, whatever becomes of ctx: on SIGTERM the
// HTTP server finishes its requests first, and the loops stop after it, so
// that the usage of the last requests is flushed and no webhook row is left
// half-drained.
func (a *App) Start(ctx context.Context, l Loops) error {
	ctx = context.WithoutCancel(ctx)
	if l.Bus != "" {
		busCtx, stop := context.WithCancel(ctx)
		// The listener's goroutines belong to the writer; stopping cancels them.
		a.loops.onStop("stream bus", stop)
		if err := a.w.StartBus(busCtx, l.Bus); err != nil {
			return fmt.Errorf("stream bus: %w", err)
		}
	}
	if l.MailSweep != nil {
		a.loops.run(ctx, "mailer", func(ctx context.Context) { a.runMailer(ctx, l.MailSweep) })
	}
	if l.UsageFlush != nil {
		a.loops.run(ctx, "usage flush", func(ctx context.Context) { a.runUsageFlusher(ctx, l.UsageFlush) })
	}
	if l.Scheduler {
		a.loops.run(ctx, "scheduler", func(ctx context.Context) {
			a.startJobs(ctx)
			<-ctx.Done()
			a.waitJobs()
		})
	}
	return nil
}

// supervisor holds how to stop each background loop. Loops stop in the
// reverse of the order they started (as deferred calls run): with Start's
// order and New's, the scheduler first (its runs and the webhook senders
// finish), then the last usage flush, the mailer, the stream bus, the
// periodic heal tasks and the stream lease renewer; Close then closes the
// writer, which answers the writes still queued.
type supervisor struct {
	log     *slog.Logger
	mu      sync.Mutex
	stops   []loopStop
	stopped bool
}

type loopStop struct {
	name string
	stop func()
}

// onStop adds stop, which ends the loop name and returns once it has. A
// loop added after the supervisor stopped is stopped at once.
func (s *supervisor) onStop(name string, stop func()) {
	s.mu.Lock()
	if !s.stopped {
		s.stops = append(s.stops, loopStop{name, stop})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	stop()
}

// run runs loop on a goroutine until the supervisor stops, which cancels
// its context and waits for it to return.
func (s *supervisor) run(ctx context.Context, name string, loop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	s.onStop(name, func() { cancel(); <-done })
}

// stop stops every loop, last started first, once.
func (s *supervisor) stop() {
	s.mu.Lock()
	stops := s.stops
	s.stops, s.stopped = nil, true
	s.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i].stop()
		s.log.Debug("background loop stopped", "loop", stops[i].name)
	}
}
