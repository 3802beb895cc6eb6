package schedule_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/auditchain/auditchain/internal/schedule"
)

// The tests run in synctest bubbles, whose fake clock starts at
// 2000-01-01 00:00:00 UTC and advances only when every goroutine waits:
// time.Sleep in a test moves the clock, synctest.Wait lets the runs it made
// due finish.

// recorder collects the runs a Runner reports through Options.OnRun.
type recorder struct {
	mu   sync.Mutex
	runs []schedule.Run
}

func (r *recorder) add(run schedule.Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, run)
}

func (r *recorder) of(job string) []schedule.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []schedule.Run
	for _, run := range r.runs {
		if run.Job == job {
			out = append(out, run)
		}
	}
	return out
}

// byPeriod indexes scheduled runs by the due time they were for.
func (r *recorder) byPeriod(job string) map[time.Time]schedule.Run {
	out := map[time.Time]schedule.Run{}
	for _, run := range r.of(job) {
		if run.Trigger == schedule.TriggerSchedule {
			out[run.Period] = run
		}
	}
	return out
}

// concurrency counts the runs of a job in progress and the most seen at once.
type concurrency struct{ now, most atomic.Int32 }

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

func succeed(context.Context) error { return nil }

// startRunner starts r in the bubble and returns the function that stops it
// and waits for its goroutines.
func startRunner(t *testing.T, r *schedule.Runner) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	r.Start(ctx)
	return func() { cancel(); r.Wait() }
}

func midnight(t *testing.T) time.Time {
	start := time.Now().UTC()
	if !start.Equal(start.Truncate(24 * time.Hour)) {
		t.Fatalf("the bubble's clock starts at %v, want a midnight UTC", start)
	}
	return start
}

func TestRunnerRunsEachJobOnItsCadenceOver48Hours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		var rec recorder
		r := schedule.New([]schedule.Job{
			{Name: "digest", Cadence: schedule.DailyAt(14, 0), Run: succeed},
			{Name: "grant-expiry", Cadence: schedule.Every(6 * time.Hour), Run: succeed},
			{Name: "key-expiry", Cadence: schedule.Every(time.Hour), Run: succeed},
			{Name: "webhooks", Cadence: schedule.Every(2 * time.Minute), Run: succeed},
		}, schedule.Options{OnRun: rec.add})
		stop := startRunner(t, r)
		time.Sleep(48*time.Hour + time.Second)
		stop()

		every := func(n int, d time.Duration) []time.Time {
			var due []time.Time
			for i := 1; i <= n; i++ {
				due = append(due, start.Add(time.Duration(i)*d))
			}
			return due
		}
		want := map[string][]time.Time{
			"digest":       {start.Add(14 * time.Hour), start.Add(38 * time.Hour)},
			"grant-expiry": every(8, 6*time.Hour),
			"key-expiry":   every(48, time.Hour),
			"webhooks":     every(1440, 2*time.Minute),
		}
		for job, due := range want {
			runs := rec.of(job)
			if len(runs) != len(due) {
				t.Errorf("%s ran %d times, want %d", job, len(runs), len(due))
				continue
			}
			for i, run := range runs {
				if run.Trigger != schedule.TriggerSchedule || run.Skipped || run.Err != "" ||
					!run.Period.Equal(due[i]) || !run.Started.Equal(due[i]) {
					t.Errorf("%s run %d = %+v, want a successful scheduled run for and started at %v", job, i, run, due[i])
				}
			}
		}
		for _, run := range rec.of("grant-expiry") {
			if h := run.Period.UTC().Hour(); h%6 != 0 || run.Period.Minute() != 0 {
				t.Errorf("grant-expiry ran for %v, want 00:00, 06:00, 12:00 or 18:00 UTC", run.Period)
			}
		}
	})
}

