package isolate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/wire"
)

// Options configures Decoders.
type Options struct {
	// Helpers is how many helper processes decode (default: the number of CPUs).
	Helpers int
	// PerHelper is how many clips each helper decodes at once (default 2): a crash costs at
	// most these (each decoded once more, alone).
	PerHelper int
	// Idle is how many open decoders each helper keeps between clips (default PerHelper): the
	// mount's idle decoders, shared among its helpers.
	Idle int
	// Open opens videos that are not local files (objects in a bucket): the mount reads them
	// and answers a helper's reads over a socket. Nil: every Path is a local file, which the
	// mount opens and hands over.
	Open decode.Opener
	// Deadline bounds a decode; past it the helper is killed as hung. 0: from the clip's size
	// (DeadlineFor).
	Deadline time.Duration
	// Log receives helpers' starts, deaths and what they print. Nil: no logging.
	Log *slog.Logger
	// Exe is the program to start as a helper (default: this one, /proc/self/exe, which stays
	// the running binary if its file is replaced or removed).
	Exe string
}

// Stats counts what the helpers met.
type Stats struct {
	Helpers     int   // helpers serving now
	Started     int64 // helpers started, replacements and retries included
	Crashes     int64 // helpers that died (killed by a signal, or exited) while decoding
	Hangs       int64 // helpers killed because a decode passed its deadline
	Retries     int64 // clips decoded again, alone in a fresh helper, after their helper died or failed inside FFmpeg
	Held        int64 // videos held damaged: they crashed a helper twice
	LandlockABI int   // the Landlock ABI helpers confine themselves under (0: none)
	// ReplaceSeconds is how long the last replacement of a dead helper took to serve.
	ReplaceSeconds float64
	// ResidentBytes is the helpers' resident memory, summed.
	ResidentBytes int64
	// Background counts the clips decoded as decode.Clip.Background asked, IdleDecodes those of
	// them that ran at SCHED_IDLE in their helper.
	Background, IdleDecodes int64
}

// Decoders decodes clips in sandboxed helper processes, as decode.Pool does in-process (it
// serves load.Decoder). A helper that crashes or hangs costs only the clips it was decoding:
// each is decoded once more, alone in a fresh helper, and fails only if that crashes too, when
// its video is held damaged for the life of the Decoders (decode.ErrCrashed).
type Decoders struct {
	opts    Options
	exe     string
	slots   chan struct{} // a token per clip decoding
	alone   chan struct{} // a token per helper started for one clip's retry (do)
	nextID  atomic.Uint64
	started atomic.Int64

	// mu guards the fields below. LOCK ORDERING: mu before a proc's mu.
	mu    sync.Mutex
	procs []*proc // by slot; nil while one is being started
	held  map[string]string
	// internal holds the videos whose lone retry after an internal failure failed inside
	// FFmpeg again: theirs is the video's own, and is not tried alone again (one a video).
	internal map[string]bool
	marks    map[string][]int // keyframes found unusable, by video (acceptMarks)
	picture  int64            // the picture measure helpers start with (limits.go)
	arena    *Arena           // the cache's memory (Buffers), nil before
	stats    Stats
	dead     decode.PoolStats // what helpers that died had done
	changed  chan struct{}    // closed (and replaced) when a helper starts, or a clip ends
	closed   bool
	lastFail error          // the last failure to start a helper
	wg       sync.WaitGroup // replacements and streamed sources running; Add with mu held, before closed
	calls    sync.WaitGroup // DecodeClips running; Add with mu held, before closed

	// Helpers are started from one thread, locked, that lives as long as the Decoders: a
	// helper dies with the thread that started it (PR_SET_PDEATHSIG), and the Go runtime ends
	// the threads of goroutines that exit locked to them. spawnMu guards spawning's end.
	spawnMu     sync.Mutex
	spawn       chan func()
	spawnClosed bool
}

