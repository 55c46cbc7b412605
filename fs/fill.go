package fs

// Filling the training copy with whole videos: --copy-fill videos at load, and vidfs copy
// (.vidfs/fill) in the background.

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/layout"
)

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
	t.c.FlushVideo(ctx, v) // a load given up on waits no more
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

// fillFile is .vidfs/fill, in a mount that keeps a training copy: writing "all" to it queues
// every video to be decoded whole into the copy (vidfs copy); anything else fails the write
// with EINVAL. Reading it gives nothing (the progress is in .vidfs/stats, under copy).
type fillFile struct{ node }

// Setattr accepts truncation (`>` truncates before it writes).
func (c *fillFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c.f.attr(&out.Attr, c.mode, 0)
	return 0
}

// Open opens .vidfs/fill for writing a request to.
func (c *fillFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &fillHandle{f: c.f}, fuse.FOPEN_DIRECT_IO, 0
}

// fillHandle is .vidfs/fill, open.
type fillHandle struct{ f *FS }

// Read gives nothing: the progress is in .vidfs/stats.
func (h *fillHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

// Write takes "all" (FillAll), and refuses anything else.
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
