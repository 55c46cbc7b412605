package decode

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"

	"github.com/asticode/go-astiav"
)

// Clip says which frames a sample holds: Frames frames from Start, Stride apart.
type Clip struct {
	Start, Frames, Stride int
	// PadEnd repeats the video's last frame in place of frames past its end, instead of failing
	// with ErrTooFewFrames.
	PadEnd bool
}

// Indices returns the frame indices the clip holds in a video of n frames.
func (c Clip) Indices(n int) ([]int, error) {
	if c.Start < 0 || c.Frames <= 0 || c.Stride <= 0 {
		return nil, fmt.Errorf("%w: clip start %d, frames %d, stride %d", ErrBadRequest, c.Start, c.Frames, c.Stride)
	}
	if c.Start >= n || (!c.PadEnd && c.Start+(c.Frames-1)*c.Stride >= n) {
		return nil, fmt.Errorf("%w: clip needs frame %d, video has %d", ErrTooFewFrames, c.Start+(c.Frames-1)*c.Stride, n)
	}
	idx := make([]int, c.Frames)
	for k := range idx {
		idx[k] = min(c.Start+k*c.Stride, n-1)
	}
	return idx, nil
}

// errRetry means the decoder did not land where the seek meant it to; decoding again from an
// earlier keyframe will do.
var errRetry = errors.New("decoding position lost")

// video is an open decoder for one video: demuxer, decoder and converter, with its position,
// reused from clip to clip. It is not safe for concurrent use.
type video struct {
	info    *Info
	in      *input
	cc      *astiav.CodecContext
	pkt     *astiav.Packet
	frame   *astiav.Frame
	conv    *converter
	threads int
	// On the GPU: g holds the CUDA device (and a slot of it, given back at close); frames come
	// out in GPU memory, and those the clip needs are downloaded into sw.
	g  *gpu
	sw *astiav.Frame

	// Position. lastOut is the presentation index of the last frame that came out of the decoder
	// (or the frame before the keyframe just seeked to); valid when positioned.
	positioned bool
	lastOut    int
	sinceSeek  int  // frames identified since the last seek
	clean      bool // an undamaged frame came out since the last seek
	resumed    bool // this clip carries on from the last one's position, without a seek
	// badGOPs maps a group of pictures (index in info.Keyframes) in which data failed to decode
	// since the last seek to the first frame found damaged there. Frames of that group that come
	// out later may be predicted from the damage, so clips that need them fail.
	badGOPs  map[int]int
	pending  bool // pkt holds a packet read but not yet sent
	draining bool // the demuxer is at its end and the decoder has been told so
	skip     int  // the decoder's skip_frame level now

	// Early draining. need holds the clip's distinct frame indices, sent which of them went to the
	// decoder and unsent how many did not. With drainEarly set, once all have gone the decoder is
	// drained instead of fed more packets: frames held back for reordering come out without
	// decoding the frames after the clip, at the price of a seek before the next clip (drained).
	need       []int
	sent       []bool
	unsent     int
	drainEarly bool
	drained    bool
	prevLast   int // the last frame of the previous clip asked of this decoder; -1 before any

	// Work done by the last decodeClip: frames out of the decoder, seeks, and how many of the
	// clip's frames the GPU and the CPU decoded.
	decoded, seeks, gpuFrames, cpuFrames int
}

