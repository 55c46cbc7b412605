package decode_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		w, h int
		o    decode.Output
		src  decode.Rect
		dst  decode.Rect
	}{
		{320, 240, decode.Output{Width: 224, Height: 224, Resize: decode.Crop}, decode.Rect{X: 40, W: 240, H: 240}, decode.Rect{W: 224, H: 224}},
		{240, 320, decode.Output{Width: 224, Height: 224, Resize: decode.Crop}, decode.Rect{Y: 40, W: 240, H: 240}, decode.Rect{W: 224, H: 224}},
		{320, 240, decode.Output{Width: 224, Height: 224, Resize: decode.Pad}, decode.Rect{W: 320, H: 240}, decode.Rect{Y: 28, W: 224, H: 168}},
		{240, 320, decode.Output{Width: 224, Height: 224, Resize: decode.Pad}, decode.Rect{W: 240, H: 320}, decode.Rect{X: 28, W: 168, H: 224}},
		{320, 240, decode.Output{Width: 224, Height: 224, Resize: decode.Stretch}, decode.Rect{W: 320, H: 240}, decode.Rect{W: 224, H: 224}},
		{720, 528, decode.Output{Width: 112, Height: 224, Resize: decode.Crop}, decode.Rect{X: 228, W: 264, H: 528}, decode.Rect{W: 112, H: 224}},
		{321, 241, decode.Output{Width: 160, Height: 90, Resize: decode.Crop}, decode.Rect{Y: 30, W: 321, H: 181}, decode.Rect{W: 160, H: 90}},
	} {
		src, dst := tc.o.Placement(tc.w, tc.h)
		if src != tc.src || dst != tc.dst {
			t.Errorf("%dx%d to %+v: got src %+v dst %+v, want %+v %+v", tc.w, tc.h, tc.o, src, dst, tc.src, tc.dst)
		}
	}
}

