package decode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"time"

	"github.com/asticode/go-astiav"
)

// Clip says which frames a sample holds: Frames frames from Start, Stride apart.
type Clip struct {
	Start, Frames, Stride int
	// PadEnd repeats the video's last frame in place of frames past its end, instead of failing
	// with ErrTooFewFrames.
	PadEnd bool
	// FPS, when set, counts Start and Stride in frames of this rate, not the video's own: frame j
	// of the clip is the one shown (Start + j*Stride)/FPS seconds after the video's first frame
	// (Info.FrameAt; fps.go says how frames are timed). Unset (zero): the video's own frames.
	FPS Rational
	// Keep, when set (and FPS is not), is given the frames the decode passes through on its way
	// to the clip's own that it wants, converted as the clip's are.
	Keep Keeper
	// Strict fails the clip (ErrCorrupt) at the first frame the decoder flags as damaged, the
	// clip's own or one passed on the way, so that no frame decoded after damage is taken from
	// it: a whole video decoded in order for a store of frames, whose frames must each be what a
	// clip's own decode gives. It is not decoded again on the CPU when NVDEC fails it, and what
	// it meets is not remembered for other clips (keyframes unusable, damage confirmed).
	Strict bool
	// Background asks a decoder that decodes in another process (isolate's helpers) to decode
	// the clip at SCHED_IDLE there, taking only CPU nothing else wants: a training copy's whole
	// decode in the time the readers leave. Pool decodes on the caller's thread, at whatever
	// priority the caller set it to.
	Background bool
}

// Result is what a clip's decode tells besides its frames (which are in the buffer it was given,
// and those it passed on the way in Clip.Keep).
type Result struct {
	// Path is where the clip's frames were decoded. A store of frames keeps each video's frames
	// of one path: NVDEC's and the CPU's may differ (Output.Fast skips the CPU's in-loop
	// filtering only).
	Path Path
	// CPU is the CPU time the decode took in another process (isolate's helpers), which the
	// caller's thread does not see, every try's; 0 where it decoded on the caller's thread
	// (Pool). Set when the decode failed too (what it spent), where Path is not.
	CPU time.Duration
}

// Path is where a clip's frames were decoded.
type Path int

const (
	// PathCPU: every frame by FFmpeg on the CPU.
	PathCPU Path = iota
	// PathGPU: every frame by NVDEC.
	PathGPU
	// PathMixed: some of each (a GPU decoder that went on on the CPU mid-clip).
	PathMixed
)

func (w clipWork) path() Path {
	switch {
	case w.GPUFrames > 0 && w.CPUFrames > 0:
		return PathMixed
	case w.GPUFrames > 0:
		return PathGPU
	}
	return PathCPU
}

// Keeper takes frames a clip's decode passes through besides the clip's own (the frames
// between the keyframe it starts from and its first frame, and between its frames): a training
// copy keeps them. Frames are known by their index in the video's own frames. A frame decoded
// with errors, or from a group of pictures where damage was seen, is never given.
type Keeper interface {
	// Want tells whether frame i is wanted. The decoder then decodes it even where it would
	// skip it (a frame no other refers to).
	Want(i int) bool
	// Keep is given frame i; rgb is valid only during the call.
	Keep(i int, rgb []byte)
	// Drop drops every frame given since the clip's decode began from frame from on (from 0:
	// all of them): the decode failed from where it started and starts again from an earlier
	// keyframe (frames of a failed start may be wrong), or, once it is done, damage came out
	// that frames given before it may be predicted from, or frames they may be predicted from
	// have not come out yet (RefWindow).
	Drop(from int)
}

// Indices returns the frame indices the clip holds in a video of n frames, counting Start and
// Stride in the video's own frames (Info.ClipFrames also follows FPS). Its error is an *Error of
// kind ErrBadRequest or ErrTooFewFrames, with no path.
func (c Clip) Indices(n int) ([]int, error) {
	if c.Start < 0 || c.Frames <= 0 || c.Stride <= 0 {
		return nil, &Error{Kind: ErrBadRequest, Detail: fmt.Sprintf("clip start %d, frames %d, stride %d", c.Start, c.Frames, c.Stride)}
	}
	if c.Start >= n || (!c.PadEnd && c.Start+(c.Frames-1)*c.Stride >= n) {
		return nil, &Error{Kind: ErrTooFewFrames, Detail: fmt.Sprintf("clip needs frame %d, video has %d", c.Start+(c.Frames-1)*c.Stride, n)}
	}
	idx := make([]int, c.Frames)
	for k := range idx {
		idx[k] = min(c.Start+k*c.Stride, n-1)
	}
	return idx, nil
}

