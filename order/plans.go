package order

import (
	"container/heap"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"
)

// accessTimeout ends an access to a sample that was not read through: a later read of the
// sample is then a new access.
const accessTimeout = 2 * time.Second

// DefaultPlan is the plan .vidfs/order holds.
const DefaultPlan = "default"

// validName is what a plan may be called: a file name without a path or a leading dot.
var validName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// ValidName tells whether name can name a plan, and if not, why.
func ValidName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("plan name %q: want 1 to 64 letters, digits, '_', '.' or '-', not starting with '.' or '-'", name)
	}
	return nil
}

// Plans follows every reader through its own plan: the samples it will read, in order (one
// DataLoader, one DDP rank). Each read is reported with Observe; a read that starts a new access
// to a sample (not the rest of a sample being read in pieces) counts toward the reader's own plan
// when the caller knows which that is (the process that wrote it, or its DataLoader workers) and
// it has the sample due, else toward the plan that has the sample due soonest, and consumes its
// next unread occurrence there. How soon a sample is due is
// a time: its distance from a plan's position, at the pace that plan's reader reads. So the
// cache, which keeps and decodes first what is due soonest, serves every plan by its pace, and a
// sample two plans want is wanted once. A plan nobody has read or written for the idle time stops
// counting (its samples are not due) until it is read or written again.
//
// Plans is safe for concurrent use. It calls nothing outside itself while holding its lock: the
// cache asks it NextUse with the cache's own lock held (Upcoming without), and the disk tier asks
// Until with the tier's lock held, so the lock order is cache, then plans, and tier, then plans.
type Plans struct {
	// mu guards everything below; it is taken last (after the cache's or the tier's lock) and
	// nothing is called with it held.
	mu      sync.Mutex
	window  int // how far readers may run out of order before unread entries are given up
	horizon int // how far past a position reads are matched and NextUse looks
	idle    time.Duration
	plans   map[string]*plan
	open    map[int]*access // accesses in pieces, not yet through
	reading map[int]int     // sample -> reads observed and not yet Done
	stats   Stats
}

type access struct {
	bytes int64
	last  time.Time
}

// Stats counts what the readers did, in all and by plan.
type Stats struct {
	Accesses int64 // reads that started an access to a sample
	OnPlan   int64 // accesses that a plan had due
	OffPlan  int64 // accesses to samples no plan had due
	Plans    []PlanStats
}

// PlanStats is one plan's state and counters.
type PlanStats struct {
	Name     string
	Length   int       // entries, from the start of what is kept (what was read before an append is dropped)
	Position int       // the first entry not yet read
	OnPlan   int64     // accesses counted toward it
	Skipped  int64     // entries given up as never read
	Writes   int64     // times it was set or appended to
	Pace     float64   // its reader's samples per second lately (0: not known yet)
	LastUse  time.Time // last read or write
	Active   bool      // read or written within the idle time
}

// NewPlans returns a set of no plans. window is how far a plan's readers may run ahead of its
// slowest one; horizon how far past a plan's position reads are matched and NextUse looks (at
// least window); idle how long a plan may go unused before its samples stop being due.
func NewPlans(window, horizon int, idle time.Duration) *Plans {
	return &Plans{window: max(window, 1), horizon: max(horizon, window, 1), idle: idle,
		plans: map[string]*plan{}, open: map[int]*access{}, reading: map[int]int{}}
}

// Set makes entries the plan called name, from its start, creating it if need be; with
// appendPlan, it queues them behind the plan's entries instead (the next epoch).
func (ps *Plans) Set(name string, entries []int32, appendPlan bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.plans[name]
	if p == nil {
		p = &plan{name: name}
		ps.plans[name] = p
	}
	p.set(entries, appendPlan, time.Now())
}

// Remove drops the plan called name, and says whether there was one.
func (ps *Plans) Remove(name string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.plans[name]
	delete(ps.plans, name)
	return ok
}

// Names lists the plans, sorted.
func (ps *Plans) Names() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Sorted(maps.Keys(ps.plans))
}

// Entries returns a copy of the plan called name, and whether there is one.
func (ps *Plans) Entries(name string) ([]int32, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.plans[name]
	if !ok {
		return nil, false
	}
	return append([]int32(nil), p.entries...), true
}

// Observe reports a read of n bytes of sample (of sampleBytes bytes) and says whether it started
// a new access to the sample, and if so, which plan it counted toward ("" for none). mine names
// the plans the reader wrote, when the caller knows (nil when not): the access counts toward the
// one of them that has the sample due soonest, and only if none has it due, toward the plan of
// all that has. Without that, a rank's read of a sample it has due now could count toward
// another rank's next epoch, whose position would move while its own stalled. Pieces of a sample
// may come in any order (page faults do), so only their sizes count. The sample is due now until
// the read calls Done: an access consumes its plan entry at once, and the sample must not look
// unwanted to the cache before the reader has it.
func (ps *Plans) Observe(sample int, n, sampleBytes int64, now time.Time, mine []string) (bool, string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.reading[sample]++
	if a, ok := ps.open[sample]; ok && now.Sub(a.last) < accessTimeout {
		a.bytes += n
		a.last = now
		if a.bytes >= sampleBytes {
			delete(ps.open, sample)
		}
		return false, ""
	}
	if n < sampleBytes {
		ps.open[sample] = &access{bytes: n, last: now}
		if len(ps.open) > 4096 {
			for s, a := range ps.open { // forget accesses that stopped part way
				if now.Sub(a.last) >= accessTimeout {
					delete(ps.open, s)
				}
			}
		}
	} else {
		delete(ps.open, sample)
	}
	ps.stats.Accesses++
	// The reader's own plan that has the sample due soonest, else any plan's.
	pace := ps.fallbackPace()
	var best *plan
	bestDue := -1
	consider := func(p *plan) {
		if d := p.due(sample, ps.horizon, pace); d >= 0 && (best == nil || d < bestDue) {
			best, bestDue = p, d
		}
	}
	for _, name := range mine {
		if p := ps.plans[name]; p != nil {
			consider(p)
		}
	}
	if best == nil {
		for _, p := range ps.plans {
			consider(p)
		}
	}
	if best == nil {
		ps.stats.OffPlan++
		return true, ""
	}
	ps.stats.OnPlan++
	best.consume(sample, ps.window, ps.horizon, now)
	return true, best.name
}

