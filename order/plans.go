package order

import (
	"container/heap"
	"container/list"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
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
// counting: it expires, its entries and window are let go (its name and counters stay), and it
// is followed again once written again. A read's work looks at the plans in use only.
//
// Plans publishes when each sample is next due (Due) in an array the cache and the disk tier
// read without a lock, while they hold their own: they never call into Plans' lock. A read's
// work (Observe, Done) does not grow with the plans, the cache or the dataset. Set builds a new
// plan, and the dues, off the lock, and swaps them in: readers wait only for the swap.
//
// The dues of samples nobody read go stale as readers' paces move, readers pause and plans go
// idle: a read that finds them old, or its reader's pace moved, has them worked out anew in the
// background (a goroutine, holding setMu while it works), which then tells OnRepublish's f.
//
// Plans is safe for concurrent use. LOCK ORDERING: setMu, then mu; both are taken after the
// locks of those who call in (a plan writer's, fs's), and nothing outside Plans is called with
// either held (OnRepublish's f is called with neither). Due takes neither.
type Plans struct {
	// setMu serializes Set and Remove: one build at a time, each swapped in whole. Taken before mu.
	setMu sync.Mutex
	// mu guards everything below but dues, which it guards for writes only. It is taken last,
	// held for work that does not grow with the plans, and nothing is called with it held.
	mu      sync.Mutex
	window  int // how far readers may run out of order before unread entries are given up
	horizon int // how far past a position reads are matched and DueInHorizon looks
	idle    time.Duration
	plans   map[string]*plan
	// inUse lists the plans not expired, the one read or written last first: a read's work
	// looks at these only, and expires those at the back that went idle. expired lists the
	// expired ones, the last to expire first; past maxExpired, the oldest are dropped whole.
	inUse, expired list.List
	// entries counts the entries the plans in use hold; maxEntries bounds it (0: no bound).
	entries, maxEntries int
	// sweep expires plans that go idle while nobody reads (a timer, armed while sweepArmed);
	// closed is set by Close, after which nothing is started.
	sweep      *time.Timer
	sweepArmed bool
	closed     bool
	// expiredSince is set when a plan expires after the dues were last worked out: they are
	// then worked out anew at the next read's chance (see republishDue).
	expiredSince bool
	stats        Stats
	// owners counts the plans with an owner, and ownerGen moves at each Set and Remove (who owns
	// what may have changed): readers' callers remember answers of Owned until it moves.
	owners   atomic.Int64
	ownerGen atomic.Int64
	// dues publishes when each sample is next due, and keeps it right as samples are read
	// (see dues). Its table is read without a lock (Due); the rest is guarded by mu, but its
	// spare, by setMu.
	dues dues
	// buildHook, if set (by tests), is called as publish ends its build, off the lock.
	buildHook func()
	// published is when the dues were last worked out; republishing is set while a republish
	// started by a read runs (see republishDue); onRepublish is told when one is done.
	published    time.Time
	republishing bool
	onRepublish  func()
	// republished is closed once the republish under way (republishing) is over, f told: Close
	// waits for it.
	republished chan struct{}
	// publishCost is how long the last publish took, from the first lock to the swap: a
	// republish waits republishShare times as long after the last (see republishDue).
	publishCost time.Duration
}

// republishEvery is how old the published dues may grow before a read has them worked out
// anew, in the background: those of samples nobody read since were worked out at the pace
// then, from the positions then, and a plan may have gone idle. paceDrift is how far (as a
// ratio) a reader's pace may move from the one its plan's dues were worked out at before they
// are worked out anew sooner (a plan not published, idle then, counts as moved).
const (
	republishEvery = 5 * time.Second
	paceDrift      = 1.25
	// minRepublish is the least time between publishes a moving pace starts, so that a pace
	// that swings does not have the plans worked out over and over.
	minRepublish = time.Second
	// republishShare: a republish (its work grows with the plans) waits at least this many
	// times as long as the last publish took, so that keeping the dues fresh costs at most
	// 1/republishShare of a core however long the plans. A plan of 8 million entries (two
	// epochs of Kinetics-400's 4 million samples) takes some 0.1 s to work out: republished at
	// most every 20 s, its far dues (the disk tier's order) may be that stale; the near ones
	// move with each read, and the cache's prefetch asks Upcoming, which is always fresh. At 50,
	// republishes took 2 % of a core at that size: more than the rest of a read's work grows.
	republishShare = 200
)

// tickMs is the resolution of published dues: a tick is 4 ms from Plans' start, so an int32
// holds 99 days of them.
const tickMs = 4

// maxExpired is how many expired plans keep their name and counters (some 2 KB each): past it,
// the one that expired first is dropped whole, so that jobs that each write a plan of their own
// and go away leave a bounded trace.
const maxExpired = 1024

// ErrTooManyEntries is the error a plan refused for the bound on the entries of all plans has.
var ErrTooManyEntries = errors.New("too many plan entries")

// Stats counts what the readers did, in all and by plan.
type Stats struct {
	Accesses int64 // reads that started an access to a sample
	OnPlan   int64 // accesses that a plan had due
	OffPlan  int64 // accesses to samples no plan had due
	// Steps counts the work of reads: plans looked at, and entries stepped over moving positions
	// and windows (those of the plans as they are: a Set starts a plan's count afresh).
	Steps int64
	// Visits counts the plans a read's work looked at (Observe's, the fallback pace's): it
	// should grow with the plans in use, not with those left idle.
	Visits int64
	// Walked counts the entries UpcomingOf stepped over (for the stats, under the lock).
	Walked int64
	Plans  []PlanStats
}

// PlanStats is one plan's state and counters.
type PlanStats struct {
	Name     string
	Length   int   // entries, from the start of what is kept (what was read before an append is dropped)
	Position int   // the first entry not yet read
	OnPlan   int64 // accesses counted toward it
	Skipped  int64 // entries given up as never read
	Writes   int64 // times it was set or appended to
	Owner    int   // the process that wrote it last (0: not known)
	Hits     int64 // accesses counted toward it that found their sample ready (Served)
	Misses   int64 // and that waited for it
	Waited   time.Duration
	Pace     float64   // its reader's samples per second lately (0: not known yet)
	LastUse  time.Time // last read or write
	Active   bool      // read or written within the idle time
	// Expired: idle for longer than the idle time, its entries let go (Length 0) until it is
	// written again.
	Expired bool
}

// NewPlans returns a set of no plans. window is how far a plan's readers may run ahead of its
// slowest one; horizon how far past a plan's position reads are matched and DueInHorizon looks (at
// least window); idle how long a plan may go unused before it expires: its samples stop being
// due and its entries are let go (0: never).
func NewPlans(window, horizon int, idle time.Duration) *Plans {
	ps := &Plans{window: max(window, 1), horizon: max(horizon, window, 1), idle: idle, plans: map[string]*plan{}}
	ps.dues.init(time.Now())
	return ps
}

// Reserve makes room among the published dues for samples [0, n), so that no read has to (a
// read of a sample past them grows them).
func (ps *Plans) Reserve(n int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.dues.grow(n)
}

// Set makes entries the plan called name, from its start, creating it if need be; with
// appendPlan, it queues them behind the plan's entries instead (the next epoch). The plan is
// built (and the dues worked out anew) before it replaces the old one, with readers reading on;
// they wait only while it is swapped in, work that does not grow with the plan. entries is not
// kept. The plan has no owner from then on.
func (ps *Plans) Set(name string, entries []int32, appendPlan bool) error {
	return ps.SetOwned(name, entries, appendPlan, 0)
}

// SetMaxEntries bounds the entries all plans in use hold together (0: no bound): a Set past it
// is refused whole (ErrTooManyEntries).
func (ps *Plans) SetMaxEntries(n int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.maxEntries = n
}

// SetOwned is Set by the process owner (a process id; 0: not known), which owns the plan from
// then on: reads by it and its descendants count toward its plans (Owned). A plan that would
// take the entries of the plans in use past the bound (SetMaxEntries) is refused whole, with
// ErrTooManyEntries, and the plan in force stays.
func (ps *Plans) SetOwned(name string, entries []int32, appendPlan bool, owner int) error {
	ps.setMu.Lock()
	defer ps.setMu.Unlock()
	ps.mu.Lock()
	p := ps.plans[name]
	var old *planData
	if p != nil && appendPlan && !p.expired { // appended to an expired plan: the plan anew
		old = p.planData
	}
	var pos0 int
	if old != nil {
		pos0 = old.pos
	}
	// Only Sets, which setMu serializes, add entries: what reads and expiry do meanwhile only
	// lets entries go.
	held, want := 0, len(entries)
	if p != nil {
		held = len(p.entries)
	}
	if old != nil {
		want += old.length() - pos0
	}
	if total := ps.entries - held + want; ps.maxEntries > 0 && total > ps.maxEntries {
		ps.mu.Unlock()
		return fmt.Errorf("plan %q refused whole: its %d entries would make %d in all plans, past the bound of %d: %w",
			name, want, total, ps.maxEntries, ErrTooManyEntries)
	}
	ps.mu.Unlock()

	var d *planData
	scratch := ps.dues.takeSpare()
	if old == nil {
		d, scratch = newPlanData(append([]int32(nil), entries...), ps.horizon, scratch)
	} else {
		// Drop what was read, so that appending epoch after epoch does not grow without bound.
		kept := old.length() - pos0
		all := make([]int32, kept+len(entries))
		for i := range kept {
			all[i] = atomic.LoadInt32(&old.entries[pos0-old.base+i])
			yieldAt(i)
		}
		copy(all[kept:], entries)
		var next []int32
		next, scratch = links(all, scratch)
		d = &planData{entries: all, next: next, base: pos0, span: ps.horizon}
	}

	ps.mu.Lock()
	if p = ps.plans[name]; p == nil { // new, or an expired one dropped meanwhile
		p = &plan{name: name}
		ps.plans[name] = p
	}
	if old != nil {
		// Reads since the copy consumed entries in [pos0, end) only: take those over, and the
		// window, which the appended entries extend.
		for q := pos0; q < old.end; q++ {
			d.entries[q-pos0] = old.entries[q-old.base]
		}
		d.pos, d.furthest, d.end, d.ahead = old.pos, old.furthest, old.end, old.ahead
		d.extend()
	}
	if p.planData != nil {
		ps.entries -= len(p.entries) // an expired plan's are none
	}
	ps.entries += len(d.entries)
	p.set(d, time.Now())
	ps.used(p)
	ps.armSweepLocked()
	if (p.owner != 0) != (owner != 0) {
		ps.owners.Add(int64(min(owner, 1) - min(p.owner, 1)))
	}
	p.owner = owner
	ps.ownerGen.Add(1)
	ps.mu.Unlock()
	ps.publish(scratch)
	return nil
}

// used moves p to the front of the plans in use, as just read or written (taking it out of the
// expired ones if need be). Called with mu held.
func (ps *Plans) used(p *plan) {
	switch {
	case p.elem == nil:
		p.elem = ps.inUse.PushFront(p)
	case p.expired:
		ps.expired.Remove(p.elem)
		p.expired = false
		p.elem = ps.inUse.PushFront(p)
	default:
		ps.inUse.MoveToFront(p.elem)
	}
}

// expireIdle expires the plans in use that went idle by now, from the back of inUse: its work
// is the plans it expires. Called with mu held.
func (ps *Plans) expireIdle(now time.Time) {
	if ps.idle <= 0 {
		return
	}
	for e := ps.inUse.Back(); e != nil; e = ps.inUse.Back() {
		p := e.Value.(*plan)
		if p.active(now, ps.idle) {
			return
		}
		ps.inUse.Remove(e)
		ps.expiredSince = true
		ps.entries -= len(p.entries)
		p.planData = &planData{furthest: -1, span: ps.horizon}
		p.expired = true
		p.elem = ps.expired.PushFront(p)
		if ps.expired.Len() > maxExpired {
			ps.dropLocked(ps.expired.Back().Value.(*plan))
		}
	}
}

// dropLocked takes p out of the plans, its owner and counters with it. Called with mu held.
func (ps *Plans) dropLocked(p *plan) {
	if p.expired {
		ps.expired.Remove(p.elem)
	} else {
		ps.inUse.Remove(p.elem)
		ps.entries -= len(p.entries)
	}
	if p.owner != 0 {
		ps.owners.Add(-1)
	}
	delete(ps.plans, p.name)
	ps.ownerGen.Add(1)
}

// armSweepLocked has the sweep timer expire the plan in use last used once it goes idle,
// unless it is armed already (it then fires sooner: a plan's idle time only moves on). Called
// with mu held.
func (ps *Plans) armSweepLocked() {
	if ps.idle <= 0 || ps.closed || ps.sweepArmed || ps.inUse.Len() == 0 {
		return
	}
	d := time.Until(ps.inUse.Back().Value.(*plan).lastUse.Add(ps.idle))
	ps.sweepArmed = true
	if ps.sweep == nil {
		ps.sweep = time.AfterFunc(d, ps.sweepIdle)
	} else {
		ps.sweep.Reset(d)
	}
}

// sweepIdle expires the plans that went idle, for the timer: so that their memory goes even
// when nobody reads, and their samples stop being due (a republish, which tells OnRepublish's f
// when it is done, from its own goroutine; Close waits for it).
func (ps *Plans) sweepIdle() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.sweepArmed = false
	if ps.closed {
		return
	}
	ps.expireIdle(time.Now())
	// With nobody reading, no read starts the dues' work (Observe): start it here, so that
	// eviction stops ranking by the plans that expired.
	if ps.expiredSince && !ps.republishing && !ps.dues.building {
		ps.republishing, ps.republished = true, make(chan struct{})
		go ps.republish(ps.republished)
	}
	ps.armSweepLocked()
}

