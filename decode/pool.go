package decode

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
)

// PoolOptions configures a Pool.
type PoolOptions struct {
	// Concurrency is how many clips decode at once (default: the number of CPUs). Callers past it
	// wait.
	Concurrency int
	// Idle is how many open CPU decoders are kept between clips for reuse (default:
	// Concurrency). Each holds a demuxer, a decoder and its reference frames: a few MB to tens of
	// MB for HD. Idle GPU decoders are kept as long as they hold a GPU slot no one else wants
	// (GPUDecoders bounds them): opening one costs far more, and a video encoded alike may
	// adopt it.
	Idle int
	// Threads is each decoder's thread count (default 1: parallelism comes from Concurrency).
	Threads int
	// HWAccel: decode on an NVIDIA GPU where possible (HWAuto), insist on one (HWCUDA), or not.
	HWAccel HWAccel
	// GPUs are the CUDA device numbers to decode on (among the devices the process sees, as
	// CUDA_VISIBLE_DEVICES leaves them); nil: every GPU the process sees. With HWCUDA, one that
	// cannot be opened fails NewPool; with HWAuto it is logged and left out.
	GPUs []int
	// GPUDecoders bounds the decoders open on each GPU at once, and so its memory (default 8).
	// A new GPU decoder opens on the GPU with the fewest open; videos beyond every GPU's bound
	// decode on the CPU.
	GPUDecoders int
	// Log receives the GPU's state at start and, the first time for each reason, why a video
	// decodes on the CPU when a GPU is in use. Nil: no logging.
	Log *slog.Logger
	// Open opens videos that are not local files (objects in a bucket) by their Info's Path;
	// nil: every Path is a local file.
	Open Opener

	// openDevice opens a CUDA device by number (nil: openCUDA); tests give stand-ins.
	openDevice deviceOpener
}

// Pool decodes clips for concurrent callers. It keeps open decoders (demuxer, decoder,
// converter) between clips and hands a caller one already open on the same video, positioned
// before the clip when possible, so that consecutive clips of a video decode without a seek.
type Pool struct {
	opts  PoolOptions
	slots chan struct{} // one token per clip being decoded

	// gpus are the GPUs decoded on, each with its own device context and decoder slots (none:
	// CPU only). A decoder stays on its GPU, idle or adopted, until it closes.
	gpus    []*gpu
	noAdopt bool // tests: no video.adopt
	// decodeOn, in tests, decodes a clip with a decoder in place of video.decodeClip (stand-in
	// GPU decoders fail as a test says); nil: video.decodeClip.
	decodeOn func(v *video, ctx context.Context, c Clip, o Output, dst []byte) (clipWork, error)

	// mu guards the fields below, and videoState.users. LOCK ORDERING: mu before videoState.mu
	// (a state's learned is asked under mu); the decoders' work is done without it.
	mu      sync.Mutex
	idle    *list.List // of *video, most recently used at the front
	closed  bool
	stats   PoolStats
	cpuOnly map[string]bool // videos NVDEC failed on: decode them on the CPU
	logged  map[string]bool // reasons for decoding on the CPU already logged
	// states holds what decoding a video taught, by path, while decoders are open on it, and after
	// for the videos it taught something (for UnusableKeyframes, and so as not to learn it again):
	// not one per video ever decoded.
	states map[string]*videoState
	// frames holds the frame buffers the CPU decoders share (framepool.go): attached under mu,
	// while the pool is open, so that none is attached after Close let it go. Nil: FFmpeg's own.
	frames *framePool
}

