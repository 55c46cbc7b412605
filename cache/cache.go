// Package cache holds samples in memory under a hard bound. Buffers are allocated once
// (outside the Go heap) and recycled; a sample a reader is copying from is never evicted; each
// sample is loaded once however many readers and prefetches ask for it at the same time; a
// reader's miss is loaded ahead of prefetch work; and eviction drops samples the plan will not
// read soon before those it will. It knows nothing of video: a Loader makes a sample's bytes,
// and a Fetch, when there is one, makes those a quicker source holds (a disk tier), in a lane of
// its own, so that they never wait behind the slow loads. A Fetch may lend the cache memory
// that holds the sample already (Fetched.Lent: a disk tier's file mapped from the page cache),
// which the cache serves in place of a buffer, without a copy. A sample whose load fails for
// good (the data's own damage: Options.Permanent) is recorded as failed; one whose load fails in
// a way that may pass (the path to the data) is loaded again by the next read, and prefetched
// again after a back-off.
//
// Eviction is the plan-aware policy of package evict, which the disk tier shares: samples no
// plan wants first, least recently used first, then the one due last, in work that does not grow
// with the cache.
//
// Locking: the cache asks NextUse with its own lock held (choosing a victim, settling a load),
// so NextUse must take no lock of anything that calls into the cache (order.Plans.Due takes
// none). Want, Fetch, Load, Permanent and OnFail are called without the cache's lock.
package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/evict"
)

// Loader writes sample's bytes into buf, which is exactly Options.SampleBytes long.
type Loader func(ctx context.Context, sample int, buf []byte) error

// Options configures a Cache.
type Options struct {
	SampleBytes int64
	Capacity    int // samples held at most: ready, being loaded or queued
	// Workers is how many prefetches load at once; a reader's miss may run beside them, up to
	// MaxLoads(Workers) loads in all.
	Workers int
	// Prefetch bounds how many samples are kept ready ahead of the reader (0: as many as fit
	// beside what readers and loads hold; see Depth).
	Prefetch int
	Load     Loader
	// Fetch, if set, makes sample's bytes from a quicker source than Load (a disk tier) if that
	// source has them, and says whether it did. Every sample goes to Fetch first, and to Load
	// only when Fetch did not make it. Fetches run in a lane of their own, beside Load's:
	// FetchWorkers prefetches at once, and readers' misses beside them (up to twice as many in
	// all), so that with every Load busy what Fetch can make is still made ahead of the reader.
	Fetch func(ctx context.Context, sample int, buf []byte) Fetched
	// FetchWorkers is how many prefetches Fetch makes at once (0: Workers).
	FetchWorkers int
	// MaxLent bounds the samples held in memory a Fetch lent (Fetched.Lent) at once: beyond it,
	// what is lent is copied into the sample's buffer and handed back at once. (Each lent
	// mapping is one of the process's memory maps, of which the kernel allows a fixed number:
	// vm.max_map_count.) 0: none is kept lent.
	MaxLent int
	// NextUse says how soon a sample is due, in milliseconds at its readers' pace, or -1 when it
	// is not due soon. It is asked with the cache's lock held, and must be quick and take no lock
	// that is held while calling into the cache. Nil: nothing is due (plain LRU).
	NextUse func(sample int) int
	// Want appends to dst the next n samples to keep ready, most urgent first (the upcoming
	// plan). Nil: none.
	Want func(dst []int, n int) []int
	// OnFail is told, once, of each sample whose load failed for good (Permanent), before Get
	// or Failed answers with its error. It is called from the load's goroutine without the
	// cache's lock held. Nil: nobody is told.
	OnFail func(sample int, err error)
	// Permanent tells which load errors are the sample's own (damage in its video), which
	// loading it again cannot mend: the sample is recorded as failed (Failed, Failures) and
	// every later Get fails at once with that error. Any other error (descriptors short, a disk
	// or a network down: the path to the data, not the data) fails only the reads waiting for
	// that load, and is counted in Stats.Transient: the next read loads the sample again, and
	// the plan's prefetches of it back off, from retryMin doubling to retryMax, so that a source
	// that is down does not keep the loads busy. Cancellation is neither. Nil: every error is
	// permanent.
	Permanent func(err error) bool
	// Memory gives the cache its sample buffers (nil: each a private anonymous mapping of its
	// own): memory shared with decoder processes (isolate.Arena), which decode into a buffer
	// with no copy.
	Memory Memory
}

