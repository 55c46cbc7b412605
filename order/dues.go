package order

import (
	"math"
	"sync/atomic"
	"time"
)

// dues is the part of Plans that publishes when each sample is next due (Due) and keeps it right
// while samples are being read: the reads under way, the accesses in pieces, the dues to publish
// once reads end, and the table the cache and the disk tier read without a lock, with its spare.
// Plans works out the dues from the plans (publish) and hands them over whole (swapIn).
//
// Its methods are called with Plans.mu held, except due (no lock), takeSpare (Plans.setMu) and
// tick (either). It calls nothing outside itself.
type dues struct {
	start   time.Time       // what dues count from
	open    map[int]*access // accesses in pieces, not yet through
	reading map[int]int     // sample -> reads observed and not yet Done
	// after holds, for each sample being read, the due to publish once its reads are Done: it
	// is published as due now until then.
	after map[int]int32
	// table holds, for each sample, when it is next due over the plans (a tick: see tick), or 0
	// when no plan has it. Read with atomic loads and no lock (due); written under Plans.mu,
	// with atomic stores (a new table is filled before it is stored here).
	table atomic.Pointer[dueTable]
	// spare is the table the last swapIn replaced, kept for the next build to fill, so that
	// keeping the dues fresh does not allocate (and fault in) a new array each time: taken only
	// once no due is reading it (see takeSpare). GUARDED_BY Plans.setMu.
	spare *dueTable
	// building is set while Plans works out dues off the lock: samples whose entries reads
	// consume meanwhile are noted in touched, and keep what the reads published (see swapIn).
	building bool
	touched  map[int]struct{}
}

// access is an access to a sample in pieces: the bytes read so far, and when last.
type access struct {
	bytes int64
	last  time.Time
}

// dueTable is one published array of dues. readers counts the due calls under way on it: a
// table replaced by a swapIn is filled anew (takeSpare) only once none is, and a due that finds
// its table replaced by the time it counts itself in asks the new one instead, so that no read
// ever sees a table being refilled.
type dueTable struct {
	d       []int32
	readers atomic.Int32
}

// init makes d empty, its dues counting from start.
func (d *dues) init(start time.Time) {
	d.start = start
	d.open, d.reading, d.after, d.touched = map[int]*access{}, map[int]int{}, map[int]int32{}, map[int]struct{}{}
	d.table.Store(&dueTable{})
}

// tick is the published form of a due ms milliseconds after now: never 0, which means not due.
func (d *dues) tick(now time.Time, ms int) int32 {
	return int32(min((now.Sub(d.start).Milliseconds()+int64(ms))/tickMs+1, math.MaxInt32))
}

// due is Plans.Due: it reads the table without a lock.
func (d *dues) due(sample int) int {
	var v int32
	for {
		t := d.table.Load()
		t.readers.Add(1)
		if d.table.Load() != t { // replaced meanwhile: it may be being refilled (takeSpare)
			t.readers.Add(-1)
			continue
		}
		if sample >= 0 && sample < len(t.d) {
			v = atomic.LoadInt32(&t.d[sample])
		}
		t.readers.Add(-1)
		break
	}
	if v == 0 {
		return -1
	}
	return int(max((int64(v)-1)*tickMs-time.Since(d.start).Milliseconds(), 0))
}

// takeSpare returns the replaced table's array for a build to overwrite, of length 0; nil when
// there is none or a due may still be reading it. Called with Plans.setMu held.
func (d *dues) takeSpare() []int32 {
	t := d.spare
	if t == nil || t.readers.Load() != 0 {
		return nil
	}
	d.spare = nil
	return t.d[:0]
}

// size is how many samples the table holds.
func (d *dues) size() int { return len(d.table.Load().d) }

// grow makes the table hold at least n samples.
func (d *dues) grow(n int) []int32 {
	old := d.table.Load().d
	if n <= len(old) {
		return old
	}
	g := make([]int32, max(n, 2*len(old)))
	for i := range old {
		g[i] = atomic.LoadInt32(&old[i])
	}
	d.table.Store(&dueTable{d: g})
	return g
}

// startRead counts a read of sample under way: the sample is due now until the last such read
// ends, and then as after says (its due before, unless the read is an access that consumes an
// entry: see setAfter).
func (d *dues) startRead(sample int, now time.Time) {
	table := d.grow(sample + 1)
	if d.reading[sample]++; d.reading[sample] == 1 {
		if _, ok := d.after[sample]; !ok { // else an access in pieces holds it due now already
			d.after[sample] = atomic.LoadInt32(&table[sample])
		}
		atomic.StoreInt32(&table[sample], d.tick(now, 0))
	}
}

