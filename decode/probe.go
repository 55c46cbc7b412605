package decode

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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

// Timing says how decoded frames are matched to frame indices.
const (
	// TimingPTS: every frame has a presentation timestamp; a decoded frame is known by its own.
	TimingPTS = "pts"
	// TimingInferred: reference frames lack a presentation timestamp (AVI with B-frames), so it is
	// inferred from decode timestamps as MPEG-style decoders stamp them: each reference frame is
	// shown when the next one arrives. Decoded frames are then known by timestamp as for TimingPTS.
	TimingInferred = "inferred"
	// TimingCount: timestamps are missing or repeat; frames are counted in presentation order
	// from the keyframe decoding started at (exact for closed GOPs only).
	TimingCount = "count"
)

// Keyframe is a frame decoding can start at.
type Keyframe struct {
	Frame  int   `json:"frame"`  // presentation index
	Packet int   `json:"packet"` // position in decode order
	PTS    int64 `json:"pts"`    // NoPTS when unknown
	DTS    int64 `json:"dts"`    // NoPTS when unknown
}

// Info is a video's probe table: everything DecodeClip needs to find frame i exactly, learnt
// from one pass over the container's packets, without decoding.
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
	// Rotation is how far (degrees clockwise: 0, 90, 180 or 270) frames are turned for display.
	Rotation     int      `json:"rotation"`
	TimeBase     Rational `json:"time_base"`
	AvgFrameRate Rational `json:"avg_frame_rate"`
	// Frames is the exact number of frames that can be read.
	Frames int `json:"frames"`
	// StartPTS is frame 0's timestamp (time base units); Duration the span of all frames (s).
	StartPTS int64   `json:"start_pts"`
	Duration float64 `json:"duration"`
	Timing   string  `json:"timing"`
	// Reordered is true when decode order differs from presentation order (B-frames).
	Reordered bool       `json:"reordered"`
	Keyframes []Keyframe `json:"keyframes"`
	// DeclaredFrames is the container's own frame count when it promises more than could be read;
	// Truncated is then true, as it is when reading stopped on an error.
	DeclaredFrames int64    `json:"declared_frames,omitempty"`
	Truncated      bool     `json:"truncated,omitempty"`
	Warnings       []string `json:"warnings,omitempty"`
	// PTS holds every frame's timestamp in presentation order (TimingCount: decode timestamps).
	PTS []int64 `json:"pts,omitempty"`
}

// KeyframeAtOrBefore returns the index in Keyframes of the last keyframe at or before frame.
func (in *Info) KeyframeAtOrBefore(frame int) int {
	k := sort.Search(len(in.Keyframes), func(i int) bool { return in.Keyframes[i].Frame > frame })
	return max(k-1, 0)
}

// carriesOn tells whether decoding can go on from frame from to frame first without a seek:
// first comes after from and no keyframe lies between them.
func (in *Info) carriesOn(from, first int) bool {
	return from < first && in.Keyframes[in.KeyframeAtOrBefore(first)].Frame <= from+1
}

// frameOf returns the presentation index of the frame with timestamp ts, the first one after
// frame `after` when timestamps repeat, or -1.
func (in *Info) frameOf(ts int64, after int) int {
	i := sort.Search(len(in.PTS), func(i int) bool { return in.PTS[i] >= ts })
	for ; i < len(in.PTS) && in.PTS[i] == ts; i++ {
		if i > after {
			return i
		}
	}
	return -1
}

// packetInfo is what the probe pass keeps of each packet.
type packetInfo struct {
	pts, dts int64
	key      bool
}