// New starts the helpers; Close them when done. It fails when one cannot start or confine
// itself, with its reason.
func New(opts Options) (*Decoders, error) {
	if opts.Helpers <= 0 {
		opts.Helpers = runtime.NumCPU()
	}
	if opts.PerHelper <= 0 {
		opts.PerHelper = 2
	}
	if opts.Idle <= 0 {
		opts.Idle = opts.PerHelper
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	exe := opts.Exe
	if exe == "" {
		exe = "/proc/self/exe"
	}
	d := &Decoders{opts: opts, exe: exe, slots: make(chan struct{}, opts.Helpers*opts.PerHelper), alone: make(chan struct{}, 2),
		procs: make([]*proc, opts.Helpers), held: map[string]string{}, internal: map[string]bool{}, changed: make(chan struct{}), spawn: make(chan func()),
		picture: probePicture}
	go func() {
		runtime.LockOSThread() // for ever: the thread ends with the goroutine, and helpers with it
		for f := range d.spawn {
			f()
		}
	}()
	first, err := d.start(0)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.procs[0] = first
	d.stats.LandlockABI = first.hello.LandlockABI
	for i := 1; i < opts.Helpers; i++ {
		p, err := d.start(0)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.procs[i] = p
	}
	if first.hello.LandlockABI == 0 {
		opts.Log.Warn("decoder helpers: this kernel has no Landlock; they are confined by seccomp, a user of their own and no privileges only")
	}
	opts.Log.Info("decoding in sandboxed helper processes", "helpers", opts.Helpers, "clips_each", opts.PerHelper,
		"uid", first.hello.UID, "landlock_abi", first.hello.LandlockABI, "seccomp", first.hello.Seccomp)
	return d, nil
}

// Buffers gives n buffers of size bytes for the cache, in memory of the mount's own (Arena) that
// a clip is written into by the kernel from its helper's window (fs asks a Decoder that has it:
// fs.SharedBuffers). No helper maps it. Asked once.
func (d *Decoders) Buffers(size int64, n int) (cache.Memory, error) {
	a, err := newArena(size, n)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.arena != nil {
		a.close()
		return nil, errors.New("decoder helpers: the cache's memory asked for twice")
	}
	d.arena = a
	return a, nil
}

// cacheArena is the cache's memory, nil before Buffers.
func (d *Decoders) cacheArena() *Arena {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.arena
}

// DeadlineFor is how long a clip may take to decode before its helper is held hung: 30 s, and
// 100 ms for each frame from the keyframe it starts at to its last, at 1080p (more for larger
// frames). Generous: a 1080p frame decodes in 5-40 ms on one core.
func DeadlineFor(info *decode.Info, c decode.Clip) time.Duration {
	first, last := c.Start, c.Start+(c.Frames-1)*c.Stride
	if c.FPS.Valid() && info.Frames > 0 {
		first, last = info.FrameAt(c.Start, c.FPS), info.FrameAt(c.Start+(c.Frames-1)*c.Stride, c.FPS)
	}
	if len(info.Keyframes) > 0 {
		first = info.KeyframeAtOrBefore(max(first, 0))
	}
	frames := max(last-first+1, c.Frames, 1)
	scale := max(float64(info.Width)*float64(info.Height)/(1920*1080), 1)
	return 30*time.Second + time.Duration(float64(frames)*scale*float64(100*time.Millisecond))
}

// DecodeClip decodes clip c of the video into dst in a helper (decode.Pool.DecodeClip's
// contract). It returns once no helper can write dst any more.
func (d *Decoders) DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error) {
	var res decode.Result
	err := d.do(ctx, info.Path, picture(info), "its clip", func(p *proc) error {
		r, err := d.run(ctx, p, info, c, o, dst)
		res.Path, res.CPU = r.Path, res.CPU+r.CPU // every try's CPU
		return err
	})
	return res, err
}

