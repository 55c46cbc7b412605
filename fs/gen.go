package fs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/internal/npy"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/placement"
)

// genFile is a read-only file whose bytes are made from the layout as they are read, only those
// a read asks for, never the whole file: index.csv, .vidfs/labels.npy, .vidfs/videos.npy and
// .vidfs/videos.txt (or fixed bytes: classes.txt, .vidfs/layout.json). Its size is known without
// making it. The kernel keeps what was read in its page cache.
type genFile struct {
	frozen
	f    *FS
	name string // the file's path in the mount, for errors
	gen  generator
}

// generator makes a generated file's bytes.
type generator interface {
	// size is the file's length.
	size() int64
	// readAt fills dst, which ends at or before size, with the bytes at off.
	readAt(dst []byte, off int64) error
}

func (g *genFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	g.f.attr(&out.Attr, syscall.S_IFREG|0o444, uint64(g.gen.size()))
	return 0
}

func (g *genFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := refuseWrites(flags); errno != 0 {
		return nil, 0, errno
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (g *genFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	size := g.gen.size()
	if off >= size || off < 0 {
		return fuse.ReadResultData(nil), 0
	}
	dest = dest[:min(int64(len(dest)), size-off)]
	if err := g.gen.readAt(dest, off); err != nil {
		g.f.log.Error("read failed", "file", g.name, "offset", off, "reason", err)
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest), 0
}

// indexCSV is index.csv: a header, then a row per sample: index, path of its .npy file, source
// video, start, stride, label (class number, -1 for none) and class name; under a target frame
// rate (--fps), where start and stride count frames at that rate, also start_time and end_time,
// in seconds (layout.Layout.Times). A read makes only the rows it covers.
//
// The rows differ in length (their numbers have more or fewer digits; a path with a comma or a
// quote is quoted), and padding them to one width would change the CSV. So the offset where
// each video's rows end is kept instead, 8 bytes a video, summed once from the lengths of the
// rows' fields, which are worked out without making the rows. A read at an offset finds its
// video by binary search over those ends, then its row within the video (locate), and makes
// rows from there until the read is full.
type indexCSV struct {
	lay   *layout.Layout
	timed bool // with start_time and end_time
	head  []byte
	once  sync.Once    // sets ends
	ends  []int64      // ends[v]: the offset just past video v's rows
	made  atomic.Int64 // rows made, for tests
	lens  atomic.Int64 // rows whose length was worked out, for tests
}

func newIndexCSV(lay *layout.Layout) *indexCSV {
	x := &indexCSV{lay: lay, timed: lay.Spec.FPS.Set()}
	head := "index,path,video,start,stride,label,class"
	if x.timed {
		head += ",start_time,end_time"
	}
	x.head = []byte(head + "\n")
	return x
}

func (x *indexCSV) size() int64 {
	x.once.Do(x.measure)
	if len(x.ends) == 0 {
		return int64(len(x.head))
	}
	return x.ends[len(x.ends)-1]
}

// measure sums the lengths of each video's rows into ends.
func (x *indexCSV) measure() {
	x.ends = make([]int64, len(x.lay.Videos))
	pos := int64(len(x.head))
	for v := range x.lay.Videos {
		pos += x.videoLen(v)
		x.ends[v] = pos
	}
}

// videoLen is the length of video v's rows: the digits of their numbers summed over runs of
// equal length, not row by row, but for the times (--fps) and for starts that are not evenly
// spaced (--clips-per-video), which are summed row by row.
func (x *indexCSV) videoLen(v int) int64 {
	sp, frames := x.lay.Spec, x.lay.Videos[v].Frames
	first, end := x.lay.VideoSamples(v)
	c := end - first
	if c == 0 {
		return 0
	}
	n := int64(c)*x.baseLen(v) + sumDigits(first, 1, c) + sumDigits(0, 1, c)
	if step := sp.Start(frames, 1); sp.ClipsPerVideo == 0 && sp.Start(frames, 0) == 0 && c > 1 {
		n += sumDigits(0, step, c) // starts 0, step, 2*step, ...
	} else {
		for k := range c {
			n += int64(digits(sp.Start(frames, k)))
		}
	}
	if x.timed {
		for k := range c {
			start := sp.Start(frames, k)
			n += int64(secondsLen(sp.FPS.Seconds(start)) + secondsLen(sp.FPS.Seconds(start+sp.Frames*sp.Stride)))
		}
	}
	return n
}

// sumDigits is the sum of digits(a + k*step) for k in [0, c), for a, step >= 0: each number has
// one digit, and one more for each power of ten it reaches.
func sumDigits(a, step, c int) int64 {
	n := int64(c)
	for p := 10; p > 0 && (a+(c-1)*step) >= p; p *= 10 {
		switch {
		case a >= p:
			n += int64(c)
		default: // k*step >= p-a from k = ceil((p-a)/step) on
			n += int64(c - min(c, (p-a+step-1)/step))
		}
	}
	return n
}

// baseLen is the length of video v's rows less that of their numbers that vary (the sample's
// index, its number in the video, its start and times): the separators, the quoted paths, the
// stride, label and class.
func (x *indexCSV) baseLen(v int) int64 {
	path, label := x.lay.Videos[v].Path, x.lay.Label(v)
	class := ""
	if label >= 0 {
		class = x.lay.Classes[label]
	}
	n := 6 + 1 // commas, newline
	if x.timed {
		n += 2
	}
	// The file's path is samples/PATH/K.npy: its quoting is that of the path, K aside.
	n += csvLen("samples/"+path+"/.npy") + csvLen(path) + digits(x.lay.Spec.Stride) + digits(label) + csvLen(class)
	return int64(n)
}

// rowLen is the length of the row of sample first+k, the k-th of video v, whose baseLen is base.
func (x *indexCSV) rowLen(v int, base int64, first, k int) int64 {
	x.lens.Add(1)
	sp := x.lay.Spec
	start := sp.Start(x.lay.Videos[v].Frames, k)
	n := base + int64(digits(first+k)+digits(k)+digits(start))
	if x.timed {
		n += int64(secondsLen(sp.FPS.Seconds(start)) + secondsLen(sp.FPS.Seconds(start+sp.Frames*sp.Stride)))
	}
	return n
}

// row is the row of sample first+k, the k-th of video v.
func (x *indexCSV) row(v, first, k int) []string {
	sp, path := x.lay.Spec, x.lay.Videos[v].Path
	start := sp.Start(x.lay.Videos[v].Frames, k)
	label, class := x.lay.Label(v), ""
	if label >= 0 {
		class = x.lay.Classes[label]
	}
	row := []string{strconv.Itoa(first + k), "samples/" + path + "/" + strconv.Itoa(k) + ".npy", path, strconv.Itoa(start),
		strconv.Itoa(sp.Stride), strconv.Itoa(label), class}
	if x.timed {
		row = append(row, formatSeconds(sp.FPS.Seconds(start)), formatSeconds(sp.FPS.Seconds(start+sp.Frames*sp.Stride)))
	}
	return row
}

func (x *indexCSV) readAt(dst []byte, off int64) error {
	x.once.Do(x.measure)
	n := copyHead(dst, x.head, off)
	if off += int64(n); n == len(dst) {
		return nil
	}
	lay := x.lay
	// The video whose rows hold off, and the row: from the end of the videos before it.
	v := sort.Search(len(x.ends), func(v int) bool { return x.ends[v] > off })
	pos := int64(len(x.head))
	if v > 0 {
		pos = x.ends[v-1]
	}
	first, end := lay.VideoSamples(v)
	base := x.baseLen(v)
	k, pos := x.locate(v, base, first, end-first, pos, off)
	var b []byte
	plain := x.plain(v)
	for n < len(dst) {
		for first+k == end { // the next video with samples
			v++
			first, end = lay.VideoSamples(v)
			base, k, plain = x.baseLen(v), 0, x.plain(v)
		}
		b = x.appendRow(b[:0], v, first, k, plain)
		x.made.Add(1)
		if want := x.rowLen(v, base, first, k); int64(len(b)) != want {
			return fmt.Errorf("the row of sample %d is %d bytes, %d were counted for it", first+k, len(b), want)
		}
		n += copy(dst[n:], b[off-pos:])
		pos += int64(len(b))
		off = pos
		k++
	}
	return nil
}

// locate finds the row of video v (c rows from sample first, whose baseLen is base, starting at
// offset pos) that holds offset off: its number k in the video and its offset. Within a video a
// row is never shorter than the one before it (its numbers and times only grow), so its rows
// are runs of equal length, a few dozen at most (one more digit, or one more digit of a time,
// starts the next); each run's end is found by binary search, and the row within it by
// division: O(runs x log c) lengths worked out, not one per row before off.
func (x *indexCSV) locate(v int, base int64, first, c int, pos, off int64) (int, int64) {
	for k := 0; k < c; {
		n := x.rowLen(v, base, first, k)
		end := k + 1 + sort.Search(c-k-1, func(i int) bool { return x.rowLen(v, base, first, k+1+i) != n })
		if run := int64(end-k) * n; pos+run <= off {
			pos, k = pos+run, end
			continue
		}
		skip := (off - pos) / n
		return k + int(skip), pos + skip*n
	}
	return c, pos // off is past the video's rows: not reached, as ends says where they end
}

// plain tells whether no field of video v's rows is quoted.
func (x *indexCSV) plain(v int) bool {
	path, class := x.lay.Videos[v].Path, ""
	if label := x.lay.Label(v); label >= 0 {
		class = x.lay.Classes[label]
	}
	sample := "samples/" + path + "/.npy"
	return csvLen(path) == len(path) && csvLen(class) == len(class) && csvLen(sample) == len(sample)
}

// appendRow appends the row of sample first+k, the k-th of video v, to b: written here where no
// field is quoted (plain), else by encoding/csv.
func (x *indexCSV) appendRow(b []byte, v, first, k int, plain bool) []byte {
	if !plain {
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		w.Write(x.row(v, first, k))
		w.Flush()
		return append(b, buf.Bytes()...)
	}
	sp, path := x.lay.Spec, x.lay.Videos[v].Path
	start, label := sp.Start(x.lay.Videos[v].Frames, k), x.lay.Label(v)
	b = strconv.AppendInt(b, int64(first+k), 10)
	b = append(append(append(b, ",samples/"...), path...), '/')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(append(append(b, ".npy,"...), path...), ',')
	b = append(strconv.AppendInt(b, int64(start), 10), ',')
	b = append(strconv.AppendInt(b, int64(sp.Stride), 10), ',')
	b = append(strconv.AppendInt(b, int64(label), 10), ',')
	if label >= 0 {
		b = append(b, x.lay.Classes[label]...)
	}
	if x.timed {
		b = strconv.AppendFloat(append(b, ','), sp.FPS.Seconds(start), 'f', 6, 64)
		b = strconv.AppendFloat(append(b, ','), sp.FPS.Seconds(start+sp.Frames*sp.Stride), 'f', 6, 64)
	}
	return append(b, '\n')
}

// copyHead copies the part of a file's head (its first bytes) at off into dst, and returns how
// many bytes it copied.
func copyHead(dst, head []byte, off int64) int {
	if off >= int64(len(head)) {
		return 0
	}
	return copy(dst, head[off:])
}

// fixedBytes is a file's whole contents, made once: classes.txt, .vidfs/layout.json.
type fixedBytes []byte

func (b fixedBytes) size() int64 { return int64(len(b)) }

func (b fixedBytes) readAt(dst []byte, off int64) error {
	copy(dst, b[off:])
	return nil
}

// digits is the length of i in decimal, its sign included.
func digits(i int) int {
	n := 1
	if i < 0 {
		n, i = 2, -i
	}
	for ; i >= 10; i /= 10 {
		n++
	}
	return n
}

// formatSeconds is how index.csv writes a time: seconds to the microsecond.
func formatSeconds(s float64) string { return strconv.FormatFloat(s, 'f', 6, 64) }

// secondsLen is len(formatSeconds(s)), for s >= 0, mostly without formatting it: the integer
// part's digits and six decimals, unless rounding to six decimals could carry into the integer
// part.
func secondsLen(s float64) int {
	if s < 0 || s >= 1e15 || s-float64(int64(s)) >= 0.999999 {
		return len(formatSeconds(s))
	}
	return digits(int(s)) + 7
}

// csvLen is the length of s as a field that encoding/csv writes: as it is, or quoted with its
// quotes doubled. Plain fields are counted here; encoding/csv says which others it quotes.
func csvLen(s string) int {
	if s == "" {
		return 0
	}
	if c := s[0]; c > ' ' && c < 0x80 && s != `\.` && !strings.ContainsAny(s, "\n\r\",") {
		return len(s)
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{s, ""}) // s, a comma, and a newline
	w.Flush()
	return b.Len() - 2
}

// npyTable is a .npy file of fixed-size records, made as they are read.
type npyTable struct {
	hdr   []byte
	rows  int
	width int                        // bytes a record
	fill  func(dst []byte, from int) // writes records from, from+1, ... into dst, len(dst)/width of them
}

func (t *npyTable) size() int64 { return int64(len(t.hdr)) + int64(t.rows)*int64(t.width) }

func (t *npyTable) readAt(dst []byte, off int64) error {
	n := copyHead(dst, t.hdr, off)
	if off += int64(n); n == len(dst) {
		return nil
	}
	rel, w := off-int64(len(t.hdr)), int64(t.width)
	from, to := rel/w, min(int64(t.rows), (rel+int64(len(dst)-n)+w-1)/w)
	buf := make([]byte, (to-from)*w)
	t.fill(buf, int(from))
	copy(dst[n:], buf[rel-from*w:])
	return nil
}

// labelsNpy is .vidfs/labels.npy: each sample's label (the index of its class in classes.txt, or
// -1), int32, shape (samples,).
func labelsNpy(lay *layout.Layout) *npyTable {
	return &npyTable{hdr: npy.Header{Descr: "<i4", Shape: []int{lay.Len()}}.Encode(64), rows: lay.Len(), width: 4,
		fill: func(dst []byte, from int) {
			v := lay.Sample(from).Video
			_, end := lay.VideoSamples(v)
			for s := from; len(dst) > 0; s++ {
				for s == end {
					v++
					_, end = lay.VideoSamples(v)
				}
				binary.LittleEndian.PutUint32(dst, uint32(int32(lay.Label(v))))
				dst = dst[4:]
			}
		}}
}

// videosNpy is .vidfs/videos.npy: a row per video, in index.csv's order, of its first sample,
// its number of samples (0 for a video too short for one) and its label, int64, shape
// (videos, 3).
func videosNpy(lay *layout.Layout) *npyTable {
	return &npyTable{hdr: npy.Header{Descr: "<i8", Shape: []int{len(lay.Videos), 3}}.Encode(64), rows: len(lay.Videos), width: 24,
		fill: func(dst []byte, v int) {
			for ; len(dst) > 0; v++ {
				first, end := lay.VideoSamples(v)
				binary.LittleEndian.PutUint64(dst, uint64(first))
				binary.LittleEndian.PutUint64(dst[8:], uint64(end-first))
				binary.LittleEndian.PutUint64(dst[16:], uint64(int64(lay.Label(v))))
				dst = dst[24:]
			}
		}}
}

// videosTxt is .vidfs/videos.txt: a line per video, in index.csv's order (the rows of
// .vidfs/videos.npy), of its path relative to SRC as the placement rule hashes it
// (placement.Name: a backslash, newline or carriage return escaped). As index.csv, the offset
// where each line ends is kept, 8 bytes a video, and a read makes only the lines it covers.
type videosTxt struct {
	lay  *layout.Layout
	once sync.Once // sets ends
	ends []int64   // ends[v]: the offset just past video v's line
}

func (x *videosTxt) measure() {
	x.ends = make([]int64, len(x.lay.Videos))
	var pos int64
	for v := range x.lay.Videos {
		pos += int64(len(placement.Name(x.lay.Videos[v].Path))) + 1
		x.ends[v] = pos
	}
}

func (x *videosTxt) size() int64 {
	x.once.Do(x.measure)
	if len(x.ends) == 0 {
		return 0
	}
	return x.ends[len(x.ends)-1]
}

func (x *videosTxt) readAt(dst []byte, off int64) error {
	x.once.Do(x.measure)
	v := sort.Search(len(x.ends), func(v int) bool { return x.ends[v] > off })
	var pos int64
	if v > 0 {
		pos = x.ends[v-1]
	}
	for n := 0; n < len(dst) && v < len(x.ends); v++ {
		line := placement.Name(x.lay.Videos[v].Path) + "\n"
		n += copy(dst[n:], line[off+int64(n)-pos:])
		pos = x.ends[v]
	}
	return nil
}
