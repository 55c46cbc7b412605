package order

import (
	"container/list"
	"runtime"
	"sync/atomic"
	"time"
)

// plan follows one reader through its plan. Its position is the first entry not yet read.
// Several readers of it (DataLoader workers) run a little out of order; an entry still unread
// when reads have landed more than window entries past it is given up, so that a reader that
// skips samples does not hold the position back. Its methods are called with Plans.mu held,
// except where they say otherwise.
//
// Entries are numbered from the plan's start, appended epochs continuing the count: entry q is
// entries[q-base] (what was read before an append is dropped, and base moves past it). Each
// entry costs 8 bytes: the sample (its bits flipped once consumed, so a consumed entry is
// negative) and the number of the sample's next entry in the plan. The window [pos, end) of
// span entries is indexed by sample (ahead), and kept up to date a step at a time as the
// position moves, so a read's work does not grow with the plan or the span.
type plan struct {
	name string
	*planData
	onPlan, skipped, writes int64
	lastUse                 time.Time
	pace                    paceMeter
	owner                   int // the process that wrote it (0: not known)
	// pubPace is the pace its dues were last published at (0: not published, idle then).
	pubPace      float64
	hits, misses int64
	waited       time.Duration
	// elem is its element in Plans.inUse, or in Plans.expired once expired.
	elem    *list.Element
	expired bool
}

// planData is what a Set builds, off the lock, and swaps into a plan.
type planData struct {
	// entries holds each entry's sample, or ^sample once consumed. GUARDED_BY Plans.mu for
	// writes, which are atomic, so that a build reads it without the lock (an append's copy, the
	// published dues); reads under Plans.mu may be plain.
	entries []int32
	next    []int32 // next[i]: the number less base of the next entry of entries[i]'s sample, -1: none
	base    int     // the number of entries[0]
	pos     int     // first entry not yet consumed (a number, not an index)
	// furthest is the furthest entry consumed.
	furthest int
	span     int // how many entries from pos the window covers
	end      int // the window is [pos, end)
	// ahead maps each sample with an unconsumed entry in the window to the first of them.
	ahead map[int32]int
	// steps counts the entries stepped over moving the position and the window: the work of
	// reads, which tests count.
	steps int64
}

// length is the number past the last entry.
func (d *planData) length() int { return d.base + len(d.entries) }

// at is entry q's sample, and whether it was consumed. It may be called without Plans.mu.
func (d *planData) at(q int) (int32, bool) {
	v := atomic.LoadInt32(&d.entries[q-d.base])
	if v < 0 {
		return ^v, true
	}
	return v, false
}

// nextOf is the number of the next entry of entry q's sample, or -1.
func (d *planData) nextOf(q int) int {
	if n := d.next[q-d.base]; n >= 0 {
		return int(n) + d.base
	}
	return -1
}

// newPlanData indexes entries (which it keeps) as a plan from its start, with a window of span.
// Its work grows with the plan: it runs off the lock, before the plan is swapped in. scratch is
// as for links.
func newPlanData(entries []int32, span int, scratch []int32) (*planData, []int32) {
	next, scratch := links(entries, scratch)
	d := &planData{entries: entries, next: next, furthest: -1, span: span, ahead: map[int32]int{}}
	d.extend()
	return d, scratch
}

// links returns, for each entry, the index of the next entry of the same sample (-1: none). It
// works in scratch, an array of one int32 per sample that nothing else reads meanwhile (nil: it
// makes one), and returns it for reuse.
func links(entries []int32, scratch []int32) (next, _ []int32) {
	next = make([]int32, len(entries))
	n := 0
	for i, v := range entries {
		n = max(n, int(sampleOf(v))+1)
		yieldAt(i)
	}
	if cap(scratch) < n {
		scratch = make([]int32, n)
	}
	last := scratch[:n] // sample -> its entry after the one at hand, -1: none
	for i := range last {
		last[i] = -1
	}
	for i := len(entries) - 1; i >= 0; i-- {
		s := sampleOf(entries[i])
		next[i], last[s] = last[s], int32(i)
		yieldAt(i)
	}
	return next, scratch
}

// yieldEvery is how many entries work that grows with a plan (parsing it, linking it, working
// out its dues: tenths of a second at millions of entries) does between yields of its goroutine.
// On a machine whose cores are all busy, the goroutines answering readers' requests otherwise
// wait for the Go processor such work holds, up to Go's 10 ms time slice at a time.
const yieldEvery = 1 << 16

// yieldAt yields the goroutine at every yieldEvery-th i.
func yieldAt(i int) {
	if i&(yieldEvery-1) == yieldEvery-1 {
		runtime.Gosched()
	}
}

// sampleOf is the sample of an entry's value, consumed or not.
func sampleOf(v int32) int32 {
	if v < 0 {
		return ^v
	}
	return v
}

// extend moves the window's end up to span entries past the position, indexing what comes in.
func (d *planData) extend() {
	for limit := min(d.pos+d.span, d.length()); d.end < limit; d.end++ {
		d.steps++
		if s, consumed := d.at(d.end); !consumed {
			if _, ok := d.ahead[s]; !ok {
				d.ahead[s] = d.end
			}
		}
	}
}

