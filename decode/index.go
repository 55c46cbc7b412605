package decode

import (
	"errors"
	"fmt"
	"sort"

	"github.com/asticode/go-astiav"
)

// The probe's decoding: what the decoder puts out, and from which packets, for videos whose
// packets alone do not say (see TimingDecoded, and dropLeading).

// scanOutput decodes info's stream from its start and calls out for every frame the decoder puts
// out, in order, with the packet it was decoded from (its index among the stream's countable
// packets) and its best-effort timestamp, until out returns false or the stream ends. Pixels
// are not worked out (no IDCT, no loop filter): which frames come out does not depend on them,
// and the scan runs several times faster.
func scanOutput(info *Info, open Opener, out func(packet int, ts int64) bool) error {
	const discarded = -1 // the tag of a packet decoded but not counted (decodable)
	in, err := openInput(info.Path, open, nil)
	if err != nil {
		return err
	}
	defer in.close()
	cc, err := newDecoder(info, in, in.codec, 1, nil)
	if err != nil {
		return err
	}
	defer cc.Free()
	skipPixels(cc)
	pkt, frame := astiav.AllocPacket(), astiav.AllocFrame()
	defer pkt.Free()
	defer frame.Free()
	// receive passes on every frame that is ready; false: out wants no more.
	receive := func() (bool, error) {
		for {
			err := cc.ReceiveFrame(frame)
			switch {
			case errors.Is(err, astiav.ErrEagain) || errors.Is(err, astiav.ErrEof):
				return true, nil
			case err != nil:
				continue // a damaged packet: the decoder says so and carries on
			}
			if frameOpaque(frame) == discarded {
				frame.Unref() // not one of the video's frames (FFmpeg itself drops them)
				continue
			}
			more := out(int(frameOpaque(frame)), bestEffortTimestamp(frame))
			frame.Unref()
			if !more {
				return false, nil
			}
		}
	}
	for p := 0; ; {
		err := in.fc.ReadFrame(pkt)
		if err != nil {
			if err := in.sourceError(nil); err != nil {
				return err // the bytes could not be had: not the video's fault
			}
			if errno, ok := pathErrno(err); ok { // nor here: a table cut short would be kept
				return &Error{Path: info.Path, Kind: ErrUnreadable, Detail: fmt.Sprintf("reading packets (after %d) to decode them", p), Err: errno}
			}
			if err := in.readError(); err != nil {
				return err // a demuxer that answered a failed read with the end of the file
			}
			break // the end, or damaged data: decode what was read
		}
		if !decodable(pkt, info.Stream) {
			pkt.Unref()
			continue
		}
		if countable(pkt, info.Stream) {
			setPacketOpaque(pkt, int64(p))
			p++
		} else {
			setPacketOpaque(pkt, discarded) // decoded (frames shown may refer to it), not counted
		}
		cc.SendPacket(pkt) // invalid data: the frames it held are simply missing
		pkt.Unref()
		if more, err := receive(); !more || err != nil {
			return err
		}
	}
	if err := cc.SendPacket(nil); err != nil && !errors.Is(err, astiav.ErrEof) {
		return &Error{Path: info.Path, Kind: ErrInternal, Detail: "draining the decoder", Err: err}
	}
	_, err = receive()
	return err
}

