package isolate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vidfs/vidfs/decode"
)

// The bodies of the messages between the mount and a helper: fixed-width little-endian fields
// (encoding/binary), strings and slices after their length. The reader is written for hostile
// input, since the mount reads what a helper that a video may have taken over writes: every read
// is checked against the bytes left, every length against what those bytes could hold before
// anything is allocated (so a body of n bytes never makes more than about n bytes of values), and
// the first failure sticks. What a value means (a frame in range, a keyframe of the table) is
// checked where it is used (checkInfo, acceptMarks).

// enc appends a body's fields.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)    { e.b = append(e.b, v) }
func (e *enc) u32(v uint32)  { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)  { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) i64(v int64)   { e.u64(uint64(v)) }
func (e *enc) int(v int)     { e.i64(int64(v)) }
func (e *enc) f64(v float64) { e.u64(math.Float64bits(v)) }
func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *enc) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *enc) ints(v []int) {
	e.u32(uint32(len(v)))
	for _, x := range v {
		e.int(x)
	}
}

// dec reads a body's fields; the first failure sticks in err, and later reads give zeros.
type dec struct {
	b   []byte
	err error
}

// errShort is a body that ends before its fields do.
var errShort = errors.New("a message ends early")

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *dec) u8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}
func (d *dec) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}
func (d *dec) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
func (d *dec) i64() int64   { return int64(d.u64()) }
func (d *dec) f64() float64 { return math.Float64frombits(d.u64()) }
func (d *dec) int() int     { return int(d.i64()) }
func (d *dec) i32() int32   { return int32(d.u32()) }
func (d *dec) str() string  { return string(d.take(d.count(1))) }
func (d *dec) boolean() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("a boolean that is neither 0 nor 1")
		return false
	}
}

// count reads a length of elements of at least size bytes each, refusing one the bytes left
// cannot hold.
func (d *dec) count(size int) int {
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/max(size, 1) {
		d.err = fmt.Errorf("a length of %d that %d bytes cannot hold", n, len(d.b))
		return 0
	}
	return n
}

func (d *dec) fail(why string) {
	if d.err == nil {
		d.err = errors.New(why)
	}
}

func (d *dec) ints() []int {
	n := d.count(8)
	if n == 0 {
		return nil
	}
	v := make([]int, n)
	for i := range v {
		v[i] = d.int()
	}
	return v
}

// end fails unless every byte was read.
func (d *dec) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after a message's end", len(d.b))
	}
	return d.err
}

// The decode package's types, field by field. TestCodecFields fails when one gains a field
// these do not carry.

func (e *enc) rational(r decode.Rational) { e.int(r.Num); e.int(r.Den) }
func (d *dec) rational() decode.Rational  { return decode.Rational{Num: d.int(), Den: d.int()} }

func (e *enc) output(o decode.Output) {
	e.int(o.Width)
	e.int(o.Height)
	e.int(int(o.Resize))
	e.bool(o.Fast)
}

func (d *dec) output() decode.Output {
	return decode.Output{Width: d.int(), Height: d.int(), Resize: decode.Resize(d.int()), Fast: d.boolean()}
}

func (e *enc) poolStats(s decode.PoolStats) {
	for _, v := range []int64{s.ClipsCPU, s.ClipsGPU, s.Frames, s.Opens, s.Adoptions, s.Seeks, s.GPUFallbacks,
		s.KeyframeFallbacks, s.FlushesSaved, s.GPUReclaims} {
		e.i64(v)
	}
	// GPUs stays behind: a helper decodes on no GPU.
}

func (d *dec) poolStats() decode.PoolStats {
	return decode.PoolStats{ClipsCPU: d.i64(), ClipsGPU: d.i64(), Frames: d.i64(), Opens: d.i64(), Adoptions: d.i64(),
		Seeks: d.i64(), GPUFallbacks: d.i64(), KeyframeFallbacks: d.i64(), FlushesSaved: d.i64(), GPUReclaims: d.i64()}
}

// keyframeBytes is the size of a Keyframe on the wire.
const keyframeBytes = 6*8 + 4 + 1

// info writes a probe table (nil: a flag of 0).
func (e *enc) info(in *decode.Info) {
	e.bool(in != nil)
	if in == nil {
		return
	}
	e.str(in.Path)
	e.str(in.Container)
	e.str(in.Codec)
	e.int(in.Stream)
	e.int(in.Width)
	e.int(in.Height)
	e.int(in.DisplayWidth)
	e.int(in.DisplayHeight)
	e.int(in.Rotation)
	e.bool(in.Mirror)
	e.rational(in.TimeBase)
	e.rational(in.AvgFrameRate)
	e.int(in.Frames)
	e.i64(in.StartPTS)
	e.f64(in.Duration)
	e.str(in.Timing)
	e.bool(in.Reordered)
	e.bool(in.Packed)
	e.u32(uint32(len(in.Keyframes)))
	for _, k := range in.Keyframes {
		e.int(k.Frame)
		e.int(k.Packet)
		e.i64(k.PTS)
		e.i64(k.DTS)
		e.i64(k.Pos)
		e.int(k.Size)
		e.u32(k.Sum)
		e.bool(k.Unusable)
	}
	e.int(in.Packets)
	e.i64(in.DeclaredFrames)
	e.bool(in.Truncated)
	e.u32(uint32(len(in.Warnings)))
	for _, w := range in.Warnings {
		e.str(w)
	}
	e.u32(uint32(len(in.PTS)))
	for _, v := range in.PTS {
		e.i64(v)
	}
	for _, s := range [][]int32{in.FramePackets, in.PacketFrames} {
		e.u32(uint32(len(s)))
		for _, v := range s {
			e.u32(uint32(v))
		}
	}
	e.bool(in.Ends != nil)
	if in.Ends != nil {
		e.int(in.Ends.N)
		e.i64(in.Ends.First)
		e.i64(in.Ends.Last)
	}
	e.bool(in.HeaderOpen)
	e.int(in.ReorderDelay)
}