// Probe reads a video's container once and returns its probe table.
func Probe(path string) (*Info, error) {
	if st, err := os.Stat(path); err != nil {
		return nil, &Error{Path: path, Kind: ErrUnreadable, Err: err}
	} else if st.IsDir() {
		return nil, &Error{Path: path, Kind: ErrUnreadable, Detail: "is a directory"}
	} else if st.Size() == 0 {
		return nil, &Error{Path: path, Kind: ErrNotVideo, Detail: "empty file"}
	}
	in, err := openInput(path)
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
		Rotation:  streamRotation(in.st),
		TimeBase:  Rational{in.st.TimeBase().Num(), in.st.TimeBase().Den()},
	}
	info.DisplayWidth, info.DisplayHeight = info.Width, info.Height
	if info.Rotation == 90 || info.Rotation == 270 {
		info.DisplayWidth, info.DisplayHeight = info.Height, info.Width
	}
	if info.Width <= 0 || info.Height <= 0 {
		return nil, &Error{Path: path, Kind: ErrCorrupt, Detail: "video stream has no picture size"}
	}

	var pkts []packetInfo
	pkt := astiav.AllocPacket()
	defer pkt.Free()
	for {
		err := in.fc.ReadFrame(pkt)
		if errors.Is(err, astiav.ErrEof) {
			break
		}
		if err != nil {
			info.Truncated = true
			info.Warnings = append(info.Warnings, fmt.Sprintf("reading stopped after %d packets: %v", len(pkts), err))
			break
		}
		if pkt.StreamIndex() == info.Stream && pkt.Size() > 0 && !pkt.Flags().Has(astiav.PacketFlagDiscard) {
			pkts = append(pkts, packetInfo{pts: pkt.Pts(), dts: pkt.Dts(), key: pkt.Flags().Has(astiav.PacketFlagKey)})
			if pkt.Flags().Has(astiav.PacketFlagCorrupt) {
				info.Warnings = append(info.Warnings, fmt.Sprintf("packet %d is marked corrupt", len(pkts)-1))
			}
		}
		pkt.Unref()
	}
	if len(pkts) == 0 {
		return nil, &Error{Path: path, Kind: ErrCorrupt, Detail: "video stream has no frames"}
	}
	if declared := in.st.NbFrames(); declared > int64(len(pkts)) {
		info.DeclaredFrames, info.Truncated = declared, true
		info.Warnings = append(info.Warnings, fmt.Sprintf("container declares %d frames, %d could be read", declared, len(pkts)))
	}
	buildFrameTable(info, pkts)

	if r := in.st.AvgFrameRate(); r.Num() > 0 && r.Den() > 0 {
		info.AvgFrameRate = Rational{r.Num(), r.Den()}
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

// buildFrameTable turns packets in decode order into the presentation-order frame table.
func buildFrameTable(info *Info, pkts []packetInfo) {
	ts := make([]int64, len(pkts)) // presentation timestamp of each packet
	info.Timing = TimingPTS
	for i, p := range pkts {
		ts[i] = p.pts
		if p.pts == NoPTS {
			info.Timing = TimingInferred
		}
	}
	if info.Timing == TimingInferred && !inferPTS(pkts, ts) {
		info.Timing = TimingCount
		info.Warnings = append(info.Warnings, "timestamps missing; frames are counted instead")
	}
	order := make([]int, len(pkts)) // order[i] = packet shown as frame i
	for i := range order {
		order[i] = i
	}
	if info.Timing != TimingCount {
		sort.SliceStable(order, func(a, b int) bool { return ts[order[a]] < ts[order[b]] })
		for i := 1; i < len(order); i++ {
			if ts[order[i]] == ts[order[i-1]] {
				info.Timing = TimingCount
				info.Warnings = append(info.Warnings, "repeated timestamps; frames are counted instead")
				for i := range order {
					order[i] = i
				}
				break
			}
		}
	}

	info.Frames = len(pkts)
	info.PTS = make([]int64, len(pkts))
	for i, p := range order {
		if info.Timing == TimingCount {
			info.PTS[i] = pkts[i].dts
		} else {
			info.PTS[i] = ts[p]
		}
		if p != i {
			info.Reordered = true
		}
		if pkts[p].key {
			info.Keyframes = append(info.Keyframes, Keyframe{Frame: i, Packet: p, PTS: info.PTS[i], DTS: pkts[p].dts})
		}
	}
	info.StartPTS = info.PTS[0]
	if len(info.Keyframes) == 0 || info.Keyframes[0].Frame != 0 {
		// Decoding from the first packet is always possible, if not always clean.
		info.Keyframes = append([]Keyframe{{Frame: 0, Packet: order[0], PTS: info.PTS[0], DTS: pkts[order[0]].dts}}, info.Keyframes...)
		info.Warnings = append(info.Warnings, "first frame is not a keyframe")
	}
}

// inferPTS fills in the presentation timestamps of packets that lack one (ts holds the known
// ones), the way MPEG-style decoders stamp their output: such a packet is a reference frame,
// shown when the next reference frame's packet is decoded, with that packet's decode timestamp;
// the last one is shown last. It needs every decode timestamp, increasing.
func inferPTS(pkts []packetInfo, ts []int64) bool {
	last := int64(math.MinInt64)
	for i, p := range pkts {
		if p.dts == NoPTS || (i > 0 && p.dts <= pkts[i-1].dts) {
			return false
		}
		last = max(last, p.dts, p.pts)
	}
	next := last + 1
	for i := len(pkts) - 1; i >= 0; i-- {
		if pkts[i].pts == NoPTS {
			ts[i], next = next, pkts[i].dts
		}
	}
	return true
}

// streamRotation returns the display rotation of a stream, clockwise degrees in {0,90,180,270}.
func streamRotation(st *astiav.Stream) int {
	m, ok := st.CodecParameters().SideData().DisplayMatrix().Get()
	if !ok || m == nil {
		return 0
	}
	r := int(math.Round(m.Rotation()/90)) * 90 // go-astiav: clockwise angle
	return ((r % 360) + 360) % 360
}

// input is an opened container with its chosen video stream.
type input struct {
	path  string
	fc    *astiav.FormatContext
	st    *astiav.Stream
	codec *astiav.Codec
}

// openInput opens path and finds its best video stream and a decoder for it.
func openInput(path string) (*input, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{Path: path, Kind: ErrUnreadable, Detail: "bad path", Err: err}
	}
	fc := astiav.AllocFormatContext()
	if fc == nil {
		return nil, &Error{Path: path, Kind: ErrInternal, Detail: "allocating a demuxer"}
	}
	// The file: prefix keeps names with colons from being read as protocols.
	if err := fc.OpenInput("file:"+abs, nil, nil); err != nil {
		fc.Free()
		return nil, &Error{Path: path, Kind: ErrNotVideo, Err: err}
	}
	in := &input{path: path, fc: fc}
	if err := fc.FindStreamInfo(nil); err != nil {
		in.close()
		return nil, &Error{Path: path, Kind: ErrNotVideo, Detail: "cannot read stream information", Err: err}
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
	in.st, in.codec = st, codec
	for _, s := range fc.Streams() {
		if s.Index() != st.Index() {
			s.SetDiscard(astiav.DiscardAll)
		}
	}
	return in, nil
}

func (in *input) close() {
	in.fc.CloseInput()
	in.fc.Free()
}
