package fs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/tier"
)

// Keep says what the disk under Config.TierDir keeps of what is decoded.
type Keep int

const (
	// KeepAuto keeps samples when every sample of the layout fits within the bound as it is
	// (their files are mapped and served without a copy: a hit costs what a memory hit does),
	// else frames.
	KeepAuto Keep = iota
	// KeepSamples is the sample tier: each sample's bytes, for the samples read again as they
	// are (the same clips every epoch).
	KeepSamples
	// KeepFrames is the training copy: each frame any sample needs, once, so that any clip of
	// a video whose frames are there is served with no decode (fresh random clips every epoch).
	KeepFrames
)

// Fill says when the training copy takes a video's frames.
type Fill int

const (
	// FillClips keeps the frames of each sample decoded for a reader: no decode beyond what
	// the readers ask for, and the copy fills over the epochs as clips land in each video.
	FillClips Fill = iota
	// FillVideos also decodes each video whole, once, in the background, from the first time
	// one of its samples is decoded: the copy holds the video after one epoch.
	FillVideos
)

// trainingCopy is the training copy on a mount's load path: the key of each video's frames,
// and the videos waiting to be decoded whole.
type trainingCopy struct {
	c      *tier.Copies
	prefix [32]byte // digest of what every key of this mount shares: versions and output
	mode   Fill
	rate   metrics.Rate // frames put in the copy
	// keepers holds *passKeeper, reused from load to load (their frames are a sample's worth).
	keepers sync.Pool
	// mu guards the fill queue. LOCK ORDERING: taken alone; nothing is called with it held.
	mu     sync.Mutex
	queue  []int32  // videos to decode whole, in order
	queued []uint64 // a bit per video: queued or done this mount
	videos int      // in the layout
	all    int      // with `fill all`, the next video to queue; -1: none
	// filling counts the videos being decoded whole now.
	filling int
	wake    chan struct{}
	stop    func() // ends the fillers and waits for them
}

// videoKey is the key of video v's frames: a digest of the decoder's output version and
// FFmpeg's, the output (size, fit, decoding), the video's file (absolute path, size,
// modification time) and the frame rate the layout counts frames at. Not the clips (frames,
// stride, step): a remount with other clips over the same output reads the same frames.
func (f *FS) videoKey(v int) tier.Key {
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
	var k tier.Key
	h.Sum(k[:0])
	return k
}

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

// neededFrames counts the distinct frames the samples of video v use.
func (f *FS) neededFrames(v int) int {
	first, end := f.lay.VideoSamples(v)
	if first == end {
		return 0
	}
	seen := make([]uint64, (f.copyExtent(v)+63)/64)
	n := 0
	var units []int
	for i := first; i < end; i++ {
		units = f.sampleUnits(i, units[:0])
		for _, u := range units {
			if seen[u/64]&(1<<(u%64)) == 0 {
				seen[u/64] |= 1 << (u % 64)
				n++
			}
		}
	}
	return n
}

// copyKeep is what the disk keeps: the one asked for, or when none was, samples if every sample
// of the layout fits within the bound as it is, else frames.
func copyKeep(asked Keep, samples int, sampleBytes, bound int64) (Keep, string) {
	if asked != KeepAuto {
		return asked, "asked for (--cache-keep)"
	}
	need := int64(samples) * (sampleBytes + tier.HeaderSize)
	if need <= bound {
		return KeepSamples, fmt.Sprintf("every sample fits as it is (%d MiB of %d MiB): samples, served mapped", need>>20, bound>>20)
	}
	return KeepFrames, fmt.Sprintf("the samples do not fit as they are (%d MiB, the bound %d MiB): frames, each kept once", need>>20, bound>>20)
}

