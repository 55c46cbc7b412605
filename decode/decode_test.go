package decode_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/leakcheck"
	"github.com/vidfs/vidfs/internal/testvideo"
)

func TestMain(m *testing.M) {
	testvideo.QuietFFmpeg()
	os.Exit(leakcheck.Main(m))
}

// goodVideo is a test video that decodes, with what its probe table must say.
type goodVideo struct {
	name          string
	codec         string
	width, height int // display size
	frames        int
	rotation      int
	timing        string
	reordered     bool
}

var goodVideos = []goodVideo{
	{"h264_gop16.mp4", "h264", 320, 240, 100, 0, decode.TimingPTS, true},
	{"h264_gop250.mp4", "h264", 320, 240, 300, 0, decode.TimingPTS, true},
	{"hevc.mkv", "hevc", 320, 240, 60, 0, decode.TimingPTS, true},
	{"vp9.webm", "vp9", 320, 240, 60, 0, decode.TimingPTS, false},
	{"vp8.webm", "vp8", 320, 240, 40, 0, decode.TimingPTS, false},
	{"av1.mp4", "libdav1d", 320, 240, 40, 0, decode.TimingPTS, false},
	{"mpeg4.avi", "mpeg4", 320, 240, 60, 0, decode.TimingDecoded, true},
	{"mjpeg.avi", "mjpeg", 320, 240, 30, 0, decode.TimingPTS, false},
	{"theora.ogv", "theora", 320, 240, 30, 0, decode.TimingPTS, false},
	{"flv1.flv", "flv", 320, 240, 30, 0, decode.TimingPTS, false},
	{"odd_321x241.webm", "vp9", 321, 241, 40, 0, decode.TimingPTS, false},
	{"rotated.mp4", "h264", 240, 320, 40, 270, decode.TimingPTS, true},
	{"vfr.mkv", "h264", 320, 240, 60, 0, decode.TimingPTS, true},
	{"start10.ts", "h264", 320, 240, 60, 0, decode.TimingPTS, true},
	{"short8.mp4", "h264", 320, 240, 8, 0, decode.TimingPTS, true},
}

// classVideos are the test videos of the classes whose decoders number frames otherwise than
// their packets suggest (testdata/gen.sh), with what their probe tables must say. Their frames do
// not carry the index pattern; TestConformance checks them against the ffmpeg CLI.
var classVideos = []struct {
	name     string
	codec    string
	frames   int
	timing   string
	rotation int
	mirror   bool
	packed   bool
}{
	{"xvid_packed.avi", "mpeg4", 46, decode.TimingDecoded, 0, false, true},
	{"h264_refresh444.mp4", "h264", 75, decode.TimingPTS, 0, false, false},
	{"mpeg2_cut.mpg", "mpeg2video", 36, decode.TimingDecoded, 0, false, false},
	{"mirrored.mp4", "h264", 30, decode.TimingPTS, 90, true, false},
	{"h264_bframes.avi", "h264", 40, decode.TimingDecoded, 0, false, false},
	{"h264_noreorder.mp4", "h264", 48, decode.TimingPTS, 0, false, false},
	{"h264_editstart.mp4", "h264", 62, decode.TimingPTS, 0, false, false},
	{"h264_editend.mp4", "h264", 49, decode.TimingPTS, 0, false, false},
}

