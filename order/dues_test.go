package order

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestDuesAfterPieces: a sample read in pieces is due now until read through, and then as its
// next entry says: not due at all when no plan has it again, not due now forever.
func TestDuesAfterPieces(t *testing.T) {
	ps := one(4, 8, 5, 9)
	now := time.Now()
	piece(ps, 5, 40, now)
	if ps.Due(5) != 0 {
		t.Errorf("Due(5) = %d part way through, want 0", ps.Due(5))
	}
	piece(ps, 5, 60, now)
	if ps.Due(5) != -1 {
		t.Errorf("Due(5) = %d once read through and in no plan again, want -1", ps.Due(5))
	}
}

// TestDuesPartWayForgotten: an access that stopped part way stops making its sample due now
// once it timed out, as readers read on.
func TestDuesPartWayForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := one(4, 8, 5, 9, 10, 11)
		piece(ps, 5, 40, time.Now())
		time.Sleep(accessTimeout + time.Second)
		read(ps, 9)
		read(ps, 10)
		if ps.Due(5) != -1 {
			t.Errorf("Due(5) = %d after its access stopped part way and timed out, want -1", ps.Due(5))
		}
	})
}

// TestDuesIdle: a plan nobody read for the idle time stops being due in what Plans publishes
// too, not only in DueInHorizon, once readers of other plans read on.
func TestDuesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, 10*time.Minute)
		ps.Set("val", []int32{1, 2, 3}, false)
		ps.Set("train", []int32{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25}, false)
		readAt(ps, 1, time.Now())
		for s := range 12 { // train's reader reads once a minute
			time.Sleep(time.Minute)
			readAt(ps, 10+s, time.Now())
		}
		synctest.Wait()
		if ps.Due(2) != -1 || ps.Due(24) < 0 {
			t.Errorf("Due(2) (an idle plan's) = %d, want -1; Due(24) (an active one's) = %d, want >= 0", ps.Due(2), ps.Due(24))
		}
	})
}

// TestDuesIdleUnread: when every plan goes idle and nobody reads any more (training over, the
// mount still up), their samples stop being due in what Plans publishes, without a read to
// start the work: eviction must not keep ranking by plans that are gone.
func TestDuesIdleUnread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, time.Minute)
		defer ps.Close()
		ps.Set("train", []int32{10, 11, 12, 13, 14, 15}, false)
		readAt(ps, 10, time.Now())
		if ps.Due(12) < 0 {
			t.Fatalf("Due(12) = %d while its plan is read, want >= 0", ps.Due(12))
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if ps.Due(12) != -1 {
			t.Errorf("Due(12) = %d two minutes after its plan went idle with nobody reading, want -1", ps.Due(12))
		}
	})
}

// TestDuesFollowPace: the dues of samples nobody read yet follow the reader's pace as it reads,
// not the pace assumed when the plan was written.
func TestDuesFollowPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, 0)
		entries := inOrder(2000)
		ps.Set("p", entries, false) // at 100 samples a second assumed
		for s := range 300 {        // read at 10 a second
			readAt(ps, s, time.Now())
			time.Sleep(100 * time.Millisecond)
		}
		synctest.Wait()
		// Entry 400 is 100 entries ahead, 10 s at the reader's pace; 500 is 20 s.
		if d4, d5 := ps.Due(400), ps.Due(500); d4 < 5000 || d5 <= d4 {
			t.Errorf("Due(400) = %d ms, Due(500) = %d ms; want about 10,000 and 20,000", d4, d5)
		}
	})
}

// TestDuesReadDuringPublish: a sample read while the dues are worked out anew (after the build
// counted the entry the read consumes, before the swap) keeps the due its read published, and
// one still being read stays due now.
func TestDuesReadDuringPublish(t *testing.T) {
	ps := one(4, 8, 5, 6, 7)
	ps.buildHook = func() {
		readAt(ps, 5, time.Now())                // through: in no plan again
		ps.Observe(6, 100, 100, time.Now(), nil) // not Done yet
	}
	ps.Set("other", []int32{9}, false)
	ps.buildHook = nil
	if ps.Due(5) != -1 || ps.Due(6) != 0 {
		t.Errorf("read during a publish: Due(5) = %d, want -1; Due(6) (being read) = %d, want 0", ps.Due(5), ps.Due(6))
	}
	ps.Done(6)
	if ps.Due(6) != -1 {
		t.Errorf("Due(6) = %d once Done, want -1", ps.Due(6))
	}
}

