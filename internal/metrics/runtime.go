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
	r.CounterFunc("go_gc_cycles_total", "Count of completed GC cycles.", read("/gc/cycles/total:gc-cycles"))

	if cpu := processCPU; cpu != nil {
		r.CounterFunc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu)
	}
	r.GaugeFunc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
		func() float64 { return float64(start.UnixNano()) / 1e9 })
	if _, err := os.Stat("/proc/self/statm"); err == nil {
		page := float64(os.Getpagesize())
		r.GaugeFunc("process_resident_memory_bytes", "Resident memory size in bytes.", func() float64 { return statm(1) * page })
		r.GaugeFunc("process_virtual_memory_bytes", "Virtual memory size in bytes.", func() float64 { return statm(0) * page })
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
