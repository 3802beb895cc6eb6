package bench

import (
	"context"
	"testing"
	"time"
)

func TestScheduleDueTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newSchedule(start, 400) // one every 2.5 ms
	for i, want := range []time.Duration{0, 2500 * time.Microsecond, 5 * time.Millisecond, 7500 * time.Microsecond} {
		if got := s.at(int64(i)).Sub(start); got != want {
			t.Fatalf("op %d due at +%v, want +%v", i, got, want)
		}
	}
	end := start.Add(10 * time.Millisecond)
	n := 0
	for {
		if _, ok := s.next(end); !ok {
			break
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d operations due before end, want 4", n)
	}
}

// A server slower than the schedule: the open loop must show the queueing in
// its latencies (measured from the due time), the closed loop cannot.
func TestOpenLoopShowsQueueing(t *testing.T) {
	slow := func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			time.Sleep(10 * time.Millisecond)
			return 1, nil
		}
	}
	e := &env{o: &Options{Duration: 100 * time.Millisecond, Rate: 200}, clients: 1}
	open := drive(context.Background(), e, slow, 200)
	if open.ops != 20 {
		t.Fatalf("open loop ran %d operations, want the 20 due in 100 ms at 200/s", open.ops)
	}
	if open.hist.Max() < 80*time.Millisecond {
		t.Fatalf("open loop max latency %v: the backlog of a 10 ms server at 5 ms intervals is hidden", open.hist.Max())
	}
	closed := drive(context.Background(), e, slow, 0)
	if closed.hist.Quantile(0.99) > 50*time.Millisecond || closed.ops < 5 {
		t.Fatalf("closed loop: p99 %v over %d ops", closed.hist.Quantile(0.99), closed.ops)
	}
}
