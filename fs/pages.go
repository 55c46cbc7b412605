package fs

import (
	"os"
	"sync"
	"sync/atomic"
)

// Memory-mapped readers of the tensor files fault one page at a time (the mount's read-ahead is
// one page, so that a fault does not reach into a neighbouring sample), and each fault is one FUSE
// round trip: 588 of them for a 224x224x16 sample. When a reader faults on a sample's first page,
// or on two adjacent pages of one sample, the pageFiller hands the rest of that sample, if it is
// in the memory cache, to the kernel's page cache (FUSE's notify-store), so that the rest of its
// faults are served there.
// Only that sample's whole pages are stored: nothing of a neighbouring sample is read or decoded.
//
// Pages served from the page cache never reach vidfs, so the filler keeps a bounded window of
// stored samples (fillerBytes) and drops the oldest from the page cache as new ones come: the
// kernel's memory stays bounded, and a sample read again later reaches vidfs, where the plans see
// it. A reader still copying a dropped sample faults it in again, from the memory cache.

// fillerBytes bounds the samples held in the kernel's page cache for memory-mapped readers.
const fillerBytes = 64 << 20

// fillerMinSamples is the fewest samples that window holds, however large they are.
const fillerMinSamples = 8

// pageKey is one sample of one tensor file.
type pageKey struct {
	file   *tensorFile
	sample int
}

// fill is a sample queued to be stored, or stored (done) as store number gen, as [lo, hi).
type fill struct {
	done   bool
	gen    uint64
	lo, hi int64
}

// storedRange is a range of a file handed to the page cache, by store number gen.
type storedRange struct {
	key     pageKey
	gen     uint64
	off, ln int64
}

// pageFiller stores samples that memory-mapped readers fault on in the page cache (above).
type pageFiller struct {
	page int64
	keep int          // samples the window holds (under mu)
	work chan pageKey // samples to store; a full queue drops requests
	// mu guards the fields below it but filled. LOCK ORDERING: taken with no other lock held, and
	// released before the cache is asked (store), so it is never held with the cache's.
	mu       sync.Mutex
	lastPage map[pageKey]int64 // the offset of the last one-page read of each sample
	stored   map[pageKey]*fill // samples queued, and samples in the window
	gen      uint64            // stores so far
	window   []storedRange     // oldest first
	closed   bool
	done     chan struct{}
	filled   atomic.Int64 // samples stored
}

func newPageFiller(f *FS) *pageFiller {
	p := &pageFiller{page: int64(os.Getpagesize()), lastPage: map[pageKey]int64{}, stored: map[pageKey]*fill{},
		work: make(chan pageKey, 64), done: make(chan struct{})}
	p.keep = max(fillerMinSamples, int(fillerBytes/f.lay.Spec.SampleBytes()))
	go p.run()
	return p
}

// sampleOf is the sample of t that holds the last byte of the page at off, or -1.
func (p *pageFiller) sampleOf(t *tensorFile, off int64) int {
	ps := t.f.lay.Pieces(int64(len(t.hdr)), t.first, t.count, off+p.page-1, 1)
	if len(ps) == 0 {
		return -1
	}
	return ps[0].Sample // -1 in the header
}

// read notes a read of n bytes at off of t: a fault on a sample's first page, or on the page next
// to the last one faulted in the same sample, queues the sample to be stored. The store runs
// beside the reader, which faults on meanwhile: the store passes it within a few pages. A fault
// on a page already stored means the kernel dropped it (an open of the file does, and memory
// pressure), so the sample is stored again.
func (p *pageFiller) read(t *tensorFile, off int64, n int) {
	if int64(n) != p.page || off%p.page != 0 {
		return // not a page fault
	}
	s := p.sampleOf(t, off)
	if s < 0 {
		return
	}
	k := pageKey{t, s}
	p.mu.Lock()
	prev, seen := p.lastPage[k]
	p.lastPage[k] = off
	if len(p.lastPage) > 4096 {
		clear(p.lastPage)
	}
	first := off <= p.sampleStart(t, s) && off+p.page > p.sampleStart(t, s)
	adjacent := seen && (prev == off-p.page || prev == off+p.page)
	f := p.stored[k]
	if f != nil && f.done && off >= f.lo && off < f.hi {
		delete(p.stored, k) // dropped by the kernel
		f, first = nil, true
	}
	if (first || adjacent) && f == nil && !p.closed {
		delete(p.lastPage, k)
		select {
		case p.work <- k:
			p.stored[k] = &fill{}
		default: // busy: the reader faults on, as without the filler
		}
	}
	p.mu.Unlock()
}

// sampleStart is the offset of sample s in t.
func (p *pageFiller) sampleStart(t *tensorFile, s int) int64 {
	return int64(len(t.hdr)) + int64(s-t.first)*t.f.lay.Spec.SampleBytes()
}

// run stores the samples queued, until close.
func (p *pageFiller) run() {
	defer close(p.done)
	for k := range p.work {
		p.store(k)
	}
}

// store hands the whole pages of sample k.sample in k.file to the page cache, if the sample is
// in the memory cache, and drops the oldest sample of the window when it is full. A page that a
// fault is reading meanwhile is locked, and the store waits for it.
func (p *pageFiller) store(k pageKey) {
	t := k.file
	start := p.sampleStart(t, k.sample)
	end := start + t.f.lay.Spec.SampleBytes()
	lo := (start + p.page - 1) / p.page * p.page
	hi := end / p.page * p.page
	if k.sample == t.first+t.count-1 {
		hi = end // the file's last page may be part of a page
	}
	stored := false
	if h := t.f.cache.Peek(k.sample); h != nil {
		stored = hi > lo && t.WriteCache(lo, h.Bytes()[lo-start:hi-start]) == 0
		h.Release()
	}
	p.mu.Lock()
	f := p.stored[k]
	if !stored || f == nil {
		delete(p.stored, k)
		p.mu.Unlock()
		return
	}
	p.gen++
	*f = fill{done: true, gen: p.gen, lo: lo, hi: hi}
	p.window = append(p.window, storedRange{k, p.gen, lo, hi - lo})
	var drop []storedRange
	if n := len(p.window) - p.keep; n > 0 {
		for _, r := range p.window[:n] {
			// Only the sample's latest store leaves: an older one's pages were stored again.
			if cur := p.stored[r.key]; cur != nil && cur.gen == r.gen {
				delete(p.stored, r.key)
				drop = append(drop, r)
			}
		}
		p.window = append(p.window[:0], p.window[n:]...)
	}
	p.mu.Unlock()
	p.filled.Add(1)
	for _, r := range drop {
		r.key.file.NotifyContent(r.off, r.ln)
	}
}

// close stops the filler and waits for its store in progress.
func (p *pageFiller) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.work)
	}
	p.mu.Unlock()
	<-p.done
}