// tableDecoded builds the frame table by decoding the whole stream once (TimingDecoded).
func tableDecoded(info *Info, pkts []packetInfo, open Opener) error {
	info.Timing = TimingDecoded
	info.PacketFrames = make([]int32, len(pkts))
	for i := range info.PacketFrames {
		info.PacketFrames[i] = -1
	}
	info.FramePackets, info.PTS = info.FramePackets[:0], info.PTS[:0]
	err := scanOutput(info, open, func(p int, ts int64) bool {
		k := len(info.FramePackets)
		info.FramePackets = append(info.FramePackets, int32(p))
		info.PTS = append(info.PTS, ts)
		if p >= 0 && p < len(pkts) && info.PacketFrames[p] < 0 {
			info.PacketFrames[p] = int32(k)
		}
		return true
	})
	if err != nil {
		return err
	}
	info.Frames = len(info.FramePackets)
	if info.Frames == 0 {
		return &Error{Path: info.Path, Kind: ErrCorrupt, Detail: fmt.Sprintf("the decoder put out no frame from %d packets", len(pkts))}
	}
	increasing(info.PTS, pkts[info.FramePackets[0]].dts)
	for k := 1; k < info.Frames; k++ {
		if info.FramePackets[k] < info.FramePackets[k-1] {
			info.Reordered = true
			break
		}
	}
	for p, pk := range pkts {
		if pk.size <= maxPlaceholder && info.PacketFrames[p] >= 0 && mayHidePlaceholders(info.Codec, pkts[p:p+1]) {
			info.Packed = true // a placeholder gave a frame: the one packed before it
		}
		if k := info.PacketFrames[p]; pk.key && k >= 0 {
			info.Keyframes = append(info.Keyframes, pk.keyframe(int(k), p))
		}
	}
	sort.SliceStable(info.Keyframes, func(a, b int) bool { return info.Keyframes[a].Frame < info.Keyframes[b].Frame })
	if len(info.Keyframes) == 0 || info.Keyframes[0].Frame != 0 {
		// Decoding from the first packet is always possible, if not always clean.
		info.Keyframes = append([]Keyframe{pkts[0].keyframe(0, 0)}, info.Keyframes...)
		info.Warnings = append(info.Warnings, "first frame is not a keyframe")
	}
	if n := len(pkts) - info.Frames; n != 0 {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%d packets, %d frames: some packets yield no frame or several", len(pkts), info.Frames))
	}
	return nil
}

// increasing fills in the timestamps a decoder gave none (NoPTS) or gave out of order, one frame
// on from the one before (a frame being the last step between two known ones, or 1), starting
// from first when the first is missing.
func increasing(ts []int64, first int64) {
	step := int64(1)
	for k := range ts {
		switch {
		case k == 0 && ts[0] == NoPTS:
			ts[0] = max(first, 0)
		case k > 0 && (ts[k] == NoPTS || ts[k] <= ts[k-1]):
			ts[k] = ts[k-1] + step
		case k > 0:
			step = ts[k] - ts[k-1]
		}
	}
}

// dropLeading decodes a TimingPTS stream from its start until its first frame comes out, and
// removes from the table the frames shown before it: the leading frames of an open group of
// pictures at the start of a stream reference a picture the stream does not hold, and decoders
// of MPEG-2 and HEVC, among others, never put them out. Should the first frame out not be in the
// table at all, timestamps cannot be trusted, and the table is built by decoding instead.
func dropLeading(info *Info, pkts []packetInfo, open Opener) error {
	first := -1
	err := scanOutput(info, open, func(p int, ts int64) bool {
		if p >= 0 && p < len(pkts) {
			first = info.frameOf(pkts[p].pts)
		}
		return false
	})
	if err != nil {
		return err
	}
	switch {
	case first < 0:
		info.Keyframes, info.PTS, info.Reordered = nil, nil, false
		info.Warnings = append(info.Warnings, "the first frame decoded has a timestamp no packet has; frames found by decoding")
		return tableDecoded(info, pkts, open)
	case first == 0:
		return nil
	}
	info.PTS = info.PTS[first:]
	info.Frames -= first
	kfs := info.Keyframes[:0]
	for _, k := range info.Keyframes {
		if k.Frame >= first {
			k.Frame -= first
			kfs = append(kfs, k)
		}
	}
	info.Keyframes = kfs
	if len(kfs) == 0 || kfs[0].Frame != 0 {
		info.Keyframes = append([]Keyframe{pkts[0].keyframe(0, 0)}, kfs...)
	}
	info.Warnings = append(info.Warnings, fmt.Sprintf("the first %d frames shown are never decoded (an open group of pictures at the start); left out", first))
	return nil
}
