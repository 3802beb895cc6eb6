// Package schedule runs the operator jobs inside `auditchain serve` (issue
// #21, CONTRACT.md "Operator jobs"): each job on its own cadence, each period
// on one replica only (through a Lease), never two runs of a job at once in
// one process, and every run recorded for GET /v1/internal/jobs and metrics.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/auditchain/auditchain/internal/metrics"
)

// Job is one scheduled job.
type Job struct {
	Name    string
	Cadence Cadence
	// Run does the job's work. It should return soon after ctx ends: the
	// runner cannot stop a run that ignores ctx, and Wait waits for it.
	Run func(ctx context.Context) error
}

// Trigger says what started a run.
type Trigger string

const (
	// TriggerSchedule: a due time of the job's cadence (Run.Period is set).
	TriggerSchedule Trigger = "schedule"
	// TriggerKick: Kick asked for an extra run (Run.Period is zero).
	TriggerKick Trigger = "kick"
	// TriggerManual: RunNow, that is a cron route call (Run.Period is zero).
	TriggerManual Trigger = "manual"
)

// ErrStillRunning is the Err of a scheduled period skipped because this
// process was still running the job (a run slower than its cadence). Such a
// period does not take the lease, so another replica may still run it.
var ErrStillRunning = errors.New("previous run still going")

// ErrUnknownJob is returned by RunNow for a name that is not a job.
var ErrUnknownJob = errors.New("unknown job")

// Run records one finished run, or one period this replica did not run.
type Run struct {
	Job     string
	Trigger Trigger
	// Period is the due time a scheduled run was for; zero for kicked and
	// manual runs, which serve no period.
	Period   time.Time
	Started  time.Time
	Duration time.Duration
	// Err is "" when nothing went wrong. A run that failed has the job's
	// error ("panic: …" when it panicked); a skipped period has ErrStillRunning
	// or "lease: …" when it was skipped for a reason other than another
	// replica holding the lease. Metrics count failures as Err != "".
	Err string
	// Skipped: this replica did not run the period, because another replica
	// held the lease (Err ""), the previous run was still going or the lease
	// could not be asked.
	Skipped bool
}

// Outcome is "ok", "failed" or "skipped".
func (r Run) Outcome() string {
	switch {
	case r.Skipped:
		return "skipped"
	case r.Err != "":
		return "failed"
	default:
		return "ok"
	}
}

// JobStatus is one job as GET /v1/internal/jobs shows it.
type JobStatus struct {
	Name    string
	Cadence string
	// Next is the next scheduled due time.
	Next time.Time
	// Running: a run of the job is in progress in this process.
	Running bool
	// Last is the latest Run recorded by this process, nil before the first.
	Last *Run
}

// Options configure a Runner; the zero value is usable.
type Options struct {
	// Now reads the clock (nil: time.Now). Waiting uses the runtime's timers,
	// so Now must advance with them: time.Now, possibly shifted, or the fake
	// clock of a testing/synctest bubble (which also drives time.Now).
	Now func() time.Time
	// Lease decides which replica runs a period (nil: a new MemoryLease).
	Lease Lease
	// Log receives run failures, panics and skipped periods (nil: discard).
	Log *slog.Logger
	// OnRun is called after each Run is recorded (metrics, persistence of the
	// last runs); it is called from the run's goroutine and should be quick.
	OnRun func(Run)
	// Timeout bounds one run, lease included (0: 10 minutes).
	Timeout time.Duration
}

// KickDebounce is how long Kick waits before the extra run, so that a burst
// of kicks (a batch of queued rows) makes one run; kicked runs start at most
// once per KickDebounce.
const KickDebounce = time.Second

const defaultTimeout = 10 * time.Minute

// Runner runs jobs on their cadences. Build it with New.
type Runner struct {
	jobs    []*job
	byName  map[string]*job
	now     func() time.Time
	lease   Lease
	log     *slog.Logger
	onRun   func(Run)
	timeout time.Duration

	startOnce sync.Once
	wg        sync.WaitGroup
}

