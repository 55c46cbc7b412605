package cache

import (
	"context"
	"runtime"
	"sync"
	"testing"
)

// BenchmarkPrefetchPass is one pass of the prefetch loop over what the plan wants (Want's
// answer, every sample of it ready) in caches of 100 and 13,000 samples (the latter a 32 GiB
// cache of 2.4 MB samples): the work the cache's lock is held for after each kick.
func BenchmarkPrefetchPass(b *testing.B) {
	for _, capacity := range []int{100, 13_000} {
		b.Run(itoa(capacity), func(b *testing.B) {
			c, err := New(Options{SampleBytes: 64, Capacity: capacity, Workers: 1, Load: func(ctx context.Context, s int, buf []byte) error { return nil }})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			want := make([]int, c.Depth())
			for i := range want {
				want[i] = i
			}
			c.prefetch(want)
			for _, s := range want { // loaded: every pass finds them ready
				h, _, err := c.Get(context.Background(), s)
				if err != nil {
					b.Fatal(err)
				}
				h.Release()
			}
			b.ResetTimer()
			for range b.N {
				c.prefetch(want)
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// BenchmarkPrefetchDrops is a prefetch pass that drops half of the queued prefetches, those
// behind the half the plan still wants (a plan cut short), in caches of 1,000 and 13,000
// queued samples: work done holding the cache's lock.
func BenchmarkPrefetchDrops(b *testing.B) {
	for _, queued := range []int{1_000, 13_000} {
		b.Run(itoa(queued), func(b *testing.B) {
			var mu sync.Mutex
			full := make([]int, queued)
			for i := range full {
				full[i] = i
			}
			plan := full
			c, err := New(Options{SampleBytes: 64, Capacity: queued + reserve(1), Workers: 1,
				Load: func(ctx context.Context, s int, buf []byte) error { <-ctx.Done(); return ctx.Err() },
				Want: func(dst []int, n int) []int {
					mu.Lock()
					defer mu.Unlock()
					return append(dst, plan[:min(n, len(plan))]...)
				}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for c.Stats().Queued < queued-1 { // the pass New kicked: then no pass runs but these
				runtime.Gosched()
			}
			half := full[:queued/2]
			b.ResetTimer()
			for range b.N {
				c.prefetch(half)
				b.StopTimer()
				c.prefetch(full)
				b.StartTimer()
			}
		})
	}
}