// Owned returns the names of the plans process owner owns, sorted (nil: none). Its work grows
// with the number of plans.
func (ps *Plans) Owned(owner int) []string {
	if ps.owners.Load() == 0 || owner <= 0 {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var names []string
	for _, p := range ps.plans {
		if p.owner == owner {
			names = append(names, p.name)
		}
	}
	slices.Sort(names)
	return names
}

// AnyOwned tells, without a lock, whether some plan has an owner.
func (ps *Plans) AnyOwned() bool { return ps.owners.Load() > 0 }

// OwnerGen moves whenever who owns which plan may have changed (at each Set and Remove).
func (ps *Plans) OwnerGen() int64 { return ps.ownerGen.Load() }

// Served counts an access toward the plan called name (as Observe said) that found its sample
// ready (hit) or waited for it.
func (ps *Plans) Served(name string, hit bool, waited time.Duration) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.plans[name]
	if p == nil {
		return
	}
	if hit {
		p.hits++
	} else {
		p.misses++
	}
	p.waited += waited
}

// Remove drops the plan called name, and says whether there was one.
func (ps *Plans) Remove(name string) bool {
	ps.setMu.Lock()
	defer ps.setMu.Unlock()
	ps.mu.Lock()
	p, ok := ps.plans[name]
	if ok {
		ps.dropLocked(p)
	}
	ps.mu.Unlock()
	if ok {
		ps.publish(ps.dues.takeSpare())
	}
	return ok
}

