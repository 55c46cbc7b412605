package fs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/internal/metrics"
)

// readCounters is what the read path counts. Accesses (a sample read in pieces is one) are the
// tracker's to count; these are the rest.
type readCounters struct {
	latency metrics.Histogram // of whole read requests

	mu       sync.Mutex
	requests int64
	bytes    int64
	hits     int64 // accesses served that found their sample ready
	misses   int64 // accesses served that waited for a decode
	waited   time.Duration
}

// read serves [off, off+len(dest)) of a file made of hdr and then samples first..first+count-1.
// It returns fewer bytes than asked (a short read, which readers handle) in two cases: a read
// that starts in the header stops at its end, so that reading the header (np.load does, with
// a large buffer) decodes nothing; and a read that reaches a sample whose decode fails returns
// the bytes before it; reading on then fails with EIO.
func (f *FS) read(ctx context.Context, hdr []byte, first, count int, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	start := time.Now()
	S := f.lay.Spec.SampleBytes()
	n := 0
	var waited time.Duration
	var hits, misses int64
	var errno syscall.Errno
	for _, p := range f.lay.Pieces(int64(len(hdr)), first, count, off, int64(len(dest))) {
		if p.Sample < 0 {
			n += copy(dest[n:], hdr[p.Offset:p.Offset+p.Len])
			break
		}
		access := f.tracker.Observe(p.Sample, p.Len, S, start)
		if access {
			f.cache.Kick() // the reader may have moved on in the plan
		}
		t0 := time.Now()
		h, hit, err := f.cache.Get(ctx, p.Sample)
		f.tracker.Done(p.Sample) // pinned (or failed): it may look unwanted now
		if err != nil {
			errno = syscall.EIO // logged once, when the decode failed
			if ctx.Err() != nil {
				errno = syscall.EINTR
			}
			break
		}
		if !hit {
			waited += time.Since(t0)
		}
		switch {
		case access && hit:
			hits++
		case access:
			misses++
		}
		n += copy(dest[n:], h.Bytes()[p.Offset:p.Offset+p.Len])
		h.Release()
	}
	if n == 0 && errno != 0 {
		return nil, errno
	}
	c := &f.reads
	c.latency.Observe(time.Since(start))
	c.mu.Lock()
	c.requests++
	c.bytes += int64(n)
	c.hits += hits
	c.misses += misses
	c.waited += waited
	c.mu.Unlock()
	return fuse.ReadResultData(dest[:n]), 0
}