// video is an open decoder for one video: demuxer, decoder and converter, reused from clip to
// clip. It is not safe for concurrent use.
//
// A video is positioned (at != nil) or not (at == nil):
//   - Not positioned: just opened, or the last clip ended in an error, at the end of the file, or
//     with an early drain. The next clip seeks.
//   - Positioned: since a seek to a keyframe (or the start of the file), packets have gone to the
//     decoder in order, and at.lastOut is the presentation index of the last frame out of it (the
//     frame before the keyframe, right after the seek). A clip whose first frame comes after
//     lastOut with no keyframe between carries on without a seek (Info.carriesOn). at.feed says
//     where packets come from: the demuxer (feeding); nowhere any more, as the demuxer ended and
//     the decoder was told so and now gives the frames it holds, then EOF (endOfFile); or nowhere
//     by choice, as every frame the clip needs went in and the decoder was told to end early
//     (drainedEarly: the position ends with the clip).
//
// While positioned:
//   - frames come out in increasing presentation order, so a frame is known, after lastOut, by its
//     timestamp (TimingPTS) or by the packet it was decoded from (TimingDecoded: each packet goes
//     to the decoder tagged with its index, at.nextPacket, which the frame carries);
//   - at.badGOPs holds each group of pictures where damage was seen since the seek;
//   - v.pkt holds a packet read but not yet sent only while at.pending (right after a seek under
//     TimingDecoded, which reads one packet to learn where it landed);
//   - every packet goes to the decoder tagged with v.gen, the position's number, and frames of an
//     earlier position that the decoder still puts out are not counted.
//
// Always: v.skip is the decoder's skip_frame setting.
type video struct {
	info    *Info
	open    Opener // nil: a local file
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

	at  *position // nil: not positioned
	gen int64     // counts positions: frames are tagged with the one they were decoded in
	// idrFlush: a new position flushes the decoder only if its first packet holds no IDR
	// picture (flushDue until that packet is seen), unless the decoder was told to end (ended).
	// Set for H.264 on NVDEC, where each flush makes FFmpeg create the hardware decoder anew
	// (h264_decode_flush clears context_initialized, so the next slice calls get_format and
	// re-inits the hwaccel): 200 ms a seek, measured on an H100. An IDR picture resets all that
	// a flush would, for decoding; frames the decoder held from before are told apart by gen.
	// nalLength is the size of the NAL unit lengths in packets (AVCC), 0 for start codes.
	idrFlush  bool
	flushDue  bool
	ended     bool
	nalLength int
	skip      int  // the decoder's skip_frame level now
	fast      bool // the decoder's shortcuts (Output.Fast) are on
	prevLast  int  // the last frame of the previous clip asked of this decoder; -1 before any
	// keepBuf is a frame converted for a clip's Keeper, reused from clip to clip.
	keepBuf []byte
	// state is what the decoders of this video have learnt of it (keyframes not to start from,
	// damage confirmed), shared through the pool.
	state *videoState
}

// feedState says where the decoder's packets come from; see video.
type feedState int

const (
	feeding      feedState = iota // packets come from the demuxer
	endOfFile                     // the demuxer ended; the decoder gives what it holds, then EOF
	drainedEarly                  // told to end early: the clip's frames all went in
)

// position is where a positioned decoder stands, since its last seek; see video.
type position struct {
	lastOut    int // presentation index of the last frame out
	nextPacket int // the index, among the stream's packets, of the next one to go to the decoder
	sinceSeek  int // frames identified since the seek
	pending    bool
	feed       feedState
	// badGOPs maps a group of pictures (index in Info.Keyframes) in which data failed to decode
	// to the first frame found damaged there. Frames of that group that come out later may be
	// predicted from the damage, so clips that need them fail.
	badGOPs map[int]int
}

// clipWork is what decoding one clip took.
type clipWork struct {
	Decoded   int // frames out of the decoder, needed or not
	Seeks     int
	Rewinds   int // of the seeks, those to a keyframe past the first that started from the file's start
	GPUFrames int // of the clip's frames, those NVDEC decoded
	CPUFrames int // and those the CPU decoded
	Fallbacks int // 1 when the clip decoded only from an earlier start than its keyframe
	// FlushesSaved counts seeks that did without flushing the decoder (video.idrFlush).
	FlushesSaved int
}

// clipRun is one clip being decoded: the frames it needs, which of them have gone to the
// decoder, whether to drain early, and the work done.
type clipRun struct {
	idx []int // the clip's frame indices, ascending (the last may repeat, for padding)
	// need holds idx's distinct frames and sent which of them went to the decoder, unsent how
	// many did not. With drainEarly, once none is unsent the decoder is drained instead of fed.
	need       []int
	sent       []bool
	unsent     int
	drainEarly bool
	work       clipWork
	keep       Keeper // Clip.Keep, or nil
	strict     bool   // Clip.Strict
}

