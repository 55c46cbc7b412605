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
	"slices"
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
	f *FS
	// slots holds a token for each fill running, at any priority: --workers of them, which the
	// decoders are sized for beside the loads' (Decoders), so that no load waits for a decoder a
	// fill holds, at SCHED_IDLE least of all.
	slots chan struct{}
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	wake  chan struct{} // a fill ended, or FillAll asked for more
	// mu guards everything below. LOCK ORDERING: taken before the training copy's store's
	// (framestore.Store.Whole) and a fill's own; nothing else is called with it held (poke
	// sends without blocking).
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
	// idleStarted counts the fills started at SCHED_IDLE (of started).
	idleStarted int64
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
	fs.poke() // a slot may have freed since the load found none
}

// priority is what a whole video's decode runs at.
type priority int

const (
	atReaders priority = iota // as the readers' decodes: the budget's, a load's, --copy-fill videos'
	atNice                    // nice 10: vidfs copy's
	// atIdle: SCHED_IDLE in the helper that decodes it, taking only CPU nothing else wants: no
	// reader's decode waits for it, and no load waits on it (auto).
	atIdle
)

// tryStart starts decoding video v whole from unit start (a multiple of the fill stride) at
// priority prio, if no fill of it ran this mount and a slot is free, and returns it.
func (fs *fills) tryStart(v, start int, prio priority) *wholeFill {
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
	fl := &wholeFill{v: v, start: start, hi: start, at: start, idle: prio == atIdle, changed: make(chan struct{})}
	fs.running[v] = fl
	fs.started++
	if fl.idle {
		fs.idleStarted++
	}
	fs.wg.Add(1)
	go fs.run(fl, prio)
	return fl
}

// run decodes fl's video whole, on a thread of its own at priority prio, and ends it.
func (fs *fills) run(fl *wholeFill, prio priority) {
	defer fs.wg.Done()
	runtime.LockOSThread() // never unlocked: the thread, with its priority, ends with the goroutine
	switch prio {
	case atNice:
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10) // best effort
	case atIdle:
		// Its decodes run at SCHED_IDLE in the helper that decodes them (decode.Clip.Background).
		// This thread mostly waits for them; where it decodes itself (--decoders in-process) it
		// runs at nice 19, not SCHED_IDLE: a thread of the mount's that the kernel may leave
		// without CPU for seconds could hold up the Go runtime's stops for the whole mount.
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19) // best effort
	}
	f := fs.f
	err := f.fillVideo(fs.ctx, fl)
	switch {
	case errors.Is(err, errNoRoom):
		f.log.Debug("training copy: video not decoded whole", "file", f.videoPath(fl.v), "err", err)
	case err != nil && fs.ctx.Err() == nil:
		f.log.Info("training copy: video not decoded whole; its samples are decoded as they are read", "file", f.videoPath(fl.v), "err", err)
	}
	if err != nil {
		f.copy.c.Release(fl.v) // the room promised to it that its frames will not take
	}
	fl.end()
	fs.mu.Lock()
	delete(fs.running, fl.v)
	if err != nil && !errors.Is(err, context.Canceled) {
		fs.failed++
	}
	if err == nil && fs.share != nil && fs.share.has(fl.v) {
		// Its last frames may still be on their way to the disk: counted when they are there.
		fs.share.pending = append(fs.share.pending, fl.v)
	}
	fs.mu.Unlock()
	<-fs.slots
	fs.poke()
}

// FillAll asks for every video of the layout to be decoded whole into the training copy, in the
// background (vidfs copy); it says false when the mount keeps no copy.
func (f *FS) FillAll() bool { return f.fill(nil) }

