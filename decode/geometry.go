package decode

import (
	"fmt"
	"math"
	"strings"

	"github.com/vidfs/vidfs/internal/enum"
)

// Resize says how a frame is fitted to the output size.
type Resize int

const (
	// Crop scales the short side to fit and cuts the long side's overflow equally from both
	// ends (the usual training transform; no distortion, loses the edges).
	Crop Resize = iota
	// Stretch scales each side independently to fit (keeps everything, distorts the aspect ratio).
	Stretch
	// Pad scales the long side to fit and fills the rest with black equally on both sides.
	Pad
)

var resizeNames = []string{Crop: "crop", Stretch: "stretch", Pad: "pad"}

func (r Resize) String() string { return enum.Name(resizeNames, "Resize", r) }

// ParseResize reads "crop", "stretch" or "pad".
func ParseResize(s string) (Resize, error) { return enum.Parse[Resize](resizeNames, "resize mode", s) }

// MarshalText writes the mode's name.
func (r Resize) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a mode's name.
func (r *Resize) UnmarshalText(b []byte) (err error) { *r, err = ParseResize(string(b)); return err }

// OutputVersion changes whenever the bytes DecodeClip writes for the same video, clip and
// Output change (a new scaling path, another frame numbering): stores of decoded samples kept
// across runs, such as the disk tier, include it in their keys, with FFmpegVersion. 2: a clip at
// a target rate shows, at an instant halfway between two frames of a video whose timestamps are
// exact, the earlier frame (it showed the later), and its length at that rate counts the
// instants in the video's last half tick; a video timed by its rate whose clock ticks once a
// frame is timed at that rate rather than its average frame rate. 3: packets a container marks to
// be discarded (an MP4 edit list's) are decoded, as the ffmpeg CLI decodes them, so frames shown
// that refer to them are no longer concealed; and after a seek, a keyframe's packet is told from
// others of the same size by its bytes (program streams numbered frames from the wrong group of
// pictures).
const OutputVersion = 3

// Output is the shape every decoded frame is brought to: Height x Width RGB24.
type Output struct {
	Width, Height int
	Resize        Resize
	// Fast allows shortcuts that are not bit-exact: the decoder skips the in-loop deblocking
	// filter (H.264, HEVC; VP9 and MPEG-4 ignore it), and frames are scaled with swscale's
	// area filter, cheaper than bilinear when shrinking. The frames that come out are the same;
	// their pixels differ slightly (docs/usage.md has the measured speed and PSNR; swscale's
	// fast_bilinear and neighbor filters were faster but 31 and 36 dB from exact).
	Fast bool
}

// Key names the output exactly, as text: everything in it that changes the bytes decoded, for
// the keys of stores of decoded samples.
func (o Output) Key() string {
	k := fmt.Sprintf("%dx%d %s", o.Width, o.Height, o.Resize)
	if o.Fast {
		k += " fast"
	}
	return k
}

// FrameBytes is the size of one output frame.
func (o Output) FrameBytes() int { return o.Width * o.Height * 3 }

func (o Output) validate() error {
	if o.Width <= 0 || o.Height <= 0 || o.Width > 16384 || o.Height > 16384 {
		return fmt.Errorf("output size %dx%d out of range", o.Width, o.Height)
	}
	if o.Resize < Crop || o.Resize > Pad {
		return fmt.Errorf("unknown resize mode %d", o.Resize)
	}
	return nil
}

// Rect is a rectangle in pixels.
type Rect struct{ X, Y, W, H int }

// Placement says which part of the displayed frame an output shows (Src, in display pixels)
// and where in the output it lands (Dst, in output pixels; the rest is black padding).
func (o Output) Placement(displayW, displayH int) (src, dst Rect) {
	src = Rect{0, 0, displayW, displayH}
	dst = Rect{0, 0, o.Width, o.Height}
	wider := displayW*o.Height > displayH*o.Width // source aspect ratio wider than the output's
	switch o.Resize {
	case Crop:
		if wider {
			src.W = max(1, roundDiv(displayH*o.Width, o.Height))
			src.X = (displayW - src.W) / 2
		} else {
			src.H = max(1, roundDiv(displayW*o.Height, o.Width))
			src.Y = (displayH - src.H) / 2
		}
	case Pad:
		if wider {
			dst.H = max(1, roundDiv(displayH*o.Width, displayW))
			dst.Y = (o.Height - dst.H) / 2
		} else {
			dst.W = max(1, roundDiv(displayW*o.Height, displayH))
			dst.X = (o.Width - dst.W) / 2
		}
	}
	return src, dst
}

func roundDiv(a, b int) int { return (a + b/2) / b }

