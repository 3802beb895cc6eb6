package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 + 12345, 1 << 46, 1 << 62} {
		b := bucketOf(v)
		if b < prev {
			t.Fatalf("bucketOf(%d) = %d, below the previous %d", v, b, prev)
		}
		prev = b
		lo, w := bucketRange(b)
		if b < numBuckets-1 && (v < lo || v >= lo+w) {
			t.Fatalf("value %d in bucket %d = [%d,%d)", v, b, lo, lo+w)
		}
	}
	// Buckets are contiguous.
	for i := 1; i < numBuckets; i++ {
		lo0, w0 := bucketRange(i - 1)
		lo1, _ := bucketRange(i)
		if lo0+w0 != lo1 {
			t.Fatalf("gap between bucket %d and %d: %d+%d != %d", i-1, i, lo0, w0, lo1)
		}
	}
}

func TestQuantilesAgainstSortedSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var xs []int64
	for range 100000 {
		// Log-normal-ish latencies between ~10 µs and ~100 ms.
		v := int64(10_000 * (1 + r.ExpFloat64()*r.ExpFloat64()*50))
		xs = append(xs, v)
		h.Record(time.Duration(v))
	}
	slices.Sort(xs)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := xs[int(q*float64(len(xs)))-1]
		got := int64(h.Quantile(q))
		if d := float64(got-want) / float64(want); d > 1.0/64 || d < -1.0/64 {
			t.Errorf("q%.3f = %d, exact %d (%.2f%% off)", q, got, want, d*100)
		}
	}
	if h.Max() != time.Duration(xs[len(xs)-1]) || h.Min() != time.Duration(xs[0]) {
		t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), xs[0], xs[len(xs)-1])
	}
	if h.Quantile(1) != h.Max() {
		t.Errorf("q1 %v != max %v", h.Quantile(1), h.Max())
	}
}

func TestSmallAndMergedHistograms(t *testing.T) {
	var a, b Histogram
	if a.Quantile(0.5) != 0 || a.Mean() != 0 {
		t.Fatal("empty histogram must read 0")
	}
	a.Record(3 * time.Millisecond)
	if a.Quantile(0.5) != 3*time.Millisecond || a.Quantile(0.99) != 3*time.Millisecond {
		t.Fatalf("one sample: p50 %v p99 %v", a.Quantile(0.5), a.Quantile(0.99))
	}
	for i := 1; i <= 99; i++ {
		b.Record(time.Duration(i) * time.Microsecond)
	}
	a.Merge(&b)
	if a.Count() != 100 || a.Max() != 3*time.Millisecond || a.Min() != time.Microsecond {
		t.Fatalf("merged: n=%d max=%v min=%v", a.Count(), a.Max(), a.Min())
	}
	p50 := a.Quantile(0.5)
	if p50 < 49*time.Microsecond || p50 > 51*time.Microsecond {
		t.Fatalf("merged p50 %v, want ≈50µs", p50)
	}
	if a.Quantile(0.995) != 3*time.Millisecond {
		t.Fatalf("merged p99.5 %v, want the 3 ms sample", a.Quantile(0.995))
	}
}
