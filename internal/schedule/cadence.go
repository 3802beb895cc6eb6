package schedule

import (
	"fmt"
	"math/bits"
	"time"
)

// Cadence says when a job is due.
type Cadence interface {
	// Next returns the first due time strictly after t, in UTC.
	Next(t time.Time) time.Time
	// String describes the cadence for GET /v1/internal/jobs: "every 2m0s",
	// "daily at 14:00 UTC".
	String() string
}

// Every is due at every multiple of d since the Unix epoch (UTC), so that
// replicas started at different moments agree on where periods begin: the
// lease is taken per period start. Every(6*time.Hour) is due at 00:00, 06:00,
// 12:00 and 18:00 UTC. d must be positive.
func Every(d time.Duration) Cadence {
	if d <= 0 {
		panic(fmt.Sprintf("schedule: Every(%v): the period must be positive", d))
	}
	// time.Time.Truncate counts from January 1, year 1, not from 1970; periods
	// counted from there are shifted by the epoch's remainder modulo d. The
	// epoch's offset in nanoseconds overflows int64, hence the 128-bit product.
	hi, lo := bits.Mul64(uint64(unixToZeroSeconds), uint64(time.Second))
	shift := time.Duration(bits.Rem64(hi, lo, uint64(d)))
	return every{d: d, shift: shift}
}

// unixToZeroSeconds is the number of seconds from January 1, year 1 to the
// Unix epoch: 719162 days.
const unixToZeroSeconds = 719162 * 24 * 60 * 60

type every struct {
	d     time.Duration
	shift time.Duration
}

func (e every) Next(t time.Time) time.Time {
	periodStart := t.Add(-e.shift).Truncate(e.d).Add(e.shift)
	return periodStart.Add(e.d).UTC()
}

func (e every) String() string { return "every " + e.d.String() }

// EveryFrom is due every d after start (start+d, start+2d, …): the cadence
// of a per-process task that counts its periods from when it was started,
// such as the heal auto task, where no replicas need to agree. d must be
// positive.
func EveryFrom(start time.Time, d time.Duration) Cadence {
	if d <= 0 {
		panic(fmt.Sprintf("schedule: EveryFrom(%v): the period must be positive", d))
	}
	return everyFrom{start: start, d: d}
}

type everyFrom struct {
	start time.Time
	d     time.Duration
}

func (e everyFrom) Next(t time.Time) time.Time {
	if t.Before(e.start) {
		return e.start.Add(e.d).UTC()
	}
	periods := t.Sub(e.start) / e.d
	return e.start.Add((periods + 1) * e.d).UTC()
}

func (e everyFrom) String() string { return "every " + e.d.String() + " from start" }

// DailyAt is due once a day at hour:minute UTC (the spec's times are UTC, so
// no daylight-saving shift ever moves or doubles a run).
func DailyAt(hour, minute int) Cadence {
	if hour < 0 || hour > 23 || minute < 0 || minute > 59 {
		panic(fmt.Sprintf("schedule: DailyAt(%d, %d): not a time of day", hour, minute))
	}
	return dailyAt{hour: hour, minute: minute}
}

type dailyAt struct{ hour, minute int }

func (d dailyAt) Next(t time.Time) time.Time {
	u := t.UTC()
	due := time.Date(u.Year(), u.Month(), u.Day(), d.hour, d.minute, 0, 0, time.UTC)
	if !due.After(u) {
		due = due.AddDate(0, 0, 1)
	}
	return due
}

func (d dailyAt) String() string { return fmt.Sprintf("daily at %02d:%02d UTC", d.hour, d.minute) }

// latestDue returns the last due time of c at or before now, starting from
// first (a due time at or before now), and how many due times it passed over.
// A process that was suspended, or whose clock jumped, runs the latest period
// only: the jobs are idempotent sweeps, so catching up on each missed period
// would repeat the same work in a burst.
func latestDue(c Cadence, first, now time.Time) (due time.Time, missed int) {
	due = first
	for {
		n := c.Next(due)
		if n.After(now) {
			return due, missed
		}
		due = n
		missed++
	}
}

// maxSleep bounds one wait for a due time. Timers count monotonic time, which
// stops while a machine is suspended and ignores wall-clock steps; waking at
// least once a minute to re-read the wall clock keeps a daily job from
// running hours late after either.
const maxSleep = time.Minute

// sleepFor is how long to wait at now for the due time next.
func sleepFor(next, now time.Time) time.Duration {
	return min(max(next.Sub(now), 0), maxSleep)
}
