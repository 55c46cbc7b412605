// Package layout is the arithmetic of a mount: which samples each video yields, where each
// sample's bytes lie in clips.npy, clips.raw and the per-sample files, and what those files are
// called. It does no I/O.
package layout

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vidfs/vidfs/internal/npy"
)

// Spec says how videos are cut into samples and what a sample holds.
type Spec struct {
	Frames int // T: frames per sample
	Stride int // distance between a sample's frames
	// Step: a sample starts every Step frames (default Frames). Ignored when ClipsPerVideo > 0.
	Step int
	// ClipsPerVideo > 0 takes that many samples per video instead, evenly spaced from the first
	// possible start to the last.
	ClipsPerVideo int
	Height, Width int
	// PadShort keeps videos shorter than one sample as one sample that repeats their last frame;
	// otherwise they yield no sample.
	PadShort bool
	// FPS, when set, is a target frame rate: Frames, Stride and Step count frames at this rate,
	// a Video's Frames is its length at it (its duration times FPS), and every sample has a time
	// (Layout.Times). Unset (zero): the videos' own frames.
	FPS Rate
}

// Rate is a frame rate, Num/Den frames a second.
type Rate struct{ Num, Den int }

// Set tells whether the rate is given.
func (r Rate) Set() bool { return r != Rate{} }

// Seconds is how long frames frames last at the rate.
func (r Rate) Seconds(frames int) float64 { return float64(frames) * float64(r.Den) / float64(r.Num) }

// Span is how many frames of a video one sample covers.
func (s Spec) Span() int { return (s.Frames-1)*s.Stride + 1 }

// SampleBytes is the size of one sample: T x H x W x 3 bytes.
func (s Spec) SampleBytes() int64 {
	return int64(s.Frames) * int64(s.Height) * int64(s.Width) * 3
}

// Validate checks the spec's numbers.
func (s Spec) Validate() error {
	switch {
	case s.Frames < 1 || s.Frames > 4096:
		return fmt.Errorf("frames per sample %d: want 1 to 4096", s.Frames)
	case s.Stride < 1:
		return fmt.Errorf("stride %d: want at least 1", s.Stride)
	case s.Step < 0 || s.ClipsPerVideo < 0:
		return errors.New("step and clips per video cannot be negative")
	case s.Height < 1 || s.Width < 1 || s.Height > 16384 || s.Width > 16384:
		return fmt.Errorf("size %dx%d out of range", s.Height, s.Width)
	case s.FPS.Set() && (s.FPS.Num <= 0 || s.FPS.Den <= 0):
		return fmt.Errorf("frame rate %d/%d: want a positive rate", s.FPS.Num, s.FPS.Den)
	}
	return nil
}

// Count returns how many samples a video of n frames yields; pad reports that its single sample
// runs past the end (PadShort) and must repeat the last frame.
func (s Spec) Count(n int) (count int, pad bool) {
	if n <= 0 {
		return 0, false
	}
	last := n - s.Span() // last start that fits
	switch {
	case last < 0 && s.PadShort:
		return 1, true
	case last < 0:
		return 0, false
	case s.ClipsPerVideo > 0:
		return s.ClipsPerVideo, false
	}
	return last/s.step() + 1, false
}

// Start returns the first frame of sample k (0 <= k < Count(n)) of a video of n frames.
func (s Spec) Start(n, k int) int {
	last := n - s.Span()
	switch {
	case last < 0:
		return 0
	case s.ClipsPerVideo == 1:
		return last / 2
	case s.ClipsPerVideo > 1:
		return (k*last + (s.ClipsPerVideo-1)/2) / (s.ClipsPerVideo - 1)
	}
	return k * s.step()
}

func (s Spec) step() int {
	if s.Step <= 0 {
		return s.Frames
	}
	return s.Step
}

// Video is a source video as the layout needs it.
type Video struct {
	Path string // relative to SRC, with / separators
	// Frames is the video's length in frames: its own, or with Spec.FPS, at that rate.
	Frames int
	// Size and ModTime (nanoseconds since 1970) are the file's as it was probed: which version
	// of it the layout describes (0 when not known).
	Size, ModTime int64
}

// Sample is one training sample. Samples are not stored: Layout.Sample works one out from its
// index and the per-video sample counts.
type Sample struct {
	Video int  // index into Layout.Videos
	K     int  // the sample's number within its video
	Start int  // first frame
	Pad   bool // repeats the video's last frame past its end
}

