package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestHistogram(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
	for i := 1; i <= 100; i++ {
		h.Observe(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.9, 90 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.Quantile(tc.q)
		if got < tc.want || float64(got) > 1.26*float64(tc.want) {
			t.Errorf("quantile %.2f = %v, want %v within a bucket", tc.q, got, tc.want)
		}
	}
	if h.Count() != 100 || h.Max() != 100*time.Millisecond {
		t.Errorf("count %d max %v", h.Count(), h.Max())
	}
}

func TestRate(t *testing.T) {
	var r Rate
	now := time.Unix(1000, 0)
	for k := range 6 {
		r.Add(10, now.Add(time.Duration(k)*time.Second))
	}
	if got := r.PerSecond(now.Add(6 * time.Second)); got != 10 {
		t.Errorf("rate %v, want 10/s", got)
	}
	if got := r.PerSecond(now.Add(60 * time.Second)); got != 0 {
		t.Errorf("stale rate %v, want 0", got)
	}
}

// TestCollector: the histogram exported to Prometheus holds every observation, their sum, and
// at each of its 90 bounds the observations at most that.
func TestCollector(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{2 * time.Microsecond, 5 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond} {
		h.Observe(d)
	}
	ch := make(chan prometheus.Metric, 1)
	h.Collector("latency_seconds", "Durations.").Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	hm := m.GetHistogram()
	sum := time.Duration(hm.GetSampleSum() * float64(time.Second))
	if hm.GetSampleCount() != 4 || sum < 45*time.Millisecond+2*time.Microsecond-time.Microsecond ||
		sum > 45*time.Millisecond+2*time.Microsecond+time.Microsecond || len(hm.GetBucket()) != 90 {
		t.Fatalf("count %d, sum %v, %d buckets", hm.GetSampleCount(), sum, len(hm.GetBucket()))
	}
	for _, tc := range []struct {
		le   time.Duration
		want uint64
	}{{3162 * time.Nanosecond, 1}, {3162 * time.Microsecond, 1}, {10 * time.Millisecond, 2}, {31622 * time.Microsecond, 4}, {1000 * time.Second, 4}} {
		var got uint64
		found := false
		for _, b := range hm.GetBucket() {
			le := time.Duration(b.GetUpperBound() * float64(time.Second))
			if le >= tc.le-time.Microsecond && le <= tc.le+time.Microsecond {
				got, found = b.GetCumulativeCount(), true
			}
		}
		if !found || got != tc.want {
			t.Errorf("bucket le %v: %d (found %v), want %d", tc.le, got, found, tc.want)
		}
	}
}

// BenchmarkHistogramObserve: what observing a read's latency costs, by as many readers at once as
// GOMAXPROCS (-cpu).
func BenchmarkHistogramObserve(b *testing.B) {
	var h Histogram
	b.RunParallel(func(pb *testing.PB) {
		d := 37 * time.Microsecond
		for pb.Next() {
			h.Observe(d)
			d += time.Microsecond
		}
	})
	if h.Count() != int64(b.N) {
		b.Fatalf("%d observations, want %d", h.Count(), b.N)
	}
}
