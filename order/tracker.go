package order

import (
	"sync"
	"time"
)

// accessTimeout ends an access to a sample that was not read through: a later read of the
// sample is then a new access.
const accessTimeout = 2 * time.Second

// Tracker follows readers through the plan. Each read is reported with Observe; a read that
// starts a new access to a sample (not the rest of a sample being read in pieces) consumes that
// sample's next unread occurrence within the horizon past the reader's position. The position is
// the first plan entry not yet read. Several readers (DataLoader workers) run a little out of
// order; an entry still unread when reads have landed more than window entries past it is given
// up, so a reader that skips samples does not hold the position back.
//
// Tracker is safe for concurrent use. It calls nothing outside itself while holding its lock:
// the cache asks it NextUse and Upcoming with the cache's own lock held, so the lock order is
// cache, then tracker.
type Tracker struct {
	mu       sync.Mutex
	window   int // how far readers may run out of order before unread entries are given up
	horizon  int // how far past the position reads are matched and NextUse looks
	plan     []int32
	consumed []bool
	pos      int // first entry not yet consumed
	furthest int // furthest entry consumed
	open     map[int]*access
	reading  map[int]int   // sample -> reads observed and not yet Done
	ahead    map[int32]int // sample -> its first unconsumed entry in [pos, pos+horizon)
	dirty    bool          // ahead must be rebuilt
	stats    Stats
}

type access struct {
	bytes int64
	last  time.Time
}

// Stats counts what the tracker has seen.
type Stats struct {
	Accesses int64 // reads that started an access to a sample
	OnPlan   int64 // accesses that matched the plan
	OffPlan  int64 // accesses to samples not due (no plan, or not within the window)
	Skipped  int64 // plan entries given up as never read
	Plans    int64 // plans set or appended
}

// NewTracker returns a tracker with no plan. window is how far readers may run ahead of the
// slowest one; horizon how far past the position reads are matched to the plan and NextUse looks
// (at least window).
func NewTracker(window, horizon int) *Tracker {
	return &Tracker{window: max(window, 1), horizon: max(horizon, window, 1), open: map[int]*access{}, reading: map[int]int{}, dirty: true}
}

// Replace makes plan the plan, from its start.
func (t *Tracker) Replace(plan []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.plan = append([]int32(nil), plan...)
	t.consumed = make([]bool, len(plan))
	t.pos, t.furthest, t.dirty = 0, -1, true
	t.stats.Plans++
}

// Append queues plan behind the current one (the next epoch).
func (t *Tracker) Append(plan []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Drop what was read, so that appending epoch after epoch does not grow without bound.
	t.plan = append(t.plan[t.pos:], plan...)
	t.consumed = append(t.consumed[t.pos:], make([]bool, len(plan))...)
	t.furthest -= t.pos
	t.pos, t.dirty = 0, true
	t.stats.Plans++
}

// Observe reports a read of n bytes of sample (of sampleBytes bytes) and says whether it started
// a new access to the sample. Pieces of a sample may come in any order (page faults do), so only
// their sizes count. The sample is due now until the read calls Done: an access consumes its
// plan entry at once, and the sample must not look unwanted to the cache before the reader has
// it.
func (t *Tracker) Observe(sample int, n, sampleBytes int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reading[sample]++
	if a, ok := t.open[sample]; ok && now.Sub(a.last) < accessTimeout {
		a.bytes += n
		a.last = now
		if a.bytes >= sampleBytes {
			delete(t.open, sample)
		}
		return false
	}
	if n < sampleBytes {
		t.open[sample] = &access{bytes: n, last: now}
		if len(t.open) > 4096 {
			t.expire(now)
		}
	} else {
		delete(t.open, sample)
	}
	t.stats.Accesses++
	t.consume(sample)
	return true
}

// Done ends a read that Observe reported, once the reader has its bytes (or gave up).
func (t *Tracker) Done(sample int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reading[sample]--; t.reading[sample] <= 0 {
		delete(t.reading, sample)
	}
}

// expire forgets accesses that stopped part way.
func (t *Tracker) expire(now time.Time) {
	for s, a := range t.open {
		if now.Sub(a.last) >= accessTimeout {
			delete(t.open, s)
		}
	}
}

// consume marks the sample's next occurrence within the window as read and moves the position.
func (t *Tracker) consume(sample int) {
	t.rebuild()
	p, ok := t.ahead[int32(sample)]
	if !ok {
		t.stats.OffPlan++
		return
	}
	t.stats.OnPlan++
	t.consumed[p] = true
	t.furthest = max(t.furthest, p)
	// Find the sample's next occurrence within the horizon, if any.
	delete(t.ahead, int32(sample))
	for q := p + 1; q < min(t.pos+t.horizon, len(t.plan)); q++ {
		if t.plan[q] == int32(sample) && !t.consumed[q] {
			t.ahead[int32(sample)] = q
			break
		}
	}
	moved := false
	for t.pos < len(t.plan) && (t.consumed[t.pos] || t.pos < t.furthest-t.window) {
		if !t.consumed[t.pos] {
			t.stats.Skipped++
		}
		t.pos++
		moved = true
	}
	if moved {
		t.dirty = true
	}
}

// rebuild recomputes ahead when the position or plan moved.
func (t *Tracker) rebuild() {
	if !t.dirty {
		return
	}
	t.ahead = make(map[int32]int, t.horizon)
	for q := t.pos; q < min(t.pos+t.horizon, len(t.plan)); q++ {
		if _, seen := t.ahead[t.plan[q]]; !seen && !t.consumed[q] {
			t.ahead[t.plan[q]] = q
		}
	}
	t.dirty = false
}

// Upcoming appends to dst the samples due next, in plan order, without repeats: the unread
// entries from the position on, at most max of them.
func (t *Tracker) Upcoming(dst []int, max int) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := make(map[int32]bool, max)
	for q := t.pos; q < len(t.plan) && len(seen) < max; q++ {
		if s := t.plan[q]; !t.consumed[q] && !seen[s] {
			seen[s] = true
			dst = append(dst, int(s))
		}
	}
	return dst
}

// NextUse returns how many plan entries from the position the sample is next due, or -1 when it
// is not due within the horizon. A sample being read right now (a read not yet Done, or an
// access in pieces not yet through) is due now: 0.
func (t *Tracker) NextUse(sample int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reading[sample] > 0 {
		return 0
	}
	if a, ok := t.open[sample]; ok && time.Since(a.last) < accessTimeout {
		return 0
	}
	t.rebuild()
	if p, ok := t.ahead[int32(sample)]; ok {
		return p - t.pos
	}
	return -1
}

// Plan returns a copy of the plan in force, from its start.
func (t *Tracker) Plan() []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]int32(nil), t.plan...)
}

// Position returns the reader's position in the plan and the plan's length.
func (t *Tracker) Position() (pos, length int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pos, len(t.plan)
}

// Stats returns the tracker's counters.
func (t *Tracker) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}