func TestReplicasSharingALeaseRunEachPeriodOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		lease := &schedule.MemoryLease{}
		var recA, recB recorder
		jobs := []schedule.Job{{Name: "key-expiry", Cadence: schedule.Every(time.Hour), Run: succeed}}
		stopA := startRunner(t, schedule.New(jobs, schedule.Options{Lease: lease, OnRun: recA.add}))
		stopB := startRunner(t, schedule.New(jobs, schedule.Options{Lease: lease, OnRun: recB.add}))
		time.Sleep(24*time.Hour + time.Second)
		stopA()
		stopB()

		a, b := recA.byPeriod("key-expiry"), recB.byPeriod("key-expiry")
		for i := 1; i <= 24; i++ {
			period := start.Add(time.Duration(i) * time.Hour)
			runA, okA := a[period]
			runB, okB := b[period]
			if !okA || !okB {
				t.Errorf("period %v: recorded by A %v, by B %v; want both", period, okA, okB)
				continue
			}
			if runA.Skipped == runB.Skipped || runA.Err != "" || runB.Err != "" {
				t.Errorf("period %v: A %+v, B %+v; want one ran and the other skipped it", period, runA, runB)
			}
		}
		if len(a) != 24 || len(b) != 24 {
			t.Errorf("A recorded %d periods and B %d, want 24 each", len(a), len(b))
		}
	})
}

// scriptedLease is a lease shared by replicas in which some periods are
// already held by a given replica; other periods go to the first asker.
type scriptedLease struct {
	mu     sync.Mutex
	holder map[time.Time]string
}

type replicaLease struct {
	shared  *scriptedLease
	replica string
}

func (l replicaLease) Acquire(_ context.Context, _ string, period time.Time) (bool, error) {
	l.shared.mu.Lock()
	defer l.shared.mu.Unlock()
	if h, ok := l.shared.holder[period]; ok {
		return h == l.replica, nil
	}
	l.shared.holder[period] = l.replica
	return true, nil
}

func TestAHungOrDeadLeaseHolderDoesNotBlockTheNextPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		p1, p2, p3 := start.Add(time.Hour), start.Add(2*time.Hour), start.Add(3*time.Hour)
		lease := &scriptedLease{holder: map[time.Time]string{p1: "A"}}
		// A's run hangs (until A's process ends); B's runs succeed.
		hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		var recA, recB recorder
		a := schedule.New([]schedule.Job{{Name: "anchor", Cadence: schedule.Every(time.Hour), Run: hang}},
			schedule.Options{Lease: replicaLease{lease, "A"}, OnRun: recA.add, Timeout: 24 * time.Hour})
		b := schedule.New([]schedule.Job{{Name: "anchor", Cadence: schedule.Every(time.Hour), Run: succeed}},
			schedule.Options{Lease: replicaLease{lease, "B"}, OnRun: recB.add})
		stopA := startRunner(t, a)
		stopB := startRunner(t, b)

		time.Sleep(2*time.Hour + 30*time.Minute) // A hangs in p1 through p2
		if run, ok := recB.byPeriod("anchor")[p2]; !ok || run.Skipped || run.Err != "" {
			t.Errorf("B's record of %v = %+v (recorded %v), want a successful run", p2, run, ok)
		}
		if run := recA.byPeriod("anchor")[p2]; !run.Skipped || run.Err != schedule.ErrStillRunning.Error() {
			t.Errorf("A's record of %v = %+v, want skipped as still running", p2, run)
		}
		stopA() // A dies mid-run, still holding p1
		time.Sleep(time.Hour)
		stopB()

		runs := recB.byPeriod("anchor")
		if run := runs[p1]; !run.Skipped || run.Err != "" {
			t.Errorf("B's record of %v = %+v, want skipped for A's lease", p1, run)
		}
		if run, ok := runs[p3]; !ok || run.Skipped || run.Err != "" {
			t.Errorf("B's record of %v = %+v (recorded %v), want a successful run after A died", p3, run, ok)
		}
	})
}