// newDecoder opens a decoder for in's video stream, which must still be the one info describes,
// with the given thread count, on the GPU when g is set. Frames it puts out carry the opaque
// value of the packet they were decoded from.
func newDecoder(info *Info, in *input, codec *astiav.Codec, threads int, g *gpu) (*astiav.CodecContext, error) {
	if in.st.Index() != info.Stream || in.codec.Name() != info.Codec {
		return nil, &Error{Path: info.Path, Kind: ErrChanged, Detail: fmt.Sprintf("its video stream is now #%d, %s; it was #%d, %s",
			in.st.Index(), in.codec.Name(), info.Stream, info.Codec)}
	}
	cc := astiav.AllocCodecContext(codec)
	if cc == nil {
		return nil, &Error{Path: info.Path, Kind: ErrInternal, Detail: "allocating a decoder"}
	}
	if err := in.st.CodecParameters().ToCodecContext(cc); err != nil {
		cc.Free()
		return nil, &Error{Path: info.Path, Kind: ErrCorrupt, Detail: "reading codec parameters", Err: err}
	}
	if in.quick {
		setReorderDelay(cc, info.ReorderDelay)
	}
	cc.SetTimeBase(in.st.TimeBase())
	cc.SetThreadCount(threads)
	copyOpaque(cc)
	if g != nil {
		useGPU(cc, g)
	}
	if err := cc.Open(codec, nil); err != nil {
		cc.SetPixelFormatCallback(nil)
		cc.Free()
		return nil, &Error{Path: info.Path, Kind: ErrUnsupportedCodec, Detail: "opening decoder " + codec.Name(), Err: err}
	}
	return cc, nil
}

// openVideo opens the video described by info with a decoder of the given thread count: on the
// CPU, or with g, on the GPU through the named decoder (which holds a slot of g, given back at
// close, whatever happens).
func openVideo(info *Info, open Opener, st *videoState, threads int, g *gpu, gpuDecoder string) (*video, error) {
	in, err := openInput(info.Path, open, info)
	if err != nil {
		if g != nil {
			g.release()
		}
		return nil, err
	}
	return openVideoIn(info, in, open, st, threads, g, gpuDecoder)
}

// openVideoIn is openVideo of a video whose input is open already; the video owns in from here
// (on error too).
func openVideoIn(info *Info, in *input, open Opener, st *videoState, threads int, g *gpu, gpuDecoder string) (*video, error) {
	var err error
	v := &video{info: info, open: open, in: in, threads: threads, skip: discardDefault, g: g, prevLast: -1, state: st}
	codec := in.codec
	if g != nil {
		if codec = astiav.FindDecoderByName(gpuDecoder); codec == nil {
			v.close()
			return nil, &Error{Path: info.Path, Kind: ErrUnsupportedCodec, Detail: "no decoder " + gpuDecoder + " for NVDEC"}
		}
		v.sw = astiav.AllocFrame()
	}
	if v.cc, err = newDecoder(info, in, codec, threads, g); err != nil {
		v.close()
		return nil, err
	}
	v.pkt = astiav.AllocPacket()
	v.frame = astiav.AllocFrame()
	if g != nil && codec.Name() == "h264" {
		v.idrFlush, v.nalLength = true, avcNALLength(in.st.CodecParameters().ExtraData())
	}
	return v, nil
}

