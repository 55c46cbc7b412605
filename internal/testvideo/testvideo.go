// Package testvideo helps tests use the videos in testdata/: it finds them, reads back the
// frame index each test frame carries, and derives H.264 videos from real footage.
package testvideo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/asticode/go-astiav"
)

// Dir is the directory holding the generated test videos (testdata/videos).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "videos")
}

// Path is the path of the named test video.
func Path(name string) string { return filepath.Join(Dir(), name) }

// Real is the path of a real video testdata/real.sh fetched into the test cache (make test runs
// it): movie-hello.mpeg or tour.mp4. It fails the test when the file is not
// there, saying how to fetch it.
func Real(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, "vidfs", "realvideos", name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("real test video %s is missing: run testdata/real.sh (make test does): %v", name, err)
	}
	return p
}

// QuietFFmpeg silences FFmpeg's own messages, unless VIDFS_FFMPEG_LOG is set: those about the
// damaged test videos would bury the test output, and the typed errors carry what matters.
func QuietFFmpeg() {
	if os.Getenv("VIDFS_FFMPEG_LOG") == "" {
		astiav.SetLogLevel(astiav.LogLevelFatal)
	}
}

// Rect is a rectangle in pixels.
type Rect struct{ X, Y, W, H int }

// ReadIndex reads the frame index drawn by testdata/gen.sh from an output frame: rgb holds
// outH rows of outW RGB24 pixels; src is the part of the displayed dispW x dispH picture the
// output shows, dst where it lands in the output. It fails when the code's check bits disagree,
// as they do for a wrong, blended or damaged frame.
func ReadIndex(rgb []byte, outW, outH int, dispW, dispH int, src, dst Rect) (int, error) {
	code := 0
	for c := 0; c < 16; c++ {
		col, row := c%4, c/4
		// The cell in display pixels, clipped to what the output shows.
		x0, x1 := max(float64(col*dispW)/4, float64(src.X)), min(float64((col+1)*dispW)/4, float64(src.X+src.W))
		y0, y1 := max(float64(row*dispH)/4, float64(src.Y)), min(float64((row+1)*dispH)/4, float64(src.Y+src.H))
		if x1-x0 < 1 || y1-y0 < 1 {
			return -1, fmt.Errorf("cell %d not visible", c)
		}
		// Its middle third, in output pixels.
		sx, sy := float64(dst.W)/float64(src.W), float64(dst.H)/float64(src.H)
		ox0 := float64(dst.X) + (x0+(x1-x0)/3-float64(src.X))*sx
		ox1 := float64(dst.X) + (x1-(x1-x0)/3-float64(src.X))*sx
		oy0 := float64(dst.Y) + (y0+(y1-y0)/3-float64(src.Y))*sy
		oy1 := float64(dst.Y) + (y1-(y1-y0)/3-float64(src.Y))*sy
		var sum, n float64
		for y := int(oy0); y <= int(oy1) && y < outH; y++ {
			for x := int(ox0); x <= int(ox1) && x < outW; x++ {
				p := (y*outW + x) * 3
				sum += 0.299*float64(rgb[p]) + 0.587*float64(rgb[p+1]) + 0.114*float64(rgb[p+2])
				n++
			}
		}
		if n == 0 {
			return -1, fmt.Errorf("cell %d too small to read", c)
		}
		if sum/n > 128 {
			code |= 1 << c
		}
	}
	idx, check := code&0xfff, code>>12
	if check != (idx*7+3)%16 {
		return -1, fmt.Errorf("code %#04x fails its check (index %d)", code, idx)
	}
	return idx, nil
}

// Full is the placement of an output that shows the whole picture over the whole output.
func Full(w, h int) Rect { return Rect{0, 0, w, h} }

// Megamind is the real footage Debian's opencv-doc package ships.
const Megamind = "/usr/share/doc/opencv-doc/examples/data/Megamind.avi"

// Transcode makes (once, cached outside the repository) an H.264 MP4 from real footage with
// Debian's ffmpeg CLI: ffmpegArgs are the encoding options, e.g. "-g 16 -vf scale=1280:720".
// It fails the test when the footage is not installed, naming the package that provides it.
func Transcode(tb testing.TB, source, ffmpegArgs string) string {
	tb.Helper()
	if _, err := os.Stat(source); err != nil {
		tb.Fatalf("%s is missing: install Debian's opencv-doc (apt-get install opencv-doc): %v", source, err)
	}
	sum := sha256.Sum256([]byte(source + "\x00" + ffmpegArgs))
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "vidfs", "testvideos")
	out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))+"-"+hex.EncodeToString(sum[:6])+".mp4")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tmp := out + ".tmp.mp4"
	args := append([]string{"-hide_banner", "-loglevel", "error", "-y", "-i", source, "-an", "-c:v", "libx264",
		"-preset", "veryfast", "-pix_fmt", "yuv420p"}, strings.Fields(ffmpegArgs)...)
	cmd := exec.Command("ffmpeg", append(args, tmp)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("transcoding %s (ffmpeg %s): %v\n%s", source, ffmpegArgs, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatal(err)
	}
	return out
}