// info reads a probe table written by enc.info.
func (d *dec) info() *decode.Info {
	if !d.boolean() {
		return nil
	}
	in := &decode.Info{Path: d.str(), Container: d.str(), Codec: d.str(), Stream: d.int(), Width: d.int(), Height: d.int(),
		DisplayWidth: d.int(), DisplayHeight: d.int(), Rotation: d.int(), Mirror: d.boolean(), TimeBase: d.rational(),
		AvgFrameRate: d.rational(), Frames: d.int(), StartPTS: d.i64(), Duration: d.f64(), Timing: d.str(),
		Reordered: d.boolean(), Packed: d.boolean()}
	if n := d.count(keyframeBytes); n > 0 {
		in.Keyframes = make([]decode.Keyframe, n)
		for i := range in.Keyframes {
			in.Keyframes[i] = decode.Keyframe{Frame: d.int(), Packet: d.int(), PTS: d.i64(), DTS: d.i64(), Pos: d.i64(),
				Size: d.int(), Sum: d.u32(), Unusable: d.boolean()}
		}
	}
	in.Packets, in.DeclaredFrames, in.Truncated = d.int(), d.i64(), d.boolean()
	if n := d.count(4); n > 0 {
		in.Warnings = make([]string, n)
		for i := range in.Warnings {
			in.Warnings[i] = d.str()
		}
	}
	if n := d.count(8); n > 0 {
		in.PTS = make([]int64, n)
		for i := range in.PTS {
			in.PTS[i] = d.i64()
		}
	}
	for _, s := range []*[]int32{&in.FramePackets, &in.PacketFrames} {
		if n := d.count(4); n > 0 {
			*s = make([]int32, n)
			for i := range *s {
				(*s)[i] = d.i32()
			}
		}
	}
	if d.boolean() {
		in.Ends = &decode.PTSEnds{N: d.int(), First: d.i64(), Last: d.i64()}
	}
	in.HeaderOpen, in.ReorderDelay = d.boolean(), d.int()
	if d.err != nil {
		return nil
	}
	return in
}

// maxSide bounds a picture's width and height in a table a helper made (FFmpeg's own bound on
// an image's size is 16384 a side for most decoders; 65536 leaves room).
const maxSide = 1 << 16

// checkInfo checks a probe table a helper made of the video at path, of size bytes: what the mount
// believes of it (the frames it lays out and decodes) holds together, so that a helper that lies
// misleads only about its own video's frames, and no arithmetic or allocation of the mount's
// goes wrong on it. Path is set to path whatever the helper said.
func checkInfo(in *decode.Info, path string) error {
	bad := func(format string, args ...any) error {
		return &decode.Error{Path: path, Kind: decode.ErrInternal, Detail: "the decoder helper's probe table: " + fmt.Sprintf(format, args...)}
	}
	if in == nil {
		return bad("none")
	}
	in.Path = path
	switch {
	case in.Frames < 0 || len(in.PTS) != in.Frames:
		return bad("%d frames, %d timestamps", in.Frames, len(in.PTS))
	case in.Packets < 0 || in.Packets > math.MaxInt32 || in.Stream < 0 || in.Stream > math.MaxInt32:
		return bad("%d packets, stream %d", in.Packets, in.Stream)
	case in.Width < 0 || in.Height < 0 || in.Width > maxSide || in.Height > maxSide ||
		in.DisplayWidth < 0 || in.DisplayHeight < 0 || in.DisplayWidth > maxSide || in.DisplayHeight > maxSide:
		return bad("a picture of %dx%d (%dx%d shown)", in.Width, in.Height, in.DisplayWidth, in.DisplayHeight)
	case in.Rotation != 0 && in.Rotation != 90 && in.Rotation != 180 && in.Rotation != 270:
		return bad("a rotation of %d", in.Rotation)
	case in.Ends != nil:
		return bad("a brief table")
	case len(in.FramePackets) != 0 && len(in.FramePackets) != in.Frames,
		len(in.PacketFrames) != 0 && len(in.PacketFrames) != in.Packets:
		return bad("decode-order maps of %d and %d entries for %d frames and %d packets", len(in.FramePackets), len(in.PacketFrames), in.Frames, in.Packets)
	case in.ReorderDelay < 0 || in.ReorderDelay > 64:
		return bad("a reordering delay of %d", in.ReorderDelay)
	case math.IsNaN(in.Duration) || math.IsInf(in.Duration, 0) || in.Duration < 0:
		return bad("a duration of %v", in.Duration)
	}
	for _, p := range in.FramePackets {
		if p < 0 || int(p) >= in.Packets {
			return bad("frame of packet %d of %d", p, in.Packets)
		}
	}
	for _, f := range in.PacketFrames {
		if f < -1 || int(f) >= in.Frames {
			return bad("packet of frame %d of %d", f, in.Frames)
		}
	}
	last := -1
	for _, k := range in.Keyframes {
		if k.Frame <= last || k.Frame >= in.Frames || k.Packet < 0 || k.Packet >= max(in.Packets, 1) || k.Size < 0 {
			return bad("keyframe at frame %d (packet %d) after %d, of %d frames", k.Frame, k.Packet, last, in.Frames)
		}
		last = k.Frame
	}
	return nil
}
