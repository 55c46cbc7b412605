// Package metrics has the small measuring instruments vidfs reports with: a latency histogram
// with logarithmic buckets, and a rate over the last seconds.
package metrics

import (
	"math"
	"sync"
	"time"
)

// Histogram counts durations in logarithmic buckets (10 per decade, 1 µs to 1000 s), so that
// quantiles come out within about 12 % in constant memory. It is safe for concurrent use.
type Histogram struct {
	mu     sync.Mutex
	counts [90]int64
	n      int64
	sum    time.Duration
	max    time.Duration
}

const perDecade = 10

func bucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return min(int(math.Log10(us)*perDecade), 89)
}

// Observe adds one duration.
func (h *Histogram) Observe(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[bucket(d)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// edge is the upper edge of bucket i.
func edge(i int) time.Duration {
	return time.Duration(math.Pow(10, float64(i+1)/perDecade) * float64(time.Microsecond))
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
	h.mu.Lock()
	defer h.mu.Unlock()
	c := Cumulative{Count: uint64(h.n), Sum: h.sum, Buckets: map[time.Duration]uint64{}}
	var seen int64
	for i, n := range h.counts {
		seen += n
		if (i+1)%(perDecade/2) == 0 {
			c.Buckets[edge(i)] = uint64(seen)
		}
	}
	return c
}

// Quantile returns the duration below which a fraction q of the observations fall (the upper
// edge of its bucket, capped by the largest seen), or 0 with no observations.
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(edge(i), h.max)
		}
	}
	return h.max
}

// Count is the number of observations.
func (h *Histogram) Count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Max is the largest observation.
func (h *Histogram) Max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max
}

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
