// Package metrics has the small measuring instruments vidfs reports with: a latency histogram
// with logarithmic buckets over the Prometheus client library's (lock-free) histogram, and a rate
// over the last seconds.
package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Histogram counts durations in a prometheus.Histogram with logarithmic buckets (10 per decade,
// 1 µs to 1000 s), so that quantiles come out within about 12 % in constant memory, and keeps the
// largest. Observe takes no lock (the client library's counts are atomic, and so is the largest),
// so that readers observing at once do not wait for one another. The zero Histogram is ready to
// use, and it is safe for concurrent use.
type Histogram struct {
	once sync.Once
	h    prometheus.Histogram
	max  atomic.Int64 // the largest observation, in nanoseconds
}

const perDecade = 10

// edge is the upper edge of bucket i.
func edge(i int) time.Duration {
	return time.Duration(math.Pow(10, float64(i+1)/perDecade) * float64(time.Microsecond))
}

// bounds are the buckets' upper edges in seconds, as Prometheus takes them: 10^0.1 µs to 1000 s
// (above it, the client library's +Inf).
func bounds() []float64 {
	b := make([]float64, 90)
	for i := range b {
		b[i] = edge(i).Seconds()
	}
	return b
}

func (h *Histogram) hist() prometheus.Histogram {
	h.once.Do(func() {
		h.h = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency_seconds", Help: "Durations.", Buckets: bounds()})
	})
	return h.h
}

// Observe adds one duration.
func (h *Histogram) Observe(d time.Duration) {
	h.hist().Observe(d.Seconds())
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// snapshot is the histogram's counts now, as the client library keeps them: for each bucket's
// upper bound in seconds, the observations at most that (cumulative); and their total and sum.
func (h *Histogram) snapshot() *dto.Histogram {
	var m dto.Metric
	if err := h.hist().Write(&m); err != nil {
		return &dto.Histogram{}
	}
	return m.GetHistogram()
}

// Collector exports the histogram to a Prometheus registry under name, with all its buckets.
func (h *Histogram) Collector(name, help string) prometheus.Collector {
	return &collector{h: h, desc: prometheus.NewDesc(name, help, nil, nil)}
}

type collector struct {
	h    *Histogram
	desc *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	hm := c.h.snapshot()
	buckets := make(map[float64]uint64, len(hm.GetBucket()))
	for _, b := range hm.GetBucket() {
		buckets[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, hm.GetSampleCount(), hm.GetSampleSum(), buckets)
}

// Quantile returns the duration below which a fraction q of the observations fall (the upper
// edge of its bucket, capped by the largest seen), or 0 with no observations.
func (h *Histogram) Quantile(q float64) time.Duration {
	return h.Quantiles(q)[0]
}

// Quantiles is Quantile of each of qs, from one snapshot of the counts.
func (h *Histogram) Quantiles(qs ...float64) []time.Duration {
	hm := h.snapshot()
	n := hm.GetSampleCount()
	mx := h.Max()
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	for k, q := range qs {
		rank := uint64(math.Ceil(q * float64(n)))
		out[k] = mx // above every bound
		for i, b := range hm.GetBucket() {
			if b.GetCumulativeCount() >= rank {
				out[k] = min(edge(i), mx)
				break
			}
		}
	}
	return out
}

// Count is the number of observations.
func (h *Histogram) Count() int64 { return int64(h.snapshot().GetSampleCount()) }

// Max is the largest observation.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Rate measures events per second over the last few whole seconds (see PerSecond). It is safe
// for concurrent use.
type Rate struct {
	mu      sync.Mutex
	buckets [10]float64 // one per second, ring
	stamp   [10]int64   // the second each bucket counts
}

// Add counts n events at time now.
func (r *Rate) Add(n float64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := now.Unix()
	i := s % int64(len(r.buckets))
	if r.stamp[i] != s {
		r.stamp[i], r.buckets[i] = s, 0
	}
	r.buckets[i] += n
}

// PerSecond is the mean rate over the 5 whole seconds before now's.
func (r *Rate) PerSecond(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := now.Unix()
	var sum float64
	const span = 5
	for k := int64(1); k <= span; k++ {
		i := (s - k) % int64(len(r.buckets))
		if r.stamp[i] == s-k {
			sum += r.buckets[i]
		}
	}
	return sum / span
}
