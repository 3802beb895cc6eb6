package schedule

import (
	"context"
	"time"
)

// Loop calls fn at each due time of c until ctx ends, in the calling
// goroutine: for a per-process periodic task that needs no lease, records or
// kicks, such as the heal auto task (Loop(ctx, Every(period), now, scan)).
// It waits the way the Runner does: now (nil: time.Now) must advance with the
// runtime's timers, and of several missed due times only the latest is
// served. fn is never called twice at once; a due time that passes while fn
// is still running is skipped.
func Loop(ctx context.Context, c Cadence, now func() time.Time, fn func(ctx context.Context, due time.Time)) {
	if now == nil {
		now = time.Now
	}
	t := now()
	next := c.Next(t)
	timer := time.NewTimer(sleepFor(next, t))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		t = now()
		if !t.Before(next) && ctx.Err() == nil {
			due, _ := latestDue(c, next, t)
			fn(ctx, due)
			t = now()
			next = c.Next(t)
		}
		timer.Reset(sleepFor(next, t))
	}
}
