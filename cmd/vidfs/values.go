package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/load"
)

// sizeValue is a --size flag: HEIGHTxWIDTH, in the order of the array's shape.
type sizeValue struct{ h, w int }

func (s *sizeValue) String() string { return fmt.Sprintf("%dx%d", s.h, s.w) }
func (s *sizeValue) Type() string   { return "HxW" }
func (s *sizeValue) Set(v string) error {
	hs, ws, ok := strings.Cut(strings.ToLower(v), "x")
	h, err1 := strconv.Atoi(hs)
	w, err2 := strconv.Atoi(ws)
	if !ok || err1 != nil || err2 != nil || h <= 0 || w <= 0 || h > 16384 || w > 16384 {
		return fmt.Errorf("%q: want HEIGHTxWIDTH in pixels, e.g. 224x224", v)
	}
	s.h, s.w = h, w
	return nil
}

// resizeValue is a --resize flag.
type resizeValue struct{ r decode.Resize }

func (r *resizeValue) String() string { return r.r.String() }
func (r *resizeValue) Type() string   { return "MODE" }
func (r *resizeValue) Set(v string) (err error) {
	r.r, err = decode.ParseResize(v)
	return err
}

// codecValue is a --cache-disk-codec flag: auto (the zero codec, which fs chooses by), none, lz4
// or zstd.
type codecValue struct{ c diskstore.Codec }

func (c *codecValue) String() string {
	if c.c == 0 {
		return "auto"
	}
	return c.c.String()
}
func (c *codecValue) Type() string { return "auto|none|lz4|zstd|huff" }
func (c *codecValue) Set(v string) (err error) {
	if v == "auto" {
		c.c = 0
		return nil
	}
	c.c, err = diskstore.ParseCodec(v)
	return err
}

// keepValue is a --cache-keep flag: auto, samples or copy (frames, its name before, taken too).
type keepValue struct{ k load.Keep }

func (k *keepValue) String() string { return k.k.String() }
func (k *keepValue) Type() string   { return "auto|samples|copy" }
func (k *keepValue) Set(v string) (err error) {
	k.k, err = load.ParseKeep(v)
	return err
}

// fillValue is a --copy-fill flag: auto, clips or videos.
type fillValue struct{ f load.Fill }

func (f *fillValue) String() string { return f.f.String() }
func (f *fillValue) Type() string   { return "auto|clips|videos" }
func (f *fillValue) Set(v string) (err error) {
	f.f, err = load.ParseFill(v)
	return err
}

// decodeValue is a --decode flag: exact or fast.
type decodeValue struct{ fast bool }

func (d *decodeValue) String() string {
	if d.fast {
		return "fast"
	}
	return "exact"
}
func (d *decodeValue) Type() string { return "exact|fast" }
func (d *decodeValue) Set(v string) error {
	switch v {
	case "exact", "fast":
		d.fast = v == "fast"
		return nil
	}
	return fmt.Errorf("%q: want exact or fast", v)
}

// hwValue is an --hwaccel flag.
type hwValue struct{ h decode.HWAccel }

func (h *hwValue) String() string { return h.h.String() }
func (h *hwValue) Type() string   { return "auto|cuda|none" }
func (h *hwValue) Set(v string) (err error) {
	h.h, err = decode.ParseHWAccel(v)
	return err
}

// rateValue is an --fps flag: a frame rate such as 15, 29.97 or 30000/1001; unset by default.
type rateValue struct{ r decode.Rational }

func (r *rateValue) String() string {
	if !r.r.Valid() {
		return ""
	}
	return r.r.FPSString()
}
func (r *rateValue) Type() string { return "F" }
func (r *rateValue) Set(v string) (err error) {
	r.r, err = decode.ParseRate(v)
	return err
}

// fpsHelp explains --fps, for mount, verify and clip.
const fpsHelp = "sample in time: T frames STRIDE/F seconds apart, each the frame shown at that instant (by its timestamp; by the average frame rate where the container has none), from the video's first frame; --step, --clips-per-video (and clip's --start) count frames at F. E.g. 15, 29.97, 30000/1001 (default: the videos' own frames)"

// bytesValue is a byte count with an optional unit: 512MiB, 4GiB, 2G (= GiB), 1000000.
type bytesValue struct{ n int64 }

func (b *bytesValue) String() string {
	if b.n == 0 {
		return "" // not set: the help says what the default is
	}
	return formatBytes(b.n)
}
func (b *bytesValue) Type() string { return "BYTES" }
func (b *bytesValue) Set(v string) error {
	n, err := parseBytes(v)
	if err != nil {
		return err
	}
	b.n = n
	return nil
}

// parseBytes reads a size flag. A bare unit letter is binary, as the flags' help and docs have
// always written it: 8G and 8g are 8GiB, 512M is 512MiB, 1.5T is 1.5TiB; 8GiB is 8GiB and 100GB
// is 100e9 bytes. go-humanize's ParseBytes is not used because it reads the bare letters as SI
// (8G = 8e9 bytes, 7% less than today's 8G; 512M = 512e6; 1.5T = 1.5e12): adopting it would shrink
// every --cache-mem 8G already written.
func parseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kb": 1e3, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1e6, "mib": 1 << 20,
		"g": 1 << 30, "gb": 1e9, "gib": 1 << 30,
		"t": 1 << 40, "tb": 1e12, "tib": 1 << 40,
	}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || f < 0 {
		return 0, fmt.Errorf("%q: want a size such as 512MiB or 4GiB", v)
	}
	return int64(f * mult), nil
}

// formatBytes writes a byte count in binary units, to one decimal: 4GiB, 255.8MiB, 512B.
func formatBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m {
			return strings.TrimSuffix(strconv.FormatFloat(float64(n)/float64(u.m), 'f', 1, 64), ".0") + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
