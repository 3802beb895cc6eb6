// Package metrics exposes the service's counters and histograms in the
// Prometheus text format (version 0.0.4) at GET /metrics, with the standard
// library only.
//
// It replaces the Prometheus client library, whose package initialisation
// every process of the binary paid, `auditchain hook` before each tool call
// of an agent (docs/performance.md, "Hooks and the proxy"). The exposition
// is what a Prometheus server scrapes; TestExpositionParsesWithPrometheus
// holds it to the Prometheus project's own parser.
package metrics

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Label is one label of a sample.
type Label struct{ Name, Value string }

// Sample is one value of a family, with its labels.
type Sample struct {
	Labels []Label
	Value  float64
	// Suffix is appended to the family's name: a summary's _sum and _count.
	Suffix string
}

// Registry is a set of metric families, exposed in registration order.
// Families are registered while the service is set up; reads are
// concurrent.
type Registry struct {
	mu       sync.Mutex
	families []*family
}

type family struct {
	name, help, kind string
	// collect appends the family's samples (for a histogram, its series).
	collect func([]Sample) []Sample
	hist    *HistogramVec
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// family returns the family name, registering it on first use: several
// registrations of one name (counters with different constant labels) join
// one family.
func (r *Registry) family(name, help, kind string) *family {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.families {
		if f.name == name {
			if f.kind != kind {
				panic("metrics: " + name + " registered as " + f.kind + " and " + kind)
			}
			return f
		}
	}
	f := &family{name: name, help: help, kind: kind}
	r.families = append(r.families, f)
	return f
}

// addCollector adds c's samples to the family name.
func (r *Registry) addCollector(name, help, kind string, c func([]Sample) []Sample) {
	f := r.family(name, help, kind)
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := f.collect; prev != nil {
		f.collect = func(s []Sample) []Sample { return c(prev(s)) }
	} else {
		f.collect = c
	}
}

// CounterFunc registers a counter read from f when scraped, with constant
// labels.
func (r *Registry) CounterFunc(name, help string, f func() float64, labels ...Label) {
	r.addCollector(name, help, "counter", func(s []Sample) []Sample { return append(s, Sample{Labels: labels, Value: f()}) })
}

// GaugeFunc registers a gauge read from f when scraped.
func (r *Registry) GaugeFunc(name, help string, f func() float64, labels ...Label) {
	r.addCollector(name, help, "gauge", func(s []Sample) []Sample { return append(s, Sample{Labels: labels, Value: f()}) })
}

// Collector registers a family whose samples f lists when scraped (labels
// known only then, such as a job's name); kind is counter, gauge or summary.
func (r *Registry) Collector(name, help, kind string, f func() []Sample) {
	r.addCollector(name, help, kind, func(s []Sample) []Sample { return append(s, f()...) })
}

// CounterVec is a counter per combination of label values.
type CounterVec struct {
	name, help string
	names      []string
	series     sync.Map // joined label values → *counterSeries
}

type counterSeries struct {
	values []string
	n      atomic.Uint64
}

// NewCounterVec returns a counter family with the given label names, which
// no registry exposes until Register adds it: the domain's counters are
// declared once per process (domain.go) and exposed by each server's registry.
func NewCounterVec(name, help string, labelNames ...string) *CounterVec {
	return &CounterVec{name: name, help: help, names: labelNames}
}

// NewCounterVec registers a counter family with the given label names.
func (r *Registry) NewCounterVec(name, help string, labelNames ...string) *CounterVec {
	v := NewCounterVec(name, help, labelNames...)
	r.Register(v)
	return v
}

func (v *CounterVec) register(r *Registry) {
	r.addCollector(v.name, v.help, "counter", func(s []Sample) []Sample {
		v.series.Range(func(_, c any) bool {
			cs := c.(*counterSeries)
			s = append(s, Sample{Labels: labelsOf(v.names, cs.values), Value: float64(cs.n.Load())})
			return true
		})
		return s
	})
}

// Inc adds one to the series of values (one per label name).
func (v *CounterVec) Inc(values ...string) { v.Add(1, values...) }

// Add adds n to the series of values (one per label name).
func (v *CounterVec) Add(n uint64, values ...string) {
	key := strings.Join(values, "\xff")
	c, ok := v.series.Load(key)
	if !ok {
		c, _ = v.series.LoadOrStore(key, &counterSeries{values: slices.Clone(values)})
	}
	c.(*counterSeries).n.Add(n)
}

// HistogramVec is a histogram per value of one label.
type HistogramVec struct {
	name, help string
	label      string
	buckets    []float64 // upper bounds, ascending; +Inf is implied
	series     sync.Map  // label value → *histogram
}

type histogram struct {
	counts  []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sumBits atomic.Uint64
}

// NewHistogramVec returns a histogram family with one label, exposed once
// Register adds it to a registry.
func NewHistogramVec(name, help string, buckets []float64, label string) *HistogramVec {
	v := &HistogramVec{name: name, help: help, label: label, buckets: slices.Clone(buckets)}
	slices.Sort(v.buckets)
	return v
}

// NewHistogramVec registers a histogram family with one label.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, label string) *HistogramVec {
	v := NewHistogramVec(name, help, buckets, label)
	r.Register(v)
	return v
}