// publish works out every sample's due anew, over the active plans, off the lock, and swaps
// the result in. Its work grows with the plans; Set, Remove and republish call it with setMu
// held. Reads go on meanwhile: a sample whose entry one consumes keeps the due that read
// publishes (its next entry's), as the build may have counted the entry it consumed; a sample
// being read stays due now until its read is Done. spare is an array no Due reads (takeSpare's,
// or a build's scratch from it) to work in; nil: it makes one.
func (ps *Plans) publish(spare []int32) {
	type view struct {
		d    *planData
		pos  int
		pace float64
	}
	ps.mu.Lock()
	now := time.Now()
	pace, n := ps.fallbackPace(), ps.dues.size()
	var views []view
	ps.expireIdle(now)
	for e := ps.inUse.Front(); e != nil; e = e.Next() {
		p := e.Value.(*plan)
		p.pubPace = 0
		if p.active(now, ps.idle) {
			p.pubPace = p.pace.or(pace)
			views = append(views, view{p.planData, p.pos, p.pubPace})
		}
	}
	ps.dues.building, ps.published, ps.expiredSince = true, now, false
	ps.mu.Unlock()
	for _, v := range views {
		for i := range v.d.entries {
			n = max(n, int(sampleOf(atomic.LoadInt32(&v.d.entries[i])))+1)
			yieldAt(i)
		}
	}
	fill := fillArray(spare, n) // no Due reads it, and none will until it is stored: plain writes
	t0 := ps.dues.tick(now, 0)
	for _, v := range views {
		perEntry := 1000 / v.pace / tickMs // ticks
		start := v.pos - v.d.base
		for i := start; i < len(v.d.entries); i++ {
			yieldAt(i)
			s := atomic.LoadInt32(&v.d.entries[i])
			if s < 0 {
				continue // consumed
			}
			if t := t0 + int32(min(float64(i-start)*perEntry, math.MaxInt32/2)); fill[s] == 0 || t < fill[s] {
				fill[s] = t
			}
		}
	}
	if ps.buildHook != nil {
		ps.buildHook()
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	began := now
	now = time.Now()
	ps.dues.swapIn(fill, n, now)
	ps.publishCost = time.Since(began)
}

// republishDue tells whether the published dues are due to be worked out anew (see
// republishEvery), given that p's reader just read at now. Called with mu held.
func (ps *Plans) republishDue(p *plan, now time.Time, pace float64) bool {
	if ps.republishing || ps.dues.building {
		return false
	}
	rest := ps.publishCost * republishShare
	if since := now.Sub(ps.published); since >= max(republishEvery, rest) {
		return true
	} else if since < max(minRepublish, rest) {
		return false
	}
	v := p.pace.or(pace)
	return ps.expiredSince || p.pubPace == 0 || v > p.pubPace*paceDrift || v*paceDrift < p.pubPace
}

// republish works the dues out anew, in the background (a read started it), and tells
// onRepublish, holding no lock, unless Plans was closed meanwhile; it then closes done.
func (ps *Plans) republish(done chan struct{}) {
	defer close(done)
	ps.setMu.Lock()
	ps.publish(ps.dues.takeSpare())
	ps.setMu.Unlock()
	ps.mu.Lock()
	ps.republishing = false
	f := ps.onRepublish
	if ps.closed {
		f = nil
	}
	ps.mu.Unlock()
	if f != nil {
		f()
	}
}

// Close stops Plans' background work: it waits for a republish under way, and from when it
// returns OnRepublish's f is not called again, so that what f calls can be closed after. The
// plans stay readable and writable; their dues are no longer worked out anew on their own, and
// idle plans expire only as they are read or written.
func (ps *Plans) Close() {
	ps.mu.Lock()
	ps.closed = true
	done := ps.republished
	if ps.sweep != nil {
		ps.sweep.Stop()
	}
	ps.mu.Unlock()
	if done != nil {
		<-done
	}
}

// OnRepublish has f called whenever the dues were worked out anew on their own (they go stale
// as readers' paces move and plans go idle): the cache and the disk tier ask theirs again. f is
// called holding none of Plans' locks. Set and Remove do not call it: their callers know.
func (ps *Plans) OnRepublish(f func()) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.onRepublish = f
}

