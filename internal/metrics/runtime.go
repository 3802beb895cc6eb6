package metrics

import (
	"math"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// RegisterRuntime adds the Go runtime's and the process's usual gauges and
// counters, under the names the Prometheus client's collectors give them
// (go_goroutines, process_resident_memory_bytes, …), so dashboards built
// for those keep working. The process ones read /proc where there is one
// (Linux) and are absent elsewhere.
func (r *Registry) RegisterRuntime(start time.Time) {
	r.GaugeFunc("go_goroutines", "Number of goroutines that currently exist.", func() float64 { return float64(runtime.NumGoroutine()) })
	threads := pprof.Lookup("threadcreate")
	r.GaugeFunc("go_threads", "Number of OS threads created.", func() float64 { return float64(threads.Count()) })
	r.GaugeFunc("go_info", "Information about the Go environment.", func() float64 { return 1 }, Label{"version", runtime.Version()})
	read := func(name string) func() float64 {
		return func() float64 {
			s := []rtmetrics.Sample{{Name: name}}
			rtmetrics.Read(s)
			switch s[0].Value.Kind() {
			case rtmetrics.KindUint64:
				return float64(s[0].Value.Uint64())
			case rtmetrics.KindFloat64:
				return s[0].Value.Float64()
			}
			return math.NaN()
		}
	}
	r.GaugeFunc("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and still in use.", read("/memory/classes/heap/objects:bytes"))
	r.GaugeFunc("go_memstats_sys_bytes", "Number of bytes obtained from the system.", read("/memory/classes/total:bytes"))
	r.CounterFunc("go_gc_cycles_total", "Count of completed GC cycles (auditchain's name; not one of the Prometheus client's).",
		read("/gc/cycles/total:gc-cycles"))
	r.Collector("go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.",
		"summary", gcPauses)

	if cpu := processCPU; cpu != nil {
		r.CounterFunc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu)
	}
	r.GaugeFunc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
		func() float64 { return float64(start.UnixNano()) / 1e9 })
	if _, err := os.Stat("/proc/self/statm"); err == nil {
		page := float64(os.Getpagesize())
		r.GaugeFunc("process_resident_memory_bytes", "Resident memory size in bytes.", func() float64 { return statm(1) * page })
		r.GaugeFunc("process_virtual_memory_bytes", "Virtual memory size in bytes.", func() float64 { return statm(0) * page })
		r.GaugeFunc("process_max_fds", "Maximum number of open file descriptors.", maxFDs)
		r.GaugeFunc("process_open_fds", "Number of open file descriptors.", func() float64 {
			ents, err := os.ReadDir("/proc/self/fd")
			if err != nil {
				return math.NaN()
			}
			return float64(len(ents))
		})
	}
}

// statm is field i of /proc/self/statm, in pages.
func statm(i int) float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return math.NaN()
	}
	fields := strings.Fields(string(b))
	if i >= len(fields) {
		return math.NaN()
	}
	n, err := strconv.ParseFloat(fields[i], 64)
	if err != nil {
		return math.NaN()
	}
	return n
}

// maxFDs is the soft limit on open files, from /proc/self/limits.
func maxFDs() float64 {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return math.NaN()
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				if n, err := strconv.ParseFloat(f[0], 64); err == nil {
					return n
				}
			}
		}
	}
	return math.NaN()
}

// gcPauses is go_gc_duration_seconds as the Prometheus client exposes it:
// quantiles 0, 0.25, 0.5, 0.75 and 1 of the GC pauses, with their sum and
// count, read from the runtime's pause histogram (each quantile is the
// upper bound of the bucket holding it; the sum, from bucket midpoints).
func gcPauses() []Sample {
	s := []rtmetrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return nil
	}
	h := s[0].Value.Float64Histogram()
	var total uint64
	var sum float64
	for i, n := range h.Counts {
		total += n
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		switch {
		case math.IsInf(lo, -1):
			lo = hi
		case math.IsInf(hi, 1):
			hi = lo
		}
		sum += float64(n) * (lo + hi) / 2
	}
	var out []Sample
	for _, q := range []float64{0, 0.25, 0.5, 0.75, 1} {
		v := 0.0
		if total > 0 {
			rank := uint64(math.Ceil(q * float64(total)))
			var seen uint64
			for i, n := range h.Counts {
				seen += n
				if n > 0 && seen >= max(rank, 1) {
					v = h.Buckets[i+1]
					if math.IsInf(v, 1) {
						v = h.Buckets[i]
					}
					break
				}
			}
		}
		out = append(out, Sample{Labels: []Label{{"quantile", formatValue(q)}}, Value: v})
	}
	return append(out, Sample{Suffix: "_sum", Value: sum}, Sample{Suffix: "_count", Value: float64(total)})
}
