package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/internal/metrics"
)

// readCounters is what the read path counts in all. Accesses (a sample read in pieces is one),
// and what each plan's were served, are the plans' to count (order.Plans.Served); these are the
// rest.
type readCounters struct {
	latency metrics.Histogram // of whole read requests

	// mu guards the fields below. LOCK ORDERING: taken with no other lock held (the read path
	// takes its locks one at a time), and nothing is called with it held.
	mu       sync.Mutex
	requests int64
	bytes    int64
	all      accessCounts
}

// accessCounts counts accesses served, and the time readers waited for them.
type accessCounts struct {
	hits   int64 // accesses that found their sample ready
	misses int64 // accesses that waited for a decode
	waited time.Duration
}

func (a *accessCounts) add(hit bool, waited time.Duration) {
	if hit {
		a.hits++
	} else {
		a.misses++
	}
	a.waited += waited
}

// counted is one access a read served.
type counted struct {
	plan   string
	hit    bool
	waited time.Duration
}

// read serves [off, off+len(dest)) of a file made of hdr and then samples first..first+count-1.
// Nothing is copied into dest: the answer is the bytes where they lie (the header, the samples'
// buffers in the cache, pinned until go-fuse has written them to the kernel, zeros), which the
// kernel copies into the reader's buffer in one writev.
// It returns fewer bytes than asked (a short read, which readers handle) in two cases: a read
// that starts in the header stops at its end, so that reading the header (np.load does, with
// a large buffer) decodes nothing; and, under OnErrorEIO, a read that reaches a sample whose
// decode fails returns the bytes before it; reading on then fails with EIO. Under the other
// policies such a sample's bytes are another sample's, or zeros. A sample the cache cannot give
// for another reason is never replaced: the read stops there, with EINTR if the reader's request
// was cancelled, else EIO (the cache closed under it: the mount is going away).
func (f *FS) read(ctx context.Context, hdr []byte, first, count int, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	start := time.Now()
	S := f.lay.Spec.SampleBytes()
	n := 0
	var waited time.Duration
	var accesses []counted
	var errno syscall.Errno
	res := &readResult{}
	var mine []string // the plans the reader wrote
	mineKnown := false
	for _, p := range f.lay.Pieces(int64(len(hdr)), first, count, off, int64(len(dest))) {
		if p.Sample < 0 {
			res.add(hdr[p.Offset : p.Offset+p.Len])
			n += int(p.Len)
			break
		}
		if !mineKnown {
			mine, mineKnown = f.owners.of(callerPid(ctx)), true
		}
		access, plan := f.plans.Observe(p.Sample, p.Len, S, start, mine)
		if access {
			f.moved() // the reader may have moved on in the plan
		}
		t0 := time.Now()
		h, hit, err := f.cache.Get(ctx, p.Sample)
		f.plans.Done(p.Sample) // pinned (or failed): it may look unwanted now
		if access {
			f.load.Accessed(p.Sample, err == nil)
		}
		if err != nil && f.cfg.OnError != OnErrorEIO && f.failedLoad(p.Sample, err) {
			h, err = f.insteadOf(ctx, p.Sample) // logged once, when first served
		}
		if err != nil {
			errno = syscall.EIO // a failed decode is logged once, when it failed
			if ctx.Err() != nil {
				errno = syscall.EINTR
			}
			break
		}
		var w time.Duration
		if !hit {
			w = time.Since(t0)
			waited += w
		}
		if access {
			accesses = append(accesses, counted{plan, hit, w})
		}
		if h == nil { // zeros in place of a sample that cannot be decoded
			res.addZeros(int(p.Len))
			n += int(p.Len)
			continue
		}
		res.add(h.Bytes()[p.Offset : p.Offset+p.Len])
		res.pinned = append(res.pinned, h)
		n += int(p.Len)
	}
	if n == 0 {
		res.Done() // go-fuse calls Done of no empty answer: nothing may stay pinned
		if errno != 0 {
			return nil, errno
		}
		return fuse.ReadResultData(nil), 0
	}
	c := &f.reads
	c.latency.Observe(time.Since(start))
	c.mu.Lock()
	c.requests++
	c.bytes += int64(n)
	for _, a := range accesses {
		c.all.add(a.hit, 0)
	}
	c.all.waited += waited
	c.mu.Unlock()
	for _, a := range accesses {
		if a.plan != "" {
			f.plans.Served(a.plan, a.hit, a.waited)
		}
	}
	return res, 0
}

// readResult is a read's answer as the pieces of memory that hold it, written to the kernel
// with one writev (go-fuse asks Slices, then calls Done once it has written them), so that
// vidfs copies nothing: the kernel copies each piece into the reader's buffer.
type readResult struct {
	parts  [][]byte
	size   int
	pinned []*cache.Handle // the samples parts point into, released by Done
}

// zeros is what parts of a sample that cannot be decoded point to under --on-error zeros. It is
// never written.
var zeros [1 << 20]byte

func (r *readResult) add(b []byte) {
	r.parts = append(r.parts, b)
	r.size += len(b)
}

func (r *readResult) addZeros(n int) {
	for n > 0 {
		k := min(n, len(zeros))
		r.add(zeros[:k])
		n -= k
	}
}

func (r *readResult) Size() int { return r.size }

// Slices is the answer's pieces, for go-fuse's writev.
func (r *readResult) Slices() ([][]byte, fuse.Status) { return r.parts, fuse.OK }

// Bytes copies the answer into buf, or a larger buffer if it does not fit.
func (r *readResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	buf = buf[:0]
	for _, p := range r.parts {
		buf = append(buf, p...)
	}
	return buf, fuse.OK
}

// Done releases the samples the answer pointed into: after it, the answer must not be used.
func (r *readResult) Done() {
	for _, h := range r.pinned {
		h.Release()
	}
	r.pinned, r.parts = nil, nil
}

// failedLoad tells whether err, from the cache's Get of sample, is that sample's failed load,
// which the cache holds (cache.Failed): only then is something served in its place. The cache
// closing (cache.ErrClosed, or a load it cancelled) and the reader's cancellation are not.
func (f *FS) failedLoad(sample int, err error) bool {
	cause := f.cache.Failed(sample)
	return err != nil && cause != nil && errors.Is(err, cause)
}