func newPool(t testing.TB, opts decode.PoolOptions) *decode.Pool {
	t.Helper()
	p, err := decode.NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func probe(t testing.TB, name string) *decode.Info {
	t.Helper()
	info, err := decode.Probe(testvideo.Path(name))
	if err != nil {
		t.Fatalf("Probe(%s): %v", name, err)
	}
	return info
}

func TestProbe(t *testing.T) {
	for _, v := range goodVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			if info.Codec != v.codec || info.DisplayWidth != v.width || info.DisplayHeight != v.height ||
				info.Frames != v.frames || info.Rotation != v.rotation || info.Timing != v.timing || info.Reordered != v.reordered {
				t.Errorf("got codec %s, %dx%d, %d frames, rotation %d, timing %s, reordered %v; want %+v",
					info.Codec, info.DisplayWidth, info.DisplayHeight, info.Frames, info.Rotation, info.Timing, info.Reordered, v)
			}
			if len(info.PTS) != info.Frames {
				t.Fatalf("%d timestamps for %d frames", len(info.PTS), info.Frames)
			}
			for i := 1; i < len(info.PTS); i++ {
				if info.PTS[i] <= info.PTS[i-1] {
					t.Fatalf("timestamps not increasing at frame %d: %d after %d", i, info.PTS[i], info.PTS[i-1])
				}
			}
			if len(info.Keyframes) == 0 || info.Keyframes[0].Frame != 0 {
				t.Fatalf("keyframes %+v: want the first at frame 0", info.Keyframes)
			}
			if info.Truncated || len(info.Warnings) > 0 {
				t.Errorf("truncated %v, warnings %q", info.Truncated, info.Warnings)
			}
			if fr := info.AvgFrameRate.Float64(); fr < 24.9 || fr > 25.1 {
				t.Errorf("average frame rate %v, want 25", info.AvgFrameRate)
			}
		})
	}

	for _, v := range classVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			if info.Codec != v.codec || info.Frames != v.frames || info.Timing != v.timing || info.Rotation != v.rotation ||
				info.Mirror != v.mirror || info.Packed != v.packed {
				t.Errorf("got %s, %d frames, %s timing, rotation %d, mirror %v, packed %v; want %+v",
					info.Codec, info.Frames, info.Timing, info.Rotation, info.Mirror, info.Packed, v)
			}
		})
	}
	t.Run("keyframes", func(t *testing.T) {
		info := probe(t, "h264_gop16.mp4")
		var got []int
		for _, k := range info.Keyframes {
			got = append(got, k.Frame)
		}
		if fmt.Sprint(got) != "[0 16 32 48 64 80 96]" {
			t.Errorf("keyframes at %v, want every 16th frame", got)
		}
	})
	t.Run("start time", func(t *testing.T) {
		info := probe(t, "start10.ts")
		if s := float64(info.StartPTS) * info.TimeBase.Float64(); s < 10 {
			t.Errorf("first frame at %.3f s, want the 10 s offset (and the muxer's delay)", s)
		}
	})
	t.Run("variable frame rate", func(t *testing.T) {
		info := probe(t, "vfr.mkv")
		gaps := map[int64]bool{}
		for i := 1; i < len(info.PTS); i++ {
			gaps[info.PTS[i]-info.PTS[i-1]] = true
		}
		if !gaps[40] || !gaps[55] || !gaps[25] {
			t.Errorf("frame gaps %v ms, want 40, 55 and 25", gaps)
		}
	})
}

// stretchOutput is a small output that shows each whole frame, so every cell of the code is readable.
func stretchOutput(info *decode.Info) decode.Output {
	return decode.Output{Width: 64, Height: 64 * info.DisplayHeight / info.DisplayWidth, Resize: decode.Stretch}
}

// readClip reads back the frame index of every frame of a decoded clip.
func readClip(t testing.TB, info *decode.Info, o decode.Output, buf []byte, frames int) []int {
	t.Helper()
	src, dst := o.Placement(info.DisplayWidth, info.DisplayHeight)
	got := make([]int, frames)
	for k := range got {
		i, err := testvideo.ReadIndex(buf[k*o.FrameBytes():(k+1)*o.FrameBytes()], o.Width, o.Height,
			info.DisplayWidth, info.DisplayHeight, testvideo.Rect(src), testvideo.Rect(dst))
		if err != nil {
			i = -1
		}
		got[k] = i
	}
	return got
}

