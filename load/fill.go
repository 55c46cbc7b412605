package load

// Decoding one video whole into the training copy: in order, a chunk of frames at a time, each
// frame kept only once it is known to be what a clip's own decode gives.

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/layout"
)

// fillChunk is how many frames a whole video's decode converts at a time, fewer where they
// would take more than fillBytes.
const (
	fillChunk = 16
	fillBytes = 4 << 20
)

// wholeFill is one video being decoded whole: from the unit it started at to the end of the video
// (the first pass, padded units past the end included), then from the start up to where it
// began (the second). A load waits for it (waitFor) where it is about to pass the load's frames.
type wholeFill struct {
	v, start int
	// mu guards the progress below. LOCK ORDERING: taken alone.
	mu      sync.Mutex
	hi      int  // first pass: units [start, hi) are in the copy (queued to be written)
	lo      int  // second pass: units [0, lo) are
	at      int  // the unit decoding has reached, in the pass it is in
	wrapped bool // in the second pass
	paused  bool // waiting for the budget (auto): a load does not wait for it meanwhile
	ended   bool
	idle    bool          // at SCHED_IDLE: a load never waits for it (it may get no CPU while loads run)
	changed chan struct{} // closed, and replaced, when the progress moves
}

// progress notes that units up to (not including) hi of the current pass are in the copy, and
// that decoding has reached at.
func (fl *wholeFill) progress(hi, at int) {
	fl.mu.Lock()
	if fl.wrapped {
		fl.lo = max(fl.lo, hi)
	} else {
		fl.hi = max(fl.hi, hi)
	}
	fl.at = at
	close(fl.changed)
	fl.changed = make(chan struct{})
	fl.mu.Unlock()
}

// end notes that the fill is over, done or not.
func (fl *wholeFill) end() {
	fl.mu.Lock()
	fl.ended = true
	close(fl.changed)
	fl.changed = make(chan struct{})
	fl.mu.Unlock()
}

// pause notes that the fill waits for the budget, or no longer does.
func (fl *wholeFill) pause(on bool) {
	fl.mu.Lock()
	fl.paused = on
	close(fl.changed)
	fl.changed = make(chan struct{})
	fl.mu.Unlock()
}