// Probe makes the probe table of the video at path in a helper (decode.ProbeFrom's contract,
// with the Options' Opener): the mount opens the video and hands it over, and reads none of its
// bytes itself. A probe that crashes or hangs its helper is tried once more, alone, as a clip is;
// a second death holds the video (decode.ErrCrashed). The table is checked (checkInfo) before it
// is believed.
func (d *Decoders) Probe(ctx context.Context, path string) (*decode.Info, error) {
	if d.opts.Open == nil { // as decode.ProbeFrom checks a local file: no bytes read
		if st, err := os.Stat(path); err != nil {
			return nil, &decode.Error{Path: path, Kind: decode.ErrUnreadable, Err: err}
		} else if st.IsDir() {
			return nil, &decode.Error{Path: path, Kind: decode.ErrUnreadable, Detail: "is a directory"}
		} else if st.Size() == 0 {
			return nil, &decode.Error{Path: path, Kind: decode.ErrNotVideo, Detail: "empty file"}
		}
	}
	var info *decode.Info
	err := d.do(ctx, path, probePicture, "its probe", func(p *proc) error {
		var err error
		info, err = d.probe(ctx, p, path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// do runs one request of the video at path, of pictures of pixels pixels, in a helper whose data
// limit allows them: attempt sends it to the helper it is given and waits for its end. A helper
// that dies under it (maybe for another video) costs one try more, alone in a fresh helper, where
// a second death is this video's: it is held, and every later request of it fails at once with
// decode.ErrCrashed. An internal failure (decode.ErrInternal: memory, mostly) is tried once more
// alone too. what names the request in the log.
func (d *Decoders) do(ctx context.Context, path string, pixels int64, what string, attempt func(p *proc) error) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return decode.ErrPoolClosed
	}
	reason, held := d.held[path]
	d.calls.Add(1)
	d.mu.Unlock()
	defer d.calls.Done()
	if held {
		return &decode.Error{Path: path, Kind: decode.ErrCrashed, Detail: reason}
	}
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.slots }()
	if err := ctx.Err(); err != nil { // select chose the slot at random
		return err
	}
	var err error
	for try := 0; ; try++ {
		var p *proc
		if p, err = d.pick(ctx, path, pixels); err != nil {
			return err
		}
		err = attempt(p)
		if !errors.Is(err, errGone) || try == 3 {
			break
		}
		// It died before the request was sent to it: another takes it, as if nothing happened.
	}
	var mine *mountFailure
	if errors.As(err, &mine) {
		return mine.err // the mount's own: no helper's doing, nothing to retry
	}
	var died *deathError
	dead := errors.As(err, &died)
	// A failure inside FFmpeg the data does not explain is mostly memory: its helper may be at
	// its limit for another video's sake (one that allocates without end, before the limit
	// kills it). It is tried once more alone too, and its second failure is only a failure.
	internal := !dead && errors.Is(err, decode.ErrInternal)
	if internal {
		d.mu.Lock()
		internal = !d.internal[path]
		d.mu.Unlock()
	}
	if !dead && !internal || ctx.Err() != nil || d.isClosed() {
		return err
	}
	if dead {
		// Its helper died under it, maybe for another video: once more, alone, in a fresh
		// helper, where a second death is this video's.
		d.opts.Log.Warn("a decoder helper died; trying "+what+" again alone in a fresh one", "file", path, "reason", died.reason)
	} else {
		d.opts.Log.Warn("a decoder helper failed inside FFmpeg; trying "+what+" again alone in a fresh one", "file", path, "err", err)
	}
	// A helper's death costs all its clips a retry each: they take turns, a few helpers at once,
	// rather than a fresh helper each at once.
	select {
	case d.alone <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.alone }()
	alone, err := d.start(pixels)
	if err != nil {
		return &decode.Error{Path: path, Kind: decode.ErrInternal, Detail: "starting a decoder helper", Err: err}
	}
	d.mu.Lock()
	d.stats.Retries++
	d.mu.Unlock()
	alone.begin(path)
	err = attempt(alone)
	alone.stop()
	if errors.As(err, &mine) {
		return mine.err
	}
	if internal {
		if errors.Is(err, decode.ErrInternal) {
			d.mu.Lock()
			d.internal[path] = true // its own failure: later reads are not retried alone
			d.mu.Unlock()
		}
		return err
	}
	var again *deathError
	if !errors.As(err, &again) || ctx.Err() != nil || d.isClosed() {
		return err
	}
	reason = fmt.Sprintf("the decoder crashed on it twice (%s; then, alone, %s)", died.reason, again.reason)
	d.mu.Lock()
	if _, ok := d.held[path]; !ok {
		d.held[path] = reason
		d.stats.Held++
	}
	d.mu.Unlock()
	d.opts.Log.Error("a video crashed the decoder twice; it fails for the rest of the mount", "file", path, "reason", reason)
	return &decode.Error{Path: path, Kind: decode.ErrCrashed, Detail: reason}
}

// isClosed tells whether Close began.
func (d *Decoders) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// pick returns a serving helper with room for a clip: one that decoded the video last (its
// decoder may be open, positioned), else the least busy. It waits while every one is being
// replaced, up to a deadline's worth.
func (d *Decoders) pick(ctx context.Context, path string, pixels int64) (*proc, error) {
	give := time.NewTimer(60 * time.Second)
	defer give.Stop()
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, decode.ErrPoolClosed
		}
		var best *proc
		bestLoad := 0
		for _, p := range d.procs {
			if p == nil {
				continue
			}
			load, has, ok := p.load(path, pixels)
			if !ok || load >= d.opts.PerHelper {
				continue
			}
			if has {
				best = p
				break
			}
			if best == nil || load < bestLoad {
				best, bestLoad = p, load
			}
		}
		if best != nil {
			best.begin(path)
			d.mu.Unlock()
			return best, nil
		}
		if pixels > d.picture {
			d.grow(pixels)
		}
		changed, fail := d.changed, d.lastFail
		d.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-give.C:
			return nil, &decode.Error{Path: path, Kind: decode.ErrInternal, Detail: "no decoder helper serves", Err: fail}
		}
	}
}