// clipCases returns (start, stride, frames) triples for a video of n frames: around every
// keyframe, the ends, and the last possible clip, for several strides and lengths.
func clipCases(info *decode.Info) []decode.Clip {
	var clips []decode.Clip
	n := info.Frames
	for _, frames := range []int{1, 4, 16} {
		for _, stride := range []int{1, 2, 3, 5} {
			span := (frames-1)*stride + 1
			if span > n {
				continue
			}
			starts := map[int]bool{}
			for _, s := range []int{0, 1, n / 2, n - span, n - span - 1} {
				starts[s] = true
			}
			for _, k := range info.Keyframes {
				for _, s := range []int{k.Frame - 1, k.Frame, k.Frame + 1} {
					starts[s] = true
				}
			}
			for s := range starts {
				if s >= 0 && s <= n-span {
					clips = append(clips, decode.Clip{Start: s, Frames: frames, Stride: stride})
				}
			}
		}
	}
	return clips
}

func want(c decode.Clip, n int) []int {
	idx, _ := c.Indices(n)
	return idx
}

// TestDecodeClipExact decodes many clips of every test video, in shuffled order from several
// goroutines through one pool (so seeks, decoder reuse and carrying on all happen), and checks
// that each frame is exactly the one asked for.
func TestDecodeClipExact(t *testing.T) {
	pool := newPool(t, decode.PoolOptions{Concurrency: 3, Idle: 4})
	defer pool.Close()
	for _, v := range goodVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			o := stretchOutput(info)
			clips := clipCases(info)
			rnd := rand.New(rand.NewPCG(1, uint64(len(clips))))
			rnd.Shuffle(len(clips), func(i, j int) { clips[i], clips[j] = clips[j], clips[i] })
			// And a run of consecutive clips, which carry on without seeking.
			for s := 0; s+8 <= info.Frames; s += 8 {
				clips = append(clips, decode.Clip{Start: s, Frames: 4, Stride: 2})
			}
			checkClips(t, pool, info, o, clips, 3, func(c decode.Clip) []int { return want(c, info.Frames) })
		})
	}
}

// checkClips decodes clips through pool from several goroutines (workers), and reads back from
// the pixels that each holds the frames want says.
func checkClips(t *testing.T, pool *decode.Pool, info *decode.Info, o decode.Output, clips []decode.Clip, workers int, want func(decode.Clip) []int) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan decode.Clip)
	for range workers {
		wg.Go(func() {
			for c := range work {
				buf := make([]byte, c.Frames*o.FrameBytes())
				if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
					t.Errorf("clip %+v: %v", c, err)
					continue
				}
				if got, w := readClip(t, info, o, buf, c.Frames), want(c); fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("clip %+v: got frames %v, want %v", c, got, w)
				}
			}
		})
	}
	for _, c := range clips {
		work <- c
	}
	close(work)
	wg.Wait()
}

// TestDecodeClipThreaded checks the one-shot API with FFmpeg's own threading (no frame skipping).
func TestDecodeClipThreaded(t *testing.T) {
	for _, name := range []string{"h264_gop250.mp4", "hevc.mkv", "mpeg4.avi", "av1.mp4"} {
		info := probe(t, name)
		o := stretchOutput(info)
		for _, c := range []decode.Clip{{Start: 0, Frames: 4, Stride: 3}, {Start: info.Frames - 13, Frames: 5, Stride: 3}} {
			buf := make([]byte, c.Frames*o.FrameBytes())
			if _, err := decode.DecodeClip(context.Background(), info, c, o, buf, 0); err != nil {
				t.Fatalf("%s clip %+v: %v", name, c, err)
			}
			if got, w := readClip(t, info, o, buf, c.Frames), want(c, info.Frames); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s clip %+v: got frames %v, want %v", name, c, got, w)
			}
		}
	}
}