// openCopy opens the training copy for the mount.
func (f *FS) openCopy(cfg Config, workers int) error {
	c, err := tier.OpenCopies(tier.CopyOptions{Dir: cfg.TierDir, MaxBytes: cfg.TierBytes, Codec: cfg.TierCodec,
		FrameBytes: f.out.FrameBytes(), Width: f.out.Width, Videos: len(f.lay.Videos), Due: f.videoDue, Log: cfg.Log,
		Backlog: max(16<<20, 4*f.lay.Spec.SampleBytes())})
	if err != nil {
		return err
	}
	f.copy = &trainingCopy{c: c, prefix: keyPrefix(f.out), mode: cfg.Fill, all: -1, wake: make(chan struct{}, 1),
		queued: make([]uint64, (len(f.lay.Videos)+63)/64), videos: len(f.lay.Videos)}
	// Fillers in either mode: FillAll (vidfs copy) needs them too.
	f.copy.stop = f.startFillers(max(1, workers/2))
	return nil
}

// videoDue is how soon video v is next wanted (tier.CopyOptions.Due): its soonest sample's due.
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
// asked before, and its miss counted.
func (f *FS) fetchCopy(i int, buf []byte, again bool) bool {
	v := f.lay.Sample(i).Video
	var units [64]int
	get := f.copy.c.Get
	if again {
		get = f.copy.c.GetAgain
	}
	return get(v, f.videoKey(v), f.sampleUnits(i, units[:0]), buf)
}

// keepFrames puts the frames of sample i, decoded into buf, in the training copy, with those
// keep took on the way, and, when the copy fills whole videos, queues its video.
func (f *FS) keepFrames(i int, buf []byte, keep *passKeeper) {
	v := f.lay.Sample(i).Video
	key, needed, extent := f.videoKey(v), keep.needed, f.copyExtent(v)
	var units [64]int
	if f.copy.c.Put(v, key, needed, extent, f.sampleUnits(i, units[:0]), buf) {
		f.copy.rate.Add(float64(f.lay.Spec.Frames), time.Now())
	}
	if len(keep.units) > 0 && f.copy.c.Put(v, key, needed, extent, keep.units, keep.frames) {
		f.copy.rate.Add(float64(len(keep.units)), time.Now())
	}
	if f.copy.mode == FillVideos {
		f.queueFill(v)
	}
}

// passKeeper takes, for the training copy, frames a sample's decode passes through that other
// samples of its video use (decode.Keeper): at most a sample's worth, so that keeping them
// costs the first epoch a bounded part of a decode.
type passKeeper struct {
	need   []uint64 // a bit per frame of the video: some sample uses it
	needed int      // how many bits are set
	max    int
	fb     int
	units  []int
	frames []byte
	own    bool // counted frames of the video's own numbering (no --fps): decode.Clip.Keep applies
}

// keeper returns a passKeeper for a decode of a sample of video v, from the pool.
func (t *trainingCopy) keeper(f *FS, v int) *passKeeper {
	k, ok := t.keepers.Get().(*passKeeper)
	if !ok {
		k = &passKeeper{}
	}
	extent := f.copyExtent(v)
	k.need = slices.Grow(k.need[:0], (extent+63)/64)[:(extent+63)/64]
	clear(k.need)
	k.needed, k.max, k.fb = 0, f.lay.Spec.Frames, f.out.FrameBytes()
	k.units, k.frames = k.units[:0], k.frames[:0]
	k.own = !f.lay.Spec.FPS.Set()
	first, end := f.lay.VideoSamples(v)
	var units []int
	for i := first; i < end; i++ {
		for _, u := range f.sampleUnits(i, units[:0]) {
			if k.need[u/64]&(1<<(u%64)) == 0 {
				k.need[u/64] |= 1 << (u % 64)
				k.needed++
			}
		}
	}
	return k
}

// decodeKeeper is k as the decoder takes it: nil when there is none, or when frames are counted
// at --fps (the decoder's frames are not the copy's then).
func (k *passKeeper) decodeKeeper() decode.Keeper {
	if k == nil || !k.own {
		return nil
	}
	return k
}

func (k *passKeeper) Want(i int) bool {
	return i >= 0 && i < len(k.need)*64 && k.need[i/64]&(1<<(i%64)) != 0 && len(k.units) < k.max
}

func (k *passKeeper) Keep(i int, rgb []byte) {
	if len(rgb) == k.fb && (len(k.units) == 0 || i > k.units[len(k.units)-1]) {
		k.units = append(k.units, i)
		k.frames = append(k.frames, rgb...)
	}
}

