package load

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
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/placement"
)

// fills runs the whole-video fills of a mount.
type fills struct {
	l *Loader
	// slots holds a token for each fill running, at any priority: --workers of them, which the
	// decoders are sized for beside the loads' (Decoders), so that no load waits for a decoder a
	// fill holds, at SCHED_IDLE least of all.
	slots chan struct{}
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	wake  chan struct{} // a fill ended, or FillAll asked for more
	// mu guards everything below. LOCK ORDERING: taken before the training copy's store's
	// (copystore.Store.Whole), never with a fill's own (wholeFill.mu); nothing else is called
	// with it held (poke sends without blocking).
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
func newFills(l *Loader, slots int) *fills {
	ctx, cancel := context.WithCancel(context.Background())
	fs := &fills{l: l, slots: make(chan struct{}, max(1, slots)), ctx: ctx, stop: cancel, wake: make(chan struct{}, 1),
		running: map[int]*wholeFill{}, tried: make([]uint64, (len(l.lay.Videos)+63)/64), all: -1,
		inWaiting: make([]uint64, (len(l.lay.Videos)+63)/64)}
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
	l := fs.l
	err := l.fillVideo(fs.ctx, fl)
	switch {
	case errors.Is(err, errNoRoom):
		l.log.Debug("training copy: video not decoded whole", "file", l.videoPath(fl.v), "err", err)
	case err != nil && fs.ctx.Err() == nil:
		l.log.Info("training copy: video not decoded whole; its samples are decoded as they are read", "file", l.videoPath(fl.v), "err", err)
	}
	if err != nil {
		l.copy.c.Release(fl.v) // the room promised to it that its frames will not take
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
func (l *Loader) FillAll() bool { return l.fill(nil) }

// FillShare asks, as FillAll, for the videos that the placement rule gives to the node named
// node among nodes (their numbers, or host names) under seed (vidfs copy --nodes or --hosts):
// placement.Assign over .vidfs/videos.txt, each video weighing its samples, or 1 with byVideo.
// It says false when the mount keeps no copy.
func (l *Loader) FillShare(node string, nodes []string, seed uint64, byVideo bool) (bool, error) {
	if l.copy == nil {
		return false, nil
	}
	me := slices.Index(nodes, node)
	if me < 0 {
		return true, fmt.Errorf("node %q is not one of the nodes %q", node, nodes)
	}
	names := make([]string, len(l.lay.Videos))
	weights := make([]int, len(l.lay.Videos))
	for v := range l.lay.Videos {
		names[v] = placement.Name(l.lay.Videos[v].Path)
		first, end := l.lay.VideoSamples(v)
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
		if n == me && l.copy.whole(v) {
			sh.found(v) // whole already: counted from the start, not as the cursor comes
		}
	}
	sh.left = sh.videos
	return l.fill(sh), nil
}

// fill queues the videos of sh (nil: every video) to be decoded whole.
func (l *Loader) fill(sh *share) bool {
	if l.copy == nil {
		return false
	}
	fs := l.copy.fills
	fs.mu.Lock()
	fs.all = 0
	fs.share = sh
	fs.mu.Unlock()
	if b := l.copy.budget; b != nil {
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
	if m := fs.l.copy.mode; m == FillAuto || m == FillVideos {
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
	l := fs.l
	if len(fs.slots) == cap(fs.slots) {
		return -1, 0
	}
	fs.mu.Lock()
	for len(fs.waiting) > 0 {
		v := fs.waiting[0]
		fs.waiting = fs.waiting[1:]
		fs.inWaiting[v/64] &^= 1 << (v % 64)
		if fs.tried[v/64]&(1<<(v%64)) == 0 && !l.copy.whole(v) {
			fs.mu.Unlock()
			return v, fromWaiting
		}
	}
	fs.waiting = nil // lets the array go
	for fs.all >= 0 && fs.all < len(l.lay.Videos) {
		v := fs.all
		fs.all++
		if !fs.share.has(v) {
			continue
		}
		if fs.share != nil {
			fs.share.left--
		}
		if l.copy.whole(v) {
			fs.share.found(v)
			continue
		}
		if fs.tried[v/64]&(1<<(v%64)) == 0 {
			fs.mu.Unlock()
			if !l.copy.admit(v) {
				fs.mu.Lock()
				continue // no room for it: not decoded for the copy
			}
			return v, fromList
		}
	}
	fs.all = -1
	fs.mu.Unlock()
	videos := l.copy.mode == FillVideos
	if b := l.copy.budget; videos || b != nil && b.ready() {
		var buf [64]int
		for _, i := range l.plans.Upcoming(buf[:0], len(buf)) {
			v := l.lay.Sample(i).Video
			if !fs.isTried(v) && !l.copy.whole(v) && l.current(i) && (videos || l.wantedAgain(i)) && l.copy.admit(v) {
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
	l := fs.l
	if l.copy.mode != FillAuto || len(fs.slots) == cap(fs.slots) || fs.idleRunning() >= idleSlots(cap(fs.slots)) {
		return -1, 0
	}
	buf := make([]int, 0, idleLookahead)
	for _, i := range l.plans.Upcoming(buf, idleLookahead) {
		v := l.lay.Sample(i).Video
		if !fs.isTried(v) && !l.copy.whole(v) && l.current(i) && l.copy.admit(v) {
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
			case fs.l.copy.whole(v):
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
		queued = len(fs.l.lay.Videos) - fs.all
		if fs.share != nil {
			queued = fs.share.left
		}
	}
	queued += len(fs.waiting)
	return queued, len(fs.running), fs.started, fs.idleStarted, fs.failed
}