// openVideo opens the video described by info with a decoder of the given thread count: on the
// CPU, or with g, on the GPU through the named decoder (which holds a slot of g, given back at
// close, whatever happens).
func openVideo(info *Info, threads int, g *gpu, gpuDecoder string) (*video, error) {
	in, err := openInput(info.Path)
	if err != nil {
		if g != nil {
			g.release()
		}
		return nil, err
	}
	v := &video{info: info, in: in, threads: threads, skip: discardDefault, g: g, prevLast: -1}
	if in.st.Index() != info.Stream || in.codec.Name() != info.Codec {
		v.close()
		return nil, newError(info.Path, -1, ErrCorrupt, "file changed since it was probed", nil)
	}
	codec := in.codec
	if g != nil {
		if codec = astiav.FindDecoderByName(gpuDecoder); codec == nil {
			v.close()
			return nil, newError(info.Path, -1, ErrUnsupportedCodec, "no decoder "+gpuDecoder+" for NVDEC", nil)
		}
	}
	if v.cc = astiav.AllocCodecContext(codec); v.cc == nil {
		v.close()
		return nil, newError(info.Path, -1, ErrCorrupt, "allocating decoder", nil)
	}
	if err := in.st.CodecParameters().ToCodecContext(v.cc); err != nil {
		v.close()
		return nil, newError(info.Path, -1, ErrCorrupt, "reading codec parameters", err)
	}
	v.cc.SetTimeBase(in.st.TimeBase())
	v.cc.SetThreadCount(threads)
	if g != nil {
		useGPU(v.cc, g)
		v.sw = astiav.AllocFrame()
	}
	if err := v.cc.Open(codec, nil); err != nil {
		v.close()
		return nil, newError(info.Path, -1, ErrUnsupportedCodec, "opening decoder "+codec.Name(), err)
	}
	v.pkt = astiav.AllocPacket()
	v.frame = astiav.AllocFrame()
	return v, nil
}

func (v *video) close() {
	if v.g != nil {
		v.g.release()
		v.g = nil
	}
	if v.sw != nil {
		v.sw.Free()
	}
	if v.conv != nil {
		v.conv.free()
	}
	if v.frame != nil {
		v.frame.Free()
	}
	if v.pkt != nil {
		v.pkt.Free()
	}
	if v.cc != nil {
		v.cc.SetPixelFormatCallback(nil) // go-astiav keeps callbacks by context until told
		v.cc.Free()
	}
	if v.in != nil {
		v.in.close()
	}
}

// decodeClip fills dst with the clip's frames, converted to o, frame after frame.
func (v *video) decodeClip(ctx context.Context, c Clip, o Output, dst []byte) error {
	path := v.info.Path
	if err := o.validate(); err != nil {
		return newError(path, -1, ErrBadRequest, err.Error(), nil)
	}
	idx, err := c.Indices(v.info.Frames)
	if err != nil {
		return newError(path, c.Start, ErrTooFewFrames, "", err)
	}
	if need := len(idx) * o.FrameBytes(); len(dst) < need {
		return newError(path, -1, ErrBadRequest, fmt.Sprintf("buffer of %d bytes, clip needs %d", len(dst), need), nil)
	}
	v.decoded, v.seeks, v.gpuFrames, v.cpuFrames = 0, 0, 0, 0

	// Continue from where the last clip left off when no keyframe lies between, else seek to the
	// keyframe at or before the first frame; on a lost position, try earlier keyframes, then the
	// start of the file.
	kf := v.info.KeyframeAtOrBefore(idx[0])
	continuing := v.positioned && v.info.carriesOn(v.lastOut, idx[0])
	drain := v.drainPays(idx)
	v.prevLast = idx[len(idx)-1]
	for attempt := 0; ; attempt++ {
		v.resumed = continuing
		if !continuing {
			if err := v.seek(kf, attempt); err != nil {
				return err
			}
		}
		v.track(idx, drain)
		err := v.fill(ctx, idx, o, dst)
		if !errors.Is(err, errRetry) {
			v.setSkip(discardDefault)
			if v.drained {
				v.positioned = false // the decoder is at its end: the next clip seeks
			}
			return err
		}
		if attempt >= 3 {
			return newError(path, idx[0], ErrCorrupt, "cannot position the decoder on this frame", nil)
		}
		if !continuing {
			kf = max(kf-1, 0)
		}
		continuing = false
	}
}

