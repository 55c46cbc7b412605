package cache

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// permanent is the rule the tests give the cache: only errSampleDamaged is the sample's own.
var errSampleDamaged = errors.New("damaged sample")

func permanent(err error) bool { return errors.Is(err, errSampleDamaged) }

// TestTransientFailure: a load that fails with an error that is not permanent (descriptors short)
// fails the read waiting for it, but is not recorded: OnFail is not told, Failed says nothing,
// and the next read loads the sample again and gets it. Stats counts the transient failure apart
// from Failed.
func TestTransientFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		f.fail[7] = syscall.EMFILE
		told := 0
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 4, Workers: 1, Load: f.load, Permanent: permanent,
			OnFail: func(int, error) { told++ }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		if _, _, err := c.Get(context.Background(), 7); !errors.Is(err, syscall.EMFILE) {
			t.Fatalf("Get(7) while descriptors are short: %v, want EMFILE", err)
		}
		if err := c.Failed(7); err != nil || len(c.Failures()) != 0 || told != 0 {
			t.Errorf("a transient failure recorded: Failed %v, failures %v, OnFail told %d times", err, c.Failures(), told)
		}
		if st := c.Stats(); st.Failed != 0 || st.Transient != 1 {
			t.Errorf("stats count %d failed, %d transient; want 0 and 1", st.Failed, st.Transient)
		}
		f.mu.Lock()
		delete(f.fail, 7)
		f.mu.Unlock()
		if get(t, c, 7) || f.count(7) != 2 {
			t.Errorf("sample 7 loaded %d times, want twice", f.count(7))
		}
		// The sample's own damage is still recorded, once.
		f.mu.Lock()
		f.fail[8] = errSampleDamaged
		f.mu.Unlock()
		for range 2 {
			if _, _, err := c.Get(context.Background(), 8); !errors.Is(err, errSampleDamaged) {
				t.Fatalf("Get(8): %v", err)
			}
		}
		if st := c.Stats(); f.count(8) != 1 || c.Failed(8) == nil || st.Failed != 1 || st.Transient != 1 || told != 1 {
			t.Errorf("damaged sample loaded %d times, Failed %v, stats %d failed %d transient, OnFail told %d; want 1, recorded, 1, 1, 1",
				f.count(8), c.Failed(8), st.Failed, st.Transient, told)
		}
	})
}

// TestTransientPrefetchBackoff: a sample the plan wants whose prefetch fails transiently is not
// prefetched again at once, however often the cache is kicked: it waits retryMin, then twice as
// long after each further failure, up to retryMax; once it loads, it is held as any other. A read
// of it does not wait for the back-off.
func TestTransientPrefetchBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		f.fail[3] = syscall.EIO
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: MinCapacity(1) + 2, Workers: 1, Load: f.load, Permanent: permanent,
			Want: func(dst []int, n int) []int { return append(dst, 3) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		kicks := func() { // a reader's pace: kicks come while the sample backs off
			for range 20 {
				c.Kick()
				synctest.Wait()
			}
		}
		kicks()
		if n := f.count(3); n != 1 {
			t.Fatalf("sample 3 loaded %d times before its first back-off ended, want once", n)
		}
		// Each wait is twice the last: 100 ms, 200 ms, 400 ms.
		for i, wait := range []time.Duration{retryMin, 2 * retryMin, 4 * retryMin} {
			time.Sleep(wait - time.Millisecond)
			kicks()
			if n := f.count(3); n != i+1 {
				t.Fatalf("sample 3 loaded %d times before back-off %d ended, want %d", n, i+1, i+1)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if n := f.count(3); n != i+2 {
				t.Fatalf("sample 3 loaded %d times after back-off %d, want %d", n, i+1, i+2)
			}
		}
		// A read tries again at once, whatever the back-off.
		if _, _, err := c.Get(context.Background(), 3); !errors.Is(err, syscall.EIO) || f.count(3) != 5 {
			t.Fatalf("Get(3) while backing off: %v after %d loads, want EIO after 5", err, f.count(3))
		}
		// The back-off is bounded.
		for range 20 {
			time.Sleep(retryMax)
			synctest.Wait()
		}
		if n := f.count(3); n < 5+18 || n > 5+22 {
			t.Errorf("sample 3 loaded %d times in 20 of the longest back-offs after 5 loads, want about 25", n)
		}
		f.mu.Lock()
		delete(f.fail, 3)
		f.mu.Unlock()
		time.Sleep(retryMax)
		synctest.Wait()
		if _, n := c.ReadyAhead([]int{3}); n != 1 {
			t.Fatal("sample 3 not prefetched once its loads succeed")
		}
		loads := f.count(3)
		kicks()
		if f.count(3) != loads || c.Stats().Failed != 0 {
			t.Errorf("a ready sample loaded again, or a failure recorded: %+v", c.Stats())
		}
	})
}

// TestTransientRecordBounded: the back-offs of samples that failed transiently long ago (the
// plan moved on, and nobody read them again) are not kept for the life of the cache.
func TestTransientRecordBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newLoader()
		c, err := New(Options{SampleBytes: sampleBytes, Capacity: 4, Workers: 1, Load: f.load, Permanent: permanent})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		fail := func(first, n int) {
			for s := first; s < first+n; s++ {
				f.mu.Lock()
				f.fail[s] = syscall.EIO
				f.mu.Unlock()
				if _, _, err := c.Get(context.Background(), s); !errors.Is(err, syscall.EIO) {
					t.Fatalf("Get(%d): %v", s, err)
				}
				<-f.began
			}
		}
		for round := range 10 {
			fail(round*1000, 1000)
			time.Sleep(2 * retryMax) // every back-off so far ended long ago
		}
		c.mu.Lock()
		held := len(c.retry)
		c.mu.Unlock()
		if held > 2500 {
			t.Errorf("%d back-offs held after 10,000 samples failed transiently, in rounds far apart; want those of about the last round", held)
		}
	})
}
