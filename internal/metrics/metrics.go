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

// snapshot is the histogram's counts now: per bucket (not cumulative, the last above every
// bound), their total and their sum.
func (h *Histogram) snapshot() (counts []uint64, n uint64, sum float64) {
	var m dto.Metric
	if err := h.hist().Write(&m); err != nil {
		return nil, 0, 0
	}
	hm := m.GetHistogram()
	var prev uint64
	for _, b := range hm.GetBucket() {
		c := b.GetCumulativeCount()
		counts = append(counts, c-prev)
		prev = c
	}
	n = hm.GetSampleCount()
	counts = append(counts, n-prev)
	return counts, n, hm.GetSampleSum()
}

// Cumulative is a histogram in Prometheus's form: how many observations were at most each
// bound, their count and their sum.
type Cumulative struct {
	Count   uint64
	Sum     time.Duration
	Buckets map[time.Duration]uint64 // upper bound -> observations at most that
}

// Cumulative returns the counts at two bounds per decade, 3.16 µs to 1000 s: the edges of every
// fifth bucket, so they are exact.
func (h *Histogram) Cumulative() Cumulative {
	counts, n, sum := h.snapshot()
	c := Cumulative{Count: n, Sum: time.Duration(sum * float64(time.Second)), Buckets: map[time.Duration]uint64{}}
	var seen uint64
	for i := range 90 {
		if i < len(counts) {
			seen += counts[i]
		}
		if (i+1)%(perDecade/2) == 0 {
			c.Buckets[edge(i)] = seen
		}
	}
	return c
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
	counts, n, sum := c.h.snapshot()
	buckets := make(map[float64]uint64, len(counts))
	var seen uint64
	for i, le := range bounds() {
		if i < len(counts) {
			seen += counts[i]
		}
		buckets[le] = seen
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, n, sum, buckets)
}

// Quantile returns the duration below which a fraction q of the observations fall (the upper
// edge of its bucket, capped by the largest seen), or 0 with no observations.
func (h *Histogram) Quantile(q float64) time.Duration {
	return h.Quantiles(q)[0]
}

// Quantiles is Quantile of each of qs, from one snapshot of the counts.
func (h *Histogram) Quantiles(qs ...float64) []time.Duration {
	counts, n, _ := h.snapshot()
	mx := h.Max()
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	for k, q := range qs {
		rank := uint64(math.Ceil(q * float64(n)))
		out[k] = mx
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= rank {
				if i < 90 {
					out[k] = min(edge(i), mx)
				}
				break
			}
		}
	}
	return out
}

// Count is the number of observations.
func (h *Histogram) Count() int64 {
	_, n, _ := h.snapshot()
	return int64(n)
}

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
