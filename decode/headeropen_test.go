package decode

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestHeaderOpen: a video whose container's header gives the decoder all it needs is opened for
// decoding from the header alone, and its clips come out byte for byte as they do when the
// container is opened with avformat_find_stream_info; containers that learn their streams from
// packets are always opened the full way.
func TestHeaderOpen(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testvideo.Dir(), "*"))
	if err != nil {
		t.Fatal(err)
	}
	// Fragmented MP4 (CMAF, as DASH downloads are): its header holds no samples, which come in
	// fragments the demuxer reads as it goes.
	fragmented := testvideo.Transcode(t, testvideo.Megamind, "-g 16 -frames:v 120 -movflags frag_keyframe+empty_moov+default_base_moof")
	paths = append(paths, testvideo.Transcode(t, testvideo.Megamind, "-g 250"), fragmented)
	// Videos of each family that must open from the header: H.264 with B-frames (one whose SPS
	// does not give the reordering delay, one fragmented), rotated and variable-rate in MP4 and
	// Matroska, HEVC, VP8/VP9 in WebM, AV1 in MP4.
	mustQuick := map[string]bool{filepath.Base(fragmented): true, "h264_gop250.mp4": true, "h264_noreorder.mp4": true, "rotated.mp4": true, "vfr_phone.mp4": true, "vfr.mkv": true,
		"hevc.mkv": true, "vp9.webm": true, "vp8.webm": true, "odd_321x241.webm": true, "av1.mp4": true}
	quick := 0
	for _, path := range paths {
		name := filepath.Base(path)
		info, err := Probe(path)
		if err != nil {
			continue // the broken videos: they fail the same way whichever way they would open
		}
		switch ext := filepath.Ext(name); {
		case mustQuick[name] && !info.HeaderOpen:
			t.Errorf("%s (%s in %s): not opened from its header", name, info.Codec, info.Container)
		case info.HeaderOpen && !headerContainer(info.Container):
			t.Errorf("%s: opened from the header of a %s container", name, info.Container)
		case info.HeaderOpen && ext != ".mp4" && ext != ".mkv" && ext != ".webm":
			t.Errorf("%s: a %s file opened from its header", name, ext)
		}
		if !info.HeaderOpen {
			continue
		}
		quick++
		t.Run(name, func(t *testing.T) { compareOpens(t, info) })
	}
	if quick < len(mustQuick) {
		t.Fatalf("%d videos opened from their header, want at least %d", quick, len(mustQuick))
	}
}

// compareOpens decodes clips of info's video opened both ways and wants the same bytes.
func compareOpens(t *testing.T, info *Info) {
	full := *info
	full.HeaderOpen = false
	// The decoder starts from the state it would have: the same reordering delay.
	delays := map[bool]int{}
	for _, known := range []*Info{info, &full} {
		in, err := openInput(info.Path, nil, known)
		if err != nil {
			t.Fatal(err)
		}
		if in.quick != known.HeaderOpen {
			t.Errorf("opened from the header: %v, want %v", in.quick, known.HeaderOpen)
		}
		cc, err := newDecoder(info, in, in.codec, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		delays[in.quick] = decoderDelay(cc)
		cc.Free()
		in.close()
	}
	if delays[true] != delays[false] {
		t.Errorf("the decoder opened from the header starts with a reordering delay of %d frames, opened the full way %d", delays[true], delays[false])
	}
	changed := *info
	changed.Width += 2
	in, err := openInput(info.Path, nil, &changed)
	if err != nil {
		t.Fatal(err)
	}
	if in.quick {
		t.Error("opened from a header that no longer matches its probe table")
	}
	in.close()

	o := Output{Width: 64, Height: 48, Resize: Stretch}
	rnd := rand.New(rand.NewPCG(uint64(info.Frames), 7))
	n := min(4, info.Frames)
	clips := []Clip{{Start: 0, Frames: n, Stride: 1}, {Start: info.Frames - n, Frames: n, Stride: 1}}
	for len(clips) < 12 {
		stride := 1 + rnd.IntN(3)
		if span := (n-1)*stride + 1; span <= info.Frames {
			clips = append(clips, Clip{Start: rnd.IntN(info.Frames - span + 1), Frames: n, Stride: stride})
		}
	}
	// decodeAll decodes every clip, each to its bytes or its error (damaged videos fail some).
	decodeAll := func(info *Info) []string {
		p, err := NewPool(PoolOptions{Concurrency: 1, Idle: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var out []string
		for _, c := range clips {
			buf := make([]byte, c.Frames*o.FrameBytes())
			if _, err := p.DecodeClip(context.Background(), info, c, o, buf); err != nil {
				out = append(out, "error: "+err.Error())
			} else {
				out = append(out, string(buf))
			}
		}
		return out
	}
	a, b := decodeAll(info), decodeAll(&full)
	for k, c := range clips {
		if a[k] != b[k] {
			t.Errorf("clip %+v differs when the video is opened from its header (%.80q against %.80q)", c, a[k], b[k])
		}
	}
}