func (v *HistogramVec) register(r *Registry) {
	f := r.family(v.name, v.help, "histogram")
	r.mu.Lock()
	f.hist = v
	r.mu.Unlock()
}

// Vec is a family a registry can expose: a *CounterVec or a *HistogramVec.
type Vec interface{ register(*Registry) }

// Register exposes each family in r, after those registered before.
func (r *Registry) Register(vs ...Vec) {
	for _, v := range vs {
		v.register(r)
	}
}

// Observe records x in the series of value.
func (v *HistogramVec) Observe(value string, x float64) {
	h, ok := v.series.Load(value)
	if !ok {
		h, _ = v.series.LoadOrStore(value, &histogram{counts: make([]atomic.Uint64, len(v.buckets)+1)})
	}
	hs := h.(*histogram)
	i, _ := slices.BinarySearch(v.buckets, x) // the first bound ≥ x; len: +Inf
	hs.counts[i].Add(1)
	for {
		old := hs.sumBits.Load()
		if hs.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			break
		}
	}
}

func labelsOf(names, values []string) []Label {
	out := make([]Label, len(names))
	for i := range names {
		out[i] = Label{names[i], values[i]}
	}
	return out
}

// ContentType is the exposition's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP writes every family in the text format.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", ContentType)
	_, _ = w.Write(r.Expose())
}

// Expose is the text exposition of every family; each family's series are
// sorted by their labels, so the output is stable.
func (r *Registry) Expose() []byte {
	r.mu.Lock()
	families := slices.Clone(r.families)
	r.mu.Unlock()
	var b []byte
	for _, f := range families {
		b = append(b, "# HELP "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = appendEscaped(b, f.help, false)
		b = append(b, "\n# TYPE "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = append(b, f.kind...)
		b = append(b, '\n')
		if f.hist != nil {
			b = f.hist.append(b, f.name)
			continue
		}
		var samples []Sample
		if f.collect != nil {
			samples = f.collect(nil)
		}
		if f.kind != "summary" { // a summary's lines stay in the order given
			slices.SortStableFunc(samples, func(x, y Sample) int { return compareLabels(x.Labels, y.Labels) })
		}
		for _, s := range samples {
			b = appendSample(b, f.name+s.Suffix, s.Labels, s.Value)
		}
	}
	return b
}

func (v *HistogramVec) append(b []byte, name string) []byte {
	var values []string
	v.series.Range(func(k, _ any) bool { values = append(values, k.(string)); return true })
	slices.Sort(values)
	for _, value := range values {
		h, _ := v.series.Load(value)
		hs := h.(*histogram)
		// A scrape is not atomic: observations landing meanwhile may be in
		// the buckets read after them and not in the sum read first, or
		// the other way round; each series stays monotonic.
		sum := math.Float64frombits(hs.sumBits.Load())
		var cumulative uint64
		for i := range hs.counts {
			cumulative += hs.counts[i].Load()
			le := "+Inf"
			if i < len(v.buckets) {
				le = formatValue(v.buckets[i])
			}
			b = appendSample(b, name+"_bucket", []Label{{v.label, value}, {"le", le}}, float64(cumulative))
		}
		labels := []Label{{v.label, value}}
		b = appendSample(b, name+"_sum", labels, sum)
		// The count is the +Inf bucket's, read once above, so that the two
		// agree even while observations land.
		b = appendSample(b, name+"_count", labels, float64(cumulative))
	}
	return b
}

func compareLabels(x, y []Label) int {
	for i := range min(len(x), len(y)) {
		if c := cmp.Or(strings.Compare(x[i].Name, y[i].Name), strings.Compare(x[i].Value, y[i].Value)); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(x), len(y))
}

func appendSample(b []byte, name string, labels []Label, v float64) []byte {
	b = append(b, name...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i, l := range labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, l.Name...)
			b = append(b, `="`...)
			b = appendEscaped(b, l.Value, true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = append(b, formatValue(v)...)
	return append(b, '\n')
}

// appendEscaped escapes s as the format wants: backslash and line feed in
// help text, and the double quote too in label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
