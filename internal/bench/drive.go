package bench

// The load driver: workers in a closed or an open loop, their histograms
// merged, and the server's CPU sampled over the measured window.

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is what drive measured.
type loadResult struct {
	hist    Histogram
	ops     int64
	items   int64
	retries int64
	errs    map[string]int64
	elapsed time.Duration
	cpu     time.Duration // server CPU over the measured window
	proc    procSample    // server at the end
	sampled bool
	io      ioDelta // server writes over the measured window
	// walFrames is the growth of the server's WAL frame count over the
	// window (walFramesMetric), when its /metrics answered both times.
	walFrames   float64
	walFramesOK bool
	abort       error
}

// ioDelta is the growth of /proc/PID/io's write counters over the window.
type ioDelta struct {
	wchar, writeBytes, syscw int64
	ok                       bool
}

// drive runs op on e.clients workers: in a closed loop (each worker sends its
// next request when the last one answered), or, with a rate > 0 (operations per second), in an open loop
// where operation i is due at start + i/rate whatever happened before, and its
// latency counts from that due time — queueing in the server or in the
// generator shows up instead of slowing the schedule (no coordinated omission).
func drive(ctx context.Context, e *env, mk func(w *worker) opFunc, rate float64) loadResult {
	open := rate > 0
	o := e.o
	n := max(e.clients, 1)
	workers := make([]*worker, n)
	for i := range workers {
		workers[i] = &worker{id: i, e: e, c: e.clientFor(i), errs: map[string]int64{}}
	}
	ops := make([]opFunc, n)
	for i, w := range workers {
		ops[i] = mk(w)
	}
	start := time.Now()
	from := start.Add(o.Warmup)
	end := from.Add(o.Duration)
	var sched *schedule
	if open {
		sched = newSchedule(start, rate)
	}
	var abort atomic.Pointer[error]
	var cpuFrom procSample
	var cpuOK atomic.Bool
	var framesFrom float64
	var framesOK bool
	stopSampler := make(chan struct{})
	var samplerDone sync.WaitGroup
	if e.serverPID > 0 {
		samplerDone.Add(1)
		go func() {
			defer samplerDone.Done()
			select {
			case <-time.After(time.Until(from)):
				if s, err := sampleProc(e.serverPID); err == nil {
					cpuFrom = s
					cpuOK.Store(true)
				}
				framesFrom, framesOK = metricValue(ctx, e.c, walFramesMetric)
			case <-stopSampler:
			}
		}()
	}
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := ops[i]
			for ctx.Err() == nil && abort.Load() == nil {
				var due time.Time
				if open {
					var ok bool
					due, ok = sched.next(end)
					if !ok {
						return
					}
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				} else {
					due = time.Now()
					if !due.Before(end) {
						return
					}
				}
				items, err := op(ctx, w)
				done := time.Now()
				if err != nil {
					if errors.Is(err, errDone) {
						return // the workload's prepared operations are spent
					}
					var ab errAbort
					if errors.As(err, &ab) {
						abort.CompareAndSwap(nil, &ab.error)
						return
					}
					if ctx.Err() != nil {
						return
					}
					if !due.Before(from) {
						w.countErr(err)
					}
					continue
				}
				if !due.Before(from) {
					w.hist.Record(done.Sub(due))
					w.ops++
					w.items += int64(items)
				}
			}
		}()
	}
	wg.Wait()
	finished := time.Now()
	close(stopSampler)
	samplerDone.Wait()
	var r loadResult
	r.errs = map[string]int64{}
	for _, w := range workers {
		r.hist.Merge(&w.hist)
		r.ops += w.ops
		r.items += w.items
		r.retries += w.retries
		for k, v := range w.errs {
			r.errs[k] += v
		}
	}
	r.elapsed = max(finished.Sub(from), time.Millisecond)
	if cpuOK.Load() {
		if s, err := sampleProc(e.serverPID); err == nil {
			r.cpu, r.proc, r.sampled = s.cpu-cpuFrom.cpu, s, true
			if s.ioOK && cpuFrom.ioOK {
				r.io = ioDelta{wchar: s.wchar - cpuFrom.wchar, writeBytes: s.writeBytes - cpuFrom.writeBytes,
					syscw: s.syscw - cpuFrom.syscw, ok: true}
			}
		}
		if framesOK {
			// A counter below the first sample is a server that restarted
			// during the window: no figure.
			if to, ok := metricValue(ctx, e.c, walFramesMetric); ok && to > 0 && to >= framesFrom {
				r.walFrames, r.walFramesOK = to-framesFrom, true
			}
		}
	}
	if p := abort.Load(); p != nil {
		r.abort = *p
	}
	return r
}

// fill turns a load result into the report's fields.
func (r *loadResult) fill(res *Result) {
	res.Seconds = r.elapsed.Seconds()
	res.Ops = r.ops
	res.OpsPerSec = float64(r.ops) / r.elapsed.Seconds()
	if r.ops > 0 && r.items != r.ops {
		res.ItemsPerOp = float64(r.items) / float64(r.ops)
		res.ItemsPerSec = float64(r.items) / r.elapsed.Seconds()
	}
	res.Latency = latencyOf(&r.hist)
	if len(r.errs) > 0 {
		res.Errors = r.errs
	}
	res.Retries = r.retries
	if r.sampled {
		s := &ServerStats{PeakRSSMB: float64(r.proc.hwmKB) / 1024, RSSMB: float64(r.proc.rssKB) / 1024,
			CPUCores: r.cpu.Seconds() / r.elapsed.Seconds()}
		if r.ops > 0 {
			s.CPUMicrosPerOp = float64(r.cpu.Microseconds()) / float64(r.ops)
			if r.items != r.ops && r.items > 0 {
				s.CPUMicrosPerItem = float64(r.cpu.Microseconds()) / float64(r.items)
			}
			if r.io.ok {
				n := float64(r.ops)
				s.WriteBytesPerOp = float64(r.io.writeBytes) / n
				s.WcharPerOp = float64(r.io.wchar) / n
				s.WriteCallsPerOp = float64(r.io.syscw) / n
			}
			if r.walFramesOK {
				s.WALFramesPerOp = r.walFrames / float64(r.ops)
			}
		}
		res.Server = s
	}
	if r.abort != nil {
		res.Error = r.abort.Error()
	}
}

func latencyOf(h *Histogram) Latency {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return Latency{P50: ms(h.Quantile(0.5)), P90: ms(h.Quantile(0.9)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max()), Mean: ms(h.Mean())}
}
