package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const sampleBytes = 4096

// filler fills sample s with byte(s) and counts its calls; gate, when set, holds fills of the
// samples it names until closed.
type filler struct {
	mu    sync.Mutex
	calls map[int]int
	gate  map[int]chan struct{}
	fail  map[int]error
	began chan int
}

func newFiller() *filler {
	return &filler{calls: map[int]int{}, gate: map[int]chan struct{}{}, fail: map[int]error{}, began: make(chan int, 100)}
}

func (f *filler) fill(ctx context.Context, s int, buf []byte) error {
	f.mu.Lock()
	f.calls[s]++
	g, err := f.gate[s], f.fail[s]
	f.mu.Unlock()
	f.began <- s
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	if len(buf) != sampleBytes {
		return errors.New("wrong buffer size")
	}
	for i := range buf {
		buf[i] = byte(s)
	}
	return nil
}

func (f *filler) count(s int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[s]
}

func newCache(t *testing.T, f *filler, capacity, workers int, nextUse func(int) int, want func([]int) []int) *Cache {
	t.Helper()
	c, err := New(Options{SampleBytes: sampleBytes, Capacity: capacity, Workers: workers, Fill: f.fill, NextUse: nextUse, Want: want})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func get(t *testing.T, c *Cache, s int) bool {
	t.Helper()
	h, hit, err := c.Get(context.Background(), s)
	if err != nil {
		t.Fatalf("Get(%d): %v", s, err)
	}
	if b := h.Bytes(); len(b) != sampleBytes || b[0] != byte(s) || b[sampleBytes-1] != byte(s) {
		t.Fatalf("Get(%d): wrong bytes", s)
	}
	h.Release()
	return hit
}

func TestGetDecodesOnce(t *testing.T) {
	f := newFiller()
	c := newCache(t, f, 4, 2, nil, nil)
	if get(t, c, 3) || !get(t, c, 3) {
		t.Error("first Get should miss and the second hit")
	}
	// Many readers at once: one decode.
	f.gate[9] = make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { get(t, c, 9) })
	}
	<-f.began // sample 3
	<-f.began // sample 9, once
	time.Sleep(20 * time.Millisecond)
	close(f.gate[9])
	wg.Wait()
	if f.count(3) != 1 || f.count(9) != 1 {
		t.Errorf("decodes: sample 3 %d times, sample 9 %d times; want once each", f.count(3), f.count(9))
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 9 || st.Decoded != 2 || st.Demand != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestBoundAndEviction(t *testing.T) {
	f := newFiller()
	c := newCache(t, f, 3, 1, nil, nil)
	for s := range 10 {
		get(t, c, s)
	}
	st := c.Stats()
	if c.allocated != 3 || st.Used != 3 || st.Evicted != 7 {
		t.Errorf("allocated %d buffers, %d used, %d evicted; want 3, 3, 7", c.allocated, st.Used, st.Evicted)
	}
	// LRU: 7, 8, 9 are cached; touching 7 makes 8 the next to go.
	get(t, c, 7)
	get(t, c, 20)
	if !get(t, c, 7) || !get(t, c, 9) || get(t, c, 8) {
		t.Error("eviction did not follow recency")
	}
}

func TestPinnedNeverEvicted(t *testing.T) {
	f := newFiller()
	c := newCache(t, f, 2, 1, nil, nil)
	h0, _, err := c.Get(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s < 6; s++ {
		get(t, c, s) // each evicts the previous one, never 0
	}
	if b := h0.Bytes(); b[0] != 0 || b[100] != 0 {
		t.Fatal("pinned sample's bytes changed")
	}
	// Capacity 2, both pinned: a third sample waits until one is released.
	h5, _, _ := c.Get(context.Background(), 5)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Get(ctx, 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with every buffer pinned: %v, want to wait until the deadline", err)
	}
	done := make(chan bool)
	go func() { done <- get(t, c, 6) }()
	time.Sleep(20 * time.Millisecond)
	h5.Release()
	<-done
	h0.Release()
}

func TestPlanAwareEviction(t *testing.T) {
	f := newFiller()
	var mu sync.Mutex
	due := map[int]int{} // sample -> plan distance
	nextUse := func(s int) int {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := due[s]; ok {
			return d
		}
		return -1
	}
	c := newCache(t, f, 3, 1, nextUse, nil)
	mu.Lock()
	due[1], due[2] = 5, 1
	mu.Unlock()
	for _, s := range []int{1, 2, 3} {
		get(t, c, s)
	}
	get(t, c, 4) // 3 is not due: it goes, though 1 is older
	if !get(t, c, 1) || !get(t, c, 2) {
		t.Error("a sample the plan needs was evicted before one it does not")
	}
	get(t, c, 5) // all due now (4 is not: goes) ...
	mu.Lock()
	due[5] = 2
	mu.Unlock()
	get(t, c, 6) // ... everything due: the one due last (1, at 5) goes
	if !get(t, c, 2) || !get(t, c, 5) || get(t, c, 1) {
		t.Error("want the sample due last evicted")
	}
}

func TestPrefetch(t *testing.T) {
	f := newFiller()
	var mu sync.Mutex
	plan := []int{10, 11, 12, 13, 14}
	pos := 0
	due := func(s int) int {
		mu.Lock()
		defer mu.Unlock()
		for i := pos; i < len(plan); i++ {
			if plan[i] == s {
				return i - pos
			}
		}
		return -1
	}
	want := func(dst []int) []int {
		mu.Lock()
		defer mu.Unlock()
		return append(dst, plan[pos:]...)
	}
	c := newCache(t, f, 3, 2, due, want)
	c.Kick()
	waitFor(t, func() bool { st := c.Stats(); return st.Ready == 3 })
	if f.count(13) != 0 {
		t.Error("prefetched past the capacity")
	}
	for _, s := range []int{10, 11} {
		if !get(t, c, s) {
			t.Errorf("sample %d not prefetched", s)
		}
		mu.Lock()
		pos++
		mu.Unlock()
		c.Kick()
	}
	waitFor(t, func() bool { _, n := c.ReadyAhead([]int{12, 13, 14}); return n == 3 })
	for _, s := range []int{12, 13, 14} {
		if !get(t, c, s) {
			t.Errorf("sample %d not prefetched", s)
		}
	}
	st := c.Stats()
	if st.Prefetched != 5 || st.Demand != 0 || st.EvictedCold != 0 {
		t.Errorf("stats %+v", st)
	}
	// A new plan: queued prefetches of the old one are dropped.
	mu.Lock()
	plan, pos = []int{30, 31, 32, 33}, 0
	mu.Unlock()
	f.gate[30], f.gate[31] = make(chan struct{}), make(chan struct{})
	c.Kick()
	waitFor(t, func() bool { return c.Stats().Queued == 1 })
	mu.Lock()
	plan = []int{40}
	mu.Unlock()
	c.Kick()
	waitFor(t, func() bool { return c.Stats().Cancelled >= 1 })
	close(f.gate[30])
	close(f.gate[31])
}

func TestDemandAheadOfPrefetch(t *testing.T) {
	f := newFiller()
	f.gate[1] = make(chan struct{})
	f.gate[2] = make(chan struct{})
	c := newCache(t, f, 8, 1, func(int) int { return 0 }, func(dst []int) []int { return append(dst, 1, 2) })
	c.Kick()
	if s := <-f.began; s != 1 {
		t.Fatalf("first prefetch %d", s)
	}
	// One worker, busy with prefetch 1; sample 2 queued behind it. A reader's miss starts at once.
	done := make(chan bool)
	go func() { done <- get(t, c, 7) }()
	select {
	case s := <-f.began:
		if s != 7 {
			t.Fatalf("started %d before the reader's miss", s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a reader's miss waited for prefetch work")
	}
	<-done
	close(f.gate[1])
	close(f.gate[2])
	waitFor(t, func() bool { return c.Stats().Decoded == 3 })
}

func TestFailedSample(t *testing.T) {
	f := newFiller()
	f.fail[7] = errors.New("corrupt video")
	c := newCache(t, f, 2, 1, nil, nil)
	for range 3 {
		if _, _, err := c.Get(context.Background(), 7); err == nil || err.Error() != "corrupt video" {
			t.Fatalf("Get(7): %v", err)
		}
	}
	if f.count(7) != 1 || c.Stats().Failed != 1 || c.Failed(7) == nil {
		t.Errorf("failed sample decoded %d times", f.count(7))
	}
	get(t, c, 8) // the failure holds no buffer
	get(t, c, 9)
}

func TestClose(t *testing.T) {
	f := newFiller()
	f.gate[1] = make(chan struct{})
	c := newCache(t, f, 2, 1, nil, nil)
	errc := make(chan error)
	go func() { _, _, err := c.Get(context.Background(), 1); errc <- err }()
	<-f.began
	c.Close()
	if err := <-errc; err == nil {
		t.Error("Get of a sample being decoded at Close succeeded")
	}
	if _, _, err := c.Get(context.Background(), 2); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	var n atomic.Int32
	for !cond() {
		if n.Add(1) > 500 {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