// notify wakes those waiting for a helper. Called with d.mu held.
func (d *Decoders) notify() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// run decodes one clip in helper p. An error that is a *deathError says p died (or was killed
// as hung) with the clip sent to it; errGone, that it died before.
func (d *Decoders) run(ctx context.Context, p *proc, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error) {
	defer d.end(p)
	req := &decodeRequest{Info: info, Out: o, Len: int64(len(dst)),
		Clip: clipSpec{Start: c.Start, Frames: c.Frames, Stride: c.Stride, PadEnd: c.PadEnd, Strict: c.Strict, Background: c.Background, FPS: c.FPS}}
	src, stop, err := d.source(p, info.Path, &req.Stream, &req.Size)
	if err != nil {
		return decode.Result{}, err
	}
	defer stop()
	fds := []int{src}
	// The frames go into a window of p's (or, over maxWindow, memory of this request's own), to
	// be copied out once it answers: p can write no other memory of the mount's.
	size := int64(len(dst))
	if c.Keep != nil && !c.FPS.Valid() {
		if spec := keepOf(c, info, o); spec != nil {
			req.Keep, req.KeepOff = spec, size
			size += int64(spec.Max * spec.FrameBytes)
		}
	}
	var mem []byte
	req.Window = -1
	if i, w, fresh, ok := p.lend(size); ok {
		defer p.giveBack(i)
		req.Window, mem = i, w.mem
		if fresh {
			fds = append(fds, w.fd)
		}
	} else {
		fd, m, err := sharedMemory("vidfs-scratch", size)
		if err != nil {
			return decode.Result{}, mountFailed(info.Path, "shared memory for a helper", err)
		}
		defer unix.Munmap(m)
		defer unix.Close(fd)
		fds = append(fds, fd)
		mem = m
	}
	r, err := p.call(ctx, &message{Kind: msgDecode, Decode: req}, fds, d.deadline(info, c), "a decode of "+info.Path, false)
	if err != nil {
		return decode.Result{}, err
	}
	res := decode.Result{CPU: max(r.CPU, 0)}
	if c.Background {
		d.mu.Lock()
		d.stats.Background++
		if r.Idle {
			d.stats.IdleDecodes++
		}
		d.mu.Unlock()
	}
	d.acceptMarks(info, r.Marks)
	if r.Err == nil {
		var err error
		if off, ok := d.cacheArena().locate(dst); ok {
			err = d.cacheArena().write(mem[:len(dst)], off)
		} else {
			copy(dst, mem[:len(dst)])
		}
		if err = mountFault(info.Path, err); err != nil {
			return decode.Result{CPU: res.CPU}, mountFailed(info.Path, "writing its frames into the cache", err)
		}
		res.Path = r.Path
	}
	if req.Keep != nil && r.Err == nil {
		// Only a decode that ended well hands its kept frames over (a failed one may have kept
		// frames whose later references it never confirmed, and is tried again).
		// What the helper says it kept is checked by the rule it follows (decode.KeepSpec):
		// frames it wants, in order, at most a clip's worth; each within the memory lent, and
		// still wanted by the Keeper.
		fb := req.Keep.FrameBytes
		for j, i := range r.Kept[:req.Keep.Valid(r.Kept)] {
			at := req.KeepOff + int64(j)*int64(fb)
			if i >= info.Frames || at+int64(fb) > size || !c.Keep.Want(i) {
				break
			}
			c.Keep.Keep(i, mem[at:at+int64(fb)])
		}
	}
	if err := r.Err.error(); err != nil {
		return decode.Result{CPU: res.CPU}, err // what the failed decode spent
	}
	return res, nil
}

