package order

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/readers"
)

// permutation is an epoch of n samples in a random order (the same for a given seed).
func permutation(n int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	p := make([]int32, n)
	for i, v := range r.Perm(n) {
		p[i] = int32(v)
	}
	return p
}

// BenchmarkObserve is one reader's read of the next sample of its plan, with a plan of 4,000,000
// entries and a horizon of 4,096 (a cache of about 4,000 samples ahead).
func BenchmarkObserve(b *testing.B) {
	for _, n := range []int{40_000, 4_000_000} {
		b.Run(itoa(n), func(b *testing.B) {
			ps := NewPlans(256, 4096, 0)
			entries := permutation(n, 1)
			ps.Set(DefaultPlan, entries, false)
			now := time.Now()
			b.ResetTimer()
			for i := range b.N {
				s := int(entries[i%n])
				ps.Observe(s, 100, 100, now, nil)
				ps.Done(s)
			}
		})
	}
}

// BenchmarkDue is the cost of asking how soon a sample is due anywhere in the plans (the disk
// tier's question), the first time after a plan of 4,000,000 entries is set, and after.
func BenchmarkDue(b *testing.B) {
	const n = 4_000_000
	ps := NewPlans(256, 4096, 0)
	entries := permutation(n, 2)
	b.Run("first", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			ps.Set(DefaultPlan, entries, false)
			b.StartTimer()
			ps.Due(int(entries[n/2]))
		}
	})
	b.Run("after", func(b *testing.B) {
		for i := range b.N {
			ps.Due(int(entries[i%n]))
		}
	})
}

// BenchmarkApply sets (replace) a plan of 4,000,000 entries, or appends one to a plan of as many, while 2 readers read their
// way through it, and reports the time the Set took (ns/op) and the longest any reader's
// Observe or Done waited meanwhile (max-wait-ms).
func BenchmarkApply(b *testing.B) {
	const n = 4_000_000
	for _, appendPlan := range []bool{false, true} {
		name := "replace"
		if appendPlan {
			name = "append"
		}
		b.Run(name, func(b *testing.B) {
			ps := NewPlans(256, 4096, 0)
			epochs := [2][]int32{permutation(n, 3), permutation(n, 4)}
			ps.Set(DefaultPlan, epochs[0], false)
			rs := readers.Start(2, 100*time.Microsecond, func(i int) error { // about 10,000 reads a second each
				s := int(epochs[0][i%n])
				ps.Observe(s, 100, 100, time.Now(), nil)
				ps.Done(s)
				ps.DueInHorizon(s)
				ps.Due(s)
				return nil
			})
			time.Sleep(20 * time.Millisecond)
			rs.Reset()
			b.ResetTimer()
			for i := range b.N {
				if appendPlan { // an epoch in the plan, and the next appended behind it
					b.StopTimer()
					ps.Set(DefaultPlan, epochs[0], false)
					b.StartTimer()
				}
				ps.Set(DefaultPlan, epochs[(i+1)%2], appendPlan)
				ps.Due(int(epochs[0][i%n])) // whatever the Set leaves to the first question
			}
			b.StopTimer()
			longest, _ := rs.Stop()
			b.ReportMetric(float64(longest)/1e6, "max-wait-ms")
		})
	}
}

func itoa(n int) string {
	switch {
	case n >= 1_000_000:
		return fmtInt(n/1_000_000) + "M"
	case n >= 1_000:
		return fmtInt(n/1_000) + "k"
	}
	return fmtInt(n)
}

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkUpcoming is the prefetch loop's question after each read (what to keep ready, the
// cache's Want), with Plans' lock held throughout, for horizons of 100 and 13,000 samples (the
// latter a 32 GiB cache of 2.4 MB samples), over a plan of 4,000,000 entries.
func BenchmarkUpcoming(b *testing.B) {
	entries := permutation(4_000_000, 5)
	for _, depth := range []int{100, 13_000} {
		b.Run(itoa(depth), func(b *testing.B) {
			ps := NewPlans(256, depth+256, 0)
			ps.Set(DefaultPlan, entries, false)
			dst := make([]int, 0, depth)
			b.ResetTimer()
			for range b.N {
				dst = ps.Upcoming(dst[:0], depth)
			}
		})
	}
}

// BenchmarkObserveAbandoned is BenchmarkObserve's read with 1,000 plans of 20,000 entries
// written beside the one in use and left idle (jobs that wrote their plan and went away).
func BenchmarkObserveAbandoned(b *testing.B) {
	const n = 40_000
	ps := NewPlans(256, 4096, 20*time.Millisecond)
	entries := permutation(n, 1)
	abandon(ps, 1000, 20_000, n, nil)
	time.Sleep(50 * time.Millisecond) // they go idle
	ps.Set(DefaultPlan, entries, false)
	b.ResetTimer()
	for i := range b.N {
		s := int(entries[i%n])
		ps.Observe(s, 100, 100, time.Now(), nil)
		ps.Done(s)
	}
}