// FillShare asks, as FillAll, for the videos that the placement rule gives to the node named
// node among nodes (their numbers, or host names) under seed (vidfs copy --nodes or --hosts):
// placement.Assign over .vidfs/videos.txt, each video weighing its samples, or 1 with byVideo.
// It says false when the mount keeps no copy.
func (f *FS) FillShare(node string, nodes []string, seed uint64, byVideo bool) (bool, error) {
	if f.copy == nil {
		return false, nil
	}
	me := slices.Index(nodes, node)
	if me < 0 {
		return true, fmt.Errorf("node %q is not one of the nodes %q", node, nodes)
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
	if int64(len(names))*int64(len(nodes)) > maxShareTable {
		return true, fmt.Errorf("%d nodes of %d videos: a placement's table of %d entries, more than the mount works out (%d)",
			len(nodes), len(names), int64(len(names))*int64(len(nodes)), maxShareTable)
	}
	at, err := placement.Assign(names, weights, seed, nodes)
	if err != nil {
		return true, err
	}
	words := (len(at) + 63) / 64
	sh := &share{node: node, nodes: len(nodes), seed: seed, byVideo: byVideo, in: make([]uint64, words), whole: make([]uint64, words)}
	for v, n := range at {
		if n == me {
			sh.in[v/64] |= 1 << (v % 64)
			sh.videos++
		}
	}
	for v, n := range at {
		if n == me && f.copy.whole(v) {
			sh.found(v) // whole already: counted from the start, not as the cursor comes
		}
	}
	sh.left = sh.videos
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
// priority (nice 10), so that readers' decodes come first; those loads found every slot taken
// for (--copy-fill videos); and the plans' next videos, under videos whenever a slot is free,
// under auto as the budget allows.
func (fs *fills) dispatch() {
	defer fs.wg.Done()
	var tick <-chan time.Time
	if m := fs.f.copy.mode; m == FillAuto || m == FillVideos {
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
			v, from := fs.next()
			if v < 0 {
				break
			}
			prio := atReaders
			switch from {
			case fromList:
				prio = atNice
			case fromIdle:
				prio = atIdle
			}
			if fs.tryStart(v, 0, prio) == nil {
				fs.giveBack(v, from) // a load took the last slot meanwhile
				break
			}
		}
	}
}

// Where next found its video: the videos a load found every slot taken for, FillAll's list
// (vidfs copy), or the plans.
const (
	fromWaiting = iota
	fromList
	fromPlans
	fromIdle // the plans' upcoming videos, decoded at SCHED_IDLE (auto)
)

// idleSlots is how many of a mount's fill slots idle fills may take: half, at least one. The
// others are left to the fills the budget pays for: an idle fill gets no CPU while readers keep
// every core busy, and holds its slot meanwhile.
func idleSlots(slots int) int { return max(1, slots/2) }

// idleRunning counts the idle fills under way.
func (fs *fills) idleRunning() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := 0
	for _, fl := range fs.running {
		if fl.idle {
			n++
		}
	}
	return n
}

// idleLookahead is how many of the plans' next samples an auto mount looks at for videos to
// decode whole at SCHED_IDLE.
const idleLookahead = 512

// next returns the next video to decode whole in the background, or -1, and where it found it:
// a video a load wanted whole when every slot was taken (videos), FillAll's next video not whole
// (decoded at nice 10: vidfs copy fills in the time the readers leave), or the soonest planned
// video not whole: under videos, any; under auto, one read again, with the budget allowing. All
// but FillAll's at the readers' priority: they are the readers' next videos (and auto's budget
// bounds what they take; at nice 10 beside readers that keep every core busy they would hold
// their slots for ever).
func (fs *fills) next() (int, int) {
	f := fs.f
	if len(fs.slots) == cap(fs.slots) {
		return -1, 0
	}
	fs.mu.Lock()
	for len(fs.waiting) > 0 {
		v := fs.waiting[0]
		fs.waiting = fs.waiting[1:]
		fs.inWaiting[v/64] &^= 1 << (v % 64)
		if fs.tried[v/64]&(1<<(v%64)) == 0 && !f.copy.whole(v) {
			fs.mu.Unlock()
			return v, fromWaiting
		}
	}
	fs.waiting = nil // lets the array go
	for fs.all >= 0 && fs.all < len(f.lay.Videos) {
		v := fs.all
		fs.all++
		if !fs.share.has(v) {
			continue
		}
		if fs.share != nil {
			fs.share.left--
		}
		if f.copy.whole(v) {
			fs.share.found(v)
			continue
		}
		if fs.tried[v/64]&(1<<(v%64)) == 0 {
			fs.mu.Unlock()
			if !f.copy.admit(v) {
				fs.mu.Lock()
				continue // no room for it: not decoded for the copy
			}
			return v, fromList
		}
	}
	fs.all = -1
	fs.mu.Unlock()
	videos := f.copy.mode == FillVideos
	if b := f.copy.budget; videos || b != nil && b.ready() {
		var buf [64]int
		for _, i := range f.plans.Upcoming(buf[:0], len(buf)) {
			v := f.lay.Sample(i).Video
			if !fs.isTried(v) && !f.copy.whole(v) && f.current(i) && (videos || f.wantedAgain(i)) && f.copy.admit(v) {
				return v, fromPlans
			}
		}
	}
	return fs.nextIdle()
}

