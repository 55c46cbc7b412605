package order

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// abandon writes k plans of n entries each (over samples [0, samples)) and leaves them; each is
// followed by a call of between (nil: none).
func abandon(ps *Plans, k, n, samples int, between func()) {
	for i := range k {
		entries := make([]int32, n)
		for j := range entries {
			entries[j] = int32((i*7919 + j*31) % samples)
		}
		ps.Set(fmt.Sprint("job-", i), entries, false)
		if between != nil {
			between()
		}
	}
}

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestPlansAbandoned: 1,000 plans written and left alone go idle, and then neither hold their
// memory (their entries and windows) nor make reads of the plan in use do more work: a read
// looks at the plans in use, not at every plan ever written.
func TestPlansAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k, n, samples = 1000, 1000, 50_000
		ps := NewPlans(8, 64, 3*time.Second)
		train := inOrder(samples)
		ps.Set("train", train, false)
		before := heapInUse()
		// The trainer reads on, 20 samples a second, while jobs write their plans, one every
		// 50 ms, and go away.
		s := 0
		read := func() {
			readAt(ps, int(train[s]), time.Now())
			s++
			time.Sleep(50 * time.Millisecond)
		}
		abandon(ps, k, n, samples, read)
		written := heapInUse()
		for range 80 {
			read()
		}
		synctest.Wait()
		after := heapInUse()
		v0 := ps.Stats().Visits
		const reads = 100
		for range reads {
			readAt(ps, int(train[s]), time.Now())
			s++
		}
		perRead := float64(ps.Stats().Visits-v0) / reads
		runtime.KeepAlive(ps)
		t.Logf("heap: %d KiB before, %d KiB with %d plans written, %d KiB once idle (%d bytes a plan); %.1f plans looked at per read",
			before>>10, written>>10, k, after>>10, (after-before)/k, perRead)
		if kept := after - before; kept > int64(k)*4096 {
			t.Errorf("%d idle plans of %d entries still hold %d KiB (%d bytes each); want under 4 KiB each", k, n, kept>>10, kept/k)
		}
		if perRead > 4 {
			t.Errorf("a read looked at %.1f plans with 1 in use and %d idle; want at most 4", perRead, k)
		}
	})
}

// TestUpcomingOfBounded: listing a plan's next samples (for each plan, at each open of the stats
// and each scrape, under the plans' lock) steps over a bounded number of entries, however long
// the plan and however few distinct samples it holds.
func TestUpcomingOfBounded(t *testing.T) {
	ps := NewPlans(8, 64, 0)
	entries := make([]int32, 100_000) // sample 0 over and over, then 1 to 9
	for i := range 9 {
		entries = append(entries, int32(i+1))
	}
	ps.Set("p", entries, false)
	got := ps.UpcomingOf("p", nil, 5)
	if w := ps.Stats().Walked; w > 64+5 {
		t.Errorf("UpcomingOf(5) stepped over %d entries of a plan of %d; want at most the horizon and 5", w, len(entries))
	}
	if len(got) == 0 || got[0] != 0 {
		t.Errorf("UpcomingOf(5) = %v; want 0 first", got)
	}
	ps.Set("q", inOrder(1000), false)
	if got := ps.UpcomingOf("q", nil, 5); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("UpcomingOf(5) of 0, 1, 2...: %v", got)
	}
}
