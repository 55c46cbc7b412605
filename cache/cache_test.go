package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const sampleBytes = 4096

// loader fills sample s with byte(s) and counts its calls; gate, when set, holds loads of the
// samples it names until closed.
type loader struct {
	mu    sync.Mutex
	calls map[int]int
	gate  map[int]chan struct{}
	fail  map[int]error
	began chan int
}

func newLoader() *loader {
	return &loader{calls: map[int]int{}, gate: map[int]chan struct{}{}, fail: map[int]error{}, began: make(chan int, 100)}
}

func (f *loader) load(ctx context.Context, s int, buf []byte) error {
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

func (f *loader) count(s int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[s]
}

// newCache makes a cache that prefetches what want says, however small its capacity.
func newCache(t *testing.T, f *loader, capacity, workers int, nextUse func(int) int, want func([]int) []int) *Cache {
	t.Helper()
	var wantN func([]int, int) []int
	if want != nil {
		wantN = func(dst []int, n int) []int { return want(dst) }
	}
	c, err := New(Options{SampleBytes: sampleBytes, Capacity: capacity, Workers: workers, Load: f.load, NextUse: nextUse, Want: wantN})
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

func TestGetLoadsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		c := newCache(t, f, 4, 2, nil, nil)
		if get(t, c, 3) || !get(t, c, 3) {
			t.Error("first Get should miss and the second hit")
		}
		// Many readers at once: one load.
		f.gate[9] = make(chan struct{})
		hits := make(chan bool, 8)
		for range 8 {
			go func() { hits <- get(t, c, 9) }()
		}
		synctest.Wait() // every reader waits for the one load
		if f.count(9) != 1 {
			t.Errorf("sample 9 loading %d times at once", f.count(9))
		}
		close(f.gate[9])
		for range 8 {
			if <-hits {
				t.Error("a reader that waited for the load counts as a hit")
			}
		}
		if f.count(3) != 1 || f.count(9) != 1 {
			t.Errorf("loads: sample 3 %d times, sample 9 %d times; want once each", f.count(3), f.count(9))
		}
		if st := c.Stats(); st.Loaded != 2 || st.Demand != 2 || st.Prefetched != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestBoundAndEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
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
	})
}

func TestPinnedNeverEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
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
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Get found a buffer while every buffer was pinned")
		default:
		}
		h5.Release()
		<-done
		h0.Release()
	})
}

// dueMap is how soon each sample is due in a test's plan (absent: not due), changed by the test
// while the cache asks.
type dueMap struct {
	mu  sync.Mutex
	due map[int]int
}

func newDueMap(due map[int]int) *dueMap { return &dueMap{due: due} }

// nextUse is the cache's NextUse.
func (d *dueMap) nextUse(s int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.due[s]; ok {
		return n
	}
	return -1
}

// with runs change with the map locked; what change touches beside it is guarded too.
func (d *dueMap) with(change func(due map[int]int)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	change(d.due)
}

func TestPlanAwareEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		d := newDueMap(map[int]int{}) // sample -> plan distance
		c := newCache(t, f, 3, 1, d.nextUse, nil)
		d.with(func(due map[int]int) { due[1], due[2] = 5, 1 })
		for _, s := range []int{1, 2, 3} {
			get(t, c, s)
		}
		get(t, c, 4) // 3 is not due: it goes, though 1 is older
		if !get(t, c, 1) || !get(t, c, 2) {
			t.Error("a sample the plan needs was evicted before one it does not")
		}
		get(t, c, 5) // all due now (4 is not: goes) ...
		d.with(func(due map[int]int) { due[5] = 2 })
		get(t, c, 6) // ... everything due: the one due last (1, at 5) goes
		if !get(t, c, 2) || !get(t, c, 5) || get(t, c, 1) {
			t.Error("want the sample due last evicted")
		}
	})
}

func TestPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
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
		synctest.Wait()
		if st := c.Stats(); st.Ready != 3 || f.count(13) != 0 {
			t.Fatalf("%d ready, sample 13 loaded %d times: want the capacity filled, no further", st.Ready, f.count(13))
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
		synctest.Wait()
		if _, n := c.ReadyAhead([]int{12, 13, 14}); n != 3 {
			t.Fatalf("%d of the rest of the plan ready, want 3", n)
		}
		for _, s := range []int{12, 13, 14} {
			if !get(t, c, s) {
				t.Errorf("sample %d not prefetched", s)
			}
		}
		if st := c.Stats(); st.Prefetched != 5 || st.Demand != 0 || st.EvictedUnread != 0 {
			t.Errorf("stats %+v", st)
		}
		// A new plan: queued prefetches of the old one are dropped.
		mu.Lock()
		plan, pos = []int{30, 31, 32, 33}, 0
		mu.Unlock()
		f.gate[30], f.gate[31] = make(chan struct{}), make(chan struct{})
		c.Kick()
		synctest.Wait()
		if st := c.Stats(); st.Queued != 1 || st.Loading != 2 {
			t.Fatalf("%d queued, %d loading; want 32 queued behind 30 and 31", st.Queued, st.Loading)
		}
		mu.Lock()
		plan = []int{40}
		mu.Unlock()
		c.Kick()
		synctest.Wait()
		c.mu.Lock()
		_, has32 := c.entries[32]
		e40 := c.entries[40]
		c.mu.Unlock()
		if st := c.Stats(); st.Cancelled != 1 || has32 || e40 == nil || e40.state != queued {
			t.Errorf("%d cancelled, 32 held %v, 40 %+v after the plan moved on; want 32 dropped and 40 queued in its place", st.Cancelled, has32, e40)
		}
		close(f.gate[30])
		close(f.gate[31])
	})
}

// TestPrefetchAtStart: a cache keeps ready what Want names from the moment it is made, without
// waiting to be kicked; so it asks Want (and NextUse) from then on, and whatever answers them must
// exist before the cache does.
func TestPrefetchAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		c := newCache(t, f, 8, 1, nil, func(dst []int) []int { return append(dst, 1, 2) })
		synctest.Wait()
		if _, n := c.ReadyAhead([]int{1, 2}); n != 2 {
			t.Errorf("%d of the 2 samples Want names ready, unkicked; want both", n)
		}
	})
}

// TestPrefetchMargin: a prefetch takes the buffer of a ready sample only when that sample is
// due at least prefetchMargin times as late; a reader's miss takes it regardless.
func TestPrefetchMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		d := newDueMap(map[int]int{1: 300, 2: 500})
		var want []int // guarded by d's lock too
		wantFn := func(dst []int) []int {
			d.with(func(map[int]int) { dst = append(dst, want...) })
			return dst
		}
		c := newCache(t, f, 2, 1, d.nextUse, wantFn)
		d.with(func(map[int]int) { want = []int{1, 2} })
		c.Kick()
		synctest.Wait()
		// 3 is due sooner than 1 and 2, but not half as soon as either: they stay.
		d.with(func(due map[int]int) { due[3], want = 260, []int{3, 1, 2} })
		c.Kick()
		synctest.Wait()
		if f.count(3) != 0 || c.Stats().EvictedUnread != 0 {
			t.Fatalf("sample 3 (due in 260) loaded %d times in place of one due in 300 or 500", f.count(3))
		}
		// 4, due in 200, takes the place of 2 (due in 500), not 1 (due in 300).
		d.with(func(due map[int]int) { due[4], want = 200, []int{4, 3, 1, 2} })
		c.Kick()
		synctest.Wait()
		if f.count(4) != 1 || !get(t, c, 1) || get(t, c, 2) {
			t.Error("want sample 2, due more than twice as late as 4, evicted for it, and 1 kept")
		}
	})
}

func TestDemandAheadOfPrefetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
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
		synctest.Wait()
		select {
		case s := <-f.began:
			if s != 7 {
				t.Fatalf("started %d before the reader's miss", s)
			}
		default:
			t.Fatal("a reader's miss waited for prefetch work")
		}
		<-done
		close(f.gate[1])
		close(f.gate[2])
		synctest.Wait()
		if st := c.Stats(); st.Loaded != 3 {
			t.Errorf("%d loaded, want 3", st.Loaded)
		}
	})
}