// Due returns how soon sample is next due over the plans, in milliseconds at their readers'
// pace, looking at each whole plan (not only the prefetch horizon, DueInHorizon's); 0 while it is
// being read; -1 when no plan has it. It reads what Plans published, without a lock, and does
// work that does not grow with anything: the cache and the disk tier ask it holding their own
// locks. What it answers was worked out at the sample's last read, or when the dues were last
// worked out whole (at each Set and Remove, and in the background once a read finds them
// republishEvery old or its reader's pace moved by a quarter), at the pace then.
func (ps *Plans) Due(sample int) int { return ps.dues.due(sample) }

// Names lists the plans, sorted.
func (ps *Plans) Names() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return slices.Sorted(maps.Keys(ps.plans))
}

// Len returns the number of entries of the plan called name (from the start of what is kept),
// and whether there is one.
func (ps *Plans) Len(name string) (int, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.plans[name]
	if !ok {
		return 0, false
	}
	return len(p.entries), true
}

// Entries returns a copy of the plan called name, and whether there is one. The copy is made
// off the lock.
func (ps *Plans) Entries(name string) ([]int32, bool) {
	ps.mu.Lock()
	p, ok := ps.plans[name]
	var d *planData
	if ok {
		d = p.planData
	}
	ps.mu.Unlock()
	if !ok {
		return nil, false
	}
	out := make([]int32, len(d.entries))
	for i := range out {
		out[i], _ = d.at(d.base + i)
	}
	return out, true
}