// shortGOP is the longest group of pictures (keyframe to keyframe) in which draining the decoder
// at the end of a clip pays; see drainPays.
const shortGOP = 32

// drainPays tells whether to drain the decoder once all of clip idx's frames are in it, instead
// of feeding it the packets after them. Draining saves decoding the frames a reordering decoder
// holds back (one or two per clip for H.264 with B-frames), but leaves it unable to carry on: a
// later clip starting before the next keyframe must seek and decode again from the keyframe
// before it. So drain only where the clip ends in a short group of pictures, so that such a clip
// is unlikely and costs at most shortGOP frames more, and only when this clip did not itself
// follow on from the last one, which would mean someone reads the video in order.
func (v *video) drainPays(idx []int) bool {
	first, last := idx[0], idx[len(idx)-1]
	kfs := v.info.Keyframes
	if v.prevLast >= 0 && v.info.carriesOn(v.prevLast, first) {
		return false
	}
	k := v.info.KeyframeAtOrBefore(last)
	next := v.info.Frames
	if k+1 < len(kfs) {
		next = kfs[k+1].Frame
	}
	return next-kfs[k].Frame <= shortGOP
}

// seek positions the decoder just before keyframe kf. After two failed attempts it reopens the
// file and decodes from the very start instead.
func (v *video) seek(kf, attempt int) error {
	v.seeks++
	v.reset()
	k := v.info.Keyframes[kf]
	ts := k.PTS
	if v.info.Timing != TimingPTS || ts == NoPTS {
		ts = k.DTS // demuxers index by decode time; only PTS-timed tables hold true PTS
	}
	if attempt >= 2 || ts == NoPTS {
		return v.rewind()
	}
	if err := v.in.fc.SeekFrame(v.info.Stream, ts, astiav.NewSeekFlags(astiav.SeekFlagBackward)); err != nil {
		return v.rewind()
	}
	v.lastOut = k.Frame - 1
	if v.info.Timing == TimingCount {
		// Frames are counted from the keyframe landed on, so find out which one that is.
		if err := v.readPacket(); err != nil {
			return v.rewind()
		}
		v.pending = true
		landed := -1
		for _, kk := range v.info.Keyframes {
			if (kk.DTS != NoPTS && kk.DTS == v.pkt.Dts()) || (kk.DTS == NoPTS && kk.PTS != NoPTS && kk.PTS == v.pkt.Pts()) {
				landed = kk.Frame
				break
			}
		}
		if landed < 0 || landed > k.Frame {
			return v.rewind()
		}
		v.lastOut = landed - 1
	}
	return nil
}

// rewind reopens the file so that decoding starts from its first packet.
func (v *video) rewind() error {
	in, err := openInput(v.info.Path)
	if err != nil {
		v.positioned = false
		return err
	}
	v.in.close()
	v.in = in
	v.reset()
	v.lastOut = -1
	return nil
}

// track starts counting which of the clip's frames idx (ascending) have gone to the decoder, and
// arms early draining if drain is set and packets can be told apart by timestamp.
func (v *video) track(idx []int, drain bool) {
	v.need, v.sent = v.need[:0], v.sent[:0]
	for _, i := range idx {
		if len(v.need) == 0 || v.need[len(v.need)-1] != i {
			v.need = append(v.need, i)
			v.sent = append(v.sent, false)
		}
	}
	v.unsent = len(v.need)
	v.drainEarly = drain && v.info.Timing == TimingPTS
}

// sending notes that the packet in v.pkt, holding frame i (-1: not known), goes to the decoder.
func (v *video) sending(i int) {
	if j := sort.SearchInts(v.need, i); i >= 0 && j < len(v.need) && v.need[j] == i && !v.sent[j] {
		v.sent[j] = true
		v.unsent--
	}
}

