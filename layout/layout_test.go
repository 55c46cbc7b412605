package layout

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestStarts(t *testing.T) {
	for _, tc := range []struct {
		spec   Spec
		frames int
		starts []int
		pad    bool
	}{
		{Spec{Frames: 16, Stride: 1}, 100, []int{0, 16, 32, 48, 64, 80}, false},
		{Spec{Frames: 16, Stride: 1}, 96, []int{0, 16, 32, 48, 64, 80}, false},
		{Spec{Frames: 16, Stride: 1}, 95, []int{0, 16, 32, 48, 64}, false},
		{Spec{Frames: 4, Stride: 3, Step: 10}, 29, []int{0, 10}, false}, // span 10: last start 19
		{Spec{Frames: 4, Stride: 3, Step: 10}, 30, []int{0, 10, 20}, false},
		{Spec{Frames: 16, Stride: 2, ClipsPerVideo: 3}, 100, []int{0, 35, 69}, false},
		{Spec{Frames: 16, Stride: 2, ClipsPerVideo: 1}, 100, []int{34}, false},
		{Spec{Frames: 16, Stride: 1, ClipsPerVideo: 4}, 17, []int{0, 0, 1, 1}, false},
		{Spec{Frames: 16, Stride: 1}, 8, nil, false},
		{Spec{Frames: 16, Stride: 1, PadShort: true}, 8, []int{0}, true},
		{Spec{Frames: 16, Stride: 1, PadShort: true}, 16, []int{0}, false},
		{Spec{Frames: 16, Stride: 1, PadShort: true}, 0, nil, false},
	} {
		starts, pad := startsOf(tc.spec, tc.frames)
		if !reflect.DeepEqual(starts, tc.starts) || pad != tc.pad {
			t.Errorf("%+v on %d frames: got %v pad %v, want %v pad %v", tc.spec, tc.frames, starts, pad, tc.starts, tc.pad)
		}
	}
}

// startsOf returns the first frame of each sample of a video of n frames, and pad as Count does.
func startsOf(s Spec, n int) (starts []int, pad bool) {
	count, pad := s.Count(n)
	for k := range count {
		starts = append(starts, s.Start(n, k))
	}
	return starts, pad
}