// PoolStats counts a pool's work since it was made.
type PoolStats struct {
	ClipsCPU int64 // clips decoded on the CPU
	ClipsGPU int64 // clips whose frames NVDEC decoded
	Frames   int64 // frames that came out of the decoders (needed or not): decode work
	Opens    int64 // decoders opened
	// Adoptions counts idle GPU decoders that went on to another video encoded alike instead
	// of a decoder being opened for it (each open of an NVDEC decoder takes about 200 ms).
	Adoptions int64
	Seeks     int64 // seeks (a clip that carries on from the last one needs none)
	// GPUFallbacks counts videos moved to the CPU after NVDEC failed on them.
	GPUFallbacks int64
	// KeyframeFallbacks counts clips that decoded only from an earlier start than their keyframe.
	KeyframeFallbacks int64
	// FlushesSaved counts seeks of H.264 on NVDEC that did without flushing the decoder,
	// because decoding went on from an IDR picture (each flush costs a new hardware decoder).
	FlushesSaved int64
	// GPUReclaims counts idle GPU decoders closed so that a video without one could decode on
	// the GPU.
	GPUReclaims int64
	// GPUs holds each GPU's figures, in the order of PoolOptions.GPUs (by number for all).
	GPUs []GPUStats
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	st := p.stats
	p.mu.Unlock()
	st.GPUs = nil
	for _, g := range p.gpus {
		st.GPUs = append(st.GPUs, g.stats())
	}
	return st
}

// NewPool returns a Pool; Close it to free its decoders. With HWCUDA it fails when there is no
// usable NVIDIA GPU and driver; with HWAuto it logs why it decodes on the CPU instead.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = runtime.NumCPU()
	}
	if opts.Idle <= 0 {
		opts.Idle = opts.Concurrency
	}
	if opts.Threads <= 0 {
		opts.Threads = 1
	}
	if opts.GPUDecoders <= 0 {
		opts.GPUDecoders = 8
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{opts: opts, slots: make(chan struct{}, opts.Concurrency), idle: list.New(),
		cpuOnly: map[string]bool{}, logged: map[string]bool{}, states: map[string]*videoState{}, frames: newFramePool()}
	if opts.openDevice == nil {
		opts.openDevice = openCUDA
	}
	if opts.HWAccel != HWNone {
		gpus, failed, err := openGPUs(opts.GPUs, opts.GPUDecoders, opts.openDevice)
		switch {
		case opts.HWAccel == HWCUDA && (err != nil || len(failed) > 0):
			for _, g := range gpus {
				g.close()
			}
			if err == nil {
				err = errors.Join(failed...)
			}
			return nil, fmt.Errorf("--hwaccel cuda: %w", err)
		case err != nil:
			opts.Log.Info("decoding on the CPU", "reason", err)
		default:
			for _, err := range failed {
				opts.Log.Warn("leaving out a GPU", "reason", err)
			}
			p.gpus = gpus
			numbers := make([]int, len(gpus))
			for i, g := range gpus {
				numbers[i] = g.index
			}
			opts.Log.Info("decoding on the GPU with NVDEC where the codec allows", "gpus", FormatGPUs(numbers), "gpu_decoders_each", opts.GPUDecoders)
		}
	}
	return p, nil
}

// ErrPoolClosed is returned by DecodeClip after Close.
var ErrPoolClosed = errors.New("decoder pool closed")