// mountFailure is a failure of the mount's own part of a request (its memory, a socket, its
// write into the cache), which no helper caused: Decoders.do returns the error it wraps as it is,
// never trying the request again in a fresh helper as it does an internal failure a helper
// replies with.
type mountFailure struct{ err error }

func (m *mountFailure) Error() string { return m.err.Error() }
func (m *mountFailure) Unwrap() error { return m.err }

// mountFailed is the mount's own failure at what, for the video at path (decode.ErrInternal).
func mountFailed(path, what string, err error) error {
	return &mountFailure{&decode.Error{Path: path, Kind: decode.ErrInternal, Detail: what, Err: err}}
}

// deadline is a clip's deadline: Options.Deadline, or DeadlineFor.
func (d *Decoders) deadline(info *decode.Info, c decode.Clip) time.Duration {
	if d.opts.Deadline > 0 {
		return d.opts.Deadline
	}
	return DeadlineFor(info, c)
}

// probe probes the video at path in helper p (Probe).
func (d *Decoders) probe(ctx context.Context, p *proc, path string) (*decode.Info, error) {
	defer d.end(p)
	req := &probeRequest{Path: path}
	src, stop, err := d.source(p, path, &req.Stream, &req.Size)
	if err != nil {
		return nil, err
	}
	defer stop()
	deadline := d.opts.Deadline
	if deadline <= 0 {
		size := req.Size
		if !req.Stream {
			var st unix.Stat_t
			if unix.Fstat(src, &st) == nil {
				size = st.Size
			}
		}
		deadline = ProbeDeadlineFor(size)
	}
	// No shared memory is lent to a probe: a caller that gives up need not wait for its end.
	r, err := p.call(ctx, &message{Kind: msgProbeVideo, ProbeVideo: req}, []int{src}, deadline, "a probe of "+path, true)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err.error()
	}
	if err := checkInfo(r.Info, path); err != nil {
		return nil, err
	}
	return r.Info, nil
}

// ProbeDeadlineFor is how long probing a video of size bytes may take before its helper is held
// hung: a minute, and a second for each MiB (a probe reads every packet, and where timestamps
// cannot tell the frames apart, decodes them all: about 2.5 MB of a 1080p or 4K stream a second
// on one core).
func ProbeDeadlineFor(size int64) time.Duration {
	return time.Minute + time.Duration(max(size, 0)>>20)*time.Second
}

// end counts a clip done in p.
func (d *Decoders) end(p *proc) {
	d.mu.Lock()
	p.finish()
	d.retireIfIdle(p)
	d.notify()
	d.mu.Unlock()
}

// Fit sizes the helpers' data limits for pictures of at most pixels (Picture of the largest video
// the mount decodes): helpers started for another measure are replaced as they go idle, and a
// request of a larger picture later starts helpers for it (grow).
func (d *Decoders) Fit(pixels int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pixels = max(min(pixels, maxPicture), Picture(0, 0))
	if pixels == d.picture {
		return
	}
	d.picture = pixels
	for _, p := range d.procs {
		if p != nil && p.pixels != pixels {
			d.retire(p)
		}
	}
}

// grow raises the picture measure helpers start with to pixels, for a request that no helper's
// limit allows, and replaces those started for less. Called with d.mu held.
func (d *Decoders) grow(pixels int64) {
	d.picture = min(pixels, maxPicture)
	for _, p := range d.procs {
		if p != nil && p.pixels < d.picture {
			d.retire(p)
		}
	}
}

// retire has p take no more requests, and be replaced once those it has end. Called with d.mu
// held.
func (d *Decoders) retire(p *proc) {
	p.mu.Lock()
	p.retiring = true
	p.mu.Unlock()
	d.retireIfIdle(p)
}