// unindex drops entry q (unconsumed) from the window's index, where it is its sample's first:
// the sample's next entry in the window, if any, takes its place.
func (d *planData) unindex(s int32, q int) {
	if d.ahead[s] != q {
		return
	}
	for n := d.nextOf(q); n >= 0 && n < d.end; n = d.nextOf(n) {
		d.steps++
		if _, consumed := d.at(n); !consumed {
			d.ahead[s] = n
			return
		}
	}
	delete(d.ahead, s)
}

// set makes entries the plan, from its start, or with appendPlan queues them behind it: the
// built data is swapped in. Called with Plans.mu held.
func (p *plan) set(d *planData, now time.Time) {
	p.planData = d
	p.writes++
	p.lastUse = now
}

// active tells whether the plan was read or written within idle (0: always).
func (p *plan) active(now time.Time, idle time.Duration) bool {
	return idle <= 0 || now.Sub(p.lastUse) < idle
}

// due returns how soon sample is next due in this plan, in milliseconds at its reader's pace (or
// fallback, not known yet), or -1 when it is not within the window.
func (p *plan) due(sample int, fallback float64) int {
	q, ok := p.ahead[int32(sample)]
	if !ok {
		return -1
	}
	return msAt(q-p.pos, p.pace.or(fallback))
}

// msAt is how many milliseconds d entries take at pace samples a second.
func msAt(d int, pace float64) int { return int(float64(d) * 1000 / pace) }

// consume marks the sample's next entry within the window as read, moves the position, and
// notes the reader's pace. It returns the number of the sample's entry after the one consumed
// (-1: none), wherever it is in the plan.
func (p *plan) consume(sample, window int, now time.Time) int {
	s := int32(sample)
	q := p.ahead[s]
	p.onPlan++
	p.lastUse = now
	p.pace.add(now)
	atomic.StoreInt32(&p.entries[q-p.base], ^s)
	p.unindex(s, q)
	p.furthest = max(p.furthest, q)
	for p.pos < p.length() {
		p.steps++
		v, consumed := p.at(p.pos)
		if !consumed && p.pos >= p.furthest-window {
			break
		}
		if !consumed {
			p.skipped++
			p.unindex(v, p.pos)
		}
		p.pos++
	}
	p.extend()
	return p.nextOf(q)
}

// cursor walks the plan's unread entries from its position, up to span of them.
func (p *plan) cursor(span int, fallback float64) *cursor {
	return &cursor{p: p, q: p.pos - 1, end: min(p.pos+span, p.length()), pace: p.pace.or(fallback)}
}

// cursor is a position in a plan's unread entries, for merging plans by how soon samples are due.
type cursor struct {
	p      *plan
	q, end int
	pace   float64
}

// next moves to the next unread entry and says whether there is one.
func (c *cursor) next() bool {
	for c.q++; c.q < c.end; c.q++ {
		if _, consumed := c.p.at(c.q); !consumed {
			return true
		}
	}
	return false
}

func (c *cursor) sample() int32 { s, _ := c.p.at(c.q); return s }
func (c *cursor) dueMs() int    { return msAt(c.q-c.p.pos, c.pace) }

// paceMeter measures a reader's pace from the times of its last accesses: how fast it reads
// while it reads. The accesses measured span many batches, so that the burst of reads as a
// DataLoader's workers start does not pass for its pace. A pause between accesses counts as at
// most maxGap; a pause longer than restGap (the end of an epoch, a validation pass) starts the
// measure afresh, and until it has minAccesses again the pace from before the pause stands.
type paceMeter struct {
	times  [64]time.Time
	n      int     // accesses measured
	before float64 // the pace before the last long pause
}

const (
	// maxGap is the most one interval between a reader's accesses counts toward its pace.
	maxGap = time.Second
	// restGap is a pause after which the pace is measured afresh.
	restGap = 5 * time.Second
	// minAccesses and minSpan are how many accesses, over how long, a pace is measured before
	// it is trusted: less may be the burst of a DataLoader's first batches.
	minAccesses = 16
	minSpan     = 2 * time.Second
)

func (m *paceMeter) add(t time.Time) {
	if m.n > 0 && t.Sub(m.times[(m.n-1)%len(m.times)]) > restGap {
		if v := m.measured(); v > 0 {
			m.before = v
		}
		m.n = 0
	}
	m.times[m.n%len(m.times)] = t
	m.n++
}

// perSecond is the pace, or 0 while it is not known.
func (m *paceMeter) perSecond() float64 {
	if v := m.measured(); v > 0 {
		return v
	}
	return m.before
}

// measured is the pace over the accesses since the last long pause, or 0 before there are
// minAccesses of them over minSpan (or a full record of them).
func (m *paceMeter) measured() float64 {
	k := min(m.n, len(m.times))
	if k < minAccesses {
		return 0
	}
	var span time.Duration
	for i := m.n - k + 1; i < m.n; i++ {
		span += min(m.times[i%len(m.times)].Sub(m.times[(i-1)%len(m.times)]), maxGap)
	}
	if span <= 0 || span < minSpan && k < len(m.times) {
		return 0
	}
	return float64(k-1) / span.Seconds()
}

// or is the pace, or fallback while it is not known.
func (m *paceMeter) or(fallback float64) float64 {
	if v := m.perSecond(); v > 0 {
		return v
	}
	return fallback
}