// nextIdle returns, under auto, a video of the plans' next samples to decode whole at SCHED_IDLE
// in a free slot, or -1: what the readers leave of the CPU fills the copy, whatever the budget,
// so that a trainer bound by its GPU, whose cores are mostly idle, has its copy (or its node's
// share, which is what its plans hold) whole within about an epoch.
func (fs *fills) nextIdle() (int, int) {
	f := fs.f
	if f.copy.mode != FillAuto || len(fs.slots) == cap(fs.slots) || fs.idleRunning() >= idleSlots(cap(fs.slots)) {
		return -1, 0
	}
	buf := make([]int, 0, idleLookahead)
	for _, i := range f.plans.Upcoming(buf, idleLookahead) {
		v := f.lay.Sample(i).Video
		if !fs.isTried(v) && !f.copy.whole(v) && f.current(i) && f.copy.admit(v) {
			return v, fromIdle
		}
	}
	return -1, 0
}

// giveBack puts video v, which next returned from where but which found no slot free, back
// where it came from: the front of the waiting videos, or FillAll's list (its cursor back at
// v); one from the plans is offered again by them.
func (fs *fills) giveBack(v, from int) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch from {
	case fromWaiting:
		if fs.inWaiting[v/64]&(1<<(v%64)) == 0 {
			fs.inWaiting[v/64] |= 1 << (v % 64)
			fs.waiting = append([]int{v}, fs.waiting...)
		}
	case fromList:
		if fs.all < 0 || v < fs.all {
			fs.all = v
			if fs.share != nil {
				fs.share.left++ // passed again
			}
		}
	}
}

// maxShareTable bounds videos x nodes for a placement the mount works out (FillShare): its
// table takes 4 bytes an entry (1 GiB here).
const maxShareTable = 1 << 28

// share is a node's share of the videos, as vidfs copy --nodes or --hosts asks for it; fills.mu
// guards its counts.
type share struct {
	node    string
	nodes   int
	seed    uint64
	byVideo bool
	in      []uint64 // a bit per video of the share
	videos  int      // how many
	left    int      // of them, those FillAll's cursor has not passed yet
	// whole has a bit per video of the share found whole as the cursor passed it, or decoded
	// whole by a fill that ended since (a video evicted after is still counted); wholes counts
	// them.
	whole  []uint64
	wholes int
	// pending are videos of the share decoded whole whose frames were not all on disk yet when
	// their fill ended: looked at again when the stats are read (as many as fills ended lately).
	pending []int
}

// has says whether video v is in the share; a nil share holds every video.
func (sh *share) has(v int) bool { return sh == nil || sh.in[v/64]&(1<<(v%64)) != 0 }

// found counts video v of the share as whole, once.
func (sh *share) found(v int) {
	if sh != nil && sh.has(v) && sh.whole[v/64]&(1<<(v%64)) == 0 {
		sh.whole[v/64] |= 1 << (v % 64)
		sh.wholes++
	}
}