// retireIfIdle stops p if it is retiring and has no request left; its end starts its
// replacement (died). Called with d.mu held.
func (d *Decoders) retireIfIdle(p *proc) {
	p.mu.Lock()
	idle := p.retiring && p.inflight == 0 && !p.dead
	p.mu.Unlock()
	if idle && !d.closed {
		go p.stop()
	}
}

// keepOf is what c.Keep wants, for a helper to follow: the frames it wants of the video, at
// most a clip's worth. Nil when it wants none.
func keepOf(c decode.Clip, info *decode.Info, o decode.Output) *decode.KeepSpec {
	need := make([]uint64, (info.Frames+63)/64)
	any := false
	for i := range info.Frames {
		if c.Keep.Want(i) {
			need[i/64] |= 1 << (i % 64)
			any = true
		}
	}
	if !any {
		return nil
	}
	return &decode.KeepSpec{Need: need, Max: c.Frames, FrameBytes: o.FrameBytes()}
}

// source opens the video at path for helper p: the file itself, or for a video that is not a
// local file, one end of a socket whose other end this process answers reads on from the
// Opener's Source (then *stream is set, and *size is its size), the time p waits for them kept
// out of its deadlines. stop closes this process's descriptors once the request is sent.
func (d *Decoders) source(p *proc, path string, stream *bool, size *int64) (fd int, stop func(), err error) {
	if d.opts.Open == nil {
		f, err := os.Open(path)
		if err != nil {
			return -1, nil, &decode.Error{Path: path, Kind: decode.ErrUnreadable, Err: err}
		}
		return int(f.Fd()), func() { f.Close() }, nil
	}
	src, err := d.opts.Open(path)
	if err != nil {
		return -1, nil, &decode.Error{Path: path, Kind: decode.ErrUnreadable, Err: err}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, mountFailed(path, "a socket for the helper", err)
	}
	*stream, *size = true, src.Size()
	mine := os.NewFile(uintptr(pair[0]), "stream")
	d.mu.Lock()
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		defer mine.Close()
		serveStream(mine, src, p)
	}()
	return pair[1], func() { unix.Close(pair[1]) }, nil
}

// serveStream answers a helper's reads of src (streamRead's requests) until it closes its end,
// telling w while it waits for src. A request out of the video's bounds ends it: only a helper
// gone wrong asks one.
func serveStream(rw io.ReadWriter, src decode.Source, w waiter) {
	buf := make([]byte, 64<<10)
	var req [12]byte
	for {
		if _, err := io.ReadFull(rw, req[:]); err != nil {
			return
		}
		off := int64(binary.LittleEndian.Uint64(req[:8]))
		n := int(binary.LittleEndian.Uint32(req[8:]))
		if n > maxStreamRead || n < 0 || off < 0 || off > src.Size() {
			return
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		w.waitBegins()
		got, err := readAt(src, buf[:n], off)
		w.waitEnds()
		ans := int32(got)
		var why []byte
		if got == 0 && err != nil && !errors.Is(err, io.EOF) {
			// The error crosses as an errno (ESTALE: the video changed since it was probed)
			// and its text.
			ans = -int32(syscall.EIO)
			var errno syscall.Errno
			switch {
			case errors.Is(err, decode.ErrChanged):
				ans = -int32(syscall.ESTALE)
			case errors.As(err, &errno):
				ans = -int32(errno)
			}
			why = []byte(err.Error())[:min(len(err.Error()), 1<<10)]
		}
		var head [4]byte
		binary.LittleEndian.PutUint32(head[:], uint32(ans))
		if _, err := rw.Write(head[:]); err != nil {
			return
		}
		if ans < 0 {
			if _, err := rw.Write(append([]byte{byte(len(why)), byte(len(why) >> 8)}, why...)); err != nil {
				return
			}
		}
		if ans > 0 {
			if _, err := rw.Write(buf[:got]); err != nil {
				return
			}
		}
	}
}

// waiter is told when a helper begins and ends waiting for its source (proc).
type waiter interface {
	waitBegins()
	waitEnds()
}

// readAt is src.ReadAt, with a panic in it an error: a Source's bug must not end the mount.
func readAt(src decode.Source, b []byte, off int64) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("reading at %d: %v", off, r)
		}
	}()
	return src.ReadAt(b, off)
}