// newAccess tells whether a read of n bytes of sample (of sampleBytes) at now starts a new
// access to it, rather than continuing one in pieces, and keeps the accesses in pieces.
func (d *dues) newAccess(sample int, n, sampleBytes int64, now time.Time) bool {
	if a, ok := d.open[sample]; ok && now.Sub(a.last) < accessTimeout {
		a.bytes += n
		a.last = now
		if a.bytes >= sampleBytes {
			delete(d.open, sample)
		}
		return false
	}
	if n < sampleBytes {
		d.open[sample] = &access{bytes: n, last: now}
		if len(d.open) > 4096 {
			for s, a := range d.open { // forget accesses that stopped part way
				if now.Sub(a.last) >= accessTimeout {
					d.forget(s)
				}
			}
		}
	} else {
		delete(d.open, sample)
	}
	return true
}

// consumed notes that a read consumed an entry of sample, and that after is its due once its
// reads end: its next entry's, or in another plan's window (0: none).
func (d *dues) consumed(sample int, after int32) {
	if d.building {
		d.touched[sample] = struct{}{}
	}
	d.after[sample] = after
}

// endRead ends a read of sample that startRead counted. The last read of a sample to end
// publishes when it is next due, unless an access in pieces to it is not through yet.
func (d *dues) endRead(sample int) {
	if d.reading[sample]--; d.reading[sample] > 0 {
		return
	}
	delete(d.reading, sample)
	if a, ok := d.open[sample]; ok {
		if time.Since(a.last) < accessTimeout {
			return // in pieces: due now until read through
		}
		delete(d.open, sample)
	}
	d.publishAfter(sample)
}

// beingRead tells whether a read of sample is under way, or an access in pieces not through.
func (d *dues) beingRead(sample int, now time.Time) bool {
	if d.reading[sample] > 0 {
		return true
	}
	a, ok := d.open[sample]
	return ok && now.Sub(a.last) < accessTimeout
}

// publishAfter publishes the due of a sample no read holds any more (what after holds for it),
// and forgets it was being read.
func (d *dues) publishAfter(sample int) {
	after, ok := d.after[sample]
	if !ok {
		return
	}
	if t := d.table.Load().d; sample < len(t) {
		atomic.StoreInt32(&t[sample], after)
	}
	delete(d.after, sample)
}

// forget drops an access in pieces that stopped part way (timed out): its sample is due as its
// plans say again, unless a read of it is still under way.
func (d *dues) forget(sample int) {
	delete(d.open, sample)
	if d.reading[sample] == 0 {
		d.publishAfter(sample)
	}
}

// expireAccesses forgets up to two accesses in pieces, taken at random, if they timed out: so
// that, read after read, one that stopped part way does not keep its sample due now for long,
// in work that does not grow with the accesses.
func (d *dues) expireAccesses(now time.Time) {
	k := 0
	for s, a := range d.open {
		if now.Sub(a.last) >= accessTimeout {
			d.forget(s)
		}
		if k++; k == 2 {
			return
		}
	}
}

// fillArray returns spare (an array no due reads: takeSpare's, or a build's scratch from it),
// or a new array if it is too small, as n zeroed dues to fill off the lock.
func fillArray(spare []int32, n int) []int32 {
	if cap(spare) >= n {
		spare = spare[:n]
		clear(spare)
		return spare
	}
	return make([]int32, n)
}

// swapIn publishes fill, the dues of samples [0, n) worked out whole since building was set,
// in place of the table, with what reads did meanwhile: what reads published past n stands (the
// table grew), a sample whose entry a read consumed keeps the due that read published (the
// build may have counted the entry), and a sample being read stays due now until its reads end.
// The table replaced becomes the spare.
func (d *dues) swapIn(fill []int32, n int, now time.Time) {
	oldTable := d.table.Load()
	old := oldTable.d
	if len(old) > n { // grown by a read meanwhile: what reads published past n stands
		fill = append(fill, old[n:]...)
	}
	for s := range d.touched { // consumed meanwhile: what the read published stands
		if _, ok := d.after[s]; !ok {
			fill[s] = atomic.LoadInt32(&old[s])
		}
	}
	for s := range d.after { // being read, or in pieces: due now until Done or read through
		if _, ok := d.touched[s]; !ok {
			d.after[s] = fill[s]
		}
		fill[s] = d.tick(now, 0)
	}
	clear(d.touched)
	d.building = false
	d.table.Store(&dueTable{d: fill})
	d.spare = oldTable
}
