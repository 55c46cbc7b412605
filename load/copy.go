package load

// The training copy on the load path: the keys of videos' frames, the frames each sample
// uses, and reading and keeping a sample's frames.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/copystore"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
)

// trainingCopy is the training copy on a mount's load path: the key of each video's frames, the
// whole-video fills, and under --copy-fill auto their budget.
type trainingCopy struct {
	c      *copystore.Store
	l      *Loader
	prefix [32]byte // digest of what every key of this mount shares: versions and output
	mode   Fill
	rate   metrics.Rate // frames put in the copy
	// keepers holds *passKeeper, reused from load to load (their frames are a sample's worth);
	// fillBufs, *fillBuffers, a whole video's decode's.
	keepers, fillBufs sync.Pool
	fills             *fills
	budget            *budget // --copy-fill auto's; nil in the other modes
	// served holds, under auto, a bit per sample: its last load was served from the copy, for
	// the budget's grant when a reader reads it; seen, a bit per video: a sample of it was
	// loaded this mount (a video loaded again is read across epochs: wantedAgain).
	served, seen bits
	// neededMu guards needed: how many frames the samples of a video of each length use.
	// LOCK ORDERING: taken alone.
	neededMu sync.Mutex
	needed   map[int]int
	// wait is how long a load waits for the writer when its backlog is full before the frames
	// it keeps are dropped (counted: Stats.Full); they are kept by a later decode then.
	wait time.Duration
	// chunk is how many frames a whole video's decode converts at a time at most (fillChunk, or
	// Disk.FillChunk).
	chunk int
	// frames is how many frames the samples use, over every video, and overhead what the
	// videos' files take besides their frames: the whole copy's size, with what a frame takes.
	frames, overhead int64
	keepFree         int64 // Disk.KeepFree
	// toMeasure is how many samples are still to be measured for a frame's size on disk
	// (measureLoaded), and measured is closed when none are.
	toMeasure atomic.Int32
	measured  chan struct{}
	stop      func() // ends the fills and the adopting of files found, and waits for them
}

// keepWait is trainingCopy.wait.
const keepWait = 50 * time.Millisecond

// videoKey is the key of video v's frames as decode path p makes them: a digest of the
// decoder's output version and FFmpeg's, the output (size, fit, decoding), the video's file
// (absolute path, size, modification time), the frame rate the layout counts frames at, and for
// NVDEC's frames the path (the CPU's and NVDEC's may differ: a copy holds one path's frames of a
// video, never a mix). Not the clips (frames, stride, step): a remount with other clips over the
// same output reads the same frames.
func (l *Loader) videoKey(v int, p decode.Path) diskstore.Key {
	vid := l.lay.Videos[v]
	h := sha256.New()
	h.Write(l.copy.prefix[:])
	h.Write([]byte("frames\x00"))
	h.Write([]byte(l.videoPath(v)))
	var b [8 * 4]byte
	fps := l.lay.Spec.FPS
	for k, x := range []int64{vid.Size, vid.ModTime, int64(fps.Num), int64(fps.Den)} {
		binary.LittleEndian.PutUint64(b[8*k:], uint64(x))
	}
	h.Write(b[:])
	if p != decode.PathCPU {
		h.Write([]byte("path\x00"))
		h.Write([]byte{byte(p)})
	}
	var k diskstore.Key
	h.Sum(k[:0])
	return k
}

// heldKey is the key of the frames the copy holds of video v, as found or written this mount:
// the CPU's, unless it holds NVDEC's.
func (l *Loader) heldKey(v int) diskstore.Key {
	cpu := l.videoKey(v, decode.PathCPU)
	if k, ok := l.copy.c.Key(v); ok && k != cpu && k == l.videoKey(v, decode.PathGPU) {
		return k
	}
	return cpu
}