// Memory is where the cache's sample buffers come from, when not from the cache's own mappings.
type Memory interface {
	// Alloc returns a buffer of Options.SampleBytes bytes, page-aligned.
	Alloc() ([]byte, error)
	// Discard gives a buffer's pages back to the system, keeping the buffer (its bytes read
	// as zeros after).
	Discard(b []byte)
	// Free gives a buffer back; it is not used again.
	Free(b []byte)
}

// Fetched is what a Fetch made. With OK, the sample's bytes are in the buffer Fetch was given,
// or, when Lent is set, in memory of the source's own that holds them already (a disk tier's
// file mapped from the page cache), which the cache serves without copying (up to
// Options.MaxLent samples at once), and hands back with Lent.Release when it drops the sample;
// never while a reader holds it. The buffer waits unused meanwhile, its memory given back to
// the kernel (MADV_DONTNEED), so that the cache's bound on buffers still holds. A Lent given
// without OK is released at once.
type Fetched struct {
	OK   bool
	Lent *Lent
}

// Lent is memory a Fetch lends the cache: the sample's Bytes (Options.SampleBytes of them), and
// Release, called once when the cache is done with them. Release is called with the cache's
// lock held: it must not call into the cache (unmapping a file, a system call of some tens of
// microseconds, is what it is for).
type Lent struct {
	Bytes   []byte
	Release func()
}

// MaxLoads is how many loads run at once in a cache of the given Workers: prefetches on up to
// workers, and readers' misses beside them on the rest. A caller that sizes a resource for the
// loads (decoders, say) asks this.
func MaxLoads(workers int) int { return 2 * workers }

// reserve is the room kept beside prefetched samples: a buffer for every load that may run,
// and two for readers copying out.
func reserve(workers int) int { return MaxLoads(workers) + 2 }

// MinCapacity is the smallest capacity that keeps at least one sample ready ahead of the reader
// beside what the loads of a cache of the given Workers, and its readers, hold.
func MinCapacity(workers int) int { return reserve(workers) + 1 }

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("cache closed")

type state int

const (
	queued state = iota
	loading
	ready
)

// job is why a sample is loaded.
type job int

const (
	prefetchJob job = iota // ahead of the reader, from the plan
	demandJob              // a reader is waiting for it
	jobs
)

// lane is which of the two ways of making a sample loads it: each has its own queues and its own
// limit on loads at once.
type lane int

const (
	fetchLane lane = iota // Options.Fetch: the quick source
	loadLane              // Options.Load
	lanes
)

type entry struct {
	sample  int
	state   state
	buf     []byte // the sample's bytes: a buffer of the cache's, or lent's
	lent    *Lent  // the memory a Fetch lent, if it did; the buffer then waits in spare
	spare   []byte
	demand  bool   // a reader asked for it: load ahead of prefetch work
	lane    lane   // the lane it is queued or loading in
	q       *fifo  // the queue it waits in, if it does
	qseq    uint64 // which time it was queued: its older places in a fifo are stale (see fifo)
	started bool   // a load of it has started (counted in Stats.Prefetched or Demand)
	pins    int    // readers copying from buf
	waiters int    // readers waiting for it
	read    bool   // read since it was loaded
	done    chan struct{}
	err     error
}

