package schedule_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/auditchain/auditchain/internal/schedule"
)

// loopCalls runs Loop in the bubble for span with fn's work taking work, and
// returns the due times fn was called for.
func loopCalls(t *testing.T, c schedule.Cadence, work, span time.Duration) []time.Time {
	var mu sync.Mutex
	var dues []time.Time
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		schedule.Loop(ctx, c, nil, func(_ context.Context, due time.Time) {
			if !time.Now().Equal(due) {
				t.Errorf("called for %v at %v, want at the due time", due, time.Now())
			}
			mu.Lock()
			dues = append(dues, due)
			mu.Unlock()
			time.Sleep(work) // the task's work, in fake time
		})
	}()
	time.Sleep(span)
	cancel()
	<-done
	return dues
}

func TestLoopCallsAtEachDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		got := loopCalls(t, schedule.Every(5*time.Minute), 0, 16*time.Minute)
		want := []time.Time{start.Add(5 * time.Minute), start.Add(10 * time.Minute), start.Add(15 * time.Minute)}
		if !equalTimes(got, want) {
			t.Errorf("called for %v, want %v", got, want)
		}
	})
}

func TestLoopSkipsDueTimesThatPassDuringASlowCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := midnight(t)
		// 00:01 works until 00:02:30, so 00:02 is skipped; likewise 00:04.
		got := loopCalls(t, schedule.Every(time.Minute), 90*time.Second, 5*time.Minute+time.Second)
		want := []time.Time{start.Add(time.Minute), start.Add(3 * time.Minute), start.Add(5 * time.Minute)}
		if !equalTimes(got, want) {
			t.Errorf("called for %v, want %v", got, want)
		}
	})
}

func equalTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
