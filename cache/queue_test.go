package cache

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// TestPrefetchDropsLinear: a prefetch pass that drops queued prefetches (the plan was cut short)
// does work that grows with the queue, not with its square: dropping each one looks at a
// bounded number of queue entries, not the whole queue. So do readers' misses that take queued
// prefetches ahead of the rest.
func TestPrefetchDropsLinear(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		var mu sync.Mutex
		var plan []int
		c, err := New(Options{SampleBytes: 64, Capacity: n + reserve(1), Workers: 1,
			Load: func(ctx context.Context, s int, buf []byte) error { <-ctx.Done(); return ctx.Err() },
			Want: func(dst []int, k int) []int {
				mu.Lock()
				defer mu.Unlock()
				return append(dst, plan[:min(k, len(plan))]...)
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		setPlan := func(first, count int) {
			mu.Lock()
			plan = plan[:0]
			for s := first; s < first+count; s++ {
				plan = append(plan, s)
			}
			mu.Unlock()
			c.Kick()
			synctest.Wait()
		}
		setPlan(0, n)
		if st := c.Stats(); st.Queued != n-1 || st.Loading != 1 {
			t.Fatalf("%d queued, %d loading; want %d and 1", st.Queued, st.Loading, n-1)
		}
		// Readers want every other queued sample now: each moves ahead of the prefetches.
		work, moved := c.Stats().QueueWork, 0
		for s := 2; s < n; s += 2 {
			go c.Get(context.Background(), s)
			moved++
		}
		synctest.Wait()
		if w := c.Stats().QueueWork - work; w > 4*n {
			t.Errorf("moving %d queued prefetches ahead for readers looked at %d queue entries, want at most %d", moved, w, 4*n)
		}
		work = c.Stats().QueueWork
		setPlan(0, n/2) // the plan is cut short: the queued prefetches of its second half are dropped
		st := c.Stats()
		if st.Cancelled != n/4 {
			t.Fatalf("%d queued prefetches dropped, want %d", st.Cancelled, n/4)
		}
		if w := st.QueueWork - work; w > 4*n {
			t.Errorf("dropping %d queued prefetches looked at %d queue entries, want at most %d", st.Cancelled, w, 4*n)
		}
	})
}

// TestFifoRequeued: an entry taken out of a fifo and queued again, in it or in another, comes
// out once, at its latest place, not at the place it left.
func TestFifoRequeued(t *testing.T) {
	var work int64
	q, other := &fifo{work: &work}, &fifo{work: &work}
	a, b, c := &entry{sample: 1}, &entry{sample: 2}, &entry{sample: 3}
	q.push(a)
	q.push(b)
	q.remove(a)
	q.push(c)
	q.push(a) // a again, behind c
	var got []int
	for e := q.pop(); e != nil; e = q.pop() {
		got = append(got, e.sample)
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 1 || q.len() != 0 {
		t.Errorf("popped %v, %d left; want [2 3 1], none left", got, q.len())
	}
	q.push(b)
	q.remove(b)
	other.push(b) // moved on, as a prefetch to the demand queue
	if e := q.pop(); e != nil || q.len() != 0 {
		t.Errorf("q popped %v after b moved to another queue, want nothing", e)
	}
	if e := other.pop(); e != b || other.pop() != nil {
		t.Errorf("the other queue popped %v, want b once", e)
	}
}