// reset empties the decoder for decoding from a new position.
func (v *video) reset() {
	flushDecoder(v.cc)
	v.pending, v.draining, v.drained, v.sinceSeek, v.clean = false, false, false, 0, false
	v.positioned = true
	clear(v.badGOPs)
}

// markBad records that frame i (or the data around it) failed to decode.
func (v *video) markBad(i int) {
	if v.badGOPs == nil {
		v.badGOPs = make(map[int]int)
	}
	g := v.info.KeyframeAtOrBefore(i)
	if _, ok := v.badGOPs[g]; !ok {
		v.badGOPs[g] = i
	}
}

// damageBefore returns the damaged frame in frame i's group of pictures, if any was seen.
func (v *video) damageBefore(i int) (int, bool) {
	b, ok := v.badGOPs[v.info.KeyframeAtOrBefore(i)]
	return b, ok
}

// readPacket reads the next packet of the video stream into v.pkt.
func (v *video) readPacket() error {
	for {
		v.pkt.Unref()
		if err := v.in.fc.ReadFrame(v.pkt); err != nil {
			return err
		}
		if v.pkt.StreamIndex() == v.info.Stream {
			return nil
		}
	}
}

// fill decodes forward until every frame in idx (ascending) is converted into dst.
func (v *video) fill(ctx context.Context, idx []int, o Output, dst []byte) error {
	path, fs := v.info.Path, o.FrameBytes()
	want := 0
	for want < len(idx) {
		// Let the scheduler see this goroutine move between frames. A goroutine that runs, in long
		// cgo calls, for 10 ms on end has its P taken away by the runtime's monitor thread, which
		// then polls every 20 µs for a while: about 2 % of a core, measured with perf on
		// BenchmarkDecodeClip, and cut to under 1 % by this yield.
		runtime.Gosched()
		if err := ctx.Err(); err != nil {
			return err
		}
		i, damaged, err := v.next(idx[want:])
		if errors.Is(err, astiav.ErrEof) {
			v.positioned = false
			if v.sinceSeek == 0 {
				return errRetry
			}
			return newError(path, idx[want], ErrCorrupt, "video ended before this frame", nil)
		}
		if err != nil {
			v.positioned = false
			return newError(path, idx[want], ErrCorrupt, "decoding", err)
		}
		if damaged {
			v.markBad(i)
		}
		if i < idx[want] {
			v.clean = v.clean || !damaged
			v.frame.Unref()
			continue
		}
		if b, ok := v.damageBefore(idx[want]); ok && v.clean {
			v.frame.Unref()
			return newError(path, idx[want], ErrCorrupt, fmt.Sprintf("data it depends on is damaged (frame %d)", b), nil)
		}
		if i > idx[want] {
			// The frame we want never came out. Right after a seek, or when carrying on from the
			// last clip (whose skipped frames may be the ones now wanted), that means we did not
			// start where we meant to.
			v.frame.Unref()
			if v.resumed || v.sinceSeek <= 1 || !v.clean {
				return errRetry
			}
			return newError(path, idx[want], ErrCorrupt, "decoder produced no such frame", nil)
		}
		if damaged {
			v.frame.Unref()
			if !v.clean {
				return errRetry // broken before decoding settled: start earlier
			}
			return newError(path, i, ErrCorrupt, "frame decoded with errors", nil)
		}
		v.clean = true
		if err := v.convert(o, dst[want*fs:(want+1)*fs]); err != nil {
			return newError(path, i, ErrCorrupt, "converting frame", err)
		}
		for want++; want < len(idx) && idx[want] == i; want++ {
			copy(dst[want*fs:(want+1)*fs], dst[(want-1)*fs:want*fs])
		}
	}
	return nil
}