// Cache is a bounded cache of samples. It is safe for concurrent use.
type Cache struct {
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	// mu guards everything below. LOCK ORDERING: mu is taken after any lock of a caller (fs
	// holds none of its own when it calls in) and before none: NextUse, asked with mu held, takes
	// no lock; Want, Fetch, Load, Permanent and OnFail are called without it.
	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) when a buffer may have become free
	entries map[int]*entry
	// evict orders the entries that may be evicted: ready ones, and queued prefetches.
	evict     *evict.Policy[int]
	failed    map[int]error // samples whose load failed, and why: the record of it (see Failures)
	free      [][]byte
	allocated int
	lent      int               // entries holding lent memory (Options.MaxLent bounds them)
	queue     [lanes][jobs]fifo // queued loads, by lane and job
	running   [lanes][jobs]int  // loads running, by lane and job
	closed    bool
	// replanned: the plans were written or removed since the last prefetch pass, and every due
	// may have moved (Replanned).
	replanned bool
	// retry holds the samples whose last load failed transiently (not Options.Permanent): not
	// prefetched again before their time. A sample leaves it when it loads, or once its
	// back-off ended over retryMax ago (when it counts as never failed), at a sweep: the next
	// back-off after retry has grown to retrySweep.
	retry      map[int]backoff
	retrySweep int
	// retryTimer, when set, kicks a prefetch pass at retryAt, when the earliest back-off that a
	// pass skipped ends.
	retryTimer *time.Timer
	retryAt    time.Time
	stats      Stats
}

// backoff is when a sample whose load failed transiently may be prefetched again, and how long
// the last wait was.
type backoff struct {
	at   time.Time
	wait time.Duration
}

// retryMin and retryMax bound the wait before a sample whose load failed transiently is
// prefetched again: retryMin after its first such failure, twice the last wait after each
// further one, at most retryMax. Reads do not wait: a read's miss loads at once.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

// Stats is a snapshot of the cache's state and counters.
type Stats struct {
	Capacity  int // samples
	Allocated int // buffers mapped so far (never more than Capacity; kept until Close)
	Used      int // samples holding a buffer: ready, loading or queued
	Ready     int
	Pinned    int // ready samples readers are copying from
	Lent      int // samples whose bytes a Fetch lent (Fetched.Lent), not in a buffer
	Loading   int
	Queued    int

	Loaded        int64 // loads that succeeded
	Fetched       int64 // of those, made by Fetch
	FetchMissed   int64 // samples Fetch did not make, passed to Load
	Failed        int64 // loads that failed for good (Options.Permanent): samples recorded failed
	Transient     int64 // loads that failed in a way that may pass: not recorded, tried again
	Prefetched    int64 // loads started ahead of a read
	Demand        int64 // loads started by a read's miss
	Evicted       int64 // ready samples dropped to make room
	EvictedUnread int64 // of those, prefetched and never read
	Cancelled     int64 // queued prefetches dropped before they ran
	// EvictWork counts the work of choosing victims and keeping their order: dues asked and
	// entries looked at (evict.Policy's Asks and Visits), which tests count.
	EvictWork int64
	// QueueWork counts the queued loads looked at to take one out of its queue (started,
	// dropped, or moved ahead for a reader), which tests count.
	QueueWork int64
}

// New returns a cache. Close it to stop its loads and free its memory. A capacity below
// MinCapacity(Workers) works, but prefetches nothing.
func New(opts Options) (*Cache, error) {
	if opts.SampleBytes <= 0 || opts.Capacity < 1 || opts.Workers < 1 || opts.Load == nil {
		return nil, fmt.Errorf("cache: bad options (sample %d bytes, capacity %d, workers %d)", opts.SampleBytes, opts.Capacity, opts.Workers)
	}
	if opts.FetchWorkers <= 0 {
		opts.FetchWorkers = opts.Workers
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		opts: opts, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1),
		changed: make(chan struct{}), entries: map[int]*entry{}, evict: evict.New[int](opts.NextUse), failed: map[int]error{},
		retry: map[int]backoff{},
	}
	for l := range lanes {
		for j := range jobs {
			c.queue[l][j].work = &c.stats.QueueWork
		}
	}
	c.wg.Add(1)
	c.Kick() // what Want names from the start is prefetched without waiting for a kick
	go c.prefetchLoop()
	return c, nil
}

// Depth is how many samples ahead of the reader a cache made with these options keeps ready:
// Prefetch, or when that is 0 or more than fits, all the capacity beside what loads and readers
// hold. It lets what a cache asks (Want) be sized before the cache is made.
func (o Options) Depth() int {
	room := max(o.Capacity-reserve(o.Workers), 0)
	if o.Prefetch > 0 {
		return min(o.Prefetch, room)
	}
	return room
}