func (k *passKeeper) Discard() { k.units, k.frames = k.units[:0], k.frames[:0] }

// queueFill queues video v to be decoded whole, unless it was this mount.
func (f *FS) queueFill(v int) {
	t := f.copy
	t.mu.Lock()
	if t.queued[v/64]&(1<<(v%64)) == 0 {
		t.queued[v/64] |= 1 << (v % 64)
		t.queue = append(t.queue, int32(v))
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// FillAll queues every video of the layout to be decoded whole into the training copy, in the
// background (vidfs copy); it says false when the mount keeps no copy.
func (f *FS) FillAll() bool {
	if f.copy == nil {
		return false
	}
	f.copy.mu.Lock()
	f.copy.all = 0
	f.copy.mu.Unlock()
	select {
	case f.copy.wake <- struct{}{}:
	default:
	}
	return true
}

// nextFill takes the next video to decode whole, or -1.
func (t *trainingCopy) nextFill() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) > 0 {
		v := int(t.queue[0])
		t.queue = t.queue[1:]
		t.filling++
		return v
	}
	for t.all >= 0 && t.all < t.videos {
		v := t.all
		t.all++
		if t.queued[v/64]&(1<<(v%64)) == 0 {
			t.queued[v/64] |= 1 << (v % 64)
			t.filling++
			return v
		}
	}
	t.all = -1
	return -1
}

