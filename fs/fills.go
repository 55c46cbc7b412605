package fs

// Which videos are decoded whole into the training copy, and when: a load's (--copy-fill videos,
// or auto within its budget), the plans' next videos while the decoders are idle (auto), or every
// video (vidfs copy, .vidfs/fill); at most as many at once as --workers.

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fills runs the whole-video fills of a mount.
type fills struct {
	f     *FS
	slots chan struct{} // a token for each fill running: --workers of them
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	wake  chan struct{} // a fill ended, or FillAll asked for more
	// mu guards everything below. LOCK ORDERING: taken before the training copy's store's
	// (framestore.Store.Whole) and a fill's own; nothing else is called with it held.
	mu      sync.Mutex
	running map[int]*wholeFill
	tried   []uint64 // a bit per video: decoded whole this mount (or tried): not again
	all     int      // vidfs copy: the next video to decode, -1: none asked
	started int64    // fills started, and those that ended early (damage, no room)
	failed  int64
}

// fillIdleEvery is how often an auto mount looks for a video to fill the budget allows.
const fillIdleEvery = 250 * time.Millisecond

// newFills starts the fills' dispatcher (vidfs copy's videos, and idle filling under auto).
func newFills(f *FS, slots int) *fills {
	ctx, cancel := context.WithCancel(context.Background())
	fs := &fills{f: f, slots: make(chan struct{}, max(1, slots)), ctx: ctx, stop: cancel, wake: make(chan struct{}, 1),
		running: map[int]*wholeFill{}, tried: make([]uint64, (len(f.lay.Videos)+63)/64), all: -1}
	fs.wg.Add(1)
	go fs.dispatch()
	return fs
}

// close stops every fill and waits for them.
func (fs *fills) close() {
	fs.stop()
	fs.wg.Wait()
}

func (fs *fills) poke() {
	select {
	case fs.wake <- struct{}{}:
	default:
	}
}

// running returns the fill of video v under way, or nil.
func (fs *fills) of(v int) *wholeFill {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.running[v]
}

// tryStart starts decoding video v whole from unit start (a multiple of the fill stride) if no
// fill of it ran this mount and a slot is free, and returns it; nice runs it at a low priority.
func (fs *fills) tryStart(v, start int, nice bool) *wholeFill {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.tried[v/64]&(1<<(v%64)) != 0 || fs.ctx.Err() != nil {
		return nil
	}
	select {
	case fs.slots <- struct{}{}:
	default:
		return nil
	}
	fs.tried[v/64] |= 1 << (v % 64)
	fl := &wholeFill{v: v, start: start, hi: start, at: start, changed: make(chan struct{})}
	fs.running[v] = fl
	fs.started++
	fs.wg.Add(1)
	go fs.run(fl, nice)
	return fl
}

// run decodes fl's video whole, on a thread of its own (at nice 10 if nice), and ends it.
func (fs *fills) run(fl *wholeFill, nice bool) {
	defer fs.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread, with its priority, ends with the goroutine
	if nice {
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10) // best effort
	}
	f := fs.f
	err := f.fillVideo(fs.ctx, fl)
	if err != nil && fs.ctx.Err() == nil {
		f.log.Info("training copy: video not decoded whole; its samples are decoded as they are read", "file", f.videoPath(fl.v), "err", err)
	}
	fl.end()
	fs.mu.Lock()
	delete(fs.running, fl.v)
	if err != nil && !errors.Is(err, context.Canceled) {
		fs.failed++
	}
	fs.mu.Unlock()
	<-fs.slots
	fs.poke()
}

// FillAll asks for every video of the layout to be decoded whole into the training copy, in the
// background (vidfs copy); it says false when the mount keeps no copy.
func (f *FS) FillAll() bool {
	if f.copy == nil {
		return false
	}
	fs := f.copy.fills
	fs.mu.Lock()
	fs.all = 0
	fs.mu.Unlock()
	if b := f.copy.budget; b != nil {
		b.lift() // every video, whatever it costs: the fills under way too
	}
	fs.poke()
	return true
}

// dispatch starts the background fills: the videos FillAll asked for, in order, at a low
// priority (nice 10), so that readers' decodes come first, and under auto the plans' next videos
// the budget allows.
func (fs *fills) dispatch() {
	defer fs.wg.Done()
	var tick <-chan time.Time
	if fs.f.copy.mode == FillAuto {
		t := time.NewTicker(fillIdleEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-fs.ctx.Done():
			return
		case <-fs.wake:
		case <-tick:
		}
		for fs.ctx.Err() == nil {
			v, nice := fs.next()
			if v < 0 || fs.tryStart(v, 0, nice) == nil {
				break
			}
		}
	}
}

// next returns the next video to decode whole in the background, or -1, and whether to decode
// it at a low priority: FillAll's next video not whole (at nice 10: vidfs copy fills in the time
// the readers leave), or under auto, with the budget allowing, the soonest planned video not
// whole (at the readers' priority: the budget bounds what it takes, and at nice 10 beside
// readers that keep every core busy it would hold its slot for ever).
func (fs *fills) next() (int, bool) {
	f := fs.f
	if len(fs.slots) == cap(fs.slots) {
		return -1, false
	}
	fs.mu.Lock()
	for fs.all >= 0 && fs.all < len(f.lay.Videos) {
		v := fs.all
		fs.all++
		if fs.tried[v/64]&(1<<(v%64)) == 0 && !f.copy.whole(v) {
			fs.mu.Unlock()
			return v, true
		}
	}
	fs.all = -1
	fs.mu.Unlock()
	b := f.copy.budget
	if b == nil || !b.ready() {
		return -1, false
	}
	var buf [64]int
	for _, i := range f.plans.Upcoming(buf[:0], len(buf)) {
		v := f.lay.Sample(i).Video
		if !fs.isTried(v) && !f.copy.whole(v) && f.current(i) && f.wantedAgain(i) {
			return v, false
		}
	}
	return -1, false
}

func (fs *fills) isTried(v int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.tried[v/64]&(1<<(v%64)) != 0
}

// counts says how many videos FillAll has still to go through (some of which may turn out whole
// or tried already), how many fills run, and how many started and ended early.
func (fs *fills) counts() (queued, running int, started, failed int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.all >= 0 {
		queued = len(fs.f.lay.Videos) - fs.all
	}
	return queued, len(fs.running), fs.started, fs.failed
}

// fillFile is .vidfs/fill, in a mount that keeps a training copy: writing "all" to it asks for
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