// put puts video v's frames units, decoded on path p (key, its key), in the copy (Store.Put,
// waiting up to wait for the writer), unless the copy holds the video's frames of the other
// path: a video's copy is of one path.
func (t *trainingCopy) put(ctx context.Context, v int, p decode.Path, key diskstore.Key, needed, extent int, units []int, frames []byte, wait time.Duration) bool {
	if p == decode.PathMixed {
		return false
	}
	if k, ok := t.c.Key(v); ok && k != key && t.otherPath(v, p, k) {
		return false
	}
	if !t.c.Put(ctx, v, key, needed, extent, units, frames, wait) {
		return false
	}
	t.rate.Add(float64(len(units)), time.Now())
	return true
}

// otherPath tells whether k, the key of the file video v has, is the key of its frames of the
// path other than p (rather than of another version of the video, which a Put replaces).
func (t *trainingCopy) otherPath(v int, p decode.Path, k diskstore.Key) bool {
	other := decode.PathGPU
	if p == decode.PathGPU {
		other = decode.PathCPU
	}
	return k == t.l.videoKey(v, other)
}

// neededOf is how many frames video v's samples use: counted once a video length (a video's
// samples follow from its length alone), not on every load.
func (t *trainingCopy) neededOf(l *Loader, v int) int {
	n := l.lay.Videos[v].Frames
	t.neededMu.Lock()
	defer t.neededMu.Unlock()
	if c, ok := t.needed[n]; ok {
		return c
	}
	_, c := l.needBits(v, nil)
	t.needed[n] = c
	return c
}

// whole tells whether the copy holds every frame video v's samples use, as counted.
func (t *trainingCopy) whole(v int) bool { return t.c.Whole(v) }

// sampleUnits appends to dst the frames of sample i, counted as the layout counts them (its
// copy's slots).
func (l *Loader) sampleUnits(i int, dst []int) []int {
	s, spec := l.lay.Sample(i), l.lay.Spec
	for j := range spec.Frames {
		dst = append(dst, s.Start+j*spec.Stride)
	}
	return dst
}

// copyExtent is how many slots video v's copy has: one past the last frame a sample of it uses.
func (l *Loader) copyExtent(v int) int {
	return max(l.lay.Videos[v].Frames, l.lay.Spec.Span())
}

// needBits sets in need (made long enough, and returned) a bit for each frame the samples of
// video v use, and counts them.
func (l *Loader) needBits(v int, need []uint64) ([]uint64, int) {
	words := (l.copyExtent(v) + 63) / 64
	need = slices.Grow(need[:0], words)[:words]
	clear(need)
	first, end := l.lay.VideoSamples(v)
	n := 0
	var buf [64]int
	for i := first; i < end; i++ {
		for _, u := range l.sampleUnits(i, buf[:0]) {
			if need[u/64]&(1<<(u%64)) == 0 {
				need[u/64] |= 1 << (u % 64)
				n++
			}
		}
	}
	return need, n
}

// orCPUs is cores, the CPUs the process may use as its caller counted them (cmd/vidfs: the
// affinity and the cgroup's quota), or where it did not count them (0), runtime.NumCPU.
func orCPUs(cores int) int {
	if cores > 0 {
		return cores
	}
	return runtime.NumCPU()
}

// fillSlots is how many videos a mount of the given workers decodes whole at once: as many as it
// decodes clips ahead of the readers, at most one a core.
func fillSlots(workers, cores int) int { return max(1, min(workers, orCPUs(cores))) }

// loadDecodes is how many of a mount's loads decode at once, at most: its cache's loads
// (cache.MaxLoads), at most twice the cores (at least 4). More than decode at once on the cores
// only share them, each decoder holding its frames the longer (5-6 MiB at 480p, 25 at 1080p):
// a mount of --workers 16 on 2 cores had 48 clips decoding and its PSS grew with them (issue 51).
// Loads past it wait for a decode to end (Loader.loadSample).
func loadDecodes(workers, cores int) int {
	return min(cache.MaxLoads(max(1, workers)), max(4, 2*orCPUs(cores)))
}

// Decoders is how many clips a mount of the given Workers decodes at once on cores CPUs
// (Config.Cores), at most: its loads' (loadDecodes) and its whole-video fills' (fillSlots), apart,
// so that no load waits for a decoder a fill holds. A decode.Pool for it is sized so (and its
// helpers).
func Decoders(workers, cores int) int { return loadDecodes(workers, cores) + fillSlots(workers, cores) }