func TestAPanickingRunIsRecordedAndTheNextPeriodRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		var calls atomic.Int32
		flaky := func(context.Context) error {
			if calls.Add(1) == 1 {
				panic("nil map")
			}
			return nil
		}
		var rec recorder
		stop := startRunner(t, schedule.New([]schedule.Job{{Name: "digest", Cadence: schedule.Every(time.Minute), Run: flaky}},
			schedule.Options{OnRun: rec.add}))
		time.Sleep(2*time.Minute + time.Second)
		stop()

		runs := rec.of("digest")
		if len(runs) != 2 {
			t.Fatalf("recorded %d runs, want 2: %+v", len(runs), runs)
		}
		if runs[0].Err != "panic: nil map" || runs[0].Outcome() != "failed" || !runs[0].Period.Equal(start.Add(time.Minute)) {
			t.Errorf("first run = %+v, want failed with the panic", runs[0])
		}
		if runs[1].Outcome() != "ok" || !runs[1].Period.Equal(start.Add(2*time.Minute)) {
			t.Errorf("second run = %+v, want ok", runs[1])
		}
	})
}

func TestARunSlowerThanItsCadenceSkipsThePeriodsItOverlaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		var running concurrency
		slow := func(ctx context.Context) error {
			running.enter()
			defer running.leave()
			time.Sleep(150 * time.Second) // the job's work, in fake time
			return nil
		}
		var rec recorder
		stop := startRunner(t, schedule.New([]schedule.Job{{Name: "webhooks", Cadence: schedule.Every(time.Minute), Run: slow}},
			schedule.Options{OnRun: rec.add}))
		time.Sleep(6*time.Minute + 31*time.Second)
		stop()

		if most := running.most.Load(); most != 1 {
			t.Errorf("%d runs at once, want 1", most)
		}
		// 00:01 runs until 00:03:30, 00:04 until 00:06:30.
		runs := rec.byPeriod("webhooks")
		for minute, wantRan := range map[int]bool{1: true, 2: false, 3: false, 4: true, 5: false, 6: false} {
			period := start.Add(time.Duration(minute) * time.Minute)
			run, ok := runs[period]
			switch {
			case !ok:
				t.Errorf("period %v not recorded", period)
			case wantRan && (run.Skipped || run.Err != "" || run.Duration != 150*time.Second):
				t.Errorf("period %v = %+v, want a 150s run", period, run)
			case !wantRan && (!run.Skipped || run.Err != schedule.ErrStillRunning.Error()):
				t.Errorf("period %v = %+v, want skipped as still running", period, run)
			}
		}
	})
}

func TestMissedPeriodsRunOnlyTheLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		var jump atomic.Int64 // how far the wall clock has jumped ahead
		now := func() time.Time { return time.Now().Add(time.Duration(jump.Load())) }
		var rec recorder
		stop := startRunner(t, schedule.New([]schedule.Job{{Name: "key-expiry", Cadence: schedule.Every(time.Minute), Run: succeed}},
			schedule.Options{Now: now, OnRun: rec.add}))
		time.Sleep(time.Minute + time.Second)
		jump.Store(int64(10 * time.Hour)) // as after a suspend: 600 periods passed unseen
		time.Sleep(2 * time.Minute)
		stop()

		var got []time.Time
		for _, run := range rec.of("key-expiry") {
			got = append(got, run.Period)
		}
		want := []time.Time{start.Add(time.Minute), start.Add(10*time.Hour + 2*time.Minute), start.Add(10*time.Hour + 3*time.Minute)}
		if len(got) != len(want) {
			t.Fatalf("ran for %v, want %v", got, want)
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Fatalf("ran for %v, want %v", got, want)
			}
		}
	})
}

func TestKickBurstMakesOneRunSoonAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		var rec recorder
		r := schedule.New([]schedule.Job{{Name: "webhooks", Cadence: schedule.Every(time.Hour), Run: succeed}},
			schedule.Options{OnRun: rec.add})
		stop := startRunner(t, r)
		for range 100 {
			r.Kick("webhooks")
		}
		r.Kick("no-such-job")
		time.Sleep(schedule.KickDebounce)
		synctest.Wait()
		runs := rec.of("webhooks")
		if len(runs) != 1 || runs[0].Trigger != schedule.TriggerKick || !runs[0].Period.IsZero() ||
			!runs[0].Started.Equal(start.Add(schedule.KickDebounce)) {
			t.Fatalf("after the debounce: %+v, want one kicked run started at %v", runs, start.Add(schedule.KickDebounce))
		}
		time.Sleep(time.Minute)
		stop()
		if runs := rec.of("webhooks"); len(runs) != 1 {
			t.Errorf("a minute later: %d runs, want still 1", len(runs))
		}
	})
}

func TestKickDuringARunRunsAfterItEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running concurrency
		release := make(chan struct{})
		held := func(ctx context.Context) error {
			running.enter()
			defer running.leave()
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var rec recorder
		r := schedule.New([]schedule.Job{{Name: "webhooks", Cadence: schedule.Every(time.Hour), Run: held}},
			schedule.Options{OnRun: rec.add})
		stop := startRunner(t, r)
		r.Kick("webhooks")
		time.Sleep(schedule.KickDebounce)
		synctest.Wait()
		if running.now.Load() != 1 {
			t.Fatalf("%d runs in progress after the first kick, want 1", running.now.Load())
		}

		for range 5 {
			r.Kick("webhooks")
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if n := running.now.Load(); n != 1 || len(rec.of("webhooks")) != 0 {
			t.Fatalf("kicks during the run: %d in progress, %d finished; want the first still alone", n, len(rec.of("webhooks")))
		}

		release <- struct{}{} // the first run ends
		synctest.Wait()
		if running.now.Load() != 1 || len(rec.of("webhooks")) != 1 {
			t.Fatalf("after the first run: %d in progress, %d finished; want the kicked run started", running.now.Load(), len(rec.of("webhooks")))
		}
		ended := time.Now()
		release <- struct{}{}
		time.Sleep(time.Minute)
		stop()

		runs := rec.of("webhooks")
		if len(runs) != 2 {
			t.Fatalf("%d runs, want 2 (the kicks during the first coalesce into one)", len(runs))
		}
		if !runs[1].Started.Equal(ended) || runs[1].Trigger != schedule.TriggerKick {
			t.Errorf("second run = %+v, want kicked and started at %v, when the first ended", runs[1], ended)
		}
		if most := running.most.Load(); most != 1 {
			t.Errorf("%d runs at once, want 1", most)
		}
	})
}

