package fs

// The training copy on the load path: the keys of videos' frames, the frames each sample
// uses, and reading and keeping a sample's frames.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/framestore"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
)

// trainingCopy is the training copy on a mount's load path: the key of each video's frames, the
// whole-video fills, and under --copy-fill auto their budget.
type trainingCopy struct {
	c      *framestore.Store
	f      *FS
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
	// chunk is how many frames a whole video's decode converts at a time at most (fillChunk;
	// tests make it small, so that chunks end everywhere).
	chunk int
	// frames is how many frames the samples use, over every video, and overhead what the
	// videos' files take besides their frames: the whole copy's size, with what a frame takes.
	frames, overhead int64
	keepFree         int64  // Config.CopyKeepFree
	stop             func() // ends the fills and the adopting of files found, and waits for them
}

// keepWait is trainingCopy.wait.
const keepWait = 50 * time.Millisecond

// videoKey is the key of video v's frames as decode path p makes them: a digest of the
// decoder's output version and FFmpeg's, the output (size, fit, decoding), the video's file
// (absolute path, size, modification time), the frame rate the layout counts frames at, and for
// NVDEC's frames the path (the CPU's and NVDEC's may differ: a copy holds one path's frames of a
// video, never a mix). Not the clips (frames, stride, step): a remount with other clips over the
// same output reads the same frames.
func (f *FS) videoKey(v int, p decode.Path) diskstore.Key {
	vid := f.lay.Videos[v]
	h := sha256.New()
	h.Write(f.copy.prefix[:])
	h.Write([]byte("frames\x00"))
	h.Write([]byte(f.videoPath(v)))
	var b [8 * 4]byte
	fps := f.lay.Spec.FPS
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
func (f *FS) heldKey(v int) diskstore.Key {
	cpu := f.videoKey(v, decode.PathCPU)
	if k, ok := f.copy.c.Key(v); ok && k != cpu && k == f.videoKey(v, decode.PathGPU) {
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
	return k == t.f.videoKey(v, other)
}

// neededOf is how many frames video v's samples use: counted once a video length (a video's
// samples follow from its length alone), not on every load.
func (t *trainingCopy) neededOf(f *FS, v int) int {
	n := f.lay.Videos[v].Frames
	t.neededMu.Lock()
	defer t.neededMu.Unlock()
	if c, ok := t.needed[n]; ok {
		return c
	}
	_, c := f.needBits(v, nil)
	t.needed[n] = c
	return c
}

// whole tells whether the copy holds every frame video v's samples use, as counted.
func (t *trainingCopy) whole(v int) bool { return t.c.Whole(v) }

// sampleUnits appends to dst the frames of sample i, counted as the layout counts them (its
// copy's slots).
func (f *FS) sampleUnits(i int, dst []int) []int {
	s, spec := f.lay.Sample(i), f.lay.Spec
	for j := range spec.Frames {
		dst = append(dst, s.Start+j*spec.Stride)
	}
	return dst
}

// copyExtent is how many slots video v's copy has: one past the last frame a sample of it uses.
func (f *FS) copyExtent(v int) int {
	return max(f.lay.Videos[v].Frames, f.lay.Spec.Span())
}

// needBits sets in need (made long enough, and returned) a bit for each frame the samples of
// video v use, and counts them.
func (f *FS) needBits(v int, need []uint64) ([]uint64, int) {
	words := (f.copyExtent(v) + 63) / 64
	need = slices.Grow(need[:0], words)[:words]
	clear(need)
	first, end := f.lay.VideoSamples(v)
	n := 0
	var buf [64]int
	for i := first; i < end; i++ {
		for _, u := range f.sampleUnits(i, buf[:0]) {
			if need[u/64]&(1<<(u%64)) == 0 {
				need[u/64] |= 1 << (u % 64)
				n++
			}
		}
	}
	return need, n
}

// fillSlots is how many videos a mount of the given workers decodes whole at once: as many as it
// decodes clips ahead of the readers.
func fillSlots(workers int) int { return max(1, workers) }

// Decoders is how many clips a mount of the given Workers decodes at once, at most: its cache's
// loads and its whole-video fills. A decode.Pool for it is sized so.
func Decoders(workers int) int { return cache.MaxLoads(workers) + fillSlots(workers) }

// openCopy opens the training copy for the mount. Its writer's backlog holds two samples' frames
// for each worker (as stored), at least 8 MiB.
func (f *FS) openCopy(cfg Config, workers int) error {
	S := f.lay.Spec.SampleBytes()
	bound := cfg.TierBytes
	if cfg.CopyKeepFree > 0 {
		bound = 0 // what the filesystem has room for
	}
	var b *budget
	var spent func(time.Duration)
	if cfg.Fill == FillAuto {
		b = newBudget()
		spent = b.spend // the writer's CPU is the copy's cost too
	}
	c, err := framestore.Open(framestore.Options{Dir: cfg.TierDir, MaxBytes: bound, KeepFree: cfg.CopyKeepFree, Codec: cfg.TierCodec,
		FrameBytes: f.out.FrameBytes(), Width: f.out.Width, Videos: len(f.lay.Videos), Due: f.videoDue, Log: cfg.Log,
		Backlog: max(8<<20, 2*int64(max(1, workers))*S), Spent: spent})
	if err != nil {
		return err
	}
	t := &trainingCopy{c: c, f: f, prefix: keyPrefix(f.out), mode: cfg.Fill, wait: keepWait, chunk: fillChunk,
		keepFree: cfg.CopyKeepFree, needed: map[int]int{}}
	t.frames, t.overhead = f.copyFootprint()
	if cfg.Fill == FillAuto {
		t.budget = b
		t.served, t.seen = newBits(f.lay.Len()), newBits(len(f.lay.Videos))
	}
	f.copy = t
	t.fills = newFills(f, fillSlots(workers))
	stopAdopting := f.adoptFound()
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
func (f *FS) adoptFound() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := range f.lay.Videos {
			if v%1024 == 0 && ctx.Err() != nil {
				return
			}
			f.copy.c.Adopt(v, f.videoKey(v, decode.PathCPU))
			f.copy.c.Adopt(v, f.videoKey(v, decode.PathGPU))
		}
		var need []uint64
		for v := range f.lay.Videos {
			if ctx.Err() != nil {
				return
			}
			need, _ = f.needBits(v, need)
			f.copy.c.Claim(v, f.heldKey(v), need)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// videoDue is how soon video v is next wanted (framestore.Options.Due): its soonest sample's due.
func (f *FS) videoDue(v int) int {
	first, end := f.lay.VideoSamples(v)
	due := -1
	for i := first; i < end; i++ {
		if d := f.plans.Due(i); d >= 0 && (due < 0 || d < due) {
			due = d
		}
	}
	return due
}

// fetchCopy makes sample i from the training copy if it holds all its frames; again says it was
// asked before, and its miss counted. Under auto, a sample served counts toward the budget.
func (f *FS) fetchCopy(i int, buf []byte, again bool) bool {
	v := f.lay.Sample(i).Video
	var ub [64]int
	units := f.sampleUnits(i, ub[:0])
	get := f.copy.c.Get
	if again {
		get = f.copy.c.GetAgain
	}
	b := f.copy.budget
	if b == nil {
		return get(v, f.heldKey(v), units, buf)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	began := threadCPU()
	ok := get(v, f.heldKey(v), units, buf)
	b.spend(threadCPU() - began)
	f.copy.served.set(i, ok)
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
func (f *FS) keepFrames(ctx context.Context, i int, p decode.Path, buf []byte, keep *passKeeper) {
	v := f.lay.Sample(i).Video
	if !f.copy.admit(v) {
		return // no room for the video: its frames are not kept (nor compressed)
	}
	key, needed, extent := f.videoKey(v, p), keep.needed, f.copyExtent(v)
	var ub [64]int
	units := f.sampleUnits(i, ub[:0])
	f.copy.put(ctx, v, p, key, needed, extent, units, buf, f.copy.wait)
	if len(keep.Kept) > 0 {
		f.copy.put(ctx, v, p, key, needed, extent, keep.Kept, keep.Frames, f.copy.wait)
	}
}

// copyStats is the training copy's part of .vidfs/stats; nil without one.
func (f *FS) copyStats() *wire.CopyStats {
	if f.copy == nil {
		return nil
	}
	queued, filling, started, idle, failed := f.copy.fills.counts() // before the store's: a fill that ends between shows its backlog
	s := f.copy.c.Stats()
	w := &wire.CopyStats{Dir: s.Dir, Codec: s.Codec.String(), Fill: f.copy.mode.String(),
		CapacityBytes: s.MaxBytes, UsedBytes: s.Bytes, Videos: s.Videos, Complete: s.Complete, Partial: s.Videos - s.Complete,
		Frames: s.Frames, Hits: s.Hits, Misses: s.Misses, Corrupt: s.Corrupt, ReadErrors: s.ReadErrors,
		WrittenFrames: s.WrittenFrames, Skipped: s.Skipped, BacklogFull: s.Full, Evicted: s.Evicted, Backlog: s.Backlog, BacklogBytes: s.BacklogBytes,
		FramesPerSecond: f.copy.rate.PerSecond(time.Now()), LayoutVideos: len(f.lay.Videos), VideosWithSamples: f.videosWithSamples,
		OldFiles: s.OldFiles, OldBytes: s.OldBytes}
	if s.WrittenFrames > 0 {
		w.BytesPerFrame = float64(s.StoredBytes) / float64(s.WrittenFrames)
		w.Ratio = float64(s.WrittenBytes) / float64(s.StoredBytes)
	}
	if n := s.Hits + s.Misses; n > 0 {
		w.HitRate = float64(s.Hits) / float64(n)
	}
	w.CapacityBytes, w.KeepFreeBytes = s.Bound, f.copy.keepFree
	w.EstimatedBytes, w.EstimateAssumed = f.copy.estimate()
	if w.EstimatedBytes > 0 {
		w.Fits = min(1, float64(s.Bound)/float64(w.EstimatedBytes))
	}
	w.Admitted, w.Refused, w.PromisedBytes, w.GivenBack = s.Admitted, s.Refused, s.Promised, s.GivenBack
	w.FillQueued, w.Filling = queued, filling
	w.WholeFills, w.IdleFills, w.WholeFillsFailed = started, idle, failed
	w.Share = f.copy.fills.shareStats(s.Backlog)
	if b := f.copy.budget; b != nil {
		s := b.state()
		w.FillBudget = &s
	}
	return w
}