// Depth is how many samples ahead of the reader the cache keeps ready (Options.Depth).
func (c *Cache) Depth() int { return c.opts.Depth() }

// Handle is a pinned sample: its bytes stay put until Release.
type Handle struct {
	c *Cache
	e *entry
}

// Bytes is the sample's data. It must not be used after Release.
func (h *Handle) Bytes() []byte { return h.e.buf }

// Release unpins the sample.
func (h *Handle) Release() {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	h.e.pins--
	if h.e.pins == 0 {
		h.c.evict.Refresh(h.e.sample) // read: due later now, most likely
		h.c.signal()
	}
}

// Peek returns the sample pinned if it is ready, else nil. It loads nothing.
func (c *Cache) Peek(sample int) *Handle {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[sample]; e != nil && e.state == ready && !c.closed {
		c.pin(e)
		return &Handle{c, e}
	}
	return nil
}

// Get returns the sample, pinned, loading it first if it is not ready: at once, ahead of
// prefetch work. hit says whether it was ready. A sample whose load failed for good
// (Options.Permanent) fails again at once, with the same error; one whose load failed
// transiently is loaded again.
func (c *Cache) Get(ctx context.Context, sample int) (h *Handle, hit bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return nil, false, ErrClosed
		}
		if err, ok := c.failed[sample]; ok {
			return nil, false, err
		}
		e := c.entries[sample]
		if e != nil && e.state == ready {
			c.pin(e)
			return &Handle{c, e}, true, nil
		}
		if e == nil {
			buf := c.takeBuffer(sample, true)
			if buf == nil {
				// Everything is pinned or awaited: wait for a reader to let go.
				if err := c.wait(ctx); err != nil {
					return nil, false, err
				}
				continue
			}
			e = c.enqueue(sample, buf, demandJob)
		} else if e.state == queued && !e.demand {
			e.demand = true // a reader wants it now: move it ahead of prefetch work
			c.evict.Remove(sample)
			q := &c.queue[e.lane]
			q[prefetchJob].remove(e)
			q[demandJob].push(e)
		}
		// A reader waits for it: should its Fetch under way miss, Load has it ahead of
		// prefetch work, and no prefetch pass drops it.
		e.demand = true
		e.waiters++
		c.dispatch()
		c.mu.Unlock()
		select {
		case <-e.done:
			c.mu.Lock()
		case <-ctx.Done():
			c.mu.Lock()
			e.waiters--
			return nil, false, ctx.Err()
		}
		e.waiters--
		if e.err != nil {
			return nil, false, e.err
		}
		if c.closed { // loaded as Close began: Close waits for pins, so take none
			return nil, false, ErrClosed
		}
		c.pin(e)
		return &Handle{c, e}, false, nil
	}
}

// enqueue makes an entry for sample, holding buf, and queues it in the first lane: Fetch's if
// there is one. Called with c.mu held.
func (c *Cache) enqueue(sample int, buf []byte, j job) *entry {
	e := &entry{sample: sample, buf: buf, demand: j == demandJob, lane: loadLane, done: make(chan struct{})}
	if c.opts.Fetch != nil {
		e.lane = fetchLane
	}
	c.entries[sample] = e
	c.queue[e.lane][j].push(e)
	if j == prefetchJob {
		c.evict.Add(sample, sample)
	}
	return e
}

// pin marks a ready entry as being read; called with c.mu held.
func (c *Cache) pin(e *entry) {
	e.pins++
	e.read = true
	c.evict.Touch(e.sample)
}