func testLayout(t *testing.T) *Layout {
	t.Helper()
	l, err := New(Spec{Frames: 4, Stride: 2, Height: 8, Width: 6}, []Video{
		{Path: "walk/b.mp4", Frames: 20},      // span 7, step 4: starts 0 4 8 12
		{Path: "walk/a.mp4", Frames: 7},       // 0
		{Path: "run/x/deep.mkv", Frames: 10},  // 0
		{Path: "top.avi", Frames: 11},         // 0 4
		{Path: "run/short.mp4", Frames: 5},    // none
		{Path: "walk/more/c.mp4", Frames: 15}, // 0 4 8
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLayout(t *testing.T) {
	l := testLayout(t)
	if got := strings.Join(l.Classes, ","); got != "run,walk" {
		t.Errorf("classes %s", got)
	}
	var names []string
	for i := range l.Len() {
		sm := l.Sample(i)
		names = append(names, fmt.Sprintf("%s/%d", l.Videos[sm.Video].Path, sm.K))
	}
	want := "run/x/deep.mkv/0 top.avi/0 top.avi/1 walk/a.mp4/0 walk/b.mp4/0 walk/b.mp4/1 walk/b.mp4/2 walk/b.mp4/3 walk/more/c.mp4/0 walk/more/c.mp4/1 walk/more/c.mp4/2"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("samples:\n got %s\nwant %s", got, want)
	}
	// Videos are sorted: run/short.mp4, run/x/deep.mkv, top.avi, walk/a.mp4, walk/b.mp4, walk/more/c.mp4
	if l.Label(0) != 0 || l.Label(2) != -1 || l.Label(5) != 1 {
		t.Errorf("labels %d %d %d", l.Label(0), l.Label(2), l.Label(5))
	}
	if f, e := l.VideoSamples(4); f != 4 || e != 8 || l.Sample(6).Start != 8 || l.Sample(6).K != 2 {
		t.Errorf("walk/b.mp4 samples [%d,%d), sample 6 = %+v", f, e, l.Sample(6))
	}
	dirs := func(p string) string {
		e, ok := l.Dir(p)
		if !ok {
			return "missing"
		}
		return fmt.Sprint(e)
	}
	for p, want := range map[string]string{
		"":          "[{run -1} {top.avi 2} {walk -1}]",
		"run":       "[{x -1}]", // run/short.mp4 has no samples
		"run/x":     "[{deep.mkv 1}]",
		"walk":      "[{a.mp4 3} {b.mp4 4} {more -1}]",
		"walk/more": "[{c.mp4 5}]",
		"nope":      "missing",
	} {
		if got := dirs(p); got != want {
			t.Errorf("Dir(%q) = %s, want %s", p, got, want)
		}
	}
	for name, want := range map[string]string{"2.raw": "6 false true", "3.npy": "7 true true", "4.raw": "0 false false", "02.raw": "0 false false", "1.txt": "0 false false", "-1.raw": "0 false false"} {
		s, npy, ok := l.ParseSampleFile(4, name)
		if got := fmt.Sprint(s, npy, ok); got != want {
			t.Errorf("ParseSampleFile(b.mp4, %s) = %s, want %s", name, got, want)
		}
	}
}

func TestPieces(t *testing.T) {
	l := testLayout(t) // sample size 4*8*6*3 = 576
	S := l.Spec.SampleBytes()
	for _, tc := range []struct {
		hdr          int64
		first, count int
		off, n       int64
		want         string
	}{
		{0, 0, 11, 0, 10, "[{0 0 10}]"},
		{0, 0, 11, 570, 20, "[{0 570 6} {1 0 14}]"},
		{0, 0, 11, S*10 + 500, 200, "[{10 500 76}]"}, // clipped at the end
		{0, 0, 11, S * 11, 10, "[]"},
		{4096, 0, 11, 4000, 100, "[{-1 4000 96} {0 0 4}]"},
		{4096, 0, 11, 0, 4096 + 2*S + 1, "[{-1 0 4096} {0 0 576} {1 0 576} {2 0 1}]"},
		{128, 6, 1, 100, 1000, "[{-1 100 28} {6 0 576}]"}, // a per-sample .npy file
	} {
		if got := fmt.Sprint(l.Pieces(tc.hdr, tc.first, tc.count, tc.off, tc.n)); got != tc.want && !(got == "[]" && tc.want == "[]") {
			t.Errorf("Pieces(%d, %d, %d, %d, %d) = %s, want %s", tc.hdr, tc.first, tc.count, tc.off, tc.n, got, tc.want)
		}
	}
}

func TestNpyHeaders(t *testing.T) {
	l := testLayout(t)
	for _, tc := range []struct {
		h     []byte
		size  int
		shape string
	}{
		{l.NpyHeader(), 4096, "(11, 4, 8, 6, 3)"},
		{l.Spec.NpyHeader(64), 64 * ((10 + len("{'descr': '|u1', 'fortran_order': False, 'shape': (4, 8, 6, 3), }") + 1 + 63) / 64), "(4, 8, 6, 3)"},
	} {
		h := tc.h
		if len(h) != tc.size || string(h[:8]) != "\x93NUMPY\x01\x00" || int(binary.LittleEndian.Uint16(h[8:]))+10 != len(h) || h[len(h)-1] != '\n' {
			t.Errorf("header %q: bad framing (length %d, want %d)", h, len(h), tc.size)
		}
		if !strings.Contains(string(h), "'shape': "+tc.shape+", }") || !strings.Contains(string(h), "'descr': '|u1'") {
			t.Errorf("header %q lacks shape %s", h, tc.shape)
		}
	}
}

func TestNewRejects(t *testing.T) {
	spec := Spec{Frames: 4, Stride: 1, Height: 8, Width: 8}
	for _, vs := range [][]Video{{{Path: "/abs.mp4", Frames: 10}}, {{Path: "a/../b.mp4", Frames: 10}}, {{Path: "a.mp4", Frames: 10}, {Path: "a.mp4", Frames: 12}}, {{Path: "", Frames: 3}}} {
		if _, err := New(spec, vs); err == nil {
			t.Errorf("New(%v) accepted", vs)
		}
	}
	if _, err := New(Spec{Frames: 0, Stride: 1, Height: 8, Width: 8}, nil); err == nil {
		t.Error("zero frames accepted")
	}
}

// TestTimes: under a target rate, a sample stands for its first instant to one sample interval
// past its last; without one, samples have no time, and a rate must be positive.
func TestTimes(t *testing.T) {
	l, err := New(Spec{Frames: 4, Stride: 2, Step: 3, Height: 8, Width: 8, FPS: Rate{15, 1}}, []Video{{Path: "a.mp4", Frames: 12}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range l.Len() {
		s, e := l.Times(i)
		got = append(got, fmt.Sprintf("%d:%.4f-%.4f", l.Sample(i).Start, s, e))
	}
	if want := "0:0.0000-0.5333 3:0.2000-0.7333"; strings.Join(got, " ") != want { // span 7: starts 0, 3
		t.Errorf("times %v, want %s", got, want)
	}
	if s, e := testLayout(t).Times(0); s != 0 || e != 0 {
		t.Errorf("without a rate: %v-%v", s, e)
	}
	if got := (Rate{30000, 1001}).Seconds(30); got != 1.001 {
		t.Errorf("30 frames at 30000/1001: %v s", got)
	}
	for _, r := range []Rate{{0, 1}, {15, 0}, {-15, 1}} {
		if err := (Spec{Frames: 1, Stride: 1, Height: 1, Width: 1, FPS: r}).Validate(); err == nil {
			t.Errorf("rate %v accepted", r)
		}
	}
}

// TestSampleArithmetic checks Layout.Sample, worked out from per-video counts, against the starts
// startsOf lists, in every way a spec cuts videos, and that a layout's memory does not grow with
// its samples: the same videos cut into 1,000 times as many samples cost the same.
func TestSampleArithmetic(t *testing.T) {
	frames := []int{0, 5, 16, 17, 40, 100, 301, 1000}
	for _, spec := range []Spec{
		{Frames: 16, Stride: 1}, {Frames: 4, Stride: 3, Step: 10}, {Frames: 16, Stride: 2, ClipsPerVideo: 3},
		{Frames: 16, Stride: 2, ClipsPerVideo: 1}, {Frames: 16, Stride: 1, ClipsPerVideo: 4},
		{Frames: 16, Stride: 1, PadShort: true}, {Frames: 1, Stride: 1, Step: 1},
	} {
		spec.Height, spec.Width = 2, 2
		var videos []Video
		for i, n := range frames {
			videos = append(videos, Video{Path: fmt.Sprintf("c/%02d.mp4", i), Frames: n})
		}
		l, err := New(spec, videos)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for v, n := range frames {
			starts, pad := startsOf(spec, n)
			for k, s := range starts {
				if got, want := l.Sample(i), (Sample{Video: v, K: k, Start: s, Pad: pad}); got != want {
					t.Errorf("%+v: sample %d = %+v, want %+v", spec, i, got, want)
				}
				i++
			}
		}
		if l.Len() != i {
			t.Errorf("%+v: %d samples, want %d", spec, l.Len(), i)
		}
	}

	heap := func(frames int) uint64 {
		videos := make([]Video, 2000)
		for i := range videos {
			videos[i] = Video{Path: fmt.Sprintf("class%02d/v%05d.mp4", i%40, i), Frames: frames}
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, err := New(Spec{Frames: 1, Stride: 1, Height: 2, Width: 2}, videos)
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(l)
		return after.TotalAlloc - before.TotalAlloc
	}
	few, many := heap(2), heap(2000)
	if many > few+few/4 {
		t.Errorf("2,000 videos of 2 samples allocate %d B; of 2,000 samples %d B: the layout grows with its samples", few, many)
	}
}

// TestClassesGiven: classes named per video (a labels file) replace the folder rule: the labels
// are the names' places among the classes, a video of no class is -1, the classes given are all
// listed (those of no video too, so that labels do not depend on which videos are laid out), and
// the folders under samples/ and the samples are those of the folder rule.
func TestClassesGiven(t *testing.T) {
	spec := Spec{Frames: 4, Stride: 2, Height: 8, Width: 6}
	videos := []Video{
		{Path: "walk/b.mp4", Frames: 20}, {Path: "walk/a.mp4", Frames: 7}, {Path: "top.avi", Frames: 11},
		{Path: "run/short.mp4", Frames: 5}, {Path: "run/x/deep.mkv", Frames: 10},
	}
	names := map[string]string{"walk/b.mp4": "pour", "walk/a.mp4": "cut", "top.avi": "pour", "run/x/deep.mkv": "stir"}
	of := func(p string) (string, bool) { c, ok := names[p]; return c, ok }
	folders, err := New(spec, videos)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		given   []string
		classes string
		labels  []int // per video, sorted by path: run/short.mp4 run/x/deep.mkv top.avi walk/a.mp4 walk/b.mp4
	}{
		{nil, "cut,pour,stir", []int{-1, 2, 1, 0, 1}},
		{[]string{"stir", "wash", "pour", "cut", "pour"}, "cut,pour,stir,wash", []int{-1, 2, 1, 0, 1}},
	} {
		l, err := NewClassified(spec, videos, Classes{Of: of, Names: tc.given})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(l.Classes, ","); got != tc.classes {
			t.Errorf("given %v: classes %s, want %s", tc.given, got, tc.classes)
		}
		var labels []int
		for v := range l.Videos {
			labels = append(labels, l.Label(v))
		}
		if !reflect.DeepEqual(labels, tc.labels) {
			t.Errorf("given %v: labels %v, want %v", tc.given, labels, tc.labels)
		}
		if l.Len() != folders.Len() || !reflect.DeepEqual(l.Dirs(), folders.Dirs()) || !reflect.DeepEqual(l.Videos, folders.Videos) {
			t.Errorf("given %v: samples or folders differ from the folder rule's: %d samples, folders %v", tc.given, l.Len(), l.Dirs())
		}
	}
	for _, tc := range []struct {
		given []string
		want  string
	}{
		{[]string{"cut", "pour"}, `class "stir" is not among the 2 classes`},
		{[]string{"cut", "pour", "stir", ""}, "empty name"},
	} {
		if _, err := NewClassified(spec, videos, Classes{Of: of, Names: tc.given}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("given %q: %v, want an error saying %q", tc.given, err, tc.want)
		}
	}
	empty := func(string) (string, bool) { return "", true }
	if _, err := NewClassified(spec, videos, Classes{Of: empty}); err == nil {
		t.Error("an empty class name accepted")
	}
}