// startFillers starts n goroutines that decode queued videos whole into the copy, each on a
// thread of its own, at the decoders' priority with --copy-fill videos (at a lower one, nice 10,
// they had next to no CPU beside readers that keep every core busy: after a first epoch of
// make bench's random clips, 6 of 24 videos were whole), else at nice 10, so that readers'
// decodes come first and vidfs copy fills in the time left over; the function it returns stops
// them and waits.
func (f *FS) startFillers(n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.copy.mode != FillVideos {
				runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
				unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10)
			}
			for ctx.Err() == nil {
				v := f.copy.nextFill()
				if v < 0 {
					select {
					case <-ctx.Done():
					case <-f.copy.wake:
					}
					continue
				}
				f.fillVideo(ctx, v)
				f.copy.mu.Lock()
				f.copy.filling--
				f.copy.mu.Unlock()
				select { // another filler may have work
				case f.copy.wake <- struct{}{}:
				default:
				}
			}
		}()
	}
	// tag the copies found on disk, so that eviction and the stats know them
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range f.lay.Videos {
			if ctx.Err() != nil {
				return
			}
			f.copy.c.Claim(v, f.videoKey(v), f.neededFrames(v))
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// fillChunk is how many frames a whole video's decode converts at a time, fewer where they
// would take more than fillBytes.
const (
	fillChunk = 32
	fillBytes = 8 << 20
)

// fillVideo decodes video v from its first frame to its last, without seeking, a chunk at a
// time, and puts every frame its samples need in the copy. A video that fails to decode is left
// to its samples, which fail as they would.
func (f *FS) fillVideo(ctx context.Context, v int) {
	first, end := f.lay.VideoSamples(v)
	if first == end || !f.current(first) {
		return
	}
	info, err := f.cfg.Infos.Info(v)
	if err != nil {
		return
	}
	spec := f.lay.Spec
	extent, step := f.copyExtent(v), fillStride(spec)
	need := make([]bool, extent)
	var units []int
	for i := first; i < end; i++ {
		for _, u := range f.sampleUnits(i, units[:0]) {
			need[u] = true
		}
	}
	key, needed := f.videoKey(v), f.neededFrames(v)
	if f.copy.c.Claim(v, key, needed); f.copy.c.Whole(v) {
		return // from an earlier mount
	}
	fb := f.out.FrameBytes()
	chunk := max(1, min(fillChunk, fillBytes/fb))
	buf := make([]byte, chunk*fb)
	keep := make([]byte, 0, chunk*fb)
	for start := 0; start < extent; start += chunk * step {
		if ctx.Err() != nil {
			return
		}
		n := min(chunk, (extent-start+step-1)/step)
		c := SampleClip(f.lay, first)
		c.Start, c.Frames, c.Stride, c.PadEnd = start, n, step, true
		if err := f.cfg.Decoder.DecodeClip(ctx, info, c, f.out, buf[:n*fb]); err != nil {
			if ctx.Err() == nil {
				f.log.Info("training copy: video not decoded whole; its samples are decoded as they are read", "file", f.videoPath(v), "err", err)
			}
			return
		}
		units, keep = units[:0], keep[:0]
		for j := range n {
			if u := start + j*step; need[u] {
				units = append(units, u)
				keep = append(keep, buf[j*fb:(j+1)*fb]...)
			}
		}
		if len(units) > 0 {
			for !f.copy.c.Put(v, key, needed, extent, units, keep) {
				// The writer is behind: wait for it rather than decode what would be skipped.
				if ctx.Err() != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			f.copy.rate.Add(float64(len(units)), time.Now())
		}
	}
}

// fillStride is the distance between the frames a whole video's decode converts: every frame
// any sample uses is a multiple of it (the step's and the stride's greatest common divisor;
// 1 with clips spread over each video).
func fillStride(s layout.Spec) int {
	if s.ClipsPerVideo > 0 {
		return 1
	}
	a, b := s.Step, s.Stride
	if a <= 0 {
		a = s.Frames
	}
	for b != 0 {
		a, b = b, a%b
	}
	return max(1, a)
}

// copyStats is the training copy's part of .vidfs/stats; nil without one.
func (f *FS) copyStats() *wire.CopyStats {
	if f.copy == nil {
		return nil
	}
	s := f.copy.c.Stats()
	w := &wire.CopyStats{Dir: s.Dir, Codec: s.Codec.String(), Fill: [...]string{"clips", "videos"}[f.copy.mode],
		CapacityBytes: s.MaxBytes, UsedBytes: s.Bytes, Videos: s.Videos, Complete: s.Complete, Partial: s.Videos - s.Complete,
		Frames: s.Frames, Hits: s.Hits, Misses: s.Misses, Corrupt: s.Corrupt, ReadErrors: s.ReadErrors,
		WrittenFrames: s.WrittenFrames, Skipped: s.Skipped, Evicted: s.Evicted, Backlog: s.Backlog, BacklogBytes: s.BacklogBytes,
		FramesPerSecond: f.copy.rate.PerSecond(time.Now()), LayoutVideos: len(f.lay.Videos)}
	if s.WrittenFrames > 0 {
		w.BytesPerFrame = float64(s.StoredBytes) / float64(s.WrittenFrames)
		w.Ratio = float64(s.WrittenBytes) / float64(s.StoredBytes)
	}
	if n := s.Hits + s.Misses; n > 0 {
		w.HitRate = float64(s.Hits) / float64(n)
	}
	f.copy.mu.Lock()
	w.FillQueued, w.Filling = len(f.copy.queue), f.copy.filling
	if f.copy.all >= 0 {
		w.FillQueued += f.copy.videos - f.copy.all
	}
	f.copy.mu.Unlock()
	return w
}

// fillFile is .vidfs/fill, in a mount that keeps a training copy: writing "all" to it queues
// every video to be decoded whole into the copy (vidfs copy); anything else fails the write
// with EINVAL. Reading it gives nothing (the progress is in .vidfs/stats, under copy).
type fillFile struct{ node }

// Setattr accepts truncation (`>` truncates before it writes).
func (c *fillFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c.f.attr(&out.Attr, c.mode, 0)
	return 0
}

func (c *fillFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &fillHandle{f: c.f}, fuse.FOPEN_DIRECT_IO, 0
}

type fillHandle struct{ f *FS }

func (h *fillHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

func (h *fillHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	switch strings.TrimSpace(string(data)) {
	case "all":
		if !h.f.FillAll() {
			h.f.log.Warn("fill asked of a mount that keeps no training copy (--cache-dir, --cache-keep frames)")
			return 0, syscall.EINVAL
		}
		h.f.log.Info("training copy: every video queued to be decoded whole", "videos", len(h.f.lay.Videos))
		return uint32(len(data)), 0
	}
	h.f.log.Warn("fill: want \"all\"", "got", string(data))
	return 0, syscall.EINVAL
}