// wait releases the lock until a buffer may have come free; called with c.mu held.
func (c *Cache) wait(ctx context.Context) error {
	ch := c.changed
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signal wakes readers waiting for a buffer; called with c.mu held.
func (c *Cache) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Replanned tells the cache that a plan was written or removed: every sample's due may have
// moved. The next prefetch pass asks them all again, once (work that grows with the cache, off
// the read path: about 1 ms at 13,000 samples), and then looks at what is wanted.
func (c *Cache) Replanned() {
	c.mu.Lock()
	c.replanned = true
	c.mu.Unlock()
	c.Kick()
}

// Kick makes the cache look at what is wanted again (the plan moved or changed).
func (c *Cache) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// prefetchLoop makes a pass over what is wanted at each kick (kicks that come during a pass
// make one more). A pass's work grows with the prefetch depth (Want's answer, and prefetch's
// look at each of it). At 13,000 samples (a 32 GiB cache of 2.4 MB samples) prefetch takes
// about 2.5 ms, holding the cache's lock (BenchmarkPrefetchPass), and Want about 2 ms beside
// (order.Plans.Upcoming: order.BenchmarkUpcoming), about 4 ms a pass in all; at 100 samples,
// some microseconds. Dropping queued prefetches adds work linear in those dropped. So that a
// large cache (a depth over restDepth) spends neither a core nor its lock on passes at a read's
// rate, a pass of it that took over passGap is followed by a rest of passRest times as long,
// while kicks gather.
func (c *Cache) prefetchLoop() {
	defer c.wg.Done()
	var want []int
	for {
		select {
		case <-c.kick:
		case <-c.ctx.Done():
			return
		}
		t0 := time.Now()
		if c.opts.Want != nil {
			want = c.opts.Want(want[:0], c.Depth())
		}
		c.prefetch(want)
		if d := time.Since(t0); d > passGap && c.Depth() > restDepth {
			select {
			case <-time.After(passRest * d):
			case <-c.ctx.Done():
				return
			}
		}
	}
}

// restDepth, passGap and passRest: in a cache of a depth over restDepth, a prefetch pass that
// takes over passGap is followed by a rest of passRest times its length, so passes hold at most
// a fifth of a core and of the cache's lock.
const (
	restDepth = 2048
	passGap   = time.Millisecond
	passRest  = 4
)

// prefetch queues the wanted samples that are missing, in order, while there is room that
// nothing due sooner needs, and drops queued prefetches no longer wanted.
func (c *Cache) prefetch(want []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.replanned {
		c.evict.RefreshAll()
		c.replanned = false
	}
	wanted := make(map[int]bool, len(want))
	for _, s := range want {
		wanted[s] = true
	}
	dropped := false
	for l := range lanes {
		q := &c.queue[l][prefetchJob]
		// Dropping one takes it out of q in constant time (fifo.remove), which leaves the
		// queue's entries in items as they are (a compaction makes new ones).
		for _, p := range q.items {
			if e := p.e; q.here(p) && !wanted[e.sample] && e.waiters == 0 {
				c.free = append(c.free, c.drop(e))
				c.stats.Cancelled++
				dropped = true
			}
		}
	}
	if dropped {
		c.signal()
	}
	var now time.Time
	if len(c.retry) > 0 {
		now = time.Now()
	}
	for _, s := range want {
		if _, failed := c.failed[s]; failed || c.entries[s] != nil {
			continue
		}
		if b, ok := c.retry[s]; ok && now.Before(b.at) {
			c.retryLater(b.at)
			continue
		}
		buf := c.takeBuffer(s, false)
		if buf == nil {
			break
		}
		c.enqueue(s, buf, prefetchJob)
	}
	c.dispatch()
}

// dispatch starts queued loads in each lane: readers' misses first, up to twice the lane's
// workers in all, prefetches on up to its workers (Workers for Load, which is what MaxLoads
// counts; FetchWorkers for Fetch). Called with c.mu held.
func (c *Cache) dispatch() {
	for l := range lanes {
		w := c.opts.Workers
		if l == fetchLane {
			w = c.opts.FetchWorkers
		}
		q, run := &c.queue[l], &c.running[l]
		running := func() int { return run[prefetchJob] + run[demandJob] }
		for q[demandJob].len() > 0 && running() < 2*w {
			c.start(q[demandJob].pop(), demandJob)
		}
		for q[demandJob].len() == 0 && q[prefetchJob].len() > 0 && run[prefetchJob] < w && running() < 2*w {
			c.start(q[prefetchJob].pop(), prefetchJob)
		}
	}
}

func (c *Cache) start(e *entry, j job) {
	e.state = loading
	c.evict.Remove(e.sample)
	c.running[e.lane][j]++
	if !e.started {
		e.started = true
		if j == demandJob {
			c.stats.Demand++
		} else {
			c.stats.Prefetched++
		}
	}
	c.wg.Add(1)
	go c.run(e, j)
}

func (c *Cache) run(e *entry, j job) {
	defer c.wg.Done()
	if e.lane == fetchLane {
		c.fetched(e, j, c.opts.Fetch(c.ctx, e.sample, e.buf))
		return
	}
	err := c.opts.Load(c.ctx, e.sample, e.buf)
	how := loaded
	switch {
	case err == nil:
	case c.ctx.Err() != nil || errors.Is(err, context.Canceled):
		how = cancelled
	case c.opts.Permanent == nil || c.opts.Permanent(err):
		how = failedForGood
	default:
		how = failedTransiently
	}
	if how == failedForGood && c.opts.OnFail != nil {
		c.opts.OnFail(e.sample, err) // while the entry still shows it loading
	}
	c.finish(e, j, err, how)
}

// outcome is how a load ended.
type outcome int

const (
	loaded            outcome = iota
	cancelled                 // by Close, or the cache dropping the sample
	failedForGood             // Options.Permanent: recorded
	failedTransiently         // may pass: tried again, prefetches after a back-off
)

// fetched settles a fetch: the sample is ready if Fetch made it, else it is queued for Load,
// ahead of prefetch work if a reader waits for it (unless the cache is closing).
func (c *Cache) fetched(e *entry, j job, f Fetched) {
	ok := f.OK
	if l := f.Lent; l != nil {
		buf, lend := e.buf, false
		if ok && len(l.Bytes) == len(buf) {
			c.mu.Lock()
			if lend = c.lent < c.opts.MaxLent; lend {
				c.lent++
				e.spare, e.buf, e.lent = buf, l.Bytes, l
			}
			c.mu.Unlock()
		}
		if lend {
			// The buffer waits, its pages given back: nobody touches a loading entry's spare.
			c.discard(buf)
		} else {
			if ok { // over MaxLent (or of another size: not the sample): a copy, outside the lock
				ok = copy(e.buf, l.Bytes) == len(e.buf)
			}
			l.Release()
		}
	}
	if !ok {
		c.mu.Lock()
		if !c.closed {
			c.running[fetchLane][j]--
			c.stats.FetchMissed++
			e.state, e.lane = queued, loadLane
			next := prefetchJob
			if e.demand {
				next = demandJob
			}
			c.queue[loadLane][next].push(e)
			if next == prefetchJob {
				c.evict.Add(e.sample, e.sample)
			}
			c.dispatch()
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	var err error
	how := loaded
	if !ok {
		err, how = ErrClosed, cancelled
	}
	c.finish(e, j, err, how)
}

// finish settles a load that returned err: failed, cancelled or ready.
func (c *Cache) finish(e *entry, j job, err error, how outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[e.lane][j]--
	if err != nil {
		delete(c.entries, e.sample)
		c.free = append(c.free, c.takeBack(e))
		e.err = err
		switch how {
		case failedForGood:
			c.failed[e.sample] = err
			c.stats.Failed++
		case failedTransiently:
			c.stats.Transient++
			c.backOff(e.sample)
		}
	} else {
		delete(c.retry, e.sample)
		e.state = ready
		c.evict.Add(e.sample, e.sample)
		c.stats.Loaded++
		if e.lane == fetchLane {
			c.stats.Fetched++
		}
	}
	close(e.done)
	c.signal()
	c.dispatch()
	c.Kick()
}

// backOff puts off the next prefetch of sample, whose load just failed transiently: retryMin
// after its first such failure (or one long after the last), twice the last wait after a
// further one, at most retryMax. Called with c.mu held.
func (c *Cache) backOff(sample int) {
	now := time.Now()
	b, ok := c.retry[sample]
	switch {
	case !ok || now.Sub(b.at) > retryMax:
		b.wait = retryMin
	default:
		b.wait = min(2*b.wait, retryMax)
	}
	b.at = now.Add(b.wait)
	c.retry[sample] = b
	if len(c.retry) >= c.retrySweep { // work amortised over the back-offs since the last sweep
		for s, b := range c.retry {
			if now.Sub(b.at) > retryMax {
				delete(c.retry, s)
			}
		}
		c.retrySweep = max(64, 2*len(c.retry))
	}
}

// retryLater makes sure a prefetch pass runs at at, when a back-off that a pass skipped ends.
// Called with c.mu held.
func (c *Cache) retryLater(at time.Time) {
	if c.retryTimer != nil && !c.retryAt.After(at) {
		return // a pass comes at or before at already
	}
	if c.retryTimer != nil {
		c.retryTimer.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(time.Until(at), func() {
		c.mu.Lock()
		if c.retryTimer == t { // set before this runs: it was set with c.mu held
			c.retryTimer = nil
		}
		c.mu.Unlock()
		c.Kick()
	})
	c.retryTimer, c.retryAt = t, at
}

// takeBuffer finds a buffer for sample: a free one, a new one while under capacity, or one
// evicted from another sample. A reader's miss (demand) may evict anything not in use, the
// sample due last first; a prefetch only what is due later than sample itself, or not due.
// It returns nil when there is none. Called with c.mu held.
func (c *Cache) takeBuffer(sample int, demand bool) []byte {
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		return b
	}
	if c.allocated < c.opts.Capacity {
		b, err := c.alloc()
		if err == nil {
			c.allocated++
			return b
		}
	}
	v := c.victim(sample, demand)
	if v == nil {
		return nil
	}
	if v.state == ready {
		c.stats.Evicted++
		if !v.read {
			c.stats.EvictedUnread++
		}
	} else {
		c.stats.Cancelled++
	}
	return c.drop(v)
}

// prefetchMargin is how much later than the sample a prefetch loads another must be due for
// the prefetch to take its buffer. How soon a sample is due is an estimate that moves as readers
// speed up, pause and start (the first reads of an epoch); evicting a sample for one due nearly
// as late only to load it back moments later is a decode wasted.
const prefetchMargin = 2

// victim picks the entry to evict for sample (the shared policy's choice). Called with c.mu
// held; its work does not grow with the cache.
func (c *Cache) victim(sample int, demand bool) *entry {
	after := evict.Any // a reader's miss may take anything not in use
	if !demand {
		if c.opts.NextUse == nil {
			return nil // not due itself: no reason to evict anything
		}
		d := c.opts.NextUse(sample)
		if d < 0 {
			return nil
		}
		after = d * prefetchMargin // a prefetch may only take from samples due well after it
	}
	s, ok := c.evict.Victim(after, func(s int) bool {
		e := c.entries[s]
		return e.pins > 0 || e.waiters > 0 || e.demand && e.state != ready
	})
	if !ok {
		return nil
	}
	return c.entries[s]
}

// drop removes an entry that holds a buffer (ready, or queued for prefetch) and returns the
// buffer. Called with c.mu held.
func (c *Cache) drop(e *entry) []byte {
	delete(c.entries, e.sample)
	c.evict.Remove(e.sample)
	if e.state != ready {
		e.q.remove(e) // a queued prefetch
		e.err = context.Canceled
		close(e.done)
	}
	return c.takeBack(e)
}

// takeBack returns the cache's buffer that e holds, giving back the memory a Fetch lent it
// instead, if it did. Called with c.mu held.
func (c *Cache) takeBack(e *entry) []byte {
	b := e.buf
	if e.lent != nil {
		e.lent.Release()
		c.lent--
		b, e.lent, e.spare = e.spare, nil, nil
	}
	e.buf = nil
	return b
}

// ReadyAhead returns how many of samples (in order) are ready from the first on without a gap,
// and how many are ready in all.
func (c *Cache) ReadyAhead(samples []int) (contiguous, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gap := false
	for _, s := range samples {
		if e := c.entries[s]; e != nil && e.state == ready {
			total++
			if !gap {
				contiguous++
			}
		} else {
			gap = true
		}
	}
	return contiguous, total
}

// Workers is how many prefetches load at once.
func (c *Cache) Workers() int { return c.opts.Workers }

// Failed returns the error of a sample whose load failed, if it did.
func (c *Cache) Failed(sample int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed[sample]
}

// Failures returns every sample whose load failed, with its error.
func (c *Cache) Failures() map[int]error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.failed)
}

// Stats returns a snapshot of the cache.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Capacity, s.Allocated, s.Lent = c.opts.Capacity, c.allocated, c.lent
	s.EvictWork = c.evict.Asks + c.evict.Visits
	for _, e := range c.entries {
		s.Used++
		switch e.state {
		case ready:
			s.Ready++
			if e.pins > 0 {
				s.Pinned++
			}
		case loading:
			s.Loading++
		case queued:
			s.Queued++
		}
	}
	return s
}