// Layout is the sample table of a mount and everything derived from it.
type Layout struct {
	Spec   Spec
	Videos []Video
	// first[v] is the index of video v's first sample; first[len(Videos)] is the number of
	// samples.
	first []int
	// Classes are the class names (Classes: by default the first-level directories under SRC),
	// sorted; label i names Classes[i].
	Classes []string
	labels  []int // per video: index into Classes, or -1 for a video of no class
	// Directories under samples/: dir path ("" is samples/ itself) to its sorted entries.
	dirs      map[string][]DirEntry
	npyHeader []byte
}

// DirEntry is an entry of a directory under samples/: a folder of SRC or a video's folder.
type DirEntry struct {
	Name  string
	Video int // the video whose samples the folder holds, or -1 for a plain folder
}

// Classes says what class each video is of. The zero value is the folder rule: a video's class
// is its first-level folder under SRC, a video at the top of SRC has none, and the classes are
// the folders of the videos laid out.
type Classes struct {
	// Of, when set, names a video's class by its path instead (a labels file): ok false gives
	// the video no class (label -1).
	Of func(path string) (class string, ok bool)
	// Names, when set, lists every class (in any order; repeats are ignored), so that label
	// numbers do not depend on which videos are laid out: a class Of gives that is not among
	// them is an error. Unset: the classes Of gives the videos.
	Names []string
}

// folderClass is the folder rule: a video's first-level folder under SRC.
func folderClass(p string) (string, bool) {
	dir, _, ok := strings.Cut(p, "/")
	return dir, ok
}

// New builds the layout of videos (in any order) under spec, with the folder rule for classes.
// Videos with no sample (too short) stay listed in Videos but yield nothing.
func New(spec Spec, videos []Video) (*Layout, error) {
	return NewClassified(spec, videos, Classes{})
}

// NewClassified is New with the videos' classes as classes says.
func NewClassified(spec Spec, videos []Video, classes Classes) (*Layout, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	classOf := classes.Of
	if classOf == nil {
		classOf = folderClass
	}
	l := &Layout{Spec: spec, Videos: append([]Video(nil), videos...), dirs: map[string][]DirEntry{"": nil}}
	sort.Slice(l.Videos, func(i, j int) bool { return l.Videos[i].Path < l.Videos[j].Path })
	l.Classes = append([]string(nil), classes.Names...)
	for i, v := range l.Videos {
		if v.Path == "" || strings.HasPrefix(v.Path, "/") || path.Clean(v.Path) != v.Path || strings.HasPrefix(v.Path, "../") {
			return nil, fmt.Errorf("video path %q: want a clean path relative to the source directory", v.Path)
		}
		if i > 0 && l.Videos[i-1].Path == v.Path {
			return nil, fmt.Errorf("video %q listed twice", v.Path)
		}
		if c, ok := classOf(v.Path); ok && classes.Names == nil {
			l.Classes = append(l.Classes, c)
		}
	}
	slices.Sort(l.Classes)
	l.Classes = slices.Compact(l.Classes)
	if len(l.Classes) > 0 && l.Classes[0] == "" {
		return nil, errors.New("a class with an empty name")
	}

	l.first = make([]int, len(l.Videos)+1)
	l.labels = make([]int, len(l.Videos))
	n := 0
	for vi, v := range l.Videos {
		l.first[vi] = n
		count, _ := spec.Count(v.Frames)
		n += count
		l.labels[vi] = -1
		if c, ok := classOf(v.Path); ok {
			label, found := slices.BinarySearch(l.Classes, c)
			if !found {
				return nil, fmt.Errorf("video %q: class %q is not among the %d classes", v.Path, c, len(l.Classes))
			}
			l.labels[vi] = label
		}
		if count > 0 {
			l.addVideoDir(v.Path, vi)
		}
	}
	l.first[len(l.Videos)] = n
	for d := range l.dirs {
		sort.Slice(l.dirs[d], func(i, j int) bool { return l.dirs[d][i].Name < l.dirs[d][j].Name })
	}
	// The data of clips.npy starts on a 4 KiB boundary, so samples whose size is a multiple of
	// 4 KiB (most shapes) lie on page boundaries, as memory maps and direct I/O like.
	l.npyHeader = npy.Header{Descr: "|u1", Shape: []int{n, spec.Frames, spec.Height, spec.Width, 3}}.Encode(4096)
	return l, nil
}

// addVideoDir records samples/<p>/, video vi's folder, in its parent folder.
func (l *Layout) addVideoDir(p string, vi int) {
	parent := parentDir(p)
	l.addDir(parent)
	l.dirs[parent] = append(l.dirs[parent], DirEntry{Name: path.Base(p), Video: vi})
}