// DecodeClip decodes clip c of the video described by info into dst, which must hold
// c.Frames * o.FrameBytes() bytes: frame k of the clip at dst[k*o.FrameBytes():], each frame
// o.Height rows of o.Width RGB24 pixels. Frames are exactly the clip's frame indices in
// presentation order, upright (display rotation applied) and fitted per o.Resize. The result
// says where it was decoded.
func (p *Pool) DecodeClip(ctx context.Context, info *Info, c Clip, o Output, dst []byte) (Result, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	defer func() { <-p.slots }()
	Populate(dst)
	v, err := p.take(info, info.firstFrame(c))
	if err != nil {
		return Result{}, err
	}
	work, err := p.decode(v, ctx, c, o, dst)
	if err != nil && v.g != nil && ctx.Err() == nil && gpuMayFail(err) && !c.Strict {
		// NVDEC may have failed on it: decode the clip again on the CPU, with a CPU decoder (not
		// another GPU decoder of the video, which would fail alike). If the CPU decodes it, NVDEC
		// was at fault: this video decodes on the CPU from now on. If not, the damage is the
		// video's, and the GPU keeps it.
		gpuErr := err
		if c.Keep != nil {
			c.Keep.Drop(0) // what NVDEC gave may be wrong
		}
		p.mu.Lock()
		p.closeLocked(v)
		p.stats.Frames += int64(work.Decoded)
		p.stats.Seeks += int64(work.Seeks)
		p.stats.FlushesSaved += int64(work.FlushesSaved)
		p.mu.Unlock()
		if v, err = p.takeFor(info, info.firstFrame(c), true); err != nil {
			return Result{}, err
		}
		if work, err = p.decode(v, ctx, c, o, dst); err == nil {
			p.mu.Lock()
			p.cpuOnly[info.Path] = true
			p.stats.GPUFallbacks++
			p.mu.Unlock()
			p.opts.Log.Warn("NVDEC failed on a video; decoding it on the CPU", "file", info.Path, "err", gpuErr)
		}
	}
	p.mu.Lock()
	p.stats.Frames += int64(work.Decoded)
	p.stats.Seeks += int64(work.Seeks)
	p.stats.KeyframeFallbacks += int64(work.Fallbacks)
	p.stats.FlushesSaved += int64(work.FlushesSaved)
	if err == nil {
		if work.GPUFrames > 0 && work.CPUFrames == 0 {
			p.stats.ClipsGPU++
			v.g.clips.Add(1)
		} else {
			p.stats.ClipsCPU++
		}
	}
	p.mu.Unlock()
	if err != nil && !errors.Is(err, ErrTooFewFrames) && !errors.Is(err, ErrBadRequest) {
		p.mu.Lock()
		p.closeLocked(v) // its state is in doubt
		p.mu.Unlock()
		return Result{}, err
	}
	p.put(v)
	if err != nil {
		return Result{}, err
	}
	return Result{Path: work.path()}, nil
}

// decode decodes clip c with decoder v (see decodeOn).
func (p *Pool) decode(v *video, ctx context.Context, c Clip, o Output, dst []byte) (clipWork, error) {
	if p.decodeOn != nil {
		return p.decodeOn(v, ctx, c, o, dst)
	}
	return v.decodeClip(ctx, c, o, dst)
}

// gpuMayFail tells whether err, from a GPU decoder, may be NVDEC's failure: what decoding
// failed with (damage, as NVDEC's errors appear, or an internal failure), not the path's
// (ErrUnreadable, ErrChanged) or the request's (ErrTooFewFrames, ErrBadRequest), which the CPU
// would meet alike.
func gpuMayFail(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrInternal)
}

// take returns an idle decoder of the video (the one positioned closest before start), or a new one.
func (p *Pool) take(info *Info, start int) (*video, error) { return p.takeFor(info, start, false) }

// takeFor is take; with cpu, of a decoder that decodes on the CPU.
func (p *Pool) takeFor(info *Info, start int, cpu bool) (*video, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	var best *list.Element
	for e := p.idle.Front(); e != nil; e = e.Next() {
		v := e.Value.(*video)
		if (v.info != info && v.info.Path != info.Path) || (cpu && v.g != nil) {
			continue
		}
		if best == nil {
			best = e
			continue
		}
		b := best.Value.(*video)
		before := func(x *video) bool { return x.at != nil && x.at.lastOut < start }
		if before(v) && (!before(b) || v.at.lastOut > b.at.lastOut) {
			best = e
		}
	}
	if best != nil {
		p.idle.Remove(best)
		p.mu.Unlock()
		v := best.Value.(*video)
		v.info = info
		return v, nil
	}
	failed := p.cpuOnly[info.Path] || cpu
	st := p.states[info.Path]
	if st == nil {
		st = newVideoState(info, p.opts.Log)
		p.states[info.Path] = st
	}
	st.users++
	p.mu.Unlock()
	v, err := p.open(info, st, failed)
	p.mu.Lock()
	switch {
	case err != nil:
		p.release(info.Path, st)
	case v.g == nil && !p.closed && p.opts.Threads == 1:
		// Single-threaded decoders only: a frame-threaded decoder's threads hold copies of its
		// context, and may take a buffer through it after detachFrames, before the context is
		// freed (and joins them).
		p.frames.attach(v.cc)
	}
	p.mu.Unlock()
	return v, err
}