func decodeOne(t *testing.T, info *decode.Info, frame int, o decode.Output) []byte {
	t.Helper()
	buf := make([]byte, o.FrameBytes())
	if _, err := decode.DecodeClip(context.Background(), info, decode.Clip{Start: frame, Frames: 1, Stride: 1}, o, buf, 1); err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestResizeGeometry checks crop and pad against the uncropped frame, pixel for pixel: a crop
// to the crop rectangle's own size and a pad to the padded size involve no scaling.
func TestResizeGeometry(t *testing.T) {
	for _, name := range []string{"h264_gop16.mp4", "rotated.mp4"} {
		info := probe(t, name)
		w, h := info.DisplayWidth, info.DisplayHeight
		full := decodeOne(t, info, 37, decode.Output{Width: w, Height: h, Resize: decode.Stretch})
		side := min(w, h)
		crop := decodeOne(t, info, 37, decode.Output{Width: side, Height: side, Resize: decode.Crop})
		x0, y0 := (w-side)/2, (h-side)/2
		for y := range side {
			row := full[((y0+y)*w+x0)*3 : ((y0+y)*w+x0+side)*3]
			if !bytes.Equal(crop[y*side*3:(y+1)*side*3], row) {
				t.Fatalf("%s: crop row %d differs from the full frame's", name, y)
			}
		}
		big := max(w, h)
		pad := decodeOne(t, info, 37, decode.Output{Width: big, Height: big, Resize: decode.Pad})
		px, py := (big-w)/2, (big-h)/2
		for y := range big {
			for x := range big {
				p := pad[(y*big+x)*3 : (y*big+x)*3+3]
				if x < px || x >= px+w || y < py || y >= py+h {
					if p[0]|p[1]|p[2] != 0 {
						t.Fatalf("%s: pad pixel (%d,%d) = %v, want black", name, x, y, p)
					}
				} else if q := full[((y-py)*w+x-px)*3:][:3]; !bytes.Equal(p, q) {
					t.Fatalf("%s: pad pixel (%d,%d) = %v, full frame has %v", name, x, y, p, q)
				}
			}
		}
		// And scaled crops and pads still show exactly the right frame (at aspect ratios that
		// leave part of every cell of the code in view).
		for _, mode := range []decode.Resize{decode.Crop, decode.Pad, decode.Stretch} {
			for _, size := range [][2]int{{96, 96}, {112, 96}, {96, 112}} {
				o := decode.Output{Width: size[0], Height: size[1], Resize: mode}
				c := decode.Clip{Start: 3, Frames: 3, Stride: 7}
				buf := make([]byte, 3*o.FrameBytes())
				if _, err := decode.DecodeClip(context.Background(), info, c, o, buf, 1); err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(readClip(t, info, o, buf, 3)); got != "[3 10 17]" {
					t.Errorf("%s %v %dx%d: got frames %s, want [3 10 17]", name, mode, o.Width, o.Height, got)
				}
			}
		}
	}
}

// cliFrames decodes the given frames with the ffmpeg CLI (Debian's, which rotates upright too)
// at native size, RGB24.
func cliFrames(t *testing.T, path string, frames []int, w, h int) [][]byte {
	t.Helper()
	// Every frame goes through the pipe and those asked for are kept (a select expression of
	// a hundred frames is more than the filter's parser takes).
	cmd := exec.Command("ffmpeg", "-v", "error", "-threads", "1", "-i", path, "-map", "0:v:0",
		"-fps_mode", "passthrough", "-pix_fmt", "rgb24", "-f", "rawvideo", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fs := w * h * 3
	res := make([][]byte, 0, len(frames))
	for n := 0; len(res) < len(frames); n++ {
		b := make([]byte, fs)
		if _, err := io.ReadFull(out, b); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("ffmpeg CLI on %s gave %d frames of %dx%d, wanted frame %d: %v\n%s", path, n, w, h, frames[len(res)], err, stderr.String())
		}
		if n == frames[len(res)] {
			res = append(res, b)
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ffmpeg CLI on %s: %v\n%s", path, err, stderr.String())
	}
	return res
}

func psnr(a, b []byte) float64 {
	if bytes.Equal(a, b) { // most frames are (and bytes.Equal is not slowed by the race detector)
		return math.Inf(1)
	}
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/(se/float64(len(a))))
}

// conformanceVideos are the videos TestConformance holds to the ffmpeg CLI: every decodable test
// video, each container and each class of stream that numbers frames its own way, and real
// footage (Megamind from Debian's opencv-doc: MPEG-4 with packed B-frames in AVI, and transcoded
// to H.264 with short and long groups of pictures).
func conformanceVideos(t *testing.T) []string {
	videos := []string{
		testvideo.Megamind,
		testvideo.Transcode(t, testvideo.Megamind, "-g 16"),
		testvideo.Transcode(t, testvideo.Megamind, "-g 250"),
	}
	for _, v := range goodVideos {
		videos = append(videos, testvideo.Path(v.name))
	}
	for _, v := range classVideos {
		videos = append(videos, testvideo.Path(v.name))
	}
	// Real files vidfs served wrongly (testdata/real.sh): a program stream whose keyframes are of
	// one size, their places often unknown after a seek, and an MP4 whose edit list ends before a
	// P-frame shown B-frames refer to.
	for _, name := range []string{"movie-hello.mpeg", "tour.mp4"} {
		videos = append(videos, testvideo.Real(t, name))
	}
	return videos
}

// cliFrameCount is how many frames the ffmpeg CLI decodes from path.
func cliFrameCount(t *testing.T, path string) int {
	out, err := exec.Command("ffmpeg", "-v", "error", "-threads", "1", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough", "-f", "framemd5", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg CLI on %s: %v", path, err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	return n
}

// TestConformance: on every conformance video, vidfs counts the frames the ffmpeg CLI decodes,
// and its clips at many random (start, stride) pairs, at display size, hold the frames the CLI
// decodes: the same bytes, or, for an odd width or height (where the CLI's colour conversion
// takes another path), at least 45 dB. A frame a little off (a damaged or concealed picture, a
// reference decoded from another history) is no conversion difference: it fails. Clips are
// decoded in shuffled order through one pool, so seeks, carrying on and fallbacks all happen.
func TestConformance(t *testing.T) {
	pool := newPool(t, decode.PoolOptions{Concurrency: 1, Idle: 2})
	defer pool.Close()
	for _, path := range conformanceVideos(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".mp4"), func(t *testing.T) {
			info, err := decode.Probe(path)
			if err != nil {
				t.Fatal(err)
			}
			if n := cliFrameCount(t, path); n != info.Frames {
				t.Fatalf("vidfs counts %d frames (%s timing), the ffmpeg CLI decodes %d", info.Frames, info.Timing, n)
			}
			o := decode.Output{Width: info.DisplayWidth, Height: info.DisplayHeight, Resize: decode.Stretch}
			rnd := rand.New(rand.NewPCG(uint64(info.Frames), 3))
			clips := []decode.Clip{{Start: 0, Frames: 4, Stride: 1}, {Start: info.Frames - 4, Frames: 4, Stride: 1}}
			// A clip from each keyframe, last first, so that each lands there after a seek.
			for k := len(info.Keyframes) - 1; k > 0; k-- {
				if f := info.Keyframes[k].Frame; f+2 <= info.Frames {
					clips = append(clips, decode.Clip{Start: f, Frames: 2, Stride: 1})
				}
			}
			for n := len(clips) + 22; len(clips) < n; {
				stride := 1 + rnd.IntN(4)
				if span := 3*stride + 1; span <= info.Frames {
					clips = append(clips, decode.Clip{Start: rnd.IntN(info.Frames - span + 1), Frames: 4, Stride: stride})
				}
			}
			need := map[int]bool{}
			for _, c := range clips {
				for _, i := range want(c, info.Frames) {
					need[i] = true
				}
			}
			var frames []int
			for i := range need {
				frames = append(frames, i)
			}
			sort.Ints(frames)
			ref := map[int][]byte{}
			for k, b := range cliFrames(t, path, frames, o.Width, o.Height) {
				ref[frames[k]] = b
			}
			worst, fs := math.Inf(1), o.FrameBytes()
			exact := o.Width%2 == 0 && o.Height%2 == 0
			for _, c := range clips {
				buf := make([]byte, c.Frames*fs)
				if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
					t.Errorf("clip %+v: %v", c, err)
					continue
				}
				for k, i := range want(c, info.Frames) {
					q := psnr(buf[k*fs:(k+1)*fs], ref[i])
					switch {
					case exact && !math.IsInf(q, 1):
						t.Errorf("clip %+v frame %d: %.1f dB against the ffmpeg CLI, want the same bytes", c, i, q)
					case q < 45:
						t.Errorf("clip %+v frame %d: %.1f dB against the ffmpeg CLI, want at least 45", c, i, q)
					default:
						worst = min(worst, q)
					}
				}
			}
			t.Logf("%s (%s in %s, %dx%d, %d frames, %s timing): %d clips, lowest PSNR %.1f dB",
				filepath.Base(path), info.Codec, info.Container, o.Width, o.Height, info.Frames, info.Timing, len(clips), worst)
		})
	}
}

func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	var size, rss int64
	fmt.Sscan(string(b), &size, &rss)
	return rss * int64(os.Getpagesize())
}

// TestNoGrowth decodes hundreds of clips through a pool and checks that resident memory stops
// growing once the decoders are warm: buffers, frames and graphs are reused, not leaked.
func TestNoGrowth(t *testing.T) {
	path := testvideo.Transcode(t, testvideo.Megamind, "-g 16")
	info, err := decode.Probe(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, decode.PoolOptions{Concurrency: 2})
	defer pool.Close()
	o := decode.Output{Width: 224, Height: 224}
	buf := make([]byte, 8*o.FrameBytes())
	run := func(n int) {
		for i := range n {
			c := decode.Clip{Start: (i * 37) % (info.Frames - 16), Frames: 8, Stride: 2}
			if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(50)
	before := rssBytes(t)
	run(400)
	after := rssBytes(t)
	t.Logf("resident memory %.1f MB after warm-up, %.1f MB after 400 more clips", float64(before)/1e6, float64(after)/1e6)
	if after-before > 16<<20 {
		t.Errorf("resident memory grew by %.1f MB over 400 clips", float64(after-before)/1e6)
	}
}