// Stats returns the helpers' decode counters, summed (decode.PoolStats, as load.Decoder asks).
func (d *Decoders) Stats() decode.PoolStats {
	d.mu.Lock()
	st := d.dead
	procs := append([]*proc(nil), d.procs...)
	d.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			addStats(&st, p.poolStats())
		}
	}
	return st
}

// Isolation returns what the helpers met.
func (d *Decoders) Isolation() Stats {
	d.mu.Lock()
	st := d.stats
	procs := append([]*proc(nil), d.procs...)
	d.mu.Unlock()
	st.Started = d.started.Load()
	for _, p := range procs {
		if p != nil && p.alive() {
			st.Helpers++
			st.ResidentBytes += p.resident()
		}
	}
	return st
}

// HelperStats is Isolation as the mount's stats give it (.vidfs/stats' decode.helpers): the
// filesystem (fs.Isolated) takes it without knowing this package.
func (d *Decoders) HelperStats() wire.HelperStats {
	h := d.Isolation()
	return wire.HelperStats{Serving: h.Helpers, Started: h.Started, Crashes: h.Crashes, Hangs: h.Hangs,
		Retries: h.Retries, VideosHeld: h.Held, LandlockABI: h.LandlockABI, ReplaceSeconds: h.ReplaceSeconds, ResidentBytes: h.ResidentBytes,
		Background: h.Background, IdleDecodes: h.IdleDecodes}
}

// UnusableKeyframes returns the keyframes helpers found unusable (decode.Pool.UnusableKeyframes),
// by video: those each decode's reply named, taken only for the video of that decode and only
// where they are keyframes of its table (acceptMarks). They outlive the helper that found them.
func (d *Decoders) UnusableKeyframes() map[string][]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]int, len(d.marks))
	for path, frames := range d.marks {
		out[path] = slices.Clone(frames)
	}
	return out
}

// acceptMarks takes the keyframes a helper found unusable decoding the video of info: frames of
// its keyframes other than the first (decoding may always start at the start), in any order,
// each once. Anything else (a frame out of range, of no keyframe, the first) is refused: a
// helper's word reaches the probe cache, which other mounts share, only so far.
func (d *Decoders) acceptMarks(info *decode.Info, frames []int) {
	if len(frames) == 0 {
		return
	}
	var ok []int
	for _, f := range frames {
		i, found := slices.BinarySearchFunc(info.Keyframes, f, func(k decode.Keyframe, f int) int { return k.Frame - f })
		if found && i > 0 {
			ok = append(ok, f)
		}
	}
	if len(ok) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.marks == nil {
		d.marks = map[string][]int{}
	}
	m := append(d.marks[info.Path], ok...)
	slices.Sort(m)
	d.marks[info.Path] = slices.Compact(m)
}

// Close waits for the decodes running, stops the helpers, and lets the shared memory go:
// nothing may use its buffers after.
func (d *Decoders) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	d.notify()
	d.mu.Unlock()
	d.calls.Wait()
	d.mu.Lock()
	procs := append([]*proc(nil), d.procs...)
	d.mu.Unlock()
	var stops sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			stops.Add(1)
			go func() { defer stops.Done(); p.stop() }()
		}
	}
	stops.Wait()
	d.wg.Wait()
	d.spawnMu.Lock()
	d.spawnClosed = true
	close(d.spawn)
	d.spawnMu.Unlock()
	if d.arena != nil {
		d.arena.close()
	}
}

// startOnSpawner runs cmd.Start on the spawning thread.
func (d *Decoders) startOnSpawner(cmd *exec.Cmd) error {
	d.spawnMu.Lock()
	defer d.spawnMu.Unlock()
	if d.spawnClosed {
		return decode.ErrPoolClosed
	}
	done := make(chan error, 1)
	d.spawn <- func() { done <- cmd.Start() }
	return <-done
}

// died is told by a helper's reader that it died: its figures are kept, and a fresh helper
// takes its place.
func (d *Decoders) died(p *proc, reason string, hung, busy bool) {
	d.mu.Lock()
	addStats(&d.dead, p.poolStats())
	slot := -1
	for i, q := range d.procs {
		if q == p {
			slot, d.procs[i] = i, nil
		}
	}
	closed := d.closed
	if busy && !closed {
		if hung {
			d.stats.Hangs++
		} else {
			d.stats.Crashes++
		}
	}
	d.notify()
	if slot >= 0 && !closed {
		d.wg.Add(1)
	}
	d.mu.Unlock()
	if slot < 0 || closed {
		return
	}
	p.mu.Lock()
	retired := p.retiring
	p.mu.Unlock()
	if retired {
		d.opts.Log.Debug("a decoder helper replaced by one of another data limit", "pid", p.pid)
	} else {
		d.opts.Log.Warn("a decoder helper died; starting another", "pid", p.pid, "reason", reason)
	}
	go d.replace(slot)
}

