package fs

// The training copy on the load path: the keys of videos' frames, the frames each sample
// uses, and reading and keeping a sample's frames.

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/vidfs/vidfs/framestore"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
)

// trainingCopy is the training copy on a mount's load path: the key of each video's frames,
// and the videos waiting to be decoded whole.
type trainingCopy struct {
	c      *framestore.Store
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
func (f *FS) videoKey(v int) diskstore.Key {
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
	var k diskstore.Key
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

// openCopy opens the training copy for the mount.
func (f *FS) openCopy(cfg Config, workers int) error {
	c, err := framestore.Open(framestore.Options{Dir: cfg.TierDir, MaxBytes: cfg.TierBytes, Codec: cfg.TierCodec,
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
