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
	"github.com/vidfs/vidfs/internal/enum"
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

var keepNames = []string{KeepAuto: "auto", KeepSamples: "samples", KeepFrames: "frames"}

func (k Keep) String() string { return enum.Name(keepNames, "Keep", k) }

// ParseKeep reads "auto", "samples" or "frames".
func ParseKeep(s string) (Keep, error) { return enum.Parse[Keep](keepNames, "cache-keep", s) }

// Fill says when the training copy takes a video's frames.
type Fill int

const (
	// FillClips keeps the frames of each sample decoded for a reader: no decode beyond what
	// the readers ask for, and the copy fills over the epochs as clips land in each video.
	FillClips Fill = iota
	// FillVideos decodes each video whole, once, the first time one of its samples is loaded,
	// in place of that sample's decode, and serves the sample from the copy: the copy holds
	// every video read once after one epoch. (Decoded in the background instead, the whole
	// videos fell behind the readers' decodes, and epochs 2 and 3 still decoded.)
	FillVideos
)

var fillNames = []string{FillClips: "clips", FillVideos: "videos"}

func (f Fill) String() string { return enum.Name(fillNames, "Fill", f) }

// ParseFill reads "clips" or "videos".
func ParseFill(s string) (Fill, error) { return enum.Parse[Fill](fillNames, "copy-fill", s) }