// shareStats is the share vidfs copy --nodes or --hosts asked for, with how many of its videos
// are whole, backlog being the copy's frames still to be written as the stats say; nil when
// none was asked for.
func (fs *fills) shareStats(backlog int) *wire.CopyShare {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	sh := fs.share
	if sh == nil {
		return nil
	}
	if len(sh.pending) > 0 {
		written := backlog == 0 // nothing more on its way to the disk, as the stats say
		left := sh.pending[:0]
		for _, v := range sh.pending {
			switch {
			case fs.f.copy.whole(v):
				sh.found(v)
			case !written:
				left = append(left, v)
			} // else not whole with all written: evicted, or no room; not counted
		}
		sh.pending = left
	}
	w := &wire.CopyShare{Node: sh.node, Nodes: sh.nodes, Seed: sh.seed, Weigh: "samples", Videos: sh.videos, Whole: sh.wholes}
	if sh.byVideo {
		w.Weigh = "videos"
	}
	return w
}

func (fs *fills) isTried(v int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.tried[v/64]&(1<<(v%64)) != 0
}

// counts says how many videos FillAll has still to go through (some of which may turn out whole
// or tried already), how many fills run, and how many started (idle of them at SCHED_IDLE) and
// ended early.
func (fs *fills) counts() (queued, running int, started, idle, failed int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.all >= 0 {
		queued = len(fs.f.lay.Videos) - fs.all
		if fs.share != nil {
			queued = fs.share.left
		}
	}
	queued += len(fs.waiting)
	return queued, len(fs.running), fs.started, fs.idleStarted, fs.failed
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

// Write takes "all" (FillAll) or "share SEED samples|videos NODE NODE1 NODE2 ..." (FillShare:
// this node's name, then every node's), and refuses anything else.
func (h *fillHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	req := strings.TrimSpace(string(data))
	if w := strings.Fields(req); len(w) >= 4 && w[0] == "share" {
		seed, err := strconv.ParseUint(w[1], 10, 64)
		if err != nil || (w[2] != "samples" && w[2] != "videos") {
			h.f.log.Warn("fill: want \"share SEED samples|videos NODE NODES...\"", "got", req, "reason", err)
			return 0, syscall.EINVAL
		}
		ok, err := h.f.FillShare(w[3], w[4:], seed, w[2] == "videos")
		if !ok {
			h.f.log.Warn("fill asked of a mount that keeps no training copy (--cache-dir, --cache-keep frames)")
			return 0, syscall.EINVAL
		}
		if err != nil {
			h.f.log.Warn("fill: refused", "got", req, "reason", err)
			return 0, syscall.EINVAL
		}
		h.f.log.Info("training copy: this node's share of the videos queued to be decoded whole", "node", w[3], "nodes", len(w)-4, "seed", seed, "weigh", w[2])
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
	h.f.log.Warn("fill: want \"all\" or \"share SEED samples|videos NODE NODES...\"", "got", string(data))
	return 0, syscall.EINVAL
}

// epochsFile is .vidfs/epochs: a reader's sampler (PlanSampler(epochs=...)) writes how many epochs
// its run has left, the current one included, at each epoch; under --copy-fill auto, a run with
// enough of them left lets whole decodes take more of each epoch's CPU (budget.run). Any mount
// takes it (a sampler need not know whether the mount keeps a copy); a write that is not a
// number from 0 to a million fails with EINVAL. Reading it gives nothing.
type epochsFile struct{ node }

// Setattr accepts truncation (`>` truncates before it writes).
func (c *epochsFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c.f.attr(&out.Attr, c.mode, 0)
	return 0
}

// Open opens .vidfs/epochs for writing.
func (c *epochsFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &epochsHandle{f: c.f}, fuse.FOPEN_DIRECT_IO, 0
}

// epochsHandle is .vidfs/epochs, open.
type epochsHandle struct{ f *FS }

// Read gives nothing: what was said is in .vidfs/stats (copy, fill_budget).
func (h *epochsHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

// maxEpochs bounds what .vidfs/epochs takes.
const maxEpochs = 1_000_000

// Write takes the epochs left, a number.
func (h *epochsHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 || n > maxEpochs {
		h.f.log.Warn("epochs: want the epochs left, a number from 0 to a million", "got", string(data))
		return 0, syscall.EINVAL
	}
	if t := h.f.copy; t != nil && t.budget != nil {
		t.budget.run(n)
	}
	return uint32(len(data)), 0
}