// ResidentBytes is how much of the cache's own buffers is resident (mincore): a buffer's pages
// come in as a sample is written into it, and a lent sample's buffer waits with them given back.
// Memory a Fetch lent is not counted. It takes the lock only to list the buffers.
func (c *Cache) ResidentBytes() int64 {
	c.mu.Lock()
	bufs := make([][]byte, 0, c.allocated)
	bufs = append(bufs, c.free...)
	for _, e := range c.entries {
		if e.lent != nil {
			bufs = append(bufs, e.spare)
		} else if e.buf != nil {
			bufs = append(bufs, e.buf)
		}
	}
	c.mu.Unlock()
	page := int64(os.Getpagesize())
	vec := make([]byte, (c.opts.SampleBytes+page-1)/page)
	var n int64
	for _, b := range bufs {
		// A buffer Close unmapped meanwhile fails (ENOMEM) and counts nothing.
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
			uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
			continue
		}
		for _, v := range vec {
			n += int64(v & 1)
		}
	}
	return n * page
}

// Close stops prefetching, cancels running loads and waits for them, waits until every Handle
// is released, and then unmaps the buffers: it never unmaps one under a reader. Readers hold a
// Handle only while their answer is written out of it (fs: until go-fuse has written the reply),
// so the wait is short. From the moment Close begins, Get and
// Peek fail (ErrClosed) or return nil.
func (c *Cache) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.retryTimer != nil {
		c.retryTimer.Stop()
		c.retryTimer = nil
	}
	for l := range lanes {
		for j := range jobs {
			c.queue[l][j].drain(func(e *entry) {
				e.err = ErrClosed
				close(e.done)
			})
		}
	}
	c.signal()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pinned() {
		c.wait(context.Background()) // Release signals when a sample's last pin goes
	}
	for _, e := range c.entries {
		if e.buf != nil {
			c.free = append(c.free, c.takeBack(e))
		}
	}
	c.entries = map[int]*entry{}
	c.evict = evict.New[int](c.opts.NextUse)
	for _, b := range c.free {
		if c.opts.Memory != nil {
			c.opts.Memory.Free(b)
		} else {
			syscall.Munmap(b)
		}
	}
	c.free = nil
}

// alloc makes a sample buffer: Options.Memory's, or a mapping of its own.
func (c *Cache) alloc() ([]byte, error) {
	if c.opts.Memory != nil {
		return c.opts.Memory.Alloc()
	}
	return syscall.Mmap(-1, 0, int(c.opts.SampleBytes), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

// discard gives a buffer's pages back to the kernel (MADV_DONTNEED frees a private mapping's;
// shared memory's are freed by its owner).
func (c *Cache) discard(b []byte) {
	if c.opts.Memory != nil {
		c.opts.Memory.Discard(b)
		return
	}
	syscall.Madvise(b, syscall.MADV_DONTNEED)
}

// pinned tells whether a reader holds a Handle. Called with c.mu held.
func (c *Cache) pinned() bool {
	for _, e := range c.entries {
		if e.pins > 0 {
			return true
		}
	}
	return false
}