// TestFailedSample: a sample whose load failed is loaded once, fails every Get at once with its
// error, is listed by Failures, and OnFail is told of it once, before any Get fails.
func TestFailedSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		bad := errors.New("corrupt video")
		f.fail[7] = bad
		told := make(chan error, 10)
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 2, Workers: 1, Load: f.load,
			OnFail: func(s int, err error) { told <- fmt.Errorf("sample %d: %w", s, err) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		for range 3 {
			if _, _, err := c.Get(context.Background(), 7); err != bad {
				t.Fatalf("Get(7): %v", err)
			}
		}
		if f.count(7) != 1 || c.Stats().Failed != 1 || c.Failed(7) != bad || !maps.Equal(c.Failures(), map[int]error{7: bad}) {
			t.Errorf("failed sample loaded %d times; failures %v", f.count(7), c.Failures())
		}
		if n := len(told); n != 1 { // told before Get failed
			t.Errorf("OnFail told %d times, want once", n)
		} else if err := <-told; err.Error() != "sample 7: corrupt video" {
			t.Errorf("OnFail told %v", err)
		}
		get(t, c, 8) // the failure holds no buffer
		get(t, c, 9)
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		f.gate[1] = make(chan struct{})
		c := newCache(t, f, 2, 1, nil, nil)
		errc := make(chan error)
		go func() { _, _, err := c.Get(context.Background(), 1); errc <- err }()
		<-f.began
		c.Close()
		if err := <-errc; err == nil {
			t.Error("Get of a sample being loaded at Close succeeded")
		}
		if _, _, err := c.Get(context.Background(), 2); !errors.Is(err, ErrClosed) {
			t.Errorf("Get after Close: %v", err)
		}
	})
}

func TestDepth(t *testing.T) {
	f := newLoader()
	for _, tc := range []struct{ capacity, workers, prefetch, want int }{
		{MinCapacity(2), 2, 0, 1}, {100, 2, 0, 100 - reserve(2)}, {100, 2, 10, 10}, {100, 2, 500, 100 - reserve(2)}, {3, 2, 0, 0},
	} {
		opts := Options{SampleBytes: sampleBytes, Capacity: tc.capacity, Workers: tc.workers, Prefetch: tc.prefetch, Load: f.load}
		c, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if got, before := c.Depth(), opts.Depth(); got != tc.want || before != tc.want {
			t.Errorf("capacity %d, %d workers, prefetch %d: depth %d (%d from the options alone), want %d",
				tc.capacity, tc.workers, tc.prefetch, got, before, tc.want)
		}
		c.Close()
	}
}

// fetcher is a test's Fetch: it makes the samples in has (filling them as loader does), and
// counts its calls.
type fetcher struct {
	mu    sync.Mutex
	has   map[int]bool
	calls map[int]int
}

func (f *fetcher) fetch(ctx context.Context, s int, buf []byte) Fetched {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[s]++
	if !f.has[s] {
		return Fetched{}
	}
	for i := range buf {
		buf[i] = byte(s)
	}
	return Fetched{OK: true}
}

func (f *fetcher) count(s int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[s]
}

