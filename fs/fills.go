package fs

// Which videos are decoded whole into the training copy, and when: a load's (--copy-fill videos,
// at once or, with every slot taken, when one frees; or auto within its budget), the plans' next
// videos while the decoders are idle (auto), or every video or a node's share of them (vidfs
// copy, .vidfs/fill); at most as many at once as --workers.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/placement"
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
	share   *share   // vidfs copy --nodes: the videos of this node's share, nil: every video
	// waiting are the videos --copy-fill videos wanted whole at a load while every slot was
	// taken, oldest first, each once (inWaiting): filled as slots free.
	waiting   []int
	inWaiting []uint64
	started   int64 // fills started, and those that ended early (damage, no room)
	failed    int64
}

// fillIdleEvery is how often an auto mount looks for a video to fill the budget allows.
const fillIdleEvery = 250 * time.Millisecond

// newFills starts the fills' dispatcher (vidfs copy's videos, and idle filling under auto).
func newFills(f *FS, slots int) *fills {
	ctx, cancel := context.WithCancel(context.Background())
	fs := &fills{f: f, slots: make(chan struct{}, max(1, slots)), ctx: ctx, stop: cancel, wake: make(chan struct{}, 1),
		running: map[int]*wholeFill{}, tried: make([]uint64, (len(f.lay.Videos)+63)/64), all: -1,
		inWaiting: make([]uint64, (len(f.lay.Videos)+63)/64)}
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

// wait queues video v to be decoded whole when a slot frees, once (--copy-fill videos: a load
// found every slot taken).
func (fs *fills) wait(v int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.tried[v/64]&(1<<(v%64)) != 0 || fs.inWaiting[v/64]&(1<<(v%64)) != 0 {
		return
	}
	fs.inWaiting[v/64] |= 1 << (v % 64)
	fs.waiting = append(fs.waiting, v)
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
func (f *FS) FillAll() bool { return f.fill(nil) }

// FillShare asks, as FillAll, for the videos that the placement rule gives to node of nodes
// under seed (vidfs copy --nodes): placement.Assign over .vidfs/videos.txt, each video weighing
// its samples, or 1 with byVideo. It says false when the mount keeps no copy.
func (f *FS) FillShare(node, nodes int, seed uint64, byVideo bool) (bool, error) {
	if f.copy == nil {
		return false, nil
	}
	if node < 0 || node >= nodes {
		return true, fmt.Errorf("node %d of %d: want 0 <= node < nodes", node, nodes)
	}
	names := make([]string, len(f.lay.Videos))
	weights := make([]int, len(f.lay.Videos))
	for v := range f.lay.Videos {
		names[v] = placement.Name(f.lay.Videos[v].Path)
		first, end := f.lay.VideoSamples(v)
		weights[v] = end - first
		if byVideo && weights[v] > 0 {
			weights[v] = 1
		}
	}
	at, err := placement.Assign(names, weights, seed, nodes)
	if err != nil {
		return true, err
	}
	sh := &share{node: node, nodes: nodes, seed: seed, byVideo: byVideo, in: make([]uint64, (len(at)+63)/64)}
	for v, n := range at {
		if n == node {
			sh.in[v/64] |= 1 << (v % 64)
			sh.videos++
		}
	}
	return f.fill(sh), nil
}

// fill queues the videos of sh (nil: every video) to be decoded whole.
func (f *FS) fill(sh *share) bool {
	if f.copy == nil {
		return false
	}
	fs := f.copy.fills
	fs.mu.Lock()
	fs.all = 0
	fs.share = sh
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
		if fs.share.has(v) && fs.tried[v/64]&(1<<(v%64)) == 0 && !f.copy.whole(v) {
			fs.mu.Unlock()
			return v, true
		}
	}
	fs.all = -1
	for len(fs.waiting) > 0 {
		v := fs.waiting[0]
		fs.waiting = fs.waiting[1:]
		fs.inWaiting[v/64] &^= 1 << (v % 64)
		if fs.tried[v/64]&(1<<(v%64)) == 0 && !f.copy.whole(v) {
			fs.mu.Unlock()
			return v, false
		}
	}
	fs.waiting = nil // lets the array go
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

// share is a node's share of the videos, as vidfs copy --nodes asks for it.
type share struct {
	node, nodes int
	seed        uint64
	byVideo     bool
	in          []uint64 // a bit per video of the share
	videos      int      // how many
}

// has says whether video v is in the share; a nil share holds every video.
func (sh *share) has(v int) bool { return sh == nil || sh.in[v/64]&(1<<(v%64)) != 0 }

// shareStats is the share vidfs copy --nodes asked for, with how many of its videos are whole
// now (a look at each: .vidfs/stats is read every few seconds, not per sample); nil when none.
func (fs *fills) shareStats() *wire.CopyShare {
	fs.mu.Lock()
	sh := fs.share
	fs.mu.Unlock()
	if sh == nil {
		return nil
	}
	w := &wire.CopyShare{Node: sh.node, Nodes: sh.nodes, Seed: sh.seed, Weigh: "samples", Videos: sh.videos}
	if sh.byVideo {
		w.Weigh = "videos"
	}
	for v := range len(fs.f.lay.Videos) {
		if sh.has(v) && fs.f.copy.whole(v) {
			w.Whole++
		}
	}
	return w
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
		if fs.share != nil { // the share's videos still to come
			queued = 0
			for v := fs.all; v < len(fs.f.lay.Videos); v++ {
				if fs.share.has(v) {
					queued++
				}
			}
		}
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

// Write takes "all" (FillAll) or "share NODE NODES SEED samples|videos" (FillShare), and refuses
// anything else.
func (h *fillHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	req := strings.TrimSpace(string(data))
	if w := strings.Fields(req); len(w) == 5 && w[0] == "share" {
		node, err1 := strconv.Atoi(w[1])
		nodes, err2 := strconv.Atoi(w[2])
		seed, err3 := strconv.ParseUint(w[3], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil || (w[4] != "samples" && w[4] != "videos") {
			h.f.log.Warn("fill: want \"share NODE NODES SEED samples|videos\"", "got", req, "reason", err)
			return 0, syscall.EINVAL
		}
		ok, err := h.f.FillShare(node, nodes, seed, w[4] == "videos")
		if !ok {
			h.f.log.Warn("fill asked of a mount that keeps no training copy (--cache-dir, --cache-keep frames)")
			return 0, syscall.EINVAL
		}
		if err != nil {
			h.f.log.Warn("fill: refused", "got", req, "reason", err)
			return 0, syscall.EINVAL
		}
		h.f.log.Info("training copy: this node's share of the videos queued to be decoded whole", "node", node, "nodes", nodes, "seed", seed, "weigh", w[4])
		return uint32(len(data)), 0
	}
	switch req {
	case "all":
		if !h.f.FillAll() {
			h.f.log.Warn("fill asked of a mount that keeps no training copy (--cache-dir, --cache-keep frames)")
			return 0, syscall.EINVAL
		}
		h.f.log.Info("training copy: every video queued to be decoded whole", "videos", len(h.f.lay.Videos))
		return uint32(len(data)), 0
	}
	h.f.log.Warn("fill: want \"all\" or \"share NODE NODES SEED samples|videos\"", "got", string(data))
	return 0, syscall.EINVAL
}