func TestPadEnd(t *testing.T) {
	info := probe(t, "short8.mp4")
	o := stretchOutput(info)
	c := decode.Clip{Start: 2, Frames: 16, Stride: 1}
	buf := make([]byte, 16*o.FrameBytes())
	_, err := decode.DecodeClip(context.Background(), info, c, o, buf, 1)
	if !isKind(err, decode.ErrTooFewFrames) {
		t.Fatalf("16 frames from an 8-frame video: got %v, want ErrTooFewFrames", err)
	}
	c.PadEnd = true
	if _, err := decode.DecodeClip(context.Background(), info, c, o, buf, 1); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readClip(t, info, o, buf, 16)); got != "[2 3 4 5 6 7 7 7 7 7 7 7 7 7 7 7]" {
		t.Errorf("padded clip: got %s, want frames 2-7 then 7 repeated", got)
	}
}

func TestBadRequests(t *testing.T) {
	info := probe(t, "h264_gop16.mp4")
	o := decode.Output{Width: 32, Height: 32}
	for _, tc := range []struct {
		c    decode.Clip
		o    decode.Output
		size int
		kind error
	}{
		{decode.Clip{Start: -1, Frames: 1, Stride: 1}, o, o.FrameBytes(), decode.ErrBadRequest},
		{decode.Clip{Start: 0, Frames: 0, Stride: 1}, o, o.FrameBytes(), decode.ErrBadRequest},
		{decode.Clip{Start: 0, Frames: 2, Stride: 0}, o, 2 * o.FrameBytes(), decode.ErrBadRequest},
		{decode.Clip{Start: 0, Frames: 2, Stride: 1}, o, o.FrameBytes(), decode.ErrBadRequest},
		{decode.Clip{Start: 0, Frames: 1, Stride: 1}, decode.Output{Width: 0, Height: 8}, 0, decode.ErrBadRequest},
		{decode.Clip{Start: 99, Frames: 2, Stride: 1}, o, 2 * o.FrameBytes(), decode.ErrTooFewFrames},
		{decode.Clip{Start: 100, Frames: 1, Stride: 1}, o, o.FrameBytes(), decode.ErrTooFewFrames},
	} {
		_, err := decode.DecodeClip(context.Background(), info, tc.c, tc.o, make([]byte, tc.size), 1)
		if !isKind(err, tc.kind) || strings.Count(err.Error(), tc.kind.Error()) != 1 {
			t.Errorf("clip %+v output %+v buffer %d: got %v, want %v (said once)", tc.c, tc.o, tc.size, err, tc.kind)
		}
		for _, other := range []error{decode.ErrBadRequest, decode.ErrTooFewFrames, decode.ErrCorrupt} {
			if other != tc.kind && errors.Is(err, other) {
				t.Errorf("clip %+v: %v is also %v", tc.c, err, other)
			}
		}
	}
}

func TestCancel(t *testing.T) {
	info := probe(t, "h264_gop250.mp4")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := stretchOutput(info)
	_, err := decode.DecodeClip(ctx, info, decode.Clip{Start: 200, Frames: 4, Stride: 1}, o, make([]byte, 4*o.FrameBytes()), 1)
	if err != context.Canceled {
		t.Errorf("cancelled decode: got %v, want context.Canceled", err)
	}
}

// TestSequentialClips: reading a video's clips in order carries on from clip to clip. The first
// clip drains the decoder at its end (it might be random access), so the second seeks again;
// after that no clip seeks, and every frame is the one asked for.
func TestSequentialClips(t *testing.T) {
	info := probe(t, "h264_gop16.mp4")
	o := stretchOutput(info)
	pool := newPool(t, decode.PoolOptions{Concurrency: 1})
	defer pool.Close()
	for s := 0; s+8 <= info.Frames; s += 8 {
		c := decode.Clip{Start: s, Frames: 8, Stride: 1}
		buf := make([]byte, c.Frames*o.FrameBytes())
		if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
			t.Fatalf("clip %+v: %v", c, err)
		}
		if got, w := readClip(t, info, o, buf, c.Frames), want(c, info.Frames); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("clip %+v: got frames %v, want %v", c, got, w)
		}
	}
	if st := pool.Stats(); st.Seeks > 2 {
		t.Errorf("%d clips read in order took %d seeks, want at most 2", st.ClipsCPU, st.Seeks)
	}
}