// replace starts a helper in slot, trying again (after 100 ms, doubling to 5 s) until one
// starts or the Decoders close.
func (d *Decoders) replace(slot int) {
	defer d.wg.Done()
	began := time.Now()
	wait := 100 * time.Millisecond
	for {
		p, err := d.start(0)
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			if p != nil {
				p.stop()
			}
			return
		}
		if err == nil {
			d.procs[slot] = p
			d.stats.ReplaceSeconds = time.Since(began).Seconds()
			d.notify()
			d.mu.Unlock()
			return
		}
		d.lastFail = err
		d.mu.Unlock()
		d.opts.Log.Error("could not start a decoder helper", "err", err, "again_in", wait)
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}

// start starts one helper, its data limit sized for pictures of the measure helpers start with,
// or of pixels if more, and waits for its hello.
func (d *Decoders) start(pixels int64) (*proc, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("decoder helper: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "helper")
	mine := os.NewFile(uintptr(pair[0]), "mount")
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("decoder helper: %w", err)
	}
	d.mu.Lock()
	pixels = max(pixels, d.picture)
	d.mu.Unlock()
	cmd := exec.Command(d.exe, HelperArg, strconv.Itoa(d.opts.PerHelper),
		strconv.FormatInt(dataLimit(d.opts.PerHelper+d.opts.Idle, pixels), 10), strconv.Itoa(d.opts.Idle))
	cmd.ExtraFiles = []*os.File{theirs} // descriptor 3 (helperFD)
	// Its clips decode on threads of their own (cgo calls), whatever GOMAXPROCS: that bounds only
	// the runtime's work beside them (its garbage collector's), as the mount's own.
	cmd.Env = []string{"GOMAXPROCS=" + strconv.Itoa(min(d.opts.PerHelper+1, runtime.GOMAXPROCS(0)))}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Its stderr is a pipe of our own, not cmd's: read to its end (the helper's death) before
	// the reason it died is told, which cmd.Wait would not wait for.
	stderr, w, err := os.Pipe()
	if err != nil {
		theirs.Close()
		fc.Close()
		return nil, fmt.Errorf("decoder helper: %w", err)
	}
	cmd.Stderr = w
	err = d.startOnSpawner(cmd)
	w.Close()
	theirs.Close()
	if err != nil {
		stderr.Close()
		fc.Close()
		return nil, fmt.Errorf("decoder helper: starting %s: %w", d.exe, err)
	}
	d.started.Add(1)
	p := &proc{d: d, pid: cmd.Process.Pid, pixels: pixels, cmd: cmd, c: newConn(fc.(*net.UnixConn), false), calls: map[uint64]*pending{},
		gone: make(chan struct{}), waited: make(chan struct{}), said: make(chan struct{})}
	go p.logLines(stderr)
	go p.wait()
	got := make(chan error, 1)
	go func() {
		m, err := p.c.receive()
		switch {
		case err != nil:
			got <- err
		case m.Kind != msgHello || m.Hello == nil:
			got <- errors.New("it did not say hello")
		case m.Hello.Err != "":
			got <- errors.New(m.Hello.Err)
		default:
			p.hello = *m.Hello
			got <- nil
		}
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	answered := false
	select {
	case err = <-got:
		answered = true
	case <-timer.C:
		err = errors.New("no hello in 30 s")
	}
	if err != nil {
		cmd.Process.Kill()
		<-p.waited // and its socket closed: the receive above ends
		if !answered {
			<-got
		}
		p.c.close()
		if last := p.lastLine(); last != "" {
			err = fmt.Errorf("%w (it said: %s)", err, last)
		}
		return nil, fmt.Errorf("decoder helper (pid %d) failed to start: %w; --decoders in-process decodes without helpers", p.pid, err)
	}
	go p.read()
	return p, nil
}