// IdleDecoders is how many decoders a mount of the given Workers on cores CPUs keeps open between
// clips, for a video's next: one a worker, at most one a core (each holds its frames: 5-6 MiB at
// 480p).
func IdleDecoders(workers, cores int) int { return max(1, min(workers, orCPUs(cores))) }

// openCopy opens the training copy for the mount. Its writer's backlog holds two samples' frames
// for each worker (as stored), at least 8 MiB.
func (l *Loader) openCopy(cfg Config, workers int) error {
	S := l.lay.Spec.SampleBytes()
	bound := cfg.Bytes
	if cfg.KeepFree > 0 {
		bound = 0 // what the filesystem has room for
	}
	var b *budget
	var spent func(time.Duration)
	if cfg.Fill == FillAuto {
		b = newBudget()
		spent = b.spend // the writer's CPU is the copy's cost too
	}
	c, err := copystore.Open(copystore.Options{Dir: cfg.Dir, MaxBytes: bound, KeepFree: cfg.KeepFree, Codec: cfg.Codec,
		FrameBytes: l.out.FrameBytes(), Width: l.out.Width, Videos: len(l.lay.Videos), Due: l.videoDue, Log: cfg.Log,
		Backlog: max(8<<20, 2*int64(max(1, workers))*S), Spent: spent})
	if err != nil {
		return err
	}
	t := &trainingCopy{c: c, l: l, prefix: keyPrefix(l.out), mode: cfg.Fill, wait: keepWait, chunk: cmp.Or(cfg.FillChunk, fillChunk),
		keepFree: cfg.KeepFree, needed: map[int]int{}}
	t.frames, t.overhead = l.copyFootprint()
	t.measured = make(chan struct{})
	if _, measured := c.FrameEstimate(); !measured {
		t.toMeasure.Store(measureSamples)
	}
	if cfg.Fill == FillAuto {
		t.budget = b
		t.served, t.seen = newBits(l.lay.Len()), newBits(len(l.lay.Videos))
	}
	l.copy = t
	t.fills = newFills(l, fillSlots(workers, cfg.Cores))
	stopAdopting := l.adoptFound()
	stopSizing := t.size(cfg)
	t.stop = func() {
		stopSizing()
		stopAdopting()
		t.fills.close()
	}
	return nil
}

// adoptFound adopts the copies found on disk, in the background: each by its video at once, so
// that eviction follows the plans for it rather than take it for a stray file, then counted
// (reading its index), so that the stats and vidfs copy know what is whole. The function it
// returns stops it and waits.
func (l *Loader) adoptFound() (stop func()) {
	return inBackground(func(ctx context.Context) {
		for v := range l.lay.Videos {
			if v%1024 == 0 && ctx.Err() != nil {
				return
			}
			l.copy.c.Adopt(v, l.videoKey(v, decode.PathCPU))
			l.copy.c.Adopt(v, l.videoKey(v, decode.PathGPU))
		}
		var need []uint64
		for v := range l.lay.Videos {
			if ctx.Err() != nil {
				return
			}
			need, _ = l.needBits(v, need)
			l.copy.c.Claim(v, l.heldKey(v), need)
		}
	})
}

// videoDue is how soon video v is next wanted (copystore.Options.Due): its soonest sample's due.
func (l *Loader) videoDue(v int) int {
	first, end := l.lay.VideoSamples(v)
	due := -1
	for i := first; i < end; i++ {
		if d := l.plans.Due(i); d >= 0 && (due < 0 || d < due) {
			due = d
		}
	}
	return due
}