// TestFetchLane: what Fetch makes is made ahead of the reader while every Load is busy (with
// the loads of samples queued before it), and a reader's miss that Fetch makes does not wait for
// them either; what Fetch does not make goes to Load, once, and a reader waiting for it comes
// before prefetches there.
func TestFetchLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ld := newLoader()
		for _, s := range []int{1, 2, 3, 20} {
			ld.gate[s] = make(chan struct{})
		}
		ft := &fetcher{has: map[int]bool{10: true, 12: true, 14: true, 16: true}, calls: map[int]int{}}
		plan := []int{1, 2, 10, 3, 12, 14}
		due := func(s int) int {
			for i, p := range plan {
				if p == s {
					return i
				}
			}
			return -1
		}
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 16, Workers: 1, Load: ld.load, Fetch: ft.fetch, NextUse: due,
			Want: func(dst []int, n int) []int { return append(dst, plan...) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		synctest.Wait()
		// The one load worker holds sample 1; 2 and 3 wait behind it. 10, 12 and 14 are made.
		st := c.Stats()
		if st.Fetched != 3 || st.FetchMissed != 3 || ld.count(1) != 1 || ld.count(2) != 0 || ld.count(3) != 0 {
			t.Fatalf("fetched %d, passed to Load %d, loads of 1, 2, 3: %d, %d, %d; want 3, 3, and 1 alone loading",
				st.Fetched, st.FetchMissed, ld.count(1), ld.count(2), ld.count(3))
		}
		for _, s := range []int{10, 12, 14} {
			if !get(t, c, s) {
				t.Errorf("sample %d, which Fetch makes, was not ready while the loads were busy", s)
			}
			if ft.count(s) != 1 {
				t.Errorf("sample %d fetched %d times", s, ft.count(s))
			}
		}
		// A reader's miss that Fetch makes, while the loads are still busy.
		done := make(chan bool)
		go func() { done <- get(t, c, 16) }()
		synctest.Wait()
		select {
		case hit := <-done:
			if hit {
				t.Error("sample 16, never prefetched, counted as a hit")
			}
		default:
			t.Fatal("a reader's miss that Fetch makes waited for the loads")
		}
		// A reader's miss that Fetch does not make is loaded before the queued prefetches 2 and 3.
		go func() { done <- get(t, c, 20) }()
		synctest.Wait()
		close(ld.gate[1])
		if s := <-ld.began; s != 1 {
			t.Fatalf("load %d began first", s)
		}
		if s := <-ld.began; s != 20 {
			t.Errorf("load %d began after 1, want the reader's miss 20 first", s)
		}
		for _, s := range []int{2, 3, 20} {
			close(ld.gate[s])
		}
		<-done
		synctest.Wait()
		if ft.count(20) != 1 || ld.count(20) != 1 || ld.count(10) != 0 {
			t.Errorf("sample 20 fetched %d and loaded %d times, 10 loaded %d times; want 1, 1, 0", ft.count(20), ld.count(20), ld.count(10))
		}
		if st := c.Stats(); st.Loaded != 8 || st.Fetched != 4 || st.Demand != 2 || st.Prefetched != 6 {
			t.Errorf("stats %+v: want 8 loaded, 4 of them fetched, 2 loads for readers and 6 prefetches", st)
		}
	})
}

// TestReplanned: after a plan goes (or is rewritten), every sample's due may have moved; once
// told (Replanned), the cache evicts a sample no plan wants any more before one still due,
// however its place in the eviction order was stale.
func TestReplanned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		d := newDueMap(map[int]int{})
		c := newCache(t, f, 40, 1, d.nextUse, nil)
		d.with(func(due map[int]int) {
			for s := range 40 {
				due[s] = 50 + 50*(s/20) // 0-19 due in 50 ms, 20-39 in 100 ms
			}
		})
		for s := range 40 {
			get(t, c, s)
		}
		d.with(func(due map[int]int) { // the plan that wanted 0-19 went
			for s := range 20 {
				delete(due, s)
			}
		})
		c.Replanned()
		synctest.Wait()
		for s := 40; s < 45; s++ {
			get(t, c, s) // a miss: a sample must go
		}
		for s := 20; s < 40; s++ {
			if h := c.Peek(s); h == nil {
				t.Errorf("sample %d, still due, evicted while samples no plan wants were held", s)
			} else {
				h.Release()
			}
		}
	})
}

