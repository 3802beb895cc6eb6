package bench

import (
	"sync/atomic"
	"time"
)

// schedule hands out the due times of an open loop: operation i is due at
// start + i/rate. Workers take the next due time whether or not the previous
// operations have finished, so a slow server cannot slow the schedule.
type schedule struct {
	start time.Time
	rate  float64
	n     atomic.Int64
}

func newSchedule(start time.Time, rate float64) *schedule {
	return &schedule{start: start, rate: rate}
}

// at is the due time of operation i.
func (s *schedule) at(i int64) time.Time {
	return s.start.Add(time.Duration(float64(i) * float64(time.Second) / s.rate))
}

// next claims the next operation; ok is false once it would be due at or after end.
func (s *schedule) next(end time.Time) (time.Time, bool) {
	i := s.n.Add(1) - 1
	t := s.at(i)
	return t, t.Before(end)
}