// fetchCopy makes sample i from the training copy if it holds all its frames; again says it was
// asked before, and its miss counted. Under auto, a sample served counts toward the budget.
func (l *Loader) fetchCopy(i int, buf []byte, again bool) bool {
	v := l.lay.Sample(i).Video
	var ub [64]int
	units := l.sampleUnits(i, ub[:0])
	get := l.copy.c.Get
	if again {
		get = l.copy.c.GetAgain
	}
	b := l.copy.budget
	if b == nil {
		return get(v, l.heldKey(v), units, buf)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	began := threadCPU()
	ok := get(v, l.heldKey(v), units, buf)
	b.spend(threadCPU() - began)
	l.copy.served.set(i, ok)
	return ok
}

// bits is a set of numbers, safe for concurrent use.
type bits []atomic.Uint64

func newBits(n int) bits { return make(bits, (n+63)/64) }

// set sets or clears bit i.
func (b bits) set(i int, on bool) {
	if on {
		b[i/64].Or(1 << (i % 64))
	} else {
		b[i/64].And(^uint64(1 << (i % 64)))
	}
}

// has says whether bit i is set.
func (b bits) has(i int) bool { return b[i/64].Load()&(1<<(i%64)) != 0 }

// take clears bit i and says whether it was set.
func (b bits) take(i int) bool { return b[i/64].And(^uint64(1<<(i%64)))&(1<<(i%64)) != 0 }

// keepFrames puts the frames of sample i, decoded on path p into buf, in the training copy,
// with those keep took on the way.
func (l *Loader) keepFrames(ctx context.Context, i int, p decode.Path, buf []byte, keep *passKeeper) {
	v := l.lay.Sample(i).Video
	if !l.copy.admit(v) {
		return // no room for the video: its frames are not kept (nor compressed)
	}
	key, needed, extent := l.videoKey(v, p), keep.needed, l.copyExtent(v)
	var ub [64]int
	units := l.sampleUnits(i, ub[:0])
	l.copy.put(ctx, v, p, key, needed, extent, units, buf, l.copy.wait)
	if len(keep.Kept) > 0 {
		l.copy.put(ctx, v, p, key, needed, extent, keep.Kept, keep.Frames, l.copy.wait)
	}
}

// CopyStats is the training copy's part of .vidfs/stats; nil without one.
func (l *Loader) CopyStats() *wire.CopyStats {
	if l.copy == nil {
		return nil
	}
	queued, filling, started, idle, failed := l.copy.fills.counts() // before the store's: a fill that ends between shows its backlog
	s := l.copy.c.Stats()
	w := &wire.CopyStats{Dir: s.Dir, Codec: s.Codec.String(), Fill: l.copy.mode.String(),
		CapacityBytes: s.MaxBytes, UsedBytes: s.Bytes, Videos: s.Videos, Complete: s.Complete, Partial: s.Videos - s.Complete,
		Frames: s.Frames, Hits: s.Hits, Misses: s.Misses, Corrupt: s.Corrupt, ReadErrors: s.ReadErrors,
		WrittenFrames: s.WrittenFrames, Skipped: s.Skipped, BacklogFull: s.Full, Evicted: s.Evicted, Backlog: s.Backlog, BacklogBytes: s.BacklogBytes,
		FramesPerSecond: l.copy.rate.PerSecond(time.Now()), LayoutVideos: len(l.lay.Videos), VideosWithSamples: l.videosWithSamples,
		OldFiles: s.OldFiles, OldBytes: s.OldBytes}
	if s.WrittenFrames > 0 {
		w.BytesPerFrame = float64(s.StoredBytes) / float64(s.WrittenFrames)
		w.Ratio = float64(s.WrittenBytes) / float64(s.StoredBytes)
	}
	if n := s.Hits + s.Misses; n > 0 {
		w.HitRate = float64(s.Hits) / float64(n)
	}
	w.CapacityBytes, w.KeepFreeBytes = s.Bound, l.copy.keepFree
	w.EstimatedBytes, w.EstimateAssumed = l.copy.estimate()
	if w.EstimatedBytes > 0 {
		w.Fits = min(1, float64(s.Bound)/float64(w.EstimatedBytes))
	}
	w.Admitted, w.Refused, w.PromisedBytes, w.GivenBack = s.Admitted, s.Refused, s.Promised, s.GivenBack
	w.FillQueued, w.Filling = queued, filling
	w.WholeFills, w.IdleFills, w.WholeFillsFailed = started, idle, failed
	w.Share = l.copy.fills.shareStats(s.Backlog)
	if b := l.copy.budget; b != nil {
		s := b.state()
		w.FillBudget = &s
	}
	return w
}