func TestRunNowWaitsForTheScheduledRunAndIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		errBoom := errors.New("boom")
		var running concurrency
		work := func(ctx context.Context) error {
			running.enter()
			defer running.leave()
			time.Sleep(80 * time.Second)
			return errBoom
		}
		var rec recorder
		r := schedule.New([]schedule.Job{{Name: "grant-expiry", Cadence: schedule.Every(time.Minute), Run: work}},
			schedule.Options{OnRun: rec.add})
		stop := startRunner(t, r)

		time.Sleep(90 * time.Second) // the 00:01 run goes on until 00:02:20
		result := make(chan error, 1)
		go func() { result <- r.RunNow(t.Context(), "grant-expiry") }()
		time.Sleep(3 * time.Minute)
		stop()

		if err := <-result; !errors.Is(err, errBoom) {
			t.Errorf("RunNow = %v, want the job's error", err)
		}
		if err := r.RunNow(t.Context(), "no-such-job"); !errors.Is(err, schedule.ErrUnknownJob) {
			t.Errorf("RunNow of an unknown job = %v, want ErrUnknownJob", err)
		}
		if most := running.most.Load(); most != 1 {
			t.Errorf("%d runs at once, want 1", most)
		}
		var manual []schedule.Run
		for _, run := range rec.of("grant-expiry") {
			if run.Trigger == schedule.TriggerManual {
				manual = append(manual, run)
			}
		}
		wantStart := start.Add(time.Minute + 80*time.Second)
		if len(manual) != 1 || !manual[0].Started.Equal(wantStart) || manual[0].Err != "boom" {
			t.Errorf("manual runs = %+v, want one started at %v, when the scheduled one ended, failed with boom", manual, wantStart)
		}
		// 00:01 ran; 00:02 overlapped it, 00:03 overlapped the manual run
		// (00:02:20–00:03:40); 00:04 ran.
		runs := rec.byPeriod("grant-expiry")
		for minute, wantRan := range map[int]bool{1: true, 2: false, 3: false, 4: true} {
			run := runs[start.Add(time.Duration(minute)*time.Minute)]
			if ran := !run.Skipped && run.Err == "boom"; ran != wantRan {
				t.Errorf("period 00:0%d = %+v, want ran %v", minute, run, wantRan)
			}
		}
	})
}

func TestStatusShowsNextDueAndLastRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		fail := func(context.Context) error { return errors.New("smtp: connection refused") }
		r := schedule.New([]schedule.Job{
			{Name: "digest", Cadence: schedule.DailyAt(14, 0), Run: succeed},
			{Name: "webhooks", Cadence: schedule.Every(2 * time.Minute), Run: fail},
		}, schedule.Options{})

		before := r.Status()
		if len(before) != 2 || before[0].Name != "digest" || before[0].Cadence != "daily at 14:00 UTC" ||
			!before[0].Next.Equal(start.Add(14*time.Hour)) || before[0].Last != nil ||
			before[1].Name != "webhooks" || before[1].Cadence != "every 2m0s" || !before[1].Next.Equal(start.Add(2*time.Minute)) {
			t.Errorf("Status before Start = %+v", before)
		}

		stop := startRunner(t, r)
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		after := r.Status()
		stop()

		digest, webhooks := after[0], after[1]
		if digest.Last != nil || !digest.Next.Equal(start.Add(14*time.Hour)) {
			t.Errorf("digest status = %+v, want no run yet and next at 14:00", digest)
		}
		if !webhooks.Next.Equal(start.Add(4*time.Minute)) || webhooks.Running {
			t.Errorf("webhooks status = %+v, want next at 00:04 and not running", webhooks)
		}
		last := webhooks.Last
		if last == nil || !last.Period.Equal(start.Add(2*time.Minute)) || last.Outcome() != "failed" ||
			!strings.Contains(last.Err, "connection refused") {
			t.Errorf("webhooks last run = %+v, want the 00:02 run, failed", last)
		}
	})
}

func TestMemoryLeaseGrantsEachPeriodOnce(t *testing.T) {
	ctx := t.Context()
	var l schedule.MemoryLease
	p1 := utc(2026, 3, 1, 6, 0, 0, 0)
	p2 := p1.Add(6 * time.Hour)
	steps := []struct {
		job    string
		period time.Time
		want   bool
	}{
		{"grant-expiry", p1, true},
		{"grant-expiry", p1, false},
		{"key-expiry", p1, true},
		{"grant-expiry", p2, true},
		{"grant-expiry", p1, false}, // forgotten, so refused: never granted twice
		{"grant-expiry", p2, false},
	}
	for i, s := range steps {
		if got, err := l.Acquire(ctx, s.job, s.period); got != s.want || err != nil {
			t.Errorf("step %d: Acquire(%s, %v) = %v, %v; want %v", i, s.job, s.period, got, err, s.want)
		}
	}

	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if ok, _ := l.Acquire(ctx, "anchor", p1); ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent callers won the same period, want 1", wins.Load())
	}
}
