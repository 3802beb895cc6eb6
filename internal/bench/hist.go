package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram records durations in log-linear buckets, like HdrHistogram: values
// below 128 ns are exact; above, each power-of-two range is split into 64
// buckets, so any reported value is within 1/64 (1.6 %) of a recorded one.
// Memory is fixed (~18 KB) whatever the number of samples. Not safe for
// concurrent use: give each worker its own and Merge them.
type Histogram struct {
	counts [numBuckets]int64
	n      int64
	sum    float64
	min    int64
	max    int64
}

const (
	subBits    = 6
	subCount   = 1 << subBits // buckets per power of two
	linearTop  = 2 * subCount // values below are their own bucket
	maxExp     = 40           // 2^46 ns ≈ 19.5 h: anything longer is clamped
	numBuckets = linearTop + maxExp*subCount
)

func bucketOf(v int64) int {
	if v < linearTop {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	e := bits.Len64(uint64(v)) - (subBits + 1) // ≥ 1
	if e > maxExp {
		return numBuckets - 1
	}
	return linearTop + (e-1)*subCount + int(v>>e) - subCount
}

// bucketRange returns the lowest value of bucket i and its width.
func bucketRange(i int) (lo, width int64) {
	if i < linearTop {
		return int64(i), 1
	}
	e := (i-linearTop)/subCount + 1
	j := int64((i-linearTop)%subCount) + subCount
	return j << e, int64(1) << e
}

// Record adds one sample.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of samples.
func (h *Histogram) Count() int64 { return h.n }

// Max is the largest sample, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Min is the smallest sample, exactly.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Mean is the exact mean.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the value at quantile q (0..1): the middle of the bucket
// holding the ceil(q·n)-th smallest sample, clamped to [Min, Max].
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	if rank >= h.n {
		return time.Duration(h.max)
	}
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, w := bucketRange(i)
			v := lo + (w-1)/2
			v = max(v, h.min)
			v = min(v, h.max)
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
