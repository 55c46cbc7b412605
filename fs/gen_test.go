package fs

import (
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vidfs/vidfs/internal/npy"
	"github.com/vidfs/vidfs/layout"
)

// indexCSVWhole is index.csv as vidfs built it before it streamed it: every row at once, one
// sample after another from lay.Sample. The streamed file must equal it byte for byte.
func indexCSVWhole(lay *layout.Layout) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	timed := lay.Spec.FPS.Set()
	head := []string{"index", "path", "video", "start", "stride", "label", "class"}
	if timed {
		head = append(head, "start_time", "end_time")
	}
	w.Write(head)
	for i := range lay.Len() {
		s := lay.Sample(i)
		v := lay.Videos[s.Video]
		label, class := lay.Label(s.Video), ""
		if label >= 0 {
			class = lay.Classes[label]
		}
		row := []string{strconv.Itoa(i), "samples/" + sampleName(lay, i) + ".npy", v.Path, strconv.Itoa(s.Start),
			strconv.Itoa(lay.Spec.Stride), strconv.Itoa(label), class}
		if timed {
			start, end := lay.Times(i)
			row = append(row, strconv.FormatFloat(start, 'f', 6, 64), strconv.FormatFloat(end, 'f', 6, 64))
		}
		w.Write(row)
	}
	w.Flush()
	return b.Bytes()
}

// readGen reads n bytes of g at off as genFile.Read does: clipped to its size.
func readGen(t *testing.T, g generator, off int64, n int) []byte {
	t.Helper()
	if off >= g.size() {
		return nil
	}
	dst := make([]byte, min(int64(n), g.size()-off))
	if err := g.readAt(dst, off); err != nil {
		t.Fatalf("read of %d bytes at %d: %v", n, off, err)
	}
	return dst
}

// genLayouts are layouts whose index.csv rows differ in every way a row's length can: the
// testdata source as the mount tests lay it out, with and without --fps, --clips-per-video and
// short videos padded or left out; videos with no sample; videos at the top (no class); paths
// that encoding/csv quotes (a comma, a quote, a leading space, a line break) or that are not
// ASCII; numbers and times that cross a power of ten.
func genLayouts(t *testing.T) map[string]*layout.Layout {
	testdata := []layout.Video{{Path: "jump/gop250.mp4", Frames: 300}, {Path: "run/vfr.mkv", Frames: 97}, {Path: "swim/short8.mp4", Frames: 8},
		{Path: "walk/gop16.mp4", Frames: 120}, {Path: "walk/ntsc.mp4", Frames: 90}, {Path: "top.mp4", Frames: 45}, {Path: "walk/empty.mp4", Frames: 0}}
	odd := []layout.Video{{Path: "a,b/one.mp4", Frames: 1001}, {Path: `q"uote/"two".mp4`, Frames: 99}, {Path: " lead/ x.mp4", Frames: 10},
		{Path: "é/ü.mp4", Frames: 12}, {Path: "nl\nx/a.mp4", Frames: 9}, {Path: "cr\r/b.mp4", Frames: 3}, {Path: `\./c.mp4`, Frames: 20},
		{Path: "tab\t/d.mp4", Frames: 30}, {Path: "\u00a0nbsp/e.mp4", Frames: 11}, {Path: "z.mp4", Frames: 1010}}
	specs := map[string]layout.Spec{
		"frames":        {Frames: 4, Stride: 2, Step: 4, Height: 32, Width: 32, PadShort: true},
		"step1":         {Frames: 2, Stride: 1, Step: 1, Height: 8, Width: 8},
		"clips":         {Frames: 8, Stride: 3, ClipsPerVideo: 7, Height: 8, Width: 8, PadShort: true},
		"fps15":         {Frames: 8, Stride: 1, Step: 3, Height: 8, Width: 8, PadShort: true, FPS: layout.Rate{Num: 15, Den: 1}},
		"fps29.97":      {Frames: 3, Stride: 7, Step: 1, Height: 8, Width: 8, FPS: layout.Rate{Num: 30000, Den: 1001}},
		"fps0.1 clips3": {Frames: 2, Stride: 1, ClipsPerVideo: 3, Height: 8, Width: 8, PadShort: true, FPS: layout.Rate{Num: 1, Den: 10}},
	}
	out := map[string]*layout.Layout{}
	for name, sp := range specs {
		for vname, vs := range map[string][]layout.Video{"testdata": testdata, "odd": odd} {
			lay, err := layout.New(sp, vs)
			if err != nil {
				t.Fatal(err)
			}
			out[vname+" "+name] = lay
		}
	}
	return out
}