// TestRepublishShare: the dues are worked out anew in the background no more often than
// republishShare times the last publish's length, so that plans however long cost a bounded
// share of a core to keep fresh: with a publish taking 1 s, none in 30 s of reads at a
// moving pace (each read would start one at once, as often as once a second, otherwise).
func TestRepublishShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, 0)
		entries := inOrder(2000)
		var republished atomic.Int32
		ps.OnRepublish(func() { republished.Add(1) })
		ps.Set("p", entries, false)
		ps.mu.Lock()
		ps.publishCost = time.Second // as if the plans took a second to work out
		ps.mu.Unlock()
		for s := range 300 { // 10 a second, then 20: the pace moves
			readAt(ps, s, time.Now())
			time.Sleep(time.Duration(100-50*(s/150)) * time.Millisecond)
			synctest.Wait()
		}
		if n := republished.Load(); n != 0 {
			t.Errorf("%d republishes in 30 s after a publish of 1 s; want none before 200 s", n)
		}
	})
}

// inOrder is a plan of samples 0 to n-1, in order.
func inOrder(n int) []int32 {
	entries := make([]int32, n)
	for i := range entries {
		entries[i] = int32(i)
	}
	return entries
}

// TestDuesWhilePublishedOver: readers asking Due while plans are set back to back (each publish
// refilling the table the one before replaced) never see a table part way through its refill:
// every sample is in every plan, so every answer is a due, never -1.
func TestDuesWhilePublishedOver(t *testing.T) {
	const n = 5000
	ps := NewPlans(8, 16, 0)
	ps.Reserve(n)
	plans := [2][]int32{inOrder(n), permutation(n, 9)}
	ps.Set("p", plans[0], false)
	var stop atomic.Bool
	bad := make(chan int, 1)
	done := make(chan struct{})
	for r := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := r; !stop.Load(); i += 7 {
				if s := i % n; ps.Due(s) < 0 {
					select {
					case bad <- s:
					default:
					}
				}
			}
		}()
	}
	for i := range 300 {
		ps.Set("p", plans[i%2], false)
	}
	stop.Store(true)
	for range 4 {
		<-done
	}
	select {
	case s := <-bad:
		t.Fatalf("Due(%d) = -1 while plans holding every sample were set: a table read part way through its refill", s)
	default:
	}
}

// TestPublishReusesTables: once plans are set over and over, a publish fills the table the one
// before it replaced rather than a new array each time (16 MB at 4 million samples, faulted in
// anew, and garbage for the collector).
func TestPublishReusesTables(t *testing.T) {
	ps := NewPlans(8, 16, 0)
	entries := inOrder(1000)
	arrays := map[*int32]bool{}
	for range 10 {
		ps.Set("p", entries, false)
		arrays[&ps.dues.table.Load().d[0]] = true
	}
	if len(arrays) > 2 {
		t.Errorf("10 publishes filled %d different arrays; want 2 (the dues and the spare)", len(arrays))
	}
}

// TestCloseJoinsRepublish: a republish a read started, in flight when Plans is closed, is waited
// for, and does not call OnRepublish's f (the cache's and the disk tier's, closed next) once
// Close has returned.
func TestCloseJoinsRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, 0)
		var closed atomic.Bool
		var late atomic.Int32
		ps.OnRepublish(func() {
			if closed.Load() {
				late.Add(1)
			}
		})
		ps.Set("p", inOrder(100), false)
		release := make(chan struct{})
		ps.buildHook = func() { <-release } // the republish waits in its build
		time.Sleep(republishEvery + time.Second)
		readAt(ps, 0, time.Now()) // the dues are old: a republish starts
		synctest.Wait()
		go func() {
			ps.Close()
			closed.Store(true)
		}()
		synctest.Wait()
		close(release)
		synctest.Wait()
		if !closed.Load() || late.Load() != 0 {
			t.Errorf("Close returned: %v; OnRepublish's f called %d times after Close returned, want none", closed.Load(), late.Load())
		}
	})
}

// TestPublishCostWhole: the cost a republish waits after (republishShare times it) is the whole
// last publish, its build off the lock included, not only its swap: with a build that takes a
// second, no republish in 30 s of reads at a moving pace.
func TestPublishCostWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ps := NewPlans(8, 16, 0)
		var republished atomic.Int32
		ps.OnRepublish(func() { republished.Add(1) })
		ps.buildHook = func() { time.Sleep(time.Second) } // a build of a second
		ps.Set("p", inOrder(2000), false)
		for s := range 300 { // 10 a second, then 20: the pace moves
			readAt(ps, s, time.Now())
			time.Sleep(time.Duration(100-50*(s/150)) * time.Millisecond)
			synctest.Wait()
		}
		ps.Close() // waits for a republish under way
		if n := republished.Load(); n != 0 {
			t.Errorf("%d republishes in 30 s after a publish of 1 s; want none before 200 s", n)
		}
	})
}