// Done ends a read that Observe reported, once the reader has its bytes (or gave up).
func (ps *Plans) Done(sample int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.reading[sample]--; ps.reading[sample] <= 0 {
		delete(ps.reading, sample)
	}
}

// NextUse returns how soon sample is due, in milliseconds, over the active plans: the soonest of
// its next occurrences, each at its plan reader's pace; -1 when no active plan has it within the
// horizon. A sample being read right now (a read not yet Done, or an access in pieces not yet
// through) is due now: 0.
func (ps *Plans) NextUse(sample int) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.reading[sample] > 0 {
		return 0
	}
	if a, ok := ps.open[sample]; ok && time.Since(a.last) < accessTimeout {
		return 0
	}
	now, pace, best := time.Now(), ps.fallbackPace(), -1
	for _, p := range ps.plans {
		if !p.active(now, ps.idle) {
			continue
		}
		if d := p.due(sample, ps.horizon, pace); d >= 0 && (best < 0 || d < best) {
			best = d
		}
	}
	return best
}

// Until returns how soon sample is due over the active plans, in milliseconds, looking at each
// whole plan rather than the prefetch horizon (NextUse's): for the disk tier, which holds far
// more than the memory cache. -1 when no active plan holds it past its position.
func (ps *Plans) Until(sample int) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.reading[sample] > 0 {
		return 0
	}
	now, pace, best := time.Now(), ps.fallbackPace(), -1
	for _, p := range ps.plans {
		if !p.active(now, ps.idle) {
			continue
		}
		if d := p.until(sample, pace); d >= 0 && (best < 0 || d < best) {
			best = d
		}
	}
	return best
}

// Upcoming appends to dst the samples due next over the active plans, soonest first, without
// repeats: at most n of them.
func (ps *Plans) Upcoming(dst []int, n int) []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now, pace := time.Now(), ps.fallbackPace()
	var cur cursors
	for _, p := range ps.plans {
		if p.active(now, ps.idle) {
			if c := p.cursor(ps.horizon, pace); c.next() {
				cur = append(cur, c)
			}
		}
	}
	heap.Init(&cur)
	seen := make(map[int32]bool, n)
	for len(seen) < n && len(cur) > 0 {
		c := cur[0]
		if s := c.sample(); !seen[s] {
			seen[s] = true
			dst = append(dst, int(s))
		}
		if c.next() {
			heap.Fix(&cur, 0)
		} else {
			heap.Pop(&cur)
		}
	}
	return dst
}

// UpcomingOf appends to dst the next n distinct samples of the plan called name, in its order.
func (ps *Plans) UpcomingOf(name string, dst []int, n int) []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.plans[name]
	if p == nil {
		return dst
	}
	c := p.cursor(len(p.entries), 1)
	seen := make(map[int32]bool, n)
	for len(seen) < n && c.next() {
		if s := c.sample(); !seen[s] {
			seen[s] = true
			dst = append(dst, int(s))
		}
	}
	return dst
}

// Stats returns the counters, and every plan's state, sorted by name.
func (ps *Plans) Stats() Stats {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := ps.stats
	now := time.Now()
	for _, p := range ps.plans {
		st.Plans = append(st.Plans, PlanStats{Name: p.name, Length: len(p.entries), Position: p.pos, OnPlan: p.onPlan,
			Skipped: p.skipped, Writes: p.writes, Pace: p.pace.perSecond(), LastUse: p.lastUse, Active: p.active(now, ps.idle)})
	}
	slices.SortFunc(st.Plans, func(a, b PlanStats) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return st
}

// fallbackPace is the pace assumed for a plan whose reader's is not known yet: the fastest known,
// so that a new plan is served at once; 100 samples a second with none known. Called with ps.mu
// held.
func (ps *Plans) fallbackPace() float64 {
	fastest := 0.0
	for _, p := range ps.plans {
		fastest = max(fastest, p.pace.perSecond())
	}
	if fastest == 0 {
		return 100
	}
	return fastest
}

// cursors is a heap of plan cursors, soonest due first, for Upcoming's merge.
type cursors []*cursor

func (c cursors) Len() int { return len(c) }
func (c cursors) Less(i, j int) bool {
	if a, b := c[i].dueMs(), c[j].dueMs(); a != b {
		return a < b
	}
	return c[i].p.name < c[j].p.name
}
func (c cursors) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *cursors) Push(x any)   { *c = append(*c, x.(*cursor)) }
func (c *cursors) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