// TestIndexCSVSameBytes: index.csv, made as it is read, is byte for byte what the whole-file
// builder made, its size included, read whole or in pieces at any offset.
func TestIndexCSVSameBytes(t *testing.T) {
	for name, lay := range genLayouts(t) {
		want := indexCSVWhole(lay)
		x := newIndexCSV(lay)
		if x.size() != int64(len(want)) {
			t.Errorf("%s: size %d, want %d", name, x.size(), len(want))
			continue
		}
		if got := readGen(t, x, 0, len(want)); !bytes.Equal(got, want) {
			t.Errorf("%s: whole file differs:\n%s\nwant\n%s", name, got, want)
			continue
		}
		for _, n := range []int{1, 5, 97, 4096} {
			for off := 0; off < len(want); off += max(1, n/3, len(want)/3001) { // about 3,000 reads a size
				if got, w := readGen(t, x, int64(off), n), want[off:min(len(want), off+n)]; !bytes.Equal(got, w) {
					t.Fatalf("%s: %d bytes at %d: %q, want %q", name, n, off, got, w)
				}
			}
		}
	}
}

// TestIndexCSVReadsMakeFewRows: on a layout of 4 million samples, a 4 KiB read of index.csv
// makes only the rows it covers, at its start, in its middle and at its end; the file's size is
// worked out without making any row.
func TestIndexCSVReadsMakeFewRows(t *testing.T) {
	videos := make([]layout.Video, 2000)
	for v := range videos {
		videos[v] = layout.Video{Path: "class" + strconv.Itoa(v%400) + "/v" + strconv.Itoa(v) + ".mp4", Frames: 2000}
	}
	lay, err := layout.New(layout.Spec{Frames: 1, Stride: 1, Step: 1, Height: 8, Width: 8}, videos)
	if err != nil {
		t.Fatal(err)
	}
	if lay.Len() != 4_000_000 {
		t.Fatalf("%d samples", lay.Len())
	}
	x := newIndexCSV(lay)
	size := x.size()
	if made := x.made.Load(); made != 0 {
		t.Fatalf("working out the size (%d bytes) made %d rows", size, made)
	}
	shortest := int64(len("0,samples/class0/v0.mp4/0.npy,class0/v0.mp4,0,1,0,class0\n"))
	for _, off := range []int64{0, size / 2, size - 4096} {
		before := x.made.Load()
		b := readGen(t, x, off, 4096)
		if made, most := x.made.Load()-before, 4096/shortest+2; made > most || len(b) != 4096 {
			t.Errorf("4 KiB at %d of %d: %d rows made (at most %d), %d bytes", off, size, made, most, len(b))
		}
	}
	last, v := readGen(t, x, size-200, 200), len(lay.Videos)-1
	p, label := lay.Videos[v].Path, lay.Label(v)
	want := "3999999,samples/" + p + "/1999.npy," + p + ",1999,1," + strconv.Itoa(label) + "," + lay.Classes[label] + "\n"
	if !bytes.HasSuffix(last, []byte(want)) {
		t.Errorf("index.csv ends %q, want %q", last, want)
	}
}

// TestIndexCSVLongVideo: in a video of 4 million samples (with and without --fps), a 4 KiB read
// of index.csv works out the length of only the rows it makes and a few dozen more, not of
// every row of the video before its offset. (TestIndexCSVSameBytes checks the bytes, at offsets
// in videos whose rows cross powers of ten.)
func TestIndexCSVLongVideo(t *testing.T) {
	for name, sp := range map[string]layout.Spec{
		"frames": {Frames: 1, Stride: 1, Step: 1, Height: 8, Width: 8},
		"fps":    {Frames: 4, Stride: 2, Step: 1, Height: 8, Width: 8, FPS: layout.Rate{Num: 30000, Den: 1001}},
	} {
		lay, err := layout.New(sp, []layout.Video{{Path: "a/short.mp4", Frames: 40}, {Path: "a/long.mp4", Frames: 4_000_003}})
		if err != nil {
			t.Fatal(err)
		}
		x := newIndexCSV(lay)
		size := x.size()
		for _, off := range []int64{size / 3, size / 2, size - 4096} {
			made, lens := x.made.Load(), x.lens.Load()
			b := readGen(t, x, off, 4096)
			made, lens = x.made.Load()-made, x.lens.Load()-lens
			if len(b) != 4096 || lens > made+2000 {
				t.Errorf("%s: 4 KiB at %d of %d: %d rows made, the lengths of %d worked out (at most %d), %d bytes", name, off, size, made, lens, made+2000, len(b))
			}
		}
	}
}