// Observe reports a read of n bytes of sample (of sampleBytes bytes) and says whether it started
// a new access to the sample, and if so, which plan it counted toward ("" for none). mine names
// the plans the reader wrote, when the caller knows (nil when not): the access counts toward the
// one of them that has the sample due soonest, and only if none has it due, toward the plan of
// all that has. Without that, a rank's read of a sample it has due now could count toward
// another rank's next epoch, whose position would move while its own stalled. Pieces of a sample
// may come in any order (page faults do), so only their sizes count. The sample is due now until
// the read calls Done: an access consumes its plan entry at once, and the sample must not look
// unwanted to the cache before the reader has it. Its work grows with the number of plans only.
func (ps *Plans) Observe(sample int, n, sampleBytes int64, now time.Time, mine []string) (bool, string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.dues.startRead(sample, now)
	ps.dues.expireAccesses(now)
	ps.expireIdle(now)
	if !ps.dues.newAccess(sample, n, sampleBytes, now) {
		return false, ""
	}
	ps.stats.Accesses++
	// The reader's own plan that has the sample due soonest, else any plan's.
	pace := ps.fallbackPace()
	var best *plan
	bestDue := -1
	consider := func(p *plan) {
		ps.stats.Steps++
		ps.stats.Visits++
		if d := p.due(sample, pace); d >= 0 && (best == nil || d < bestDue) {
			best, bestDue = p, d
		}
	}
	for _, name := range mine {
		if p := ps.plans[name]; p != nil {
			consider(p)
		}
	}
	if best == nil {
		for e := ps.inUse.Front(); e != nil; e = e.Next() {
			consider(e.Value.(*plan))
		}
	}
	if best == nil {
		ps.stats.OffPlan++
		return true, ""
	}
	ps.stats.OnPlan++
	if !ps.closed && ps.republishDue(best, now, pace) {
		ps.republishing, ps.republished = true, make(chan struct{})
		go ps.republish(ps.republished)
	}
	next := best.consume(sample, ps.window, now)
	ps.used(best)
	// Due next: at its entry after this one in the same plan, or in another plan's window.
	var after int32
	if next >= 0 {
		after = ps.dues.tick(now, msAt(next-best.pos, best.pace.or(pace)))
	}
	for e := ps.inUse.Front(); e != nil; e = e.Next() {
		p := e.Value.(*plan)
		ps.stats.Visits++
		if d := p.due(sample, pace); d >= 0 && p.active(now, ps.idle) {
			if t := ps.dues.tick(now, d); after == 0 || t < after {
				after = t
			}
		}
	}
	ps.dues.consumed(sample, after)
	return true, best.name
}