type job struct {
	Job
	// busy holds one token while a run of the job is in progress in this
	// process, whatever started it: runs of a job never overlap.
	busy chan struct{}
	// kick holds a kick the job's loop has not seen yet; more kicks coalesce.
	kick chan struct{}

	mu sync.Mutex
	// kickQueued: a kicked run is waiting for busy; kicks until it starts
	// are served by it.
	kickQueued bool
	next       time.Time
	last       *Run
}

// New returns a Runner for jobs. Names must be unique and every job needs a
// Cadence and a Run: anything else is a programming error and panics.
func New(jobs []Job, o Options) *Runner {
	r := &Runner{
		byName:  map[string]*job{},
		now:     o.Now,
		lease:   o.Lease,
		log:     o.Log,
		onRun:   o.OnRun,
		timeout: o.Timeout,
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.lease == nil {
		r.lease = &MemoryLease{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.timeout <= 0 {
		r.timeout = defaultTimeout
	}
	for _, j := range jobs {
		if j.Name == "" || j.Cadence == nil || j.Run == nil {
			panic(fmt.Sprintf("schedule: job %q needs a name, a cadence and a run function", j.Name))
		}
		if r.byName[j.Name] != nil {
			panic(fmt.Sprintf("schedule: job %q listed twice", j.Name))
		}
		jj := &job{Job: j, busy: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
		r.jobs = append(r.jobs, jj)
		r.byName[j.Name] = jj
	}
	return r
}

// Start runs every job on its cadence until ctx ends, and returns at once;
// later calls do nothing. Different jobs run concurrently; runs of one job
// never overlap in this process: a period that comes while a run is still
// going is skipped and recorded with ErrStillRunning (and no lease taken).
// A due time is served when the clock reaches it; when several were missed
// (the process was suspended or the clock jumped) only the latest runs. A run
// that panics is recovered, logged and recorded as failed.
func (r *Runner) Start(ctx context.Context) {
	r.startOnce.Do(func() {
		for _, j := range r.jobs {
			r.wg.Add(1)
			go r.loop(ctx, j)
		}
	})
}

// Wait blocks until the runner's goroutines, runs included, have returned
// after the context given to Start ended.
func (r *Runner) Wait() { r.wg.Wait() }

// Kick asks job name to run once outside its cadence, KickDebounce after the
// first of a burst of kicks (webhooks soon after a row is queued). A kicked
// run takes no lease (it serves no period) but waits for a run in progress
// to end; kicks made while a kicked run is waiting are served by it. Kick
// never blocks; an unknown name, or a runner not started, does nothing.
func (r *Runner) Kick(name string) {
	j := r.byName[name]
	if j == nil {
		return
	}
	select {
	case j.kick <- struct{}{}:
	default: // a kick is already pending: this one coalesces with it
	}
}

// RunNow runs job name once in the calling goroutine, after any run of it in
// progress in this process has ended, and returns the job's error (or
// ErrUnknownJob, or ctx's error if ctx ends while waiting). It takes no lease:
// its caller chooses the replica. The run is
// recorded like any other and bounded by Options.Timeout.
func (r *Runner) RunNow(ctx context.Context, name string) error {
	j := r.byName[name]
	if j == nil {
		return fmt.Errorf("%w: %q", ErrUnknownJob, name)
	}
	select {
	case j.busy <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-j.busy }()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.execute(ctx, j, Run{Job: j.Name, Trigger: TriggerManual})
}

// Status lists every job in the order given to New.
func (r *Runner) Status() []JobStatus {
	now := r.now()
	out := make([]JobStatus, 0, len(r.jobs))
	for _, j := range r.jobs {
		j.mu.Lock()
		s := JobStatus{Name: j.Name, Cadence: j.Cadence.String(), Next: j.next, Running: len(j.busy) > 0}
		if j.last != nil {
			last := *j.last
			s.Last = &last
		}
		j.mu.Unlock()
		if s.Next.IsZero() { // not started: when it would be due from now
			s.Next = j.Cadence.Next(now)
		}
		out = append(out, s)
	}
	return out
}

// loop waits for the job's due times and kicks until ctx ends. It never
// waits for a run: runs happen on their own goroutines, so a slow run cannot
// delay the recording of the periods it overlaps.
func (r *Runner) loop(ctx context.Context, j *job) {
	defer r.wg.Done()
	now := r.now()
	next := j.Cadence.Next(now)
	j.setNext(next)
	timer := time.NewTimer(sleepFor(next, now))
	defer timer.Stop()
	var debounce <-chan time.Time // set while a burst of kicks is being gathered
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.kick:
			if debounce == nil {
				debounce = time.After(KickDebounce)
			}
		case <-debounce:
			debounce = nil
			r.startKicked(ctx, j)
		case <-timer.C:
			now := r.now()
			if !now.Before(next) {
				due, missed := latestDue(j.Cadence, next, now)
				if missed > 0 {
					r.log.Warn("job periods missed; running the latest only", "job", j.Name, "missed", missed, "period", due)
				}
				r.startScheduled(ctx, j, due, now)
				next = j.Cadence.Next(due)
				j.setNext(next)
			}
			timer.Reset(sleepFor(next, now))
		}
	}
}

func (j *job) setNext(t time.Time) {
	j.mu.Lock()
	j.next = t
	j.mu.Unlock()
}

// startScheduled serves the due time period: skipped at once if a run is in
// progress, otherwise run on its own goroutine if this replica wins the lease.
func (r *Runner) startScheduled(ctx context.Context, j *job, period, now time.Time) {
	if ctx.Err() != nil {
		return
	}
	select {
	case j.busy <- struct{}{}:
	default:
		r.record(j, Run{Job: j.Name, Trigger: TriggerSchedule, Period: period, Started: now,
			Skipped: true, Err: ErrStillRunning.Error()})
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() { <-j.busy }()
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		run := Run{Job: j.Name, Trigger: TriggerSchedule, Period: period}
		won, err := r.lease.Acquire(ctx, j.Name, period)
		if err != nil || !won {
			run.Started, run.Skipped = r.now(), true
			if err != nil {
				run.Err = "lease: " + err.Error()
			}
			r.record(j, run)
			return
		}
		r.execute(ctx, j, run)
	}()
}

// startKicked queues one kicked run unless one is already waiting to start.
func (r *Runner) startKicked(ctx context.Context, j *job) {
	j.mu.Lock()
	queued := j.kickQueued
	j.kickQueued = true
	j.mu.Unlock()
	if queued {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		var started bool
		select {
		case j.busy <- struct{}{}:
			started = true
		case <-ctx.Done():
		}
		// From here a new kick needs a run of its own: this one may already
		// have read whatever the kick announced.
		j.mu.Lock()
		j.kickQueued = false
		j.mu.Unlock()
		if !started {
			return
		}
		defer func() { <-j.busy }()
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		r.execute(ctx, j, Run{Job: j.Name, Trigger: TriggerKick})
	}()
}

// execute runs the job, its busy token held by the caller, and records it.
func (r *Runner) execute(ctx context.Context, j *job, run Run) error {
	run.Started = r.now()
	err := r.call(ctx, j)
	run.Duration = r.now().Sub(run.Started)
	if err != nil {
		run.Err = err.Error()
	}
	r.record(j, run)
	return err
}

// call runs the job and turns a panic into an error: one broken job must not
// take serve down or stop the other jobs.
func (r *Runner) call(ctx context.Context, j *job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("job panicked", "job", j.Name, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return j.Run(ctx)
}

func (r *Runner) record(j *job, run Run) {
	j.mu.Lock()
	j.last = &run
	j.mu.Unlock()
	switch {
	case run.Skipped && run.Err != "":
		r.log.Warn("job period skipped", "job", j.Name, "period", run.Period, "err", run.Err)
	case run.Skipped:
		r.log.Debug("job period run by another replica", "job", j.Name, "period", run.Period)
	case run.Err != "":
		r.log.Error("job run failed", "job", j.Name, "trigger", run.Trigger, "period", run.Period,
			"duration", run.Duration, "err", run.Err)
	default:
		r.log.Debug("job run", "job", j.Name, "trigger", run.Trigger, "period", run.Period, "duration", run.Duration)
	}
	metrics.JobRuns.Inc(run.Job, run.Outcome())
	if !run.Skipped {
		metrics.JobDuration.Observe(run.Job, run.Duration.Seconds())
	}
	if r.onRun != nil {
		r.onRun(run)
	}
}