// waitFor waits until units first to last (ascending) are in the copy, and says whether they
// are; it does not wait when the fill is not about to put them there (within ahead units of
// where it is), nor once the fill is over or ctx is done.
func (fl *wholeFill) waitFor(ctx context.Context, first, last, ahead int) bool {
	for {
		fl.mu.Lock()
		// Covered: [first, last] within [start, hi) of the first pass and [0, lo) of the second,
		// which ends where the first began.
		if last < fl.lo || last < fl.hi && (first >= fl.start || fl.lo >= fl.start) {
			fl.mu.Unlock()
			return true
		}
		soon := last < fl.at+ahead && (fl.wrapped || first >= fl.start)
		if fl.ended || fl.paused || fl.idle || !soon {
			fl.mu.Unlock()
			return false
		}
		changed := fl.changed
		fl.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// errNoRoom ends a fill before it starts: the copy has no room for the video (it keeps the
// videos it holds rather than swap them: copystore.Store.Admit).
var errNoRoom = errors.New("no room in the training copy for this video: it keeps the videos it took first")

// errMixedPath ends a fill whose chunks came from NVDEC and the CPU both.
var errMixedPath = errors.New("decoded partly on the GPU, partly on the CPU: not kept as one copy")

// fillVideo decodes video v whole into the copy, as fill fl says, from its start unit (a
// multiple of the fill stride), a chunk at a time, in Strict clips: a chunk that meets damage ends
// the fill, its frames and those held back from the chunk before it dropped, and the video's
// remaining frames are left to its samples' own decodes. A chunk's frames whose references may
// not have come out of the decoder yet (decode.Info.RefWindow) are held back until the next
// chunk is decoded.
func (l *Loader) fillVideo(ctx context.Context, fl *wholeFill) error {
	v := fl.v
	first, end := l.lay.VideoSamples(v)
	if first == end || !l.current(first) {
		return nil
	}
	info, err := l.cfg.Infos.Info(v)
	if err != nil {
		return err
	}
	b, ok := l.copy.fillBufs.Get().(*fillBuffers)
	if !ok {
		b = new(fillBuffers)
	}
	defer l.copy.fillBufs.Put(b)
	r := &filler{l: l, fl: fl, v: v, info: info, spec: l.lay.Spec, extent: l.copyExtent(v), step: fillStride(l.lay.Spec),
		fb: l.out.FrameBytes(), window: info.RefWindow(), path: -1, b: b}
	b.need, r.needed = l.needBits(v, b.need)
	if l.copy.c.Claim(v, l.heldKey(v), b.need); l.copy.c.Whole(v) {
		return nil // whole from an earlier mount (counted now, if it was not yet)
	}
	if !l.copy.admit(v) {
		return errNoRoom // decided before decoding: its frames would not be kept
	}
	r.n = min(r.extent, l.lay.Videos[v].Frames)
	r.chunk = l.copy.chunkFrames()
	b.chunk = grow(b.chunk, r.chunk*r.fb)
	b.pack = grow(b.pack, r.chunk*r.fb)
	b.held, b.heldUnits = b.held[:0], b.heldUnits[:0]
	if r.n == 0 {
		return nil
	}
	// First pass: from the start unit to the end, then the last frame for padded units.
	if err := r.decode(ctx, fl.start, r.n); err != nil {
		return err
	}
	if err := r.tail(ctx); err != nil {
		return err
	}
	fl.progress(r.extent, r.extent)
	if fl.start == 0 {
		return nil
	}
	// Second pass: from the start to where the first began. The frames it holds back at its end
	// are sound: those after them, from the keyframe before the first pass's start on, came out
	// undamaged in the first pass (Strict fails at damage anywhere it decodes).
	fl.mu.Lock()
	fl.wrapped = true
	fl.mu.Unlock()
	b.held, b.heldUnits = b.held[:0], b.heldUnits[:0]
	if err := r.decode(ctx, 0, fl.start); err != nil {
		return err
	}
	if err := r.release(ctx, math.MaxInt); err != nil {
		return err
	}
	fl.progress(fl.start, fl.start)
	return nil
}

// fillBuffers is what a fill decodes into and keeps, reused from fill to fill
// (trainingCopy.fillBufs): the frames its samples use (need), a chunk's frames, the needed ones
// packed for a Put, and the frames held back with their units.
type fillBuffers struct {
	need            []uint64
	chunk, pack     []byte
	held            []byte
	heldUnits, unit []int
}

// chunkFrames is how many frames a whole video's decode converts at a time: t.chunk, fewer where
// they would take more than fillBytes.
func (t *trainingCopy) chunkFrames() int { return max(1, min(t.chunk, fillBytes/t.l.out.FrameBytes())) }

// grow returns b with n bytes, reusing its array when it is large enough.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// filler is the state of one fillVideo.
type filler struct {
	l              *Loader
	fl             *wholeFill
	b              *fillBuffers
	v              int
	info           *decode.Info
	spec           layout.Spec
	needed         int
	n, extent      int // units before the video's end, and slots
	step, chunk    int
	fb, window     int
	path           decode.Path // of the chunks so far; -1: none yet
	key            diskstore.Key
	lastFrame, out int // the video frame of the last unit out, and its place in the chunk
}

// frameOf is the video frame unit u is: itself, or at --fps the frame shown then.
func (r *filler) frameOf(u int) int {
	if r.spec.FPS.Set() {
		return r.info.FrameAt(u, decode.Rational{Num: r.spec.FPS.Num, Den: r.spec.FPS.Den})
	}
	return u
}

func (r *filler) needs(u int) bool { return u < len(r.b.need)*64 && r.b.need[u/64]&(1<<(u%64)) != 0 }

// decode decodes units [a, b), step apart, a chunk at a time, putting the frames the samples
// need, and keeping back those within the reference window of the chunk's end.
func (r *filler) decode(ctx context.Context, a, b int) error {
	fb, bf := r.fb, r.b
	for start := a; start < b; start += r.chunk * r.step {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(r.chunk, (b-start+r.step-1)/r.step)
		if err := r.decodeClip(ctx, decode.Clip{Start: start, Frames: k, Stride: r.step,
			FPS: decode.Rational{Num: r.spec.FPS.Num, Den: r.spec.FPS.Den}}, k); err != nil {
			return err
		}
		last := start + (k-1)*r.step
		r.lastFrame, r.out = r.frameOf(last), k-1
		// What was held back is sound now if the frames after it came out undamaged.
		if err := r.release(ctx, r.lastFrame-r.window); err != nil {
			return err
		}
		// This chunk's frames: put those out of the window's reach, hold back the rest.
		bf.unit, bf.pack = bf.unit[:0], bf.pack[:0]
		for j := range k {
			u := start + j*r.step
			frame := bf.chunk[j*fb : (j+1)*fb]
			switch {
			case !r.needs(u):
			case r.frameOf(u) > r.lastFrame-r.window:
				bf.heldUnits = append(bf.heldUnits, u)
				bf.held = append(bf.held, frame...)
			default:
				bf.unit = append(bf.unit, u)
				bf.pack = append(bf.pack, frame...)
			}
		}
		if err := r.put(ctx, bf.unit, bf.pack); err != nil {
			return err
		}
		hi := start + k*r.step
		if len(bf.heldUnits) > 0 {
			hi = bf.heldUnits[0]
		}
		r.fl.progress(hi, start+k*r.step)
	}
	return nil
}

// decodeClip decodes clip c (k frames) strictly into the chunk buffer, once the budget allows
// (auto), charges its CPU to the budget, and checks it came from the fill's decode path.
func (r *filler) decodeClip(ctx context.Context, c decode.Clip, k int) error {
	b := r.l.copy.budget
	if r.fl.idle {
		b = nil // it takes what no one else wants of the CPU: not the readers' budget
	}
	budgeted := false
	if b != nil {
		var err error
		if budgeted, err = b.take(ctx, r.fl.pause); err != nil {
			return err
		}
	}
	c.Strict, c.Background = true, r.fl.idle
	began := threadCPU()
	res, err := r.l.cfg.Decoder.DecodeClip(ctx, r.info, c, r.l.out, r.b.chunk[:k*r.fb])
	if b != nil {
		b.paid(threadCPU()-began+res.CPU, budgeted) // res.CPU: a helper's, where it decodes in one
	}
	if err != nil {
		return err
	}
	path := res.Path
	if path == decode.PathMixed || r.path >= 0 && path != r.path {
		return errMixedPath
	}
	if r.path < 0 {
		r.path = path
		r.key = r.l.videoKey(r.v, path)
	}
	return nil
}

// release puts the frames held back whose video frames are at most sound, and keeps the rest.
func (r *filler) release(ctx context.Context, sound int) error {
	bf, fb := r.b, r.fb
	n := 0
	for n < len(bf.heldUnits) && r.frameOf(bf.heldUnits[n]) <= sound {
		n++
	}
	if n == 0 {
		return nil
	}
	if err := r.put(ctx, bf.heldUnits[:n], bf.held[:n*fb]); err != nil {
		return err
	}
	rest := copy(bf.heldUnits, bf.heldUnits[n:])
	copy(bf.held, bf.held[n*fb:])
	bf.heldUnits, bf.held = bf.heldUnits[:rest], bf.held[:rest*fb]
	return nil
}

// tail lets the frames held back at the end of the first pass go once every frame of the video
// has come out (decoding its last frame if the chunks did not end there), and puts the last
// frame for the units past the end that padded samples use: what their decode gives.
func (r *filler) tail(ctx context.Context) error {
	bf, fb := r.b, r.fb
	last := r.info.Frames - 1
	if r.lastFrame < last {
		if err := r.decodeClip(ctx, decode.Clip{Start: last, Frames: 1, Stride: 1}, 1); err != nil {
			return err
		}
		r.lastFrame, r.out = last, 0
	}
	lastBytes := bf.chunk[r.out*fb : (r.out+1)*fb]
	if err := r.release(ctx, last); err != nil {
		return err
	}
	bf.unit = bf.unit[:0]
	for u := r.n; u < r.extent; u++ {
		if r.needs(u) {
			bf.unit = append(bf.unit, u)
		}
	}
	// The last frame once for each unit, a chunk's worth at a time.
	bf.pack = bf.pack[:0]
	for range min(len(bf.unit), r.chunk) {
		bf.pack = append(bf.pack, lastBytes...)
	}
	for units := bf.unit; len(units) > 0; {
		k := min(len(units), r.chunk)
		if err := r.put(ctx, units[:k], bf.pack[:k*fb]); err != nil {
			return err
		}
		units = units[k:]
	}
	return nil
}

// put puts frames of units in the copy, waiting for the writer while it is behind rather than
// decode what would not be written; the fill is paused meanwhile, so that no load waits on it.
func (r *filler) put(ctx context.Context, units []int, frames []byte) error {
	if len(units) == 0 {
		return nil
	}
	t := r.l.copy
	if b := t.budget; b != nil && !r.fl.idle {
		// Compressing the frames is the fill's cost too: paid from the budget that paid its decode.
		began := threadCPU()
		defer func() { b.spend(threadCPU() - began) }()
	}
	if t.put(ctx, r.v, r.path, r.key, r.needed, r.extent, units, frames, 0) {
		return nil
	}
	if k, ok := t.c.Key(r.v); ok && k != r.key && t.otherPath(r.v, r.path, k) {
		return errOtherPath
	}
	r.fl.pause(true)
	defer r.fl.pause(false)
	if !t.put(ctx, r.v, r.path, r.key, r.needed, r.extent, units, frames, time.Hour) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errOtherPath
	}
	return nil
}

// errOtherPath ends a fill whose frames the copy does not take: it holds the video's frames of
// the other decode path (NVDEC's or the CPU's).
var errOtherPath = errors.New("the copy holds this video's frames of the other decode path")

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