// TestReaderOfMissedFetchKept: a reader waiting for a sample whose Fetch was under way when it
// came, and missed, gets the sample from Load, though no plan wants it any more (the reader
// itself moved the plan on): the prefetch pass that follows does not drop it under the reader.
func TestReaderOfMissedFetchKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ld := newLoader()
		ld.gate[1] = make(chan struct{}) // holds the one load worker
		fetchGate := make(chan struct{})
		fetch := func(ctx context.Context, s int, buf []byte) Fetched {
			if s == 5 {
				<-fetchGate
			}
			return Fetched{} // the tier has nothing
		}
		var mu sync.Mutex
		plan := []int{1, 5}
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 16, Workers: 1, Load: ld.load, Fetch: fetch,
			NextUse: func(s int) int { return s },
			Want: func(dst []int, n int) []int {
				mu.Lock()
				defer mu.Unlock()
				return append(dst, plan...)
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		synctest.Wait() // 1 loading, 5's Fetch under way
		errc := make(chan error, 1)
		go func() {
			h, _, err := c.Get(context.Background(), 5)
			if err == nil {
				h.Release()
			}
			errc <- err
		}()
		synctest.Wait() // the reader waits for 5
		mu.Lock()
		plan = nil // read: the plans want neither any more
		mu.Unlock()
		close(fetchGate) // 5's Fetch misses: it goes to Load, behind 1
		synctest.Wait()
		c.Kick() // a prefetch pass
		synctest.Wait()
		close(ld.gate[1])
		if err := <-errc; err != nil {
			t.Fatalf("reader of sample 5: %v, want its bytes", err)
		}
	})
}

// lender is a test's Fetch that lends memory of its own for every sample, and counts what it
// lent and what came back.
type lender struct {
	mu       sync.Mutex
	out      map[int]int // lent and not yet released, by sample
	released int
}

func (l *lender) fetch(ctx context.Context, s int, buf []byte) Fetched {
	mem := make([]byte, sampleBytes)
	for i := range mem {
		mem[i] = byte(s)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out[s]++
	return Fetched{OK: true, Lent: &Lent{Bytes: mem, Release: func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.out[s]--
		if l.out[s] < 0 {
			panic("lent memory released twice")
		}
		l.released++
	}}}
}

func (l *lender) outstanding() (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.out {
		n += k
	}
	return n
}

// TestLentMemory: a sample whose Fetch lent its bytes is served from them, not from the buffer;
// they are handed back once, when the sample is evicted and never while a reader holds them,
// and at Close; the buffers still number at most Capacity, and the samples kept lent at most
// MaxLent: beyond, what is lent is copied and handed back at once.
func TestLentMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &lender{out: map[int]int{}}
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 3, Workers: 1, Load: newLoader().load, Fetch: l.fetch, MaxLent: 2})
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := c.Get(context.Background(), 7)
		if err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.Lent != 1 || st.Fetched != 1 {
			t.Fatalf("stats after one fetch: %d lent, %d fetched; want 1, 1", st.Lent, st.Fetched)
		}
		// Readers of other samples evict everything that is not held: 7 stays, and its memory.
		for s := range 10 {
			if s != 7 {
				get(t, c, s)
			}
		}
		if b := h.Bytes(); b[0] != 7 || b[sampleBytes-1] != 7 {
			t.Fatal("a held sample's lent bytes changed")
		}
		if l.out[7] != 1 {
			t.Fatalf("sample 7's lent memory released while held (%d out)", l.out[7])
		}
		if n := l.outstanding(); n > 2 {
			t.Errorf("%d samples' memory kept lent at once; MaxLent is 2", n)
		}
		h.Release()
		for s := 10; s < 14; s++ {
			get(t, c, s)
		}
		if l.out[7] != 0 {
			t.Error("sample 7's lent memory kept after it was evicted")
		}
		st := c.Stats()
		if st.Allocated > 3 || st.Lent != 2 || st.Ready != 3 {
			t.Errorf("%d buffers allocated (capacity 3), %d lent of %d ready; want 2 lent of 3", st.Allocated, st.Lent, st.Ready)
		}
		for s := 11; s < 14; s++ { // lent or copied, the bytes are the sample's
			if !get(t, c, s) {
				t.Errorf("sample %d not ready", s)
			}
		}
		c.Close()
		if n := l.outstanding(); n != 0 {
			t.Errorf("%d lent memories not handed back at Close", n)
		}
		if l.released != 14 {
			t.Errorf("%d handed back; 14 were lent", l.released)
		}
	})
}