// addDir records samples/<d>/ and the folders above it, once.
func (l *Layout) addDir(d string) {
	if _, ok := l.dirs[d]; ok {
		return
	}
	l.dirs[d] = nil
	parent := parentDir(d)
	l.addDir(parent)
	l.dirs[parent] = append(l.dirs[parent], DirEntry{Name: path.Base(d), Video: -1})
}

func parentDir(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// Len is the number of samples.
func (l *Layout) Len() int { return l.first[len(l.Videos)] }

// Sample returns sample i (0 <= i < Len()), worked out from the per-video counts: a binary search
// over the videos, no per-sample table.
func (l *Layout) Sample(i int) Sample {
	v := sort.Search(len(l.Videos), func(v int) bool { return l.first[v+1] > i })
	n := l.Videos[v].Frames
	k := i - l.first[v]
	_, pad := l.Spec.Count(n)
	return Sample{Video: v, K: k, Start: l.Spec.Start(n, k), Pad: pad}
}

// VideoSamples returns the range [first, end) of video v's samples.
func (l *Layout) VideoSamples(v int) (first, end int) { return l.first[v], l.first[v+1] }

// Label returns the class index of video v (into Classes), or -1.
func (l *Layout) Label(v int) int { return l.labels[v] }

// Dir returns the entries of a directory under samples/ ("" for samples/ itself).
func (l *Layout) Dir(p string) ([]DirEntry, bool) {
	e, ok := l.dirs[p]
	return e, ok
}

// Dirs lists the folders under samples/ (not the videos' folders), sorted; "" is samples/.
func (l *Layout) Dirs() []string {
	ds := make([]string, 0, len(l.dirs))
	for d := range l.dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds
}

// Times returns the span of time sample i stands for, in seconds from its video's first frame,
// under Spec.FPS: from its first frame's instant to one frame interval of the sample (Stride
// frames at FPS) past its last, as PyTorchVideo's clip samplers count a clip's duration. Both
// are 0 without Spec.FPS.
func (l *Layout) Times(i int) (start, end float64) {
	sp := l.Spec
	if !sp.FPS.Set() {
		return 0, 0
	}
	s := l.Sample(i).Start
	return sp.FPS.Seconds(s), sp.FPS.Seconds(s + sp.Frames*sp.Stride)
}

// ParseSampleFile reads a per-sample file name, "<k>.raw" or "<k>.npy", in video v's folder.
func (l *Layout) ParseSampleFile(v int, name string) (sample int, npy bool, ok bool) {
	stem, ext, found := strings.Cut(name, ".")
	if !found || (ext != "raw" && ext != "npy") {
		return 0, false, false
	}
	k, err := strconv.Atoi(stem)
	if err != nil || strconv.Itoa(k) != stem {
		return 0, false, false
	}
	first, end := l.VideoSamples(v)
	if k < 0 || first+k >= end {
		return 0, false, false
	}
	return first + k, ext == "npy", true
}

// NpyHeader is the header of clips.npy, (N, T, H, W, 3) uint8, 4096 bytes long.
func (l *Layout) NpyHeader() []byte { return l.npyHeader }

// NpyHeader is the header of a .npy file holding one sample, (T, H, W, 3) uint8, padded to a
// multiple of align bytes.
func (s Spec) NpyHeader(align int) []byte {
	return npy.Header{Descr: "|u1", Shape: []int{s.Frames, s.Height, s.Width, 3}}.Encode(align)
}

// Piece is the part of one sample that a byte range of a file covers.
type Piece struct {
	Sample int   // -1 for header bytes
	Offset int64 // offset within the sample (or the header)
	Len    int64
}

// Pieces splits the byte range [off, off+n) of a file whose data (samples first..first+count-1,
// back to back) follows header bytes of length hdr, into per-sample pieces. The range is clipped
// to the file's end.
func (l *Layout) Pieces(hdr int64, first, count int, off, n int64) []Piece {
	size := hdr + int64(count)*l.Spec.SampleBytes()
	if off >= size || n <= 0 {
		return nil
	}
	end := min(off+n, size)
	var ps []Piece
	if off < hdr {
		m := min(end, hdr) - off
		ps = append(ps, Piece{Sample: -1, Offset: off, Len: m})
		off += m
	}
	S := l.Spec.SampleBytes()
	for off < end {
		i := (off - hdr) / S
		in := (off - hdr) % S
		m := min(end-off, S-in)
		ps = append(ps, Piece{Sample: first + int(i), Offset: in, Len: m})
		off += m
	}
	return ps
}