// trainingCopy is the training copy on a mount's load path: the key of each video's frames,
// and the videos waiting to be decoded whole.
type trainingCopy struct {
	c      *tier.Copies
	prefix [32]byte // digest of what every key of this mount shares: versions and output
	mode   Fill
	rate   metrics.Rate // frames put in the copy
	// keepers holds *passKeeper, reused from load to load (their frames are a sample's worth);
	// fillBufs, *[]byte, a whole video's decode's chunk of frames.
	keepers, fillBufs sync.Pool
	// mu guards the fill queue. LOCK ORDERING: taken alone; nothing is called with it held.
	mu     sync.Mutex
	queue  []int32  // videos to decode whole, in order
	queued []uint64 // a bit per video: queued or done this mount
	videos int      // in the layout
	all    int      // with `fill all`, the next video to queue; -1: none
	// filling counts the videos being decoded whole now by the fillers; fills, those a load is
	// decoding whole, each closed when done.
	filling int
	fills   map[int]chan struct{}
	// fillSlots bounds the videos loads decode whole at once (--workers): each holds a
	// decoder and a chunk of frames, and the loads beyond it decode their samples as they are.
	fillSlots chan struct{}
	wake      chan struct{}
	stop      func() // ends the fillers and waits for them
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

// frameCodec is the codec the training copy writes with: the one asked for, or when none was,
// none if every frame the samples use fits within the bound as it is (the least CPU in every
// epoch), else huff (2.3x the frames in the same room, for 0.6 ms of CPU a 224x224 frame read
// back: a frame the copy cannot hold costs a decode, ten times that).
func (f *FS) frameCodec(asked tier.Codec, bound int64) (tier.Codec, string) {
	if asked != 0 {
		return asked, "asked for (--cache-disk-codec)"
	}
	// A video's samples, and so the frames they use, follow from its length alone: counted once
	// a length, not once a video (at mount, before anything is served).
	var need []uint64
	byLength := map[int]int{}
	frames := int64(0)
	for v, vid := range f.lay.Videos {
		n, ok := byLength[vid.Frames]
		if !ok {
			need, n = f.needBits(v, need)
			byLength[vid.Frames] = n
		}
		frames += int64(n)
	}
	bytes := frames * int64(f.out.FrameBytes())
	if bytes <= bound {
		return tier.None, fmt.Sprintf("every frame the samples use fits as it is (%d frames, %d MiB of %d MiB)", frames, bytes>>20, bound>>20)
	}
	return tier.Huff, fmt.Sprintf("the frames the samples use do not fit as they are (%d frames, %d MiB, the bound %d MiB): the smallest lossless", frames, bytes>>20, bound>>20)
}

// openCopy opens the training copy for the mount.
func (f *FS) openCopy(cfg Config, workers int) error {
	c, err := tier.OpenCopies(tier.CopyOptions{Dir: cfg.TierDir, MaxBytes: cfg.TierBytes, Codec: cfg.TierCodec,
		FrameBytes: f.out.FrameBytes(), Width: f.out.Width, Videos: len(f.lay.Videos), Due: f.videoDue, Log: cfg.Log,
		Backlog: max(8<<20, 2*f.lay.Spec.SampleBytes())})
	if err != nil {
		return err
	}
	f.copy = &trainingCopy{c: c, prefix: keyPrefix(f.out), mode: cfg.Fill, all: -1, wake: make(chan struct{}, 1), fills: map[int]chan struct{}{},
		queued: make([]uint64, (len(f.lay.Videos)+63)/64), videos: len(f.lay.Videos), fillSlots: make(chan struct{}, max(1, workers))}
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
// keep took on the way.
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
	k.need, k.needed = f.needBits(v, k.need)
	k.max, k.fb = f.lay.Spec.Frames, f.out.FrameBytes()
	k.units, k.frames = k.units[:0], slices.Grow(k.frames[:0], k.max*k.fb) // grown once, not by doubling
	k.own = !f.lay.Spec.FPS.Set()
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

func (k *passKeeper) Drop(from int) {
	n, _ := slices.BinarySearch(k.units, from)
	k.units, k.frames = k.units[:n], k.frames[:n*k.fb]
}

// fillNow decodes video v whole into the copy, for a load of one of its samples
// (--copy-fill videos), unless it was this mount, and waits until its frames are written; a
// load that finds another load filling the video waits for that one.
func (f *FS) fillNow(ctx context.Context, v int) {
	t := f.copy
	t.mu.Lock()
	if ch, ok := t.fills[v]; ok {
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	if t.queued[v/64]&(1<<(v%64)) != 0 { // filled, failed, or a filler's already
		t.mu.Unlock()
		return
	}
	select {
	case t.fillSlots <- struct{}{}:
		defer func() { <-t.fillSlots }()
	default: // as many videos as fillers are being decoded whole: this sample decodes as it is
		t.mu.Unlock()
		return
	}
	t.queued[v/64] |= 1 << (v % 64)
	ch := make(chan struct{})
	t.fills[v] = ch
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.fills, v)
		t.mu.Unlock()
		close(ch)
	}()
	f.fillVideo(ctx, v)
	t.c.FlushVideo(v)
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

// startFillers starts n goroutines that decode the videos FillAll queues whole into the copy
// (vidfs copy), each on a thread of its own at a low priority (nice 10), so that readers'
// decodes come first and the copy fills in the time left over; the function it returns stops
// them and waits.
func (f *FS) startFillers(n int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10)
			for ctx.Err() == nil {
				v := f.copy.nextFill()
				if v < 0 {
					select {
					case <-ctx.Done():
					case <-f.copy.wake:
					}
					continue
				}
				select { // more may be queued: another filler takes the next
				case f.copy.wake <- struct{}{}:
				default:
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
	// The copies found on disk: each adopted by its video at once, so that eviction follows the
	// plans for it rather than take it for a stray file, then counted (reading its index), so
	// that the stats and vidfs copy know what is whole.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range f.lay.Videos {
			if v%1024 == 0 && ctx.Err() != nil {
				return
			}
			f.copy.c.Adopt(v, f.videoKey(v))
		}
		var need []uint64
		for v := range f.lay.Videos {
			if ctx.Err() != nil {
				return
			}
			need, _ = f.needBits(v, need)
			f.copy.c.Claim(v, f.videoKey(v), need)
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
	fillChunk = 16
	fillBytes = 4 << 20
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
	need, needed := f.needBits(v, nil)
	key := f.videoKey(v)
	if f.copy.c.Claim(v, key, need); f.copy.c.Whole(v) {
		return // from an earlier mount
	}
	// Frames from the first to the last of the video (n: its length as the layout counts it),
	// step apart, a chunk at a time; frames a padded sample uses past the end repeat the last.
	n := min(extent, f.lay.Videos[v].Frames)
	fb := f.out.FrameBytes()
	chunk := max(1, min(fillChunk, fillBytes/fb))
	bp, ok := f.copy.fillBufs.Get().(*[]byte)
	if !ok || cap(*bp) < chunk*fb {
		b := make([]byte, chunk*fb)
		bp = &b
	}
	defer f.copy.fillBufs.Put(bp)
	buf := (*bp)[:chunk*fb]
	var keep []byte // the frames needed of a chunk, when not all are
	var units []int
	put := func(units []int, frames []byte) bool {
		for !f.copy.c.Put(v, key, needed, extent, units, frames) {
			// The writer is behind: wait for it rather than decode what would be skipped.
			if ctx.Err() != nil {
				return false
			}
			time.Sleep(20 * time.Millisecond)
		}
		f.copy.rate.Add(float64(len(units)), time.Now())
		return true
	}
	failed := func(err error) {
		if ctx.Err() == nil {
			f.log.Info("training copy: video not decoded whole; its samples are decoded as they are read", "file", f.videoPath(v), "err", err)
		}
	}
	for start := 0; start < n; start += chunk * step {
		if ctx.Err() != nil {
			return
		}
		k := min(chunk, (n-start+step-1)/step)
		c := SampleClip(f.lay, first)
		c.Start, c.Frames, c.Stride, c.PadEnd = start, k, step, false
		if err := f.cfg.Decoder.DecodeClip(ctx, info, c, f.out, buf[:k*fb]); err != nil {
			failed(err)
			return
		}
		units, keep = units[:0], keep[:0]
		for j := range k {
			if u := start + j*step; need[u/64]&(1<<(u%64)) != 0 {
				units = append(units, u)
			}
		}
		frames := buf[:k*fb] // every frame decoded is needed (the usual case): as they are
		if len(units) < k {
			for j := range k {
				if u := start + j*step; need[u/64]&(1<<(u%64)) != 0 {
					keep = append(keep, buf[j*fb:(j+1)*fb]...)
				}
			}
			frames = keep
		}
		if len(units) > 0 && !put(units, frames) {
			return
		}
	}
	// Past the end: the last frame, as padded samples repeat it.
	units = units[:0]
	for u := n; u < extent; u++ {
		if need[u/64]&(1<<(u%64)) != 0 {
			units = append(units, u)
		}
	}
	if len(units) == 0 || n == 0 {
		return
	}
	c := SampleClip(f.lay, first)
	c.Start, c.Frames, c.Stride, c.PadEnd = n-1, 1, 1, false
	if err := f.cfg.Decoder.DecodeClip(ctx, info, c, f.out, buf[:fb]); err != nil {
		failed(err)
		return
	}
	keep = keep[:0]
	for range units {
		keep = append(keep, buf[:fb]...)
	}
	put(units, keep)
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
	w := &wire.CopyStats{Dir: s.Dir, Codec: s.Codec.String(), Fill: f.copy.mode.String(),
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