// open opens a decoder of the video, on the GPU where it may: an idle GPU decoder of a video
// encoded alike goes on with this one where there is one (video.adopt), else a new one opens.
func (p *Pool) open(info *Info, st *videoState, failed bool) (*video, error) {
	if len(p.gpus) == 0 {
		p.count(func(s *PoolStats) { s.Opens++ })
		return openVideo(info, p.opts.Open, st, p.opts.Threads, nil, "")
	}
	maxGPU := p.opts.GPUDecoders * len(p.gpus)
	_, wants, _ := chooseDecoder(info.Codec, info.Width, info.Height, hasCUDA, true, failed, maxGPU)
	var in *input
	if wants && !p.noAdopt {
		var v *video
		if v, in = p.adoptIdle(info, st); v != nil {
			return v, nil
		}
	}
	if in == nil {
		var err error
		if in, err = openInput(info.Path, p.opts.Open, info); err != nil {
			return nil, err
		}
	}
	p.count(func(s *PoolStats) { s.Opens++ })
	g := p.takeGPU()
	if wants && g == nil {
		g = p.reclaimGPUSlot()
	}
	dec, onGPU, reason := chooseDecoder(info.Codec, info.Width, info.Height, hasCUDA, g != nil, failed, maxGPU)
	if g != nil && !onGPU {
		g.release()
	}
	if !onGPU {
		p.mu.Lock()
		first := !p.logged[reason]
		p.logged[reason] = true
		p.mu.Unlock()
		if first {
			p.opts.Log.Info("decoding a video on the CPU", "file", info.Path, "reason", reason)
		}
		return openVideoIn(info, in, p.opts.Open, st, p.opts.Threads, nil, "")
	}
	g.opened(info)
	return openVideoIn(info, in, p.opts.Open, st, 1, g, dec)
}

// takeGPU reserves a decoder slot on the GPU with the fewest decoders open (the first of those
// with as few), or on the next where another caller took the last first; nil: every GPU is full.
func (p *Pool) takeGPU() *gpu {
	order := slices.Clone(p.gpus)
	slices.SortStableFunc(order, func(a, b *gpu) int { return cmp.Compare(len(a.slots), len(b.slots)) })
	for _, g := range order {
		if g.take() {
			return g
		}
	}
	return nil
}

// adoptIdle hands the video the least recently used idle GPU decoder that can go on with it
// (video.adopt). Where none can, it returns the video's input if it opened it, for the caller.
func (p *Pool) adoptIdle(info *Info, st *videoState) (*video, *input) {
	var in *input
	for tried := map[*video]bool{}; ; {
		p.mu.Lock()
		var cand *video
		for e := p.idle.Back(); e != nil; e = e.Prev() {
			if v := e.Value.(*video); v.g != nil && !tried[v] && v.info.Codec == info.Codec && v.info.Width == info.Width && v.info.Height == info.Height {
				p.idle.Remove(e)
				cand = v
				break
			}
		}
		p.mu.Unlock()
		if cand == nil {
			return nil, in
		}
		tried[cand] = true
		if in == nil {
			var err error
			if in, err = openInput(info.Path, p.opts.Open, info); err != nil {
				p.putBack(cand)
				return nil, nil // the caller meets the error again, and reports it
			}
		}
		was, wasState := cand.info.Path, cand.state
		if !cand.adopt(info, in, st) {
			p.putBack(cand)
			continue
		}
		p.mu.Lock()
		p.release(was, wasState)
		p.stats.Adoptions++
		p.mu.Unlock()
		return cand, nil
	}
}