// adopt moves this decoder, idle and on the GPU, to another video whose stream it can decode as
// it stands: the same decoder, picture size, pixel format, colour tags and extradata (so the same
// parameter sets), as videos encoded alike have. in is that video's input, opened; st its state. Opening an
// NVDEC decoder takes about 200 ms (FFmpeg's hwaccel init creates the hardware decoder and its
// surfaces), 4 times the decoding of a 1080p clip; a mount reading samples at random opens one
// for nearly every clip otherwise. It reports false, changing nothing, when the streams differ.
// The decoder is then positioned nowhere, so the next clip seeks: a new position, whose frames the
// decoder tells apart from any it still holds of the old video by gen.
func (v *video) adopt(info *Info, in *input, st *videoState) bool {
	was, cp := v.in.st.CodecParameters(), in.st.CodecParameters()
	if v.g == nil || in.st.Index() != info.Stream || in.codec.Name() != info.Codec || info.Codec != v.info.Codec ||
		cp.Width() != was.Width() || cp.Height() != was.Height() || cp.PixelFormat() != was.PixelFormat() ||
		!bytes.Equal(cp.ExtraData(), was.ExtraData()) ||
		// Parameter sets only in the packets (Annex B): those of the last video stay in the decoder.
		len(cp.ExtraData()) == 0 && (info.Codec == "h264" || info.Codec == "hevc") ||
		// The container's colour tags: frames whose bitstream says none take the decoder's.
		cp.ColorRange() != was.ColorRange() || cp.ColorSpace() != was.ColorSpace() || cp.ColorPrimaries() != was.ColorPrimaries() ||
		cp.ColorTransferCharacteristic() != was.ColorTransferCharacteristic() || cp.ChromaLocation() != was.ChromaLocation() {
		return false
	}
	if in.quick && info.ReorderDelay > decoderDelay(v.cc) {
		setReorderDelay(v.cc, info.ReorderDelay)
	}
	v.cc.SetTimeBase(in.st.TimeBase())
	v.in.close()
	v.in, v.info, v.state = in, info, st
	v.at, v.prevLast = nil, -1
	return true
}

