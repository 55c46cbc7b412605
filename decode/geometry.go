package decode

import (
	"fmt"
	"strings"
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

var resizeNames = [...]string{Crop: "crop", Stretch: "stretch", Pad: "pad"}

func (r Resize) String() string {
	if int(r) < len(resizeNames) {
		return resizeNames[r]
	}
	return fmt.Sprintf("Resize(%d)", int(r))
}

// ParseResize reads "crop", "stretch" or "pad".
func ParseResize(s string) (Resize, error) {
	for i, n := range resizeNames {
		if s == n {
			return Resize(i), nil
		}
	}
	return 0, fmt.Errorf("resize mode %q: want crop, stretch or pad", s)
}

// MarshalText writes the mode's name.
func (r Resize) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a mode's name.
func (r *Resize) UnmarshalText(b []byte) (err error) { *r, err = ParseResize(string(b)); return err }

// Output is the shape every decoded frame is brought to: Height x Width RGB24.
type Output struct {
	Width, Height int
	Resize        Resize
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

// filterChain is the libavfilter description that turns a decoded frame (coded size, decoder
// pixel format) into the output: rotate upright, crop, scale (bilinear), pad, RGB24.
func filterChain(rotation, displayW, displayH int, o Output) string {
	var f []string
	switch rotation {
	case 90:
		f = append(f, "transpose=clock")
	case 180:
		f = append(f, "hflip", "vflip")
	case 270:
		f = append(f, "transpose=cclock")
	}
	src, dst := o.Placement(displayW, displayH)
	if src.W != displayW || src.H != displayH {
		f = append(f, fmt.Sprintf("crop=%d:%d:%d:%d:exact=1", src.W, src.H, src.X, src.Y))
	}
	f = append(f, fmt.Sprintf("scale=%d:%d:flags=bilinear", dst.W, dst.H), "format=rgb24")
	if dst.W != o.Width || dst.H != o.Height {
		f = append(f, fmt.Sprintf("pad=%d:%d:%d:%d:color=black", o.Width, o.Height, dst.X, dst.Y))
	}
	return strings.Join(f, ",")
}
