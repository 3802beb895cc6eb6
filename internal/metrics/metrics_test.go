package metrics_test

import (
	"bytes"
	"math"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/auditchain/auditchain/internal/metrics"
)

// The exposition is read by the Prometheus project's own text parser, with
// the values, labels, types and histogram buckets it was given.
func TestExpositionParsesWithPrometheus(t *testing.T) {
	r := metrics.NewRegistry()
	requests := r.NewCounterVec("app_requests_total", "Requests by route and status.", "route", "status")
	latency := r.NewHistogramVec("app_request_seconds", "Latency\nwith a \\ and a line feed.", []float64{0.01, 0.1, 1}, "route")
	r.CounterFunc("app_faults_total", "Faults.", func() float64 { return 3 })
	r.CounterFunc("app_paths_total", "Paths.", func() float64 { return 5 }, metrics.Label{Name: "path", Value: "locked"})
	r.CounterFunc("app_paths_total", "Paths.", func() float64 { return 7 }, metrics.Label{Name: "path", Value: `a "quoted" \ value`})
	r.Collector("app_jobs_total", "Jobs.", "counter", func() []metrics.Sample {
		return []metrics.Sample{{Labels: []metrics.Label{{Name: "job", Value: "digest"}, {Name: "outcome", Value: "ok"}}, Value: 2}}
	})
	r.RegisterRuntime(time.Unix(1_700_000_000, 0))

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			requests.Inc("GET /v1/health", "200")
			latency.Observe("GET /v1/health", 0.05)
		})
	}
	wg.Wait()
	requests.Inc("unmatched", "404")
	latency.Observe("GET /v1/health", 0.01) // on a bound: counted in its bucket (le)
	latency.Observe("GET /v1/health", 7)    // beyond the last bound: +Inf only

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != metrics.ContentType {
		t.Fatalf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("the Prometheus parser refuses the exposition: %v\n%s", err, rec.Body)
	}
	counter := func(name string, labels map[string]string) float64 {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("no family %s", name)
		}
	metric:
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metric
				}
			}
			if len(m.Label) == len(labels) {
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("%s%v not exposed", name, labels)
		return 0
	}
	if v := counter("app_requests_total", map[string]string{"route": "GET /v1/health", "status": "200"}); v != 50 {
		t.Errorf("requests = %v, want 50", v)
	}
	if v := counter("app_requests_total", map[string]string{"route": "unmatched", "status": "404"}); v != 1 {
		t.Errorf("unmatched = %v", v)
	}
	if v := counter("app_faults_total", nil); v != 3 {
		t.Errorf("faults = %v", v)
	}
	if v := counter("app_paths_total", map[string]string{"path": `a "quoted" \ value`}); v != 7 {
		t.Errorf("escaped label: %v", v)
	}
	if v := counter("app_jobs_total", map[string]string{"job": "digest", "outcome": "ok"}); v != 2 {
		t.Errorf("jobs = %v", v)
	}
	if h := fams["app_request_seconds"]; h.GetHelp() != "Latency\nwith a \\ and a line feed." {
		t.Errorf("help = %q", h.GetHelp())
	}
	h := fams["app_request_seconds"].Metric[0].GetHistogram()
	if h.GetSampleCount() != 52 || h.GetSampleSum() < 9.509 || h.GetSampleSum() > 9.511 {
		t.Errorf("histogram count %d sum %v, want 52 and 9.51", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{0.01: 1, 0.1: 51, 1: 51, math.Inf(1): 52}
	for _, b := range h.Bucket {
		if b.GetCumulativeCount() != want[b.GetUpperBound()] {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
	runtime.GC() // a pause for go_gc_duration_seconds
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if fams, err = p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes())); err != nil {
		t.Fatalf("the Prometheus parser refuses the exposition: %v\n%s", err, rec.Body)
	}
	if gc := fams["go_gc_duration_seconds"].GetMetric()[0].GetSummary(); gc.GetSampleCount() == 0 || len(gc.GetQuantile()) != 5 ||
		gc.GetQuantile()[4].GetValue() < gc.GetQuantile()[0].GetValue() {
		t.Errorf("go_gc_duration_seconds = %v", gc)
	}
	for _, name := range []string{"go_goroutines", "go_info", "go_memstats_heap_alloc_bytes", "process_start_time_seconds", "process_max_fds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if v := fams["process_start_time_seconds"].Metric[0].GetGauge().GetValue(); v != 1_700_000_000 {
		t.Errorf("process_start_time_seconds = %v", v)
	}
	// Stable: the same state gives the same text.
	again := httptest.NewRecorder()
	r.ServeHTTP(again, httptest.NewRequest("GET", "/metrics", nil))
	first, second := dropRuntime(rec.Body.String()), dropRuntime(again.Body.String())
	if first != second {
		t.Errorf("two scrapes differ:\n%s\n---\n%s", first, second)
	}
}

// dropRuntime removes the go_ and process_ lines, which move between scrapes.
func dropRuntime(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.Contains(line, "go_") && !strings.Contains(line, "process_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func TestRegisteringOneNameAsTwoKindsPanics(t *testing.T) {
	r := metrics.NewRegistry()
	r.CounterFunc("x_total", "x", func() float64 { return 0 })
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	r.GaugeFunc("x_total", "x", func() float64 { return 0 })
}

func BenchmarkCounterInc(b *testing.B) {
	v := metrics.NewRegistry().NewCounterVec("r_total", "r", "route", "status")
	for b.Loop() {
		v.Inc("GET /v1/grants/status", "200")
	}
}
