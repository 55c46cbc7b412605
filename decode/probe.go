package decode

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/asticode/go-astiav"
)

// NoPTS marks a timestamp the container does not give.
const NoPTS = math.MinInt64

// Rational is a fraction such as a time base (1/12800) or a frame rate (25/1).
type Rational struct{ Num, Den int }

// Float64 is the fraction's value, or 0 when the denominator is 0.
func (r Rational) Float64() float64 {
	if r.Den == 0 {
		return 0
	}
	return float64(r.Num) / float64(r.Den)
}

func (r Rational) String() string { return fmt.Sprintf("%d/%d", r.Num, r.Den) }

// MarshalText writes "num/den".
func (r Rational) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads "num/den".
func (r *Rational) UnmarshalText(b []byte) error {
	n, d, ok := strings.Cut(string(b), "/")
	if !ok {
		return fmt.Errorf("rational %q: want num/den", b)
	}
	var err1, err2 error
	r.Num, err1 = strconv.Atoi(n)
	r.Den, err2 = strconv.Atoi(d)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("rational %q: %w", b, err)
	}
	return nil
}

// Timing says how the frames a decoder puts out are known by their index.
const (
	// TimingPTS: every packet carries a presentation timestamp, and a decoded frame is known by
	// its own. The frame table is the packets sorted by timestamp, less any leading frames the
	// decoder was seen not to put out.
	TimingPTS = "pts"
	// TimingDecoded: the container's timestamps cannot be trusted to say which frame is which
	// (AVI, which has none, with B-frames, packed or not; MPEG program streams, which stamp some
	// frames only; timestamps that repeat). The probe decodes the video once and takes the frame
	// table from what the decoder put out: frame k is the k-th frame out, known by the packet it
	// was decoded from (FramePackets).
	TimingDecoded = "decoded"
)

// Keyframe is a frame decoding can start at.
type Keyframe struct {
	Frame  int   `json:"frame"`  // presentation index
	Packet int   `json:"packet"` // position in decode order, among the stream's packets
	PTS    int64 `json:"pts"`    // NoPTS when unknown
	DTS    int64 `json:"dts"`    // NoPTS when unknown
	Pos    int64 `json:"pos"`    // byte offset of its packet in the file, -1 when unknown
	Size   int   `json:"size"`   // its packet's size
	// Sum is a checksum of its packet's bytes (CRC-32C, never 0), which tells keyframes of the
	// same size apart where a seek lands on one whose place in the file the demuxer does not
	// give; 0 in tables probed before it was kept.
	Sum uint32 `json:"sum,omitempty"`
	// Unusable: decoding from here was seen to give damaged frames that decoding from an earlier
	// keyframe does not (an I-frame marked as a sync point that is not a clean random access
	// point). Clips are decoded from an earlier keyframe instead.
	Unusable bool `json:"unusable,omitempty"`
}

// TableVersion is the version of what a probe table (Info) holds and how probing counts frames:
// tables kept by an earlier version are probed again. 2: keyframes carry their packet's checksum
// (Keyframe.Sum), and the packets an MP4 edit list marks to be discarded count as the decoder
// decodes them (a table of 1 numbers such a video's frames differently).
const TableVersion = 2