// orientation says how the ffmpeg CLI turns frames upright for a display matrix whose clockwise
// rotation is theta degrees and whose entries 0, 3 and 4 (16.16 fixed point) are m0, m3 and m4:
// it turns them by rotation degrees clockwise, then mirrors them left to right if mirror is set.
// The CLI's filters per angle (transpose=clock or cclock_flip at 90 degrees, hflip and vflip at
// 180, transpose=cclock or clock_flip at 270, vflip at 0, chosen by the signs of m0, m3 and m4)
// come out as these: cclock_flip is clock then a mirror, clock_flip is cclock then a mirror,
// vflip is a half turn then a mirror. odd is set for an angle that is not a multiple of 90
// degrees, which the CLI turns by exactly; it is rounded here.
func orientation(theta float64, m0, m3, m4 int32) (rotation int, mirror, odd bool) {
	if math.IsNaN(theta) {
		return 0, false, true
	}
	theta = math.Round(theta)
	theta -= 360 * math.Floor(theta/360+0.9/360)
	near := func(a float64) bool { return math.Abs(theta-a) < 1 }
	switch {
	case near(90):
		return 90, m3 > 0, false
	case near(180):
		switch hflip, vflip := m0 < 0, m4 < 0; {
		case hflip && vflip:
			return 180, false, false
		case hflip:
			return 0, true, false
		case vflip:
			return 180, true, false
		default:
			return 0, false, false
		}
	case near(270):
		return 270, m3 < 0, false
	case near(0) || near(360):
		if m4 < 0 {
			return 180, true, false
		}
		return 0, false, false
	}
	r := int(math.Round(theta/90)) * 90
	return ((r % 360) + 360) % 360, false, true
}

// planarVia is the 8-bit planar YUV format a frame in pixFmt is scaled in: its own chroma
// resolution (4:2:0, 4:2:2 or 4:4:4; finer, for layouts swscale has no fast path for), so that
// no colour detail is lost before RGB, and full range kept for full-range (yuvj) sources.
func planarVia(pixFmt string) string {
	via := "yuv420p"
	switch {
	case strings.Contains(pixFmt, "422") || strings.HasPrefix(pixFmt, "nv16") || strings.HasPrefix(pixFmt, "nv20") ||
		strings.HasPrefix(pixFmt, "yuyv") || strings.HasPrefix(pixFmt, "uyvy") || strings.HasPrefix(pixFmt, "yvyu"):
		via = "yuv422p"
	case strings.Contains(pixFmt, "444") || strings.Contains(pixFmt, "440") || strings.Contains(pixFmt, "411") ||
		strings.HasPrefix(pixFmt, "nv24") || strings.HasPrefix(pixFmt, "nv42"):
		via = "yuv444p"
	}
	if strings.HasPrefix(pixFmt, "yuvj") {
		via = strings.Replace(via, "yuv", "yuvj", 1) // full range: keep all 256 levels
	}
	return via
}

// filterChain is the libavfilter description that turns a decoded frame of codedW x codedH in
// pixel format pixFmt into the output: crop, scale (bilinear; area when Fast), turn upright (rotation degrees
// clockwise, then mirrored left to right if mirror is set), pad, RGB24. Cropping and scaling
// come first, on the coded picture, so that turning it moves few pixels. YUV frames are scaled in
// YUV 4:2:0 and then converted to RGB24 unscaled: both steps have SIMD code in swscale, which
// scaling straight to RGB24 lacks (2.7 times faster, measured).
func filterChain(rotation int, mirror bool, codedW, codedH int, pixFmt string, o Output) string {
	dispW, dispH := codedW, codedH
	if rotation == 90 || rotation == 270 {
		dispW, dispH = codedH, codedW
	}
	src, dst := o.Placement(dispW, dispH)
	if mirror {
		src.X = dispW - src.X - src.W // the same part of the picture before the mirror
	}
	// The crop rectangle in coded pixels, and the scaled size before rotation.
	crop, sw, sh := src, dst.W, dst.H
	switch rotation {
	case 90: // shown turned clockwise: display (x, y) is coded (y, codedH-1-x)
		crop = Rect{src.Y, codedH - src.X - src.W, src.H, src.W}
		sw, sh = dst.H, dst.W
	case 180:
		crop = Rect{codedW - src.X - src.W, codedH - src.Y - src.H, src.W, src.H}
	case 270: // shown turned counter-clockwise: display (x, y) is coded (codedW-1-y, x)
		crop = Rect{codedW - src.Y - src.H, src.X, src.H, src.W}
		sw, sh = dst.H, dst.W
	}
	var f []string
	if crop.W != codedW || crop.H != codedH {
		f = append(f, fmt.Sprintf("crop=%d:%d:%d:%d:exact=1", crop.W, crop.H, crop.X, crop.Y))
	}
	yuv := strings.HasPrefix(pixFmt, "yuv") || strings.HasPrefix(pixFmt, "nv") || strings.HasPrefix(pixFmt, "p01")
	if yuv {
		flags := "bilinear"
		if o.Fast {
			flags = "area"
		}
		f = append(f, fmt.Sprintf("scale=%d:%d:flags=%s", sw, sh, flags), "format="+planarVia(pixFmt))
	}
	switch rotation {
	case 90:
		f = append(f, "transpose=clock")
	case 180:
		f = append(f, "hflip", "vflip")
	case 270:
		f = append(f, "transpose=cclock")
	}
	if mirror {
		f = append(f, "hflip")
	}
	if yuv {
		f = append(f, "scale=flags=bilinear", "format=rgb24")
	} else {
		f = append(f, fmt.Sprintf("scale=%d:%d:flags=bilinear", dst.W, dst.H), "format=rgb24")
	}
	if dst.W != o.Width || dst.H != o.Height {
		f = append(f, fmt.Sprintf("pad=%d:%d:%d:%d:color=black", o.Width, o.Height, dst.X, dst.Y))
	}
	return strings.Join(f, ",")
}