// Done ends a read that Observe reported, once the reader has its bytes (or gave up). The last
// read of a sample to end publishes when it is next due.
func (ps *Plans) Done(sample int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.dues.endRead(sample)
}

// DueInHorizon returns how soon sample is due, in milliseconds, over the active plans: the
// soonest of its next occurrences within the horizon, each at its plan reader's pace; -1 when no
// active plan has it within the horizon. A sample being read right now (a read not yet Done, or
// an access in pieces not yet through) is due now: 0. It takes the lock. It is worked out fresh,
// where Due (what the cache and the disk tier ask) reads what was published: tests compare them.
func (ps *Plans) DueInHorizon(sample int) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := time.Now()
	if ps.dues.beingRead(sample, now) {
		return 0
	}
	pace, best := ps.fallbackPace(), -1
	for e := ps.inUse.Front(); e != nil; e = e.Next() {
		p := e.Value.(*plan)
		if !p.active(now, ps.idle) {
			continue
		}
		if d := p.due(sample, pace); d >= 0 && (best < 0 || d < best) {
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
	for e := ps.inUse.Front(); e != nil; e = e.Next() {
		if p := e.Value.(*plan); p.active(now, ps.idle) {
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

// UpcomingOf appends to dst the next distinct samples of the plan called name, in its order: at
// most n of them, among the max(n, horizon) entries from its position, so that its work (under the
// lock, for each plan at each open of the stats) does not grow with the plan.
func (ps *Plans) UpcomingOf(name string, dst []int, n int) []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.plans[name]
	if p == nil {
		return dst
	}
	c := p.cursor(max(n, ps.horizon), 1)
	seen := make(map[int32]bool, n)
	for len(seen) < n && c.next() {
		if s := c.sample(); !seen[s] {
			seen[s] = true
			dst = append(dst, int(s))
		}
	}
	ps.stats.Walked += int64(c.q - p.pos + 1)
	return dst
}

// Stats returns the counters, and every plan's state, sorted by name.
func (ps *Plans) Stats() Stats {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := ps.stats
	now := time.Now()
	ps.expireIdle(now)
	for _, p := range ps.plans {
		st.Steps += p.steps
		st.Plans = append(st.Plans, PlanStats{Name: p.name, Length: len(p.entries), Position: p.pos - p.base, OnPlan: p.onPlan,
			Skipped: p.skipped, Writes: p.writes, Owner: p.owner, Hits: p.hits, Misses: p.misses, Waited: p.waited, Pace: p.pace.perSecond(), LastUse: p.lastUse, Active: !p.expired && p.active(now, ps.idle), Expired: p.expired})
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
	fastest := 0.0 // of the plans in use: an expired one's pace is old
	for e := ps.inUse.Front(); e != nil; e = e.Next() {
		p := e.Value.(*plan)
		ps.stats.Visits++
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