// Info is a video's probe table: everything DecodeClip needs to find frame i exactly.
//
// Frame k is the k-th frame FFmpeg's decoder puts out for the stream, in presentation order: what
// `ffmpeg -i FILE -fps_mode passthrough` writes and what PyAV's container.decode() enumerates. A
// packet that yields no frame (the leading frames of an open group of pictures at the start of a
// stream, a placeholder) is not a frame, and Frames counts exactly the frames that come out.
type Info struct {
	Path      string `json:"path"`
	Container string `json:"container"` // demuxer, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
	Codec     string `json:"codec"`     // e.g. "h264"
	Stream    int    `json:"stream"`    // index of the video stream in the container
	// Width and Height are the coded picture size; DisplayWidth and DisplayHeight the size after
	// rotation, which is what clips are cut from.
	Width         int `json:"width"`
	Height        int `json:"height"`
	DisplayWidth  int `json:"display_width"`
	DisplayHeight int `json:"display_height"`
	// Rotation is how far (degrees clockwise: 0, 90, 180 or 270) frames are turned for display,
	// and Mirror whether they are then flipped left to right, as the ffmpeg CLI applies the
	// stream's display matrix.
	Rotation     int      `json:"rotation"`
	Mirror       bool     `json:"mirror,omitempty"`
	TimeBase     Rational `json:"time_base"`
	AvgFrameRate Rational `json:"avg_frame_rate"`
	// Frames is the exact number of frames the decoder puts out.
	Frames int `json:"frames"`
	// StartPTS is frame 0's timestamp (time base units); Duration the span of all frames (s).
	StartPTS int64   `json:"start_pts"`
	Duration float64 `json:"duration"`
	Timing   string  `json:"timing"`
	// Reordered is true when decode order differs from presentation order (B-frames).
	Reordered bool `json:"reordered"`
	// Packed is true for an MPEG-4 part 2 stream with DivX-style packed B-frames: a packet holds a
	// frame and the B-frame after it, which comes out when the next packet (often a placeholder
	// of a few bytes) is decoded.
	Packed    bool       `json:"packed,omitempty"`
	Keyframes []Keyframe `json:"keyframes"`
	// Packets is how many packets of the stream are read (some may yield no frame).
	Packets int `json:"packets"`
	// DeclaredFrames is the container's own frame count when it differs from Frames.
	DeclaredFrames int64 `json:"declared_frames,omitempty"`
	// Truncated is true when reading the container stopped on an error before its end, or when the
	// container declares more frames than it holds packets.
	Truncated bool     `json:"truncated,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	// PTS holds every frame's presentation timestamp in presentation order. Under TimingDecoded it
	// is the decoder's best guess, made to increase (one frame on from the last where it had none):
	// for reports only, as frames are known by their packets.
	PTS []int64 `json:"pts,omitempty"`
	// Under TimingDecoded: FramePackets[k] is the packet (in decode order) frame k was decoded
	// from, and PacketFrames[p] the first frame decoded from packet p, or -1 for none.
	FramePackets []int32 `json:"frame_packets,omitempty"`
	PacketFrames []int32 `json:"packet_frames,omitempty"`
	// Ends, in a Brief Info only, stands for PTS: its length and first and last timestamps.
	Ends *PTSEnds `json:"pts_ends,omitempty"`
	// HeaderOpen is set when the container's header alone gives the decoder all it needs: a
	// decode then opens the container without avformat_find_stream_info, which reads and
	// decodes the video's first frames each time (see openInput). ReorderDelay is what that
	// step found the decoder's reordering delay to be (has_b_frames), which the decoder is
	// given instead, so that it puts out the frames the probe counted.
	HeaderOpen   bool `json:"header_open,omitempty"`
	ReorderDelay int  `json:"reorder_delay,omitempty"`
}

// PTSEnds is what a Brief Info keeps of its PTS table.
type PTSEnds struct {
	N           int
	First, Last int64
}

// Brief returns a copy of the Info without its per-frame tables (Keyframes, PTS, FramePackets,
// PacketFrames) or Warnings: what a catalog keeps of every video. It answers TimedByPTS,
// TimingRate, TimingNote and FramesAt as the full Info does, but cannot be decoded from.
func (in *Info) Brief() *Info {
	b := *in
	n, first, last := in.ptsEnds()
	b.Ends = &PTSEnds{N: n, First: first, Last: last}
	b.Keyframes, b.PTS, b.FramePackets, b.PacketFrames, b.Warnings = nil, nil, nil, nil, nil
	return &b
}

// ptsEnds returns the length of the PTS table and its first and last timestamps (0 when empty).
func (in *Info) ptsEnds() (n int, first, last int64) {
	if in.Ends != nil {
		return in.Ends.N, in.Ends.First, in.Ends.Last
	}
	if n = len(in.PTS); n == 0 {
		return 0, 0, 0
	}
	return n, in.PTS[0], in.PTS[n-1]
}

// KeyframeAtOrBefore returns the index in Keyframes of the last keyframe at or before frame.
func (in *Info) KeyframeAtOrBefore(frame int) int {
	k := sort.Search(len(in.Keyframes), func(i int) bool { return in.Keyframes[i].Frame > frame })
	return max(k-1, 0)
}

// RefWindow is how many frames after a frame, in presentation order, a frame it is predicted
// from may be shown: 0 without reordering, where every reference is shown before; with it, 16,
// H.264's and HEVC's bound on the frames a decoder reorders. Damage is seen when the damaged
// frame comes out of the decoder, so a frame is known to be sound only once the frames of its
// window have come out undamaged.
func (in *Info) RefWindow() int {
	if in.Reordered {
		return 16
	}
	return 0
}

// carriesOn tells whether decoding can go on from frame from to frame first without a seek:
// first comes after from and no keyframe lies between them.
func (in *Info) carriesOn(from, first int) bool {
	return from < first && in.Keyframes[in.KeyframeAtOrBefore(first)].Frame <= from+1
}

// frameOf returns the presentation index of the frame with timestamp ts (TimingPTS), or -1.
func (in *Info) frameOf(ts int64) int {
	i := sort.Search(len(in.PTS), func(i int) bool { return in.PTS[i] >= ts })
	if i < len(in.PTS) && in.PTS[i] == ts {
		return i
	}
	return -1
}

// frameOfPacket returns the frame decoded from packet p (TimingDecoded) that comes after frame
// `after` (a packet may yield more than one frame), or -1.
func (in *Info) frameOfPacket(p, after int) int {
	if p < 0 || p >= len(in.PacketFrames) {
		return -1
	}
	for k := int(in.PacketFrames[p]); k >= 0 && k < len(in.FramePackets) && int(in.FramePackets[k]) == p; k++ {
		if k > after {
			return k
		}
	}
	return -1
}

// packetInfo is what the probe pass keeps of each packet.
type packetInfo struct {
	pts, dts, pos int64
	size          int
	key           bool
	sum           uint32 // packetSum of a keyframe's bytes; 0 for other packets
}

// keyframe describes packet p, holding frame k, as a Keyframe.
func (pk packetInfo) keyframe(k, p int) Keyframe {
	return Keyframe{Frame: k, Packet: p, PTS: pk.pts, DTS: pk.dts, Pos: pk.pos, Size: pk.size, Sum: pk.sum}
}

// packetSum is Keyframe.Sum of a packet's bytes: their CRC-32C, never 0 (0 is "not known").
// (crc32.MakeTable makes the Castagnoli table once, and returns it after.)
func packetSum(pkt *astiav.Packet) uint32 {
	return max(crc32.Checksum(pkt.Data(), crc32.MakeTable(crc32.Castagnoli)), 1)
}

// countable tells whether a packet read from the container is one of the stream's packets, as
// the probe numbers them: of the video stream, not empty, not marked to be discarded.
func countable(pkt *astiav.Packet, stream int) bool {
	return decodable(pkt, stream) && !pkt.Flags().Has(astiav.PacketFlagDiscard)
}

// decodable tells whether a packet read from the container goes to the decoder: of the video
// stream and not empty. Packets the container marks to be discarded (AV_PKT_FLAG_DISCARD: those
// an MP4 edit list cuts off, before its start or after its end) are decoded too, as the ffmpeg
// CLI decodes them, though their frames are not the video's: the frames shown may be predicted
// from them. (Left out, they made the last B-frames of an MP4 whose edit list ends before a
// P-frame they refer to come out concealed, and differently from one decoder's history to
// another's.)
func decodable(pkt *astiav.Packet, stream int) bool {
	return pkt.StreamIndex() == stream && pkt.Size() > 0
}

// Probe reads a video's container and returns its probe table. Most videos need one pass over
// their packets; those whose timestamps do not say which frame is which are decoded once too
// (TimingDecoded), and those whose first frames may never come out are decoded at their start.
func Probe(path string) (*Info, error) {
	return ProbeFrom(path, nil)
}

// ProbeFrom is Probe of a video opened through open (nil: path is a local file).
func ProbeFrom(path string, open Opener) (*Info, error) {
	if open == nil { // a Source's size and errors are checked as it is opened
		if st, err := os.Stat(path); err != nil {
			return nil, &Error{Path: path, Kind: ErrUnreadable, Err: err}
		} else if st.IsDir() {
			return nil, &Error{Path: path, Kind: ErrUnreadable, Detail: "is a directory"}
		} else if st.Size() == 0 {
			return nil, &Error{Path: path, Kind: ErrNotVideo, Detail: "empty file"}
		}
	}
	in, err := openInput(path, open, nil)
	if err != nil {
		return nil, err
	}
	defer in.close()

	info := &Info{
		Path:      path,
		Container: in.fc.InputFormat().Name(),
		Codec:     in.codec.Name(),
		Stream:    in.st.Index(),
		Width:     in.st.CodecParameters().Width(),
		Height:    in.st.CodecParameters().Height(),
		TimeBase:  Rational{in.st.TimeBase().Num(), in.st.TimeBase().Den()},
	}
	var odd bool
	info.Rotation, info.Mirror, odd = streamOrientation(in.st)
	if odd {
		info.Warnings = append(info.Warnings, "display matrix turns by an angle that is not a multiple of 90 degrees; rounded")
	}
	info.DisplayWidth, info.DisplayHeight = info.Width, info.Height
	if info.Rotation == 90 || info.Rotation == 270 {
		info.DisplayWidth, info.DisplayHeight = info.Height, info.Width
	}
	if info.Width <= 0 || info.Height <= 0 {
		return nil, &Error{Path: path, Kind: ErrCorrupt, Detail: "video stream has no picture size"}
	}
	if delay, ok := reorderDelay(in.st); ok && in.headerOnly && headerContainer(info.Container) {
		info.HeaderOpen, info.ReorderDelay = true, delay
	}

	var pkts []packetInfo
	pkt := astiav.AllocPacket()
	defer pkt.Free()
	for {
		err := in.fc.ReadFrame(pkt)
		if errors.Is(err, astiav.ErrEof) {
			// Some demuxers answer a read that failed with the end of the file: a table cut
			// short by the path's failure must not be kept as the video's.
			if err := in.readError(); err != nil {
				return nil, err
			}
			break
		}
		if err != nil {
			if err := in.sourceError(nil); err != nil {
				return nil, err // the bytes could not be had: not the video's fault
			}
			if errno, ok := pathErrno(err); ok { // nor are they here: a table cut short would be kept
				return nil, &Error{Path: path, Kind: ErrUnreadable, Detail: fmt.Sprintf("reading packets (after %d)", len(pkts)), Err: errno}
			}
			info.Truncated = true
			info.Warnings = append(info.Warnings, fmt.Sprintf("reading stopped after %d packets: %v", len(pkts), err))
			break
		}
		if countable(pkt, info.Stream) {
			pi := packetInfo{pts: pkt.Pts(), dts: pkt.Dts(), pos: pkt.Pos(), size: pkt.Size(), key: pkt.Flags().Has(astiav.PacketFlagKey)}
			if pi.key {
				pi.sum = packetSum(pkt)
			}
			pkts = append(pkts, pi)
			if pkt.Flags().Has(astiav.PacketFlagCorrupt) {
				info.Warnings = append(info.Warnings, fmt.Sprintf("packet %d is marked corrupt", len(pkts)-1))
			}
		}
		pkt.Unref()
	}
	if len(pkts) == 0 {
		return nil, &Error{Path: path, Kind: ErrCorrupt, Detail: "video stream has no frames"}
	}
	info.Packets = len(pkts)

	if r := in.st.AvgFrameRate(); r.Num() > 0 && r.Den() > 0 {
		info.AvgFrameRate = Rational{r.Num(), r.Den()}
	}
	if stampedPTS(pkts) && !mayHidePlaceholders(info.Codec, pkts) {
		if leading := tablePTS(info, pkts); leading {
			// Frames shown before the first keyframe may never come out of the decoder.
			if err := dropLeading(info, pkts, open); err != nil {
				return nil, err
			}
		}
	} else if err := tableDecoded(info, pkts, open); err != nil {
		return nil, err
	}
	if declared := in.st.NbFrames(); declared > 0 && declared != int64(info.Frames) {
		info.DeclaredFrames = declared
		info.Truncated = info.Truncated || declared > int64(len(pkts))
		info.Warnings = append(info.Warnings, fmt.Sprintf("container declares %d frames; %d packets were read, and the decoder puts out %d", declared, len(pkts), info.Frames))
	}
	if len(info.PTS) > 0 && info.PTS[0] != NoPTS {
		info.StartPTS = info.PTS[0]
	}
	if info.Timing == TimingPTS && info.Frames > 1 {
		span := float64(info.PTS[info.Frames-1]-info.PTS[0]) * info.TimeBase.Float64()
		info.Duration = span * float64(info.Frames) / float64(info.Frames-1)
		if info.AvgFrameRate.Num == 0 && span > 0 {
			info.AvgFrameRate = Rational{int(math.Round(float64(info.Frames-1) / span * 1000)), 1000}
		}
	} else if fr := info.AvgFrameRate.Float64(); fr > 0 {
		info.Duration = float64(info.Frames) / fr
	}
	return info, nil
}

// stampedPTS tells whether every packet has a presentation timestamp of its own.
func stampedPTS(pkts []packetInfo) bool {
	seen := make(map[int64]bool, len(pkts))
	for _, p := range pkts {
		if p.pts == NoPTS || seen[p.pts] {
			return false
		}
		seen[p.pts] = true
	}
	return true
}

// maxPlaceholder is the largest MPEG-4 part 2 packet that may be a placeholder (a not-coded
// VOP), which yields no frame or, in a packed bitstream, the B-frame packed before it.
const maxPlaceholder = 19

// mayHidePlaceholders tells whether a stream of an MPEG-4 part 2 family codec holds packets small
// enough to be placeholders, whose frames only decoding can tell.
func mayHidePlaceholders(codec string, pkts []packetInfo) bool {
	switch codec {
	case "mpeg4", "msmpeg4", "msmpeg4v2", "msmpeg4v3", "h263", "h263p":
	default:
		return false
	}
	for _, p := range pkts {
		if p.size <= maxPlaceholder {
			return true
		}
	}
	return false
}

// tablePTS builds the frame table of a stream whose packets all carry distinct timestamps:
// frames in timestamp order. leading says that frames are shown before the first keyframe.
func tablePTS(info *Info, pkts []packetInfo) (leading bool) {
	info.Timing = TimingPTS
	order := make([]int, len(pkts)) // order[i] = packet shown as frame i
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return pkts[order[a]].pts < pkts[order[b]].pts })
	info.Frames = len(pkts)
	info.PTS = make([]int64, len(pkts))
	for i, p := range order {
		info.PTS[i] = pkts[p].pts
		if p != i {
			info.Reordered = true
		}
		if pkts[p].key {
			info.Keyframes = append(info.Keyframes, pkts[p].keyframe(i, p))
		}
	}
	if len(info.Keyframes) == 0 || info.Keyframes[0].Frame != 0 {
		// Decoding from the first packet is always possible, if not always clean.
		info.Keyframes = append([]Keyframe{pkts[order[0]].keyframe(0, order[0])}, info.Keyframes...)
		info.Warnings = append(info.Warnings, "first frame is not a keyframe")
		return true
	}
	return false
}

// streamOrientation returns how the ffmpeg CLI turns a stream's frames upright: clockwise
// degrees in {0, 90, 180, 270}, then whether it mirrors them left to right; odd is set for an
// angle that is not a multiple of 90 degrees (rounded to the nearest).
func streamOrientation(st *astiav.Stream) (rotation int, mirror, odd bool) {
	m, ok := st.CodecParameters().SideData().DisplayMatrix().Get()
	if !ok || m == nil {
		return 0, false, false
	}
	return orientation(m.Rotation(), int32(m[0]), int32(m[3]), int32(m[4]))
}

// input is an opened container with its chosen video stream.
type input struct {
	path  string
	ic    *astiav.IOContext // the custom I/O context over a Source; nil for a local file
	sio   *sourceIO
	fc    *astiav.FormatContext
	st    *astiav.Stream
	codec *astiav.Codec
	// headerOnly, for an input opened without a probe table: avformat_find_stream_info changed
	// nothing the decoder is opened from (the streams, and the chosen one's codec, picture size
	// and extradata), so the header had it all.
	headerOnly bool
	// quick: the input was opened from its header alone (Info.HeaderOpen), and its decoder is
	// to start from the table's ReorderDelay.
	quick bool
}

// headerContainer tells whether a demuxer's header describes every stream fully enough to decode
// it (sample descriptions, codec private data) and its seeking uses the header's index alone:
// MP4/MOV and Matroska/WebM. Others (AVI, MPEG-TS, raw streams) may learn streams, sizes or
// timing from packets, and are always opened with avformat_find_stream_info.
func headerContainer(demuxer string) bool {
	switch demuxer {
	case "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm":
		return true
	}
	return false
}

// streamHeader is what the decoder is opened from, as a container's header gives it.
type streamHeader struct {
	codec         astiav.CodecID
	width, height int
	extradata     string
}

// headersOf lists what fc's streams' parameters say now.
func headersOf(fc *astiav.FormatContext) []streamHeader {
	var hs []streamHeader
	for _, s := range fc.Streams() {
		cp := s.CodecParameters()
		hs = append(hs, streamHeader{cp.CodecID(), cp.Width(), cp.Height(), string(cp.ExtraData())})
	}
	return hs
}

// openInput opens path (through open, or as a local file when open is nil) and finds its best
// video stream and a decoder for it. With known, the video's probe table, and known.HeaderOpen
// set, it takes the stream the probe chose from the container's header alone, without
// avformat_find_stream_info, unless the header no longer matches the table. That step reads and
// decodes the first frames: a fifth of the time of opening a 340x256 H.264 video and decoding a
// 16-frame clip from it.
func openInput(path string, open Opener, known *Info) (*input, error) {
	fc := astiav.AllocFormatContext()
	if fc == nil {
		return nil, &Error{Path: path, Kind: ErrInternal, Detail: "allocating a demuxer"}
	}
	url := ""
	in := &input{path: path, fc: fc}
	if open != nil {
		var err error
		if in.ic, in.sio, err = openSource(fc, path, open); err != nil {
			fc.Free()
			return nil, err
		}
	} else {
		abs, err := filepath.Abs(path)
		if err != nil {
			fc.Free()
			return nil, &Error{Path: path, Kind: ErrUnreadable, Detail: "bad path", Err: err}
		}
		// The file: prefix keeps names with colons from being read as protocols.
		url = "file:" + abs
	}
	if err := fc.OpenInput(url, nil, nil); err != nil {
		fc.Free()
		if in.ic != nil { // a custom I/O context is the caller's to free
			in.ic.Free()
		}
		return nil, in.sourceError(openError(path, "", err))
	}
	if known != nil && known.HeaderOpen && in.fromHeader(known) {
		return in, nil
	}
	var before []streamHeader
	if known == nil {
		before = headersOf(fc)
	}
	if err := fc.FindStreamInfo(nil); err != nil {
		in.close()
		return nil, in.sourceError(openError(path, "cannot read stream information", err))
	}
	st, codec, err := fc.FindBestStream(astiav.MediaTypeVideo, -1, -1)
	switch {
	case errors.Is(err, astiav.ErrDecoderNotFound) || (err == nil && codec == nil):
		name := "unknown"
		for _, s := range fc.Streams() {
			if s.CodecParameters().MediaType() == astiav.MediaTypeVideo {
				name = s.CodecParameters().CodecID().Name()
				if tag := uint32(s.CodecParameters().CodecTag()); tag != 0 {
					fourcc := string([]byte{byte(tag), byte(tag >> 8), byte(tag >> 16), byte(tag >> 24)})
					name += " (FourCC " + strconv.Quote(fourcc) + ")"
				}
				break
			}
		}
		in.close()
		return nil, &Error{Path: path, Kind: ErrUnsupportedCodec, Detail: "no decoder for codec " + name, Err: err}
	case err != nil:
		in.close()
		return nil, &Error{Path: path, Kind: ErrNoVideo}
	}
	if known == nil {
		after := headersOf(fc)
		in.headerOnly = len(after) == len(before) && after[st.Index()] == before[st.Index()]
	}
	in.choose(st, codec)
	return in, nil
}

// openError is the error for FFmpeg's failure err to open or read the container of path (with
// detail, what it was doing): ErrUnreadable, wrapping the system's error, when the system failed
// to give the bytes (an I/O error, no descriptor left, no permission, a timeout: they may pass,
// and the video is probed again); ErrNotVideo when only the bytes explain it (invalid data, no
// demuxer knows them, too short); ErrInternal when FFmpeg ran out of memory.
func openError(path, detail string, err error) error {
	errno, ok := pathErrno(err)
	switch {
	case ok:
		return &Error{Path: path, Kind: ErrUnreadable, Detail: detail, Err: errno}
	case errors.Is(err, astiav.Error(-int(syscall.ENOMEM))):
		return &Error{Path: path, Kind: ErrInternal, Detail: detail, Err: err}
	}
	return &Error{Path: path, Kind: ErrNotVideo, Detail: detail, Err: err}
}

// pathErrno tells whether err, an FFmpeg error, is a system call's error that is not the bytes'
// fault (EIO, EMFILE, ENOENT, EACCES, ETIMEDOUT, ...), and returns it. FFmpeg's own codes
// (AVERROR_INVALIDDATA, AVERROR_EOF, ...) are not errnos; of the errnos, demuxers use EINVAL,
// ENOSYS, EDOM, ERANGE, EILSEQ and ENOTSUP to say that the data is invalid or unsupported,
// and ENOMEM is FFmpeg's own want of memory.
func pathErrno(err error) (syscall.Errno, bool) {
	var av astiav.Error
	if !errors.As(err, &av) || av >= 0 || av < -4095 { // Linux's errnos are 1 to 4095
		return 0, false
	}
	switch errno := syscall.Errno(-av); errno {
	case syscall.EINVAL, syscall.ENOSYS, syscall.EDOM, syscall.ERANGE, syscall.EILSEQ, syscall.ENOTSUP, syscall.ENOMEM:
		return 0, false
	default:
		return errno, true
	}
}

// fromHeader chooses the stream known describes, as the container's header gives it, and tells
// whether it could: the header must still say what it said when the video was probed.
func (in *input) fromHeader(known *Info) bool {
	if in.fc.InputFormat().Name() != known.Container || known.Stream >= in.fc.NbStreams() {
		return false
	}
	st := in.fc.Streams()[known.Stream]
	cp := st.CodecParameters()
	if cp.MediaType() != astiav.MediaTypeVideo || cp.Width() != known.Width || cp.Height() != known.Height {
		return false
	}
	codec := astiav.FindDecoder(cp.CodecID())
	if codec == nil || codec.Name() != known.Codec {
		return false
	}
	in.quick = true
	in.choose(st, codec)
	return true
}

// choose makes st, decoded by codec, the input's stream, and has the demuxer drop the others.
func (in *input) choose(st *astiav.Stream, codec *astiav.Codec) {
	in.st, in.codec = st, codec
	for _, s := range in.fc.Streams() {
		if s.Index() != st.Index() {
			s.SetDiscard(astiav.DiscardAll)
		}
	}
}

func (in *input) close() {
	in.fc.CloseInput()
	in.fc.Free()
	if in.ic != nil {
		in.ic.Free()
	}
	if c, ok := in.sio.srcCloser(); ok {
		c.Close() // a Source that holds a descriptor (a helper's) lets it go with its decoder
	}
}