// TestIndexCSVConcurrent: readers that race the first stat and read of index.csv (run with
// -race) all see one size and the same bytes at every offset.
func TestIndexCSVConcurrent(t *testing.T) {
	lay := genLayouts(t)["odd fps29.97"]
	want := indexCSVWhole(lay)
	x := newIndexCSV(lay)
	errs := make(chan string, 8)
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if size := x.size(); size != int64(len(want)) {
				errs <- fmt.Sprintf("reader %d: size %d, want %d", r, size, len(want))
				return
			}
			for off := r; off < len(want); off += 61 {
				dst := make([]byte, min(113, len(want)-off))
				if err := x.readAt(dst, int64(off)); err != nil || !bytes.Equal(dst, want[off:off+len(dst)]) {
					errs <- fmt.Sprintf("reader %d: %d bytes at %d: %q (%v), want %q", r, len(dst), off, dst, err, want[off:off+len(dst)])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestControlNpy: .vidfs/labels.npy holds each sample's label and .vidfs/videos.npy each video's
// first sample, sample count and label, as the layout has them, read whole or in pieces.
func TestControlNpy(t *testing.T) {
	for name, lay := range genLayouts(t) {
		var labels, videos []byte
		for i := range lay.Len() {
			labels = binary.LittleEndian.AppendUint32(labels, uint32(int32(lay.Label(lay.Sample(i).Video))))
		}
		for v := range lay.Videos {
			first, end := lay.VideoSamples(v)
			for _, x := range []int{first, end - first, lay.Label(v)} {
				videos = binary.LittleEndian.AppendUint64(videos, uint64(int64(x)))
			}
		}
		for file, c := range map[string]struct {
			g     generator
			data  []byte
			descr string
			shape []int
		}{"labels.npy": {labelsNpy(lay), labels, "<i4", []int{lay.Len()}}, "videos.npy": {videosNpy(lay), videos, "<i8", []int{len(lay.Videos), 3}}} {
			whole := readGen(t, c.g, 0, int(c.g.size()))
			h, off, err := npy.Decode(whole)
			if err != nil || h.Descr != c.descr || h.Fortran || !slices.Equal(h.Shape, c.shape) || !bytes.Equal(whole[off:], c.data) {
				t.Errorf("%s %s: header %+v (%v), data %v, want %s %v, %v", name, file, h, err, whole[off:], c.descr, c.shape, c.data)
				continue
			}
			for _, n := range []int{1, 3, 29, 4096} {
				for o := 0; o < len(whole); o += max(1, n/2, len(whole)/3001) {
					if got, w := readGen(t, c.g, int64(o), n), whole[o:min(len(whole), o+n)]; !bytes.Equal(got, w) {
						t.Fatalf("%s %s: %d bytes at %d: %v, want %v", name, file, n, o, got, w)
					}
				}
			}
		}
	}
}

// TestSumDigits: sumDigits is the sum of the numbers' lengths, counted one by one.
func TestSumDigits(t *testing.T) {
	for _, a := range []int{0, 1, 9, 10, 95, 999, 1000, 123456} {
		for _, step := range []int{1, 2, 3, 7, 10, 16, 999} {
			for _, c := range []int{1, 2, 9, 10, 11, 100, 1001, 5000} {
				var want int64
				for k := range c {
					want += int64(digits(a + k*step))
				}
				if got := sumDigits(a, step, c); got != want {
					t.Fatalf("sumDigits(%d, %d, %d) = %d, want %d", a, step, c, got, want)
				}
			}
		}
	}
}

// TestVideosTxt: .vidfs/videos.txt holds a line per video, its path with backslashes, newlines
// and carriage returns escaped (so that each path is one line, and unescapes to itself), read
// whole or in pieces at any offset.
func TestVideosTxt(t *testing.T) {
	unescape := strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\r`, "\r")
	for name, lay := range genLayouts(t) {
		g := &videosTxt{lay: lay}
		whole := readGen(t, g, 0, int(g.size()))
		lines := strings.Split(strings.TrimSuffix(string(whole), "\n"), "\n")
		if len(lines) != len(lay.Videos) || !strings.HasSuffix(string(whole), "\n") {
			t.Fatalf("%s: %d lines for %d videos: %q", name, len(lines), len(lay.Videos), whole)
		}
		for v, line := range lines {
			if got := unescape.Replace(line); got != lay.Videos[v].Path || strings.ContainsRune(line, '\r') {
				t.Errorf("%s: line %d is %q, unescaped %q, want %q", name, v, line, got, lay.Videos[v].Path)
			}
		}
		for _, n := range []int{1, 3, 29, 4096} {
			for o := 0; o < len(whole); o += max(1, n/2) {
				if got, w := readGen(t, g, int64(o), n), whole[o:min(len(whole), o+n)]; !bytes.Equal(got, w) {
					t.Fatalf("%s: %d bytes at %d: %q, want %q", name, n, o, got, w)
				}
			}
		}
	}
}