func (v *video) close() {
	if v.g != nil {
		v.g.closed(v.info)
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

// decodeClip fills dst with the clip's frames, converted to o, frame after frame, and says what
// it took.
func (v *video) decodeClip(ctx context.Context, c Clip, o Output, dst []byte) (clipWork, error) {
	path := v.info.Path
	if err := o.validate(); err != nil {
		return clipWork{}, &Error{Path: path, Kind: ErrBadRequest, Err: err}
	}
	idx, err := v.info.ClipFrames(c)
	if err != nil {
		e := err.(*Error)
		e.Path = path
		return clipWork{}, e
	}
	if need := len(idx) * o.FrameBytes(); len(dst) < need {
		return clipWork{}, &Error{Path: path, Kind: ErrBadRequest, Detail: fmt.Sprintf("buffer of %d bytes, clip needs %d", len(dst), need)}
	}

	// Continue from where the last clip left off when no keyframe lies between, else start at the
	// usable keyframe at or before the first frame. Damage found after any start but the start of
	// the file is not trusted: it may come from the start point (a keyframe that is no clean random
	// access point) rather than the data. So try again from the usable keyframe before, then from
	// the start of the file; a keyframe that fails where an earlier one succeeds is marked unusable.
	// A clip with a Keeper that meets damage is first decoded again without it, from the same
	// place: the frames it decodes only for the Keeper must not change what the clip gives.
	if o.Fast != v.fast {
		setFast(v.cc, o.Fast)
		v.fast = o.Fast
	}
	v.in.clearReadError() // readError tells of this clip's reads
	r := &clipRun{idx: idx, strict: c.Strict}
	if !c.FPS.Valid() {
		r.keep = c.Keep
	}
	drain := !v.idrFlush && v.drainPays(idx) // a drained decoder takes packets only after a flush
	v.prevLast = idx[len(idx)-1]
	starts := v.startsFor(idx[0])
	var failed []int // keyframes started from that gave damage
	for attempt := 0; ; attempt++ {
		kf := -1 // carry on without a seek
		if attempt > 0 || v.at == nil || !v.info.carriesOn(v.at.lastOut, idx[0]) {
			if len(starts) == 0 {
				return r.work, &Error{Path: path, Frame: frame(idx[0]), Kind: ErrCorrupt, Detail: "cannot position the decoder on this frame"}
			}
			kf, starts = starts[0], starts[1:]
			r.work.Seeks++
			rewound, err := v.seek(kf)
			if err != nil {
				return r.work, err
			}
			if rewound && kf > 0 {
				r.work.Rewinds++
			}
		}
		r.track(drain)
		err := v.decodeFrames(ctx, r, o, dst)
		v.setSkip(discardDefault)
		if err != nil {
			if ioErr := v.in.readError(); ioErr != nil {
				// A read of the file failed (a packet read short decodes as damage): the
				// path's failure. Nothing is learnt of the video from it.
				v.at = nil
				return r.work, ioErr
			}
		}
		var dmg *damage
		if !errors.As(err, &dmg) {
			if err == nil && r.keep != nil {
				r.keep.Drop(v.unsure())
			}
			if v.at != nil && v.at.feed == drainedEarly {
				v.at = nil // the decoder is at its end: the next clip seeks
			}
			if err == nil && len(failed) > 0 {
				r.work.Fallbacks++
				if !r.strict { // what a Strict clip meets on the way tells nothing of clips
					v.state.markUnusable(v.info, failed, kf)
				}
			}
			return r.work, err
		}
		v.at = nil
		if r.keep != nil {
			// A frame decoded for the Keeper alone, which the clip would skip (a non-reference
			// frame it does not use), may be damaged where none of the clip's are: decode the
			// clip again without it, from the same place, as it would be decoded alone.
			r.keep.Drop(0)
			r.keep = nil
			if kf >= 0 {
				starts = append([]int{kf}, starts...)
			}
			continue
		}
		if kf == 0 || v.state.confirmed(v.info, dmg.frame) {
			// From the start of the file (or where that was seen to fail the same way): real.
			// (A Strict clip's damage may lie in a frame a clip would skip: not remembered.)
			if !r.strict {
				v.state.confirm(v.info, dmg.frame)
			}
			return r.work, dmg.err
		}
		if kf > 0 {
			failed = append(failed, kf)
		}
	}
}

// unsure returns the first frame out since the seek that is not known to be sound yet: frames
// it may be predicted from may not have come out of the decoder (RefWindow), or may have come
// out damaged (a frame shown before a damaged one may refer to it). Past the end: none.
func (v *video) unsure() int {
	at, w := v.at, v.info.RefWindow()
	if at == nil {
		return math.MaxInt
	}
	from := math.MaxInt // drained: every frame decoded came out
	if at.feed == feeding {
		from = at.lastOut + 1 - w
	}
	if len(at.badGOPs) > 0 {
		from = min(from, at.firstBad()-w)
	}
	return max(from, 0)
}

// startsFor lists the keyframes to start a clip whose first frame is first from, in the order to
// try them: the usable keyframe at or before it, the usable one before that, the start of the file.
func (v *video) startsFor(first int) []int {
	kf := v.state.usableAtOrBefore(v.info, first)
	starts := []int{kf}
	if kf > 0 {
		if prev := v.state.usableAtOrBefore(v.info, v.info.Keyframes[kf].Frame-1); prev > 0 {
			starts = append(starts, prev)
		}
		starts = append(starts, 0)
	}
	return starts
}

// damage is a failure to decode a clip's frame: the *Error to report, and the frame it concerns.
// Whether it is real depends on where decoding started (see decodeClip).
type damage struct {
	err   *Error
	frame int
}

func (d *damage) Error() string { return d.err.Error() }

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

// seek positions the decoder just before keyframe kf; keyframe 0 is the start of the file. It
// says whether it went to the start of the file instead (rewind): the demuxer could not seek, or
// where it landed could not be told surely (landing).
func (v *video) seek(kf int) (rewound bool, err error) {
	if kf == 0 {
		return true, v.rewind()
	}
	v.reset()
	k := v.info.Keyframes[kf]
	ts := k.PTS
	if v.info.Timing != TimingPTS || ts == NoPTS {
		ts = k.DTS // demuxers index by decode time; only PTS-timed tables hold true PTS
	}
	if ts == NoPTS {
		return true, v.rewind()
	}
	if err := v.in.fc.SeekFrame(v.info.Stream, ts, astiav.NewSeekFlags(astiav.SeekFlagBackward)); err != nil {
		return true, v.rewind()
	}
	if v.info.Timing == TimingPTS {
		v.at.lastOut = k.Frame - 1
		return false, nil
	}
	// Frames are known by the packets they come from, so find out which packet the demuxer landed
	// on: a keyframe's, at or before the one asked for (landing). What comes before it is dropped:
	// after a seek, the parser of an MPEG program stream first hands out a piece of a packet, and
	// the keyframe's packet without its place.
	for range maxLanding {
		if err := v.readPacket(); err != nil {
			break
		}
		if !v.pkt.Flags().Has(astiav.PacketFlagKey) || !countable(v.pkt, v.info.Stream) {
			continue // (a packet to discard is no keyframe of the table)
		}
		kk, ok, sure := v.info.landing(kf, v.pkt)
		if !ok {
			continue
		}
		if !sure {
			break // it could be more than one keyframe's: numbering frames from it could be wrong
		}
		v.at.lastOut, v.at.nextPacket, v.at.pending = kk.Frame-1, kk.Packet, true
		return false, nil
	}
	return true, v.rewind()
}

// landing finds the keyframe, at or before keyframe kf, whose packet pkt (a keyframe's, read
// after a seek) is: one of the same size and, where the demuxer gives both, place in the file,
// and where the table has it, the same checksum of its bytes. ok says such a keyframe matches;
// sure, that no other keyframe of the whole table does (or that it is the one at the packet's
// own place). Keyframes alike in size whose places the demuxer does not give are common in
// program streams of steady footage (a constant bit rate makes I-frames of nearly equal size):
// taking the first that matched numbered every frame after a landing from another group of
// pictures. Keyframes alike in every byte (a still scene, black between shots) leave a landing
// unsure too, also where the other is past kf: a demuxer may land past the keyframe asked for.
// Unsure, the decoder starts from the start of the file. A packet that is surely keyframe 0's or
// one past kf is no landing (ok false): the caller reads on, as where the file holds keyframes
// out of their frames' order (packed B-frames in AVI).
func (in *Info) landing(kf int, pkt *astiav.Packet) (kk Keyframe, ok, sure bool) {
	var sum uint32 // the packet's, once a keyframe with a checksum needs it
	n := 0
	for j, c := range in.Keyframes {
		if c.Size != pkt.Size() || c.Pos >= 0 && pkt.Pos() >= 0 && c.Pos != pkt.Pos() {
			continue
		}
		usable := j >= 1 && j <= kf // keyframe 0's landing is a rewind's; past kf, too late
		if c.Pos >= 0 && c.Pos == pkt.Pos() && (c.Sum == 0 || c.Sum == packetSum(pkt)) {
			if !usable {
				return Keyframe{}, false, false // one packet a place: surely keyframe j's
			}
			return c, true, true
		}
		if c.Sum != 0 {
			if sum == 0 {
				sum = packetSum(pkt)
			}
			if c.Sum != sum {
				continue
			}
		}
		if usable && !ok {
			kk, ok = c, true
		}
		n++
	}
	return kk, ok, ok && n == 1
}

// maxLanding is how many packets after a seek may come before one known as a keyframe's.
const maxLanding = 16

// rewind reopens the file so that decoding starts from its first packet.
func (v *video) rewind() error {
	in, err := openInput(v.info.Path, v.open, v.info)
	if err != nil {
		v.at = nil
		return err
	}
	v.in.close()
	v.in = in
	v.reset()
	v.at.lastOut, v.at.nextPacket = -1, 0
	return nil
}

// track starts counting which of the clip's frames have gone to the decoder, and arms early
// draining if drain is set.
func (r *clipRun) track(drain bool) {
	r.need, r.sent = r.need[:0], r.sent[:0]
	for _, i := range r.idx {
		if len(r.need) == 0 || r.need[len(r.need)-1] != i {
			r.need = append(r.need, i)
			r.sent = append(r.sent, false)
		}
	}
	r.unsent = len(r.need)
	r.drainEarly = drain
}

// sending notes that a packet holding frame i (-1: not known) goes to the decoder.
func (r *clipRun) sending(i int) {
	if j := sort.SearchInts(r.need, i); i >= 0 && j < len(r.need) && r.need[j] == i && !r.sent[j] {
		r.sent[j] = true
		r.unsent--
	}
}

// reset empties the decoder and positions it anew, for decoding from a new place; with idrFlush,
// the flush waits for the first packet (see send).
func (v *video) reset() {
	if v.idrFlush && !v.ended {
		v.flushDue = true
	} else {
		flushDecoder(v.cc)
		v.flushDue, v.ended = false, false
	}
	v.gen = (v.gen + 1) & (1<<(63-genShift) - 1) // a decoder adopted from video to video lives long
	v.at = &position{}
}

// markBad records that frame i (or the data around it) failed to decode.
func (p *position) markBad(info *Info, i int) {
	if p.badGOPs == nil {
		p.badGOPs = make(map[int]int)
	}
	g := info.KeyframeAtOrBefore(i)
	if _, ok := p.badGOPs[g]; !ok {
		p.badGOPs[g] = i
	}
}

// firstBad returns the first frame found damaged since the seek.
func (p *position) firstBad() int {
	first := -1
	for _, b := range p.badGOPs {
		if first < 0 || b < first {
			first = b
		}
	}
	return first
}

// damageBefore returns the damaged frame in frame i's group of pictures, if any was seen.
func (p *position) damageBefore(info *Info, i int) (int, bool) {
	b, ok := p.badGOPs[info.KeyframeAtOrBefore(i)]
	return b, ok
}

// readPacket reads the stream's next packet for the decoder into v.pkt: one of its packets as the
// probe counts them, or one the container marks to be discarded (see decodable).
func (v *video) readPacket() error {
	for {
		v.pkt.Unref()
		if err := v.in.fc.ReadFrame(v.pkt); err != nil {
			return err
		}
		if decodable(v.pkt, v.info.Stream) {
			return nil
		}
	}
}

// decodeFrames decodes forward until every frame of the clip is converted into dst.
func (v *video) decodeFrames(ctx context.Context, r *clipRun, o Output, dst []byte) error {
	path, fs, idx := v.info.Path, o.FrameBytes(), r.idx
	// damaged reports frame f of the clip as not decoded, and why.
	damaged := func(f int, detail string, cause error) error {
		return &damage{err: &Error{Path: path, Frame: frame(f), Kind: ErrCorrupt, Detail: detail, Err: cause}, frame: f}
	}
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
		at := v.at
		i, bad, err := v.next(r, idx[want:])
		switch {
		case errors.Is(err, astiav.ErrEof) && at.sinceSeek == 0:
			return damaged(idx[want], "the decoder put out no frame from where decoding started", nil)
		case errors.Is(err, astiav.ErrEof):
			return damaged(idx[want], "video ended before this frame", nil)
		case err != nil:
			return damaged(idx[want], "decoding", err)
		}
		if bad {
			at.markBad(v.info, i)
		}
		if r.strict && len(at.badGOPs) > 0 {
			v.frame.Unref()
			b := at.firstBad() // the group it is in is the damaged one, should it be confirmed
			return damaged(b, "frame decoded with errors on the way to the clip's frames", nil)
		}
		if i < idx[want] {
			// A Keeper takes no frame decoded after damage, in any group of pictures: a group
			// that follows may still refer to the damaged one (an open GOP).
			if k := r.keep; k != nil && len(at.badGOPs) == 0 && k.Want(i) {
				if len(v.keepBuf) != fs {
					v.keepBuf = make([]byte, fs)
				}
				if err := v.convert(o, v.keepBuf, &r.work); err == nil {
					k.Keep(i, v.keepBuf)
				}
				continue
			}
			v.frame.Unref()
			continue
		}
		if b, ok := at.damageBefore(v.info, idx[want]); ok {
			v.frame.Unref()
			return damaged(idx[want], fmt.Sprintf("data it depends on is damaged (frame %d)", b), nil)
		}
		if i > idx[want] {
			v.frame.Unref()
			return damaged(idx[want], "decoder produced no such frame", nil)
		}
		if bad {
			v.frame.Unref()
			return damaged(i, "frame decoded with errors", nil)
		}
		if err := v.convert(o, dst[want*fs:(want+1)*fs], &r.work); err != nil {
			return &Error{Path: path, Frame: frame(i), Kind: ErrInternal, Detail: "converting frame", Err: err}
		}
		for want++; want < len(idx) && idx[want] == i; want++ {
			copy(dst[want*fs:(want+1)*fs], dst[(want-1)*fs:want*fs])
		}
	}
	return nil
}

// next returns the presentation index of the next frame out of the decoder, now in v.frame, and
// whether the decoder flagged it damaged. rest is what the clip still needs, ascending, so
// frames outside it may be skipped.
func (v *video) next(r *clipRun, rest []int) (int, bool, error) {
	at := v.at
	for {
		err := v.cc.ReceiveFrame(v.frame)
		if err == nil {
			i := v.identify()
			if i < 0 {
				v.frame.Unref()
				continue
			}
			at.lastOut = i
			at.sinceSeek++
			r.work.Decoded++
			return i, frameDamaged(v.frame), nil
		}
		if errors.Is(err, astiav.ErrEof) {
			return -1, false, err
		}
		if !errors.Is(err, astiav.ErrEagain) {
			// A damaged packet: the decoder says so and carries on with the next one.
			continue
		}
		if at.feed != feeding {
			return -1, false, astiav.ErrEof
		}
		if !at.pending && r.drainEarly && r.unsent == 0 {
			// Every frame the clip needs is in the decoder: drain it rather than decode more.
			at.feed = drainedEarly
			if err := v.end(); err != nil {
				return -1, false, err
			}
			continue
		}
		if !at.pending {
			if err := v.readPacket(); err != nil {
				if err := v.in.readError(); err != nil {
					return -1, false, err // the bytes could not be had (EIO, a fetch failed): no damage
				}
				// The end of the file, or a demuxer's error (truncation): decode what was read.
				at.feed = endOfFile
				if err := v.end(); err != nil {
					return -1, false, err
				}
				continue
			}
		}
		at.pending = false
		p, i := -1, -1 // a packet to discard holds no frame, and is not counted
		if countable(v.pkt, v.info.Stream) {
			p = at.nextPacket
			at.nextPacket++
			i = v.packetFrame(p)
		}
		setPacketOpaque(v.pkt, v.tag(p, i)) // the frames decoded from it carry this
		r.sending(i)
		v.chooseSkip(r, i, rest)
		if err := v.send(&r.work); err != nil && !errors.Is(err, astiav.ErrEagain) {
			// Invalid data in this packet: its frame will be missing or damaged, and so may the
			// frames predicted from it.
			if i < 0 {
				i = at.lastOut + 1
			}
			at.markBad(v.info, i)
			v.pkt.Unref()
			continue
		}
		v.pkt.Unref()
	}
}

// send sends the packet in v.pkt to the decoder, first flushing it if a flush is due and the
// packet does not start anew with an IDR picture.
func (v *video) send(w *clipWork) error {
	if v.flushDue {
		v.flushDue = false
		if startsIDR(v.pkt.Data(), v.nalLength) {
			w.FlushesSaved++
		} else {
			flushDecoder(v.cc)
		}
	}
	return v.cc.SendPacket(v.pkt)
}

// end tells the decoder that no packet follows, so that it puts out what it holds; it then takes
// none until flushed.
func (v *video) end() error {
	v.ended = true
	if err := v.cc.SendPacket(nil); err != nil && !errors.Is(err, astiav.ErrEof) {
		return err
	}
	return nil
}

// packetFrame returns the frame decoded from the packet in v.pkt, packet p of the stream, or -1
// when that is not known.
func (v *video) packetFrame(p int) int {
	if v.info.Timing == TimingDecoded {
		return v.info.frameOfPacket(p, -1)
	}
	return v.info.frameOf(v.pkt.Pts())
}

// genShift places a position's number above the packet's key in the tag each packet goes to the
// decoder with.
const genShift = 40

// tag is what packet p of the stream, which holds frame i (-1: not known), goes to the decoder
// with, for identify: the position's number, and the packet under TimingDecoded, else its frame.
// A packet to discard (p -1) holds no frame (noFrame).
func (v *video) tag(p, i int) int64 {
	key := int64(i + 1)
	switch {
	case p < 0:
		key = noFrame
	case v.info.Timing == TimingDecoded:
		key = int64(p)
	}
	return v.gen<<genShift | key
}

// noFrame is the key in a tag of a packet whose frames are not the video's (a packet the
// container marks to be discarded).
const noFrame = 1<<genShift - 1

// identify returns the presentation index of the frame in v.frame from the tag of the packet it
// was decoded from, or -1 for a frame of no known packet, of a packet sent before the last seek
// (a flush does not always clear what a decoder has ready: FFmpeg 7.1's HEVC decoder keeps its
// output queue), or not after the last frame out (frames shown before the keyframe decoding
// started at). Frames are not known by their own timestamps: decoders stamp some frames with
// the timestamp of a later packet (HEVC's best-effort timestamp turns to decode time when frames
// are skipped; H.264 in AVI has only decode times).
func (v *video) identify() int {
	last, tag := v.at.lastOut, frameOpaque(v.frame)
	if tag>>genShift != v.gen {
		return -1
	}
	key := int(tag & (1<<genShift - 1))
	if key == noFrame {
		return -1
	}
	if v.info.Timing == TimingDecoded {
		return v.info.frameOfPacket(key, last)
	}
	if i := key - 1; i > last {
		return i
	}
	return -1
}

// chooseSkip lets the decoder skip the packet in v.pkt (frame i) when that frame is not needed (by
// the clip, rest its frames still to come, or by its Keeper) and no other frame refers to it.
// Only done where the decoder runs on one thread, so that the setting
// applies to exactly this packet, and where each packet holds its own frame (not so in packed
// bitstreams, where skipping a B-frame also drops the next one, packed behind it).
func (v *video) chooseSkip(r *clipRun, i int, rest []int) {
	level := discardDefault
	if v.threads == 1 && i >= 0 && !v.info.Packed && (r.keep == nil || !r.keep.Want(i)) {
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

// convert converts the frame in v.frame into dst, building the converter when needed, and counts
// it in w by where it was decoded. A frame in GPU memory is downloaded first.
func (v *video) convert(o Output, dst []byte, w *clipWork) error {
	f := v.frame
	if f.PixelFormat() == astiav.PixelFormatCuda {
		if err := download(v.sw, f); err != nil {
			f.Unref()
			return fmt.Errorf("downloading a frame from the GPU: %w", err)
		}
		copyFrameProps(v.sw, f)
		f.Unref()
		f = v.sw
		w.GPUFrames++
	} else {
		w.CPUFrames++
	}
	if v.conv == nil || v.conv.key != keyOf(f, v.info, o) {
		if v.conv != nil {
			v.conv.free()
			v.conv = nil
		}
		c, err := newConverter(f, v.info, o)
		if err != nil {
			f.Unref()
			return err
		}
		v.conv = c
	}
	// v.sw keeps its buffer for the next frame's download (the graph takes a reference of its own).
	return v.conv.convert(f, dst, f == v.sw)
}
