package order

import (
	"slices"
	"time"
)

// plan follows one reader through its plan. Its position is the first entry not yet read.
// Several readers of it (DataLoader workers) run a little out of order; an entry still unread
// when reads have landed more than window entries past it is given up, so that a reader that
// skips samples does not hold the position back. Its methods are called with Plans.mu held.
type plan struct {
	name     string
	entries  []int32
	consumed []bool
	pos      int // first entry not yet consumed
	furthest int // furthest entry consumed
	// ahead maps a sample to its first unconsumed entry in [pos, pos+aheadSpan); rebuilt when dirty.
	ahead     map[int32]int
	aheadSpan int
	dirty     bool
	// where maps a sample to all its entries, ascending; built when first needed after set.
	where map[int32][]int32

	onPlan, skipped, writes int64
	lastUse                 time.Time
	pace                    paceMeter
}

// set makes entries the plan, from its start, or with appendPlan queues them behind it.
func (p *plan) set(entries []int32, appendPlan bool, now time.Time) {
	if appendPlan {
		// Drop what was read, so that appending epoch after epoch does not grow without bound.
		p.entries = append(p.entries[p.pos:], entries...)
		p.consumed = append(p.consumed[p.pos:], make([]bool, len(entries))...)
		p.furthest -= p.pos
	} else {
		p.entries = append([]int32(nil), entries...)
		p.consumed = make([]bool, len(entries))
		p.furthest = -1
	}
	p.pos, p.dirty, p.where = 0, true, nil
	p.writes++
	p.lastUse = now
}

// active tells whether the plan was read or written within idle (0: always).
func (p *plan) active(now time.Time, idle time.Duration) bool {
	return idle <= 0 || now.Sub(p.lastUse) < idle
}

// rebuild recomputes ahead over span entries from the position, when the plan or the position
// moved or span changed.
func (p *plan) rebuild(span int) {
	if !p.dirty && p.aheadSpan == span {
		return
	}
	p.ahead = make(map[int32]int, min(span, len(p.entries)-p.pos))
	for q := p.pos; q < min(p.pos+span, len(p.entries)); q++ {
		if _, seen := p.ahead[p.entries[q]]; !seen && !p.consumed[q] {
			p.ahead[p.entries[q]] = q
		}
	}
	p.aheadSpan, p.dirty = span, false
}

// due returns how soon sample is next due in this plan, in milliseconds at its reader's pace (or
// fallback, not known yet), or -1 when it is not within horizon entries of the position.
func (p *plan) due(sample, horizon int, fallback float64) int {
	p.rebuild(horizon)
	q, ok := p.ahead[int32(sample)]
	if !ok {
		return -1
	}
	return msAt(q-p.pos, p.pace.or(fallback))
}

// until returns how soon sample is next due anywhere in this plan past its position, in
// milliseconds at its reader's pace (or fallback), or -1 when the plan does not hold it there.
// Unlike due it looks at the whole plan, for a store far larger than the prefetch window.
func (p *plan) until(sample int, fallback float64) int {
	if p.where == nil {
		p.where = make(map[int32][]int32)
		for q, s := range p.entries {
			p.where[s] = append(p.where[s], int32(q))
		}
	}
	qs := p.where[int32(sample)]
	for i, _ := slices.BinarySearch(qs, int32(p.pos)); i < len(qs); i++ {
		if q := int(qs[i]); !p.consumed[q] {
			return msAt(q-p.pos, p.pace.or(fallback))
		}
	}
	return -1
}

// msAt is how many milliseconds d entries take at pace samples a second.
func msAt(d int, pace float64) int { return int(float64(d) * 1000 / pace) }

// consume marks the sample's next occurrence within horizon as read, moves the position, and
// notes the reader's pace.
func (p *plan) consume(sample, window, horizon int, now time.Time) {
	p.rebuild(horizon)
	q := p.ahead[int32(sample)]
	p.onPlan++
	p.lastUse = now
	p.pace.add(now)
	p.consumed[q] = true
	p.furthest = max(p.furthest, q)
	// Find the sample's next occurrence within the horizon, if any.
	delete(p.ahead, int32(sample))
	for r := q + 1; r < min(p.pos+p.aheadSpan, len(p.entries)); r++ {
		if p.entries[r] == int32(sample) && !p.consumed[r] {
			p.ahead[int32(sample)] = r
			break
		}
	}
	moved := false
	for p.pos < len(p.entries) && (p.consumed[p.pos] || p.pos < p.furthest-window) {
		if !p.consumed[p.pos] {
			p.skipped++
		}
		p.pos++
		moved = true
	}
	if moved {
		p.dirty = true
	}
}

// cursor walks the plan's unread entries from its position, up to span of them.
func (p *plan) cursor(span int, fallback float64) *cursor {
	return &cursor{p: p, q: p.pos - 1, end: min(p.pos+span, len(p.entries)), pace: p.pace.or(fallback)}
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
		if !c.p.consumed[c.q] {
			return true
		}
	}
	return false
}

func (c *cursor) sample() int32 { return c.p.entries[c.q] }
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