// next returns the presentation index of the next frame out of the decoder, now in v.frame.
// rest is what the clip still needs, ascending, so frames outside it may be skipped.
func (v *video) next(rest []int) (int, bool, error) {
	for {
		err := v.cc.ReceiveFrame(v.frame)
		if err == nil {
			i := v.identify()
			if i < 0 {
				v.frame.Unref()
				continue
			}
			v.lastOut = i
			v.sinceSeek++
			v.decoded++
			return i, frameDamaged(v.frame), nil
		}
		if errors.Is(err, astiav.ErrEof) {
			return -1, false, err
		}
		if !errors.Is(err, astiav.ErrEagain) {
			// A damaged packet: the decoder says so and carries on with the next one.
			continue
		}
		if v.draining {
			return -1, false, astiav.ErrEof
		}
		if !v.pending && v.drainEarly && v.unsent == 0 {
			// Every frame the clip needs is in the decoder: drain it rather than decode more.
			v.draining, v.drained = true, true
			if err := v.cc.SendPacket(nil); err != nil && !errors.Is(err, astiav.ErrEof) {
				return -1, false, err
			}
			continue
		}
		if !v.pending {
			if err := v.readPacket(); err != nil {
				// The end of the file, or a read error (truncation): decode what was read.
				v.draining = true
				if err := v.cc.SendPacket(nil); err != nil && !errors.Is(err, astiav.ErrEof) {
					return -1, false, err
				}
				continue
			}
		}
		v.pending = false
		i := v.info.frameOf(v.pkt.Pts(), -1) // the packet's frame, by timestamp
		v.sending(i)
		v.chooseSkip(i, rest)
		if err := v.cc.SendPacket(v.pkt); err != nil && !errors.Is(err, astiav.ErrEagain) {
			// Invalid data in this packet: its frame will be missing or damaged, and so may the
			// frames predicted from it.
			if i < 0 || v.info.Timing != TimingPTS {
				i = v.lastOut + 1
			}
			v.markBad(i)
			v.pkt.Unref()
			continue
		}
		v.pkt.Unref()
	}
}

// identify returns the presentation index of the frame in v.frame, or -1 for a frame that is
// not in the table (before the seek point, or dropped by an edit list).
func (v *video) identify() int {
	if v.info.Timing == TimingCount {
		return v.lastOut + 1
	}
	ts := bestEffortTimestamp(v.frame)
	if ts == NoPTS {
		return v.lastOut + 1
	}
	return v.info.frameOf(ts, v.lastOut)
}

// chooseSkip lets the decoder skip the packet in v.pkt (frame i) when that frame is not needed and
// no other frame refers to it. Only done where a decoded frame is known by its timestamp and the
// decoder runs on one thread, so the setting applies to exactly this packet.
func (v *video) chooseSkip(i int, rest []int) {
	level := discardDefault
	if v.info.Timing == TimingPTS && v.threads == 1 && i >= 0 {
		if j := sort.SearchInts(rest, i); j == len(rest) || rest[j] != i {
			level = discardNonRef
		}
	}
	v.setSkip(level)
}

func (v *video) setSkip(level int) {
	if level != v.skip {
		skipFrames(v.cc, level)
		v.skip = level
	}
}

// convert converts the frame in v.frame into dst, building the converter when needed. A frame
// in GPU memory is downloaded first.
func (v *video) convert(o Output, dst []byte) error {
	f := v.frame
	if f.PixelFormat() == astiav.PixelFormatCuda {
		if err := f.TransferHardwareData(v.sw); err != nil {
			f.Unref()
			return fmt.Errorf("downloading a frame from the GPU: %w", err)
		}
		copyFrameProps(v.sw, f)
		f.Unref()
		f = v.sw
		v.gpuFrames++
	} else {
		v.cpuFrames++
	}
	if v.conv == nil || v.conv.key != keyOf(f, v.info.Rotation, o) {
		if v.conv != nil {
			v.conv.free()
			v.conv = nil
		}
		c, err := newConverter(f, v.info.Rotation, o)
		if err != nil {
			f.Unref()
			return err
		}
		v.conv = c
	}
	return v.conv.convert(f, dst)
}