// count updates the pool's counters.
func (p *Pool) count(f func(*PoolStats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// reclaimGPUSlot closes the least recently used idle decoder that holds a GPU slot, of any GPU,
// and takes a slot as takeGPU does: the freed one, unless another GPU has fewer decoders open.
// Without it, idle decoders of videos read earlier would hold every slot and each new video
// would decode on the CPU, however idle the GPUs. It returns nil when every GPU decoder is busy,
// or other callers took the freed slot first.
func (p *Pool) reclaimGPUSlot() *gpu {
	p.mu.Lock()
	var victim *video
	for e := p.idle.Back(); e != nil; e = e.Prev() {
		if v := e.Value.(*video); v.g != nil {
			p.idle.Remove(e)
			p.release(v.info.Path, v.state)
			p.stats.GPUReclaims++
			victim = v
			break
		}
	}
	p.mu.Unlock()
	if victim != nil {
		detachFrames(victim.cc)
		victim.close() // outside mu: destroying an NVDEC decoder takes a while
	}
	return p.takeGPU()
}

// UnusableKeyframes returns, by video path, the frames of the keyframes found unusable since the
// pool was made (see Keyframe.Unusable), for the probe tables to remember.
func (p *Pool) UnusableKeyframes() map[string][]int {
	p.mu.Lock()
	states := make(map[string]*videoState, len(p.states))
	for path, st := range p.states {
		states[path] = st
	}
	p.mu.Unlock()
	marks := map[string][]int{}
	for path, st := range states {
		if m := st.markedFrames(); len(m) > 0 {
			marks[path] = m
		}
	}
	return marks
}

// put returns a decoder for reuse, as the most recently used, closing the least recently used
// CPU decoders beyond the Idle bound (idle GPU decoders are bounded by their slots).
func (p *Pool) put(v *video) { p.park(v, true) }

// putBack returns an idle decoder taken out for adoption and not adopted to where it was: the
// least recently used end.
func (p *Pool) putBack(v *video) { p.park(v, false) }

// park adds an idle decoder at the front of the idle list (recent) or its back, or closes it if
// the pool is closed.
func (p *Pool) park(v *video, recent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.closeLocked(v)
		return
	}
	if !recent {
		p.idle.PushBack(v)
		return
	}
	p.idle.PushFront(v)
	cpu := 0
	for e := p.idle.Front(); e != nil; {
		next := e.Next()
		if v := e.Value.(*video); v.g == nil {
			if cpu++; cpu > p.opts.Idle {
				p.idle.Remove(e)
				p.closeLocked(v)
			}
		}
		e = next
	}
}

// closeLocked closes a decoder the pool opened, and forgets its video's state if no other decoder
// uses it and it holds nothing learned. p.mu is held.
func (p *Pool) closeLocked(v *video) {
	detachFrames(v.cc)
	v.close()
	p.release(v.info.Path, v.state)
}

// release drops a user of a video's state, and the state with the last unless it learned
// something. p.mu is held.
func (p *Pool) release(path string, st *videoState) {
	st.users--
	if st.users <= 0 && !st.learned() && p.states[path] == st {
		delete(p.states, path)
	}
}

// Close frees the idle decoders; decoders in use are freed as their clips finish.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.frames.close() // decoders in use keep their buffers until they close
	}
	p.closed = true
	for e := p.idle.Front(); e != nil; e = e.Next() {
		p.closeLocked(e.Value.(*video))
	}
	p.idle.Init()
	for _, g := range p.gpus {
		g.close() // decoders still busy hold their own reference to the device
	}
}

// DecodeClip decodes one clip on the CPU with a decoder opened for it alone and closed
// afterwards; see Pool.DecodeClip for the layout of dst. threads is the decoder's thread count
// (0: automatic). To decode many clips, or on the GPU, use a Pool.
func DecodeClip(ctx context.Context, info *Info, c Clip, o Output, dst []byte, threads int) (Result, error) {
	v, err := openVideo(info, nil, newVideoState(info, nil), threads, nil, "")
	if err != nil {
		return Result{}, err
	}
	defer v.close()
	work, err := v.decodeClip(ctx, c, o, dst)
	if err != nil {
		return Result{}, err
	}
	return Result{Path: work.path()}, nil
}
