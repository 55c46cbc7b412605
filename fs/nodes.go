package fs

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/order"
)

// Inode numbers: fixed ones for the top-level files, and ranges for the samples/ tree, so that
// a file keeps its number however often the kernel forgets and looks it up again.
const (
	inoSampleFiles = 1 << 40 // + 2*sample (+1 for .npy)
	inoVideoDirs   = 1 << 41 // + video
	inoPlainDirs   = 1 << 42 // + folder number
)

// root is the mount's top directory.
type root struct {
	gofs.Inode
	f *FS
}

var _ gofs.NodeOnAdder = (*root)(nil)

func (r *root) OnAdd(ctx context.Context) {
	f, lay := r.f, r.f.lay
	add := func(parent *gofs.Inode, name string, node gofs.InodeEmbedder, mode uint32, ino uint64) *gofs.Inode {
		ch := parent.NewPersistentInode(ctx, node, gofs.StableAttr{Mode: mode, Ino: ino})
		parent.AddChild(name, ch, false)
		return ch
	}
	add(&r.Inode, "clips.npy", &tensorFile{f: f, hdr: lay.NpyHeader(), first: 0, count: lay.Len()}, syscall.S_IFREG, 2)
	add(&r.Inode, "clips.raw", &tensorFile{f: f, first: 0, count: lay.Len()}, syscall.S_IFREG, 3)
	add(&r.Inode, "index.csv", &staticFile{data: f.indexCSV()}, syscall.S_IFREG, 4)
	add(&r.Inode, "classes.txt", &staticFile{data: []byte(strings.Join(lay.Classes, "\n") + "\n")}, syscall.S_IFREG, 5)
	add(&r.Inode, "samples", &samplesDir{f: f, path: ""}, syscall.S_IFDIR, 6)
	ctl := add(&r.Inode, ".vidfs", &gofs.Inode{}, syscall.S_IFDIR, 7)
	add(ctl, "order", &orderFile{f: f}, syscall.S_IFREG, 8)
	add(ctl, "order.npy", &orderFile{f: f}, syscall.S_IFREG, 9)
	add(ctl, "stats", &statsFile{f: f}, syscall.S_IFREG, 10)
	add(ctl, "layout.json", &staticFile{data: f.layoutJSON()}, syscall.S_IFREG, 11)
}

// indexCSV lists every sample: index, path of its .npy file, source video, start, stride,
// label (class number, -1 for none) and class name.
func (f *FS) indexCSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"index", "path", "video", "start", "stride", "label", "class"})
	for i, s := range f.lay.Samples {
		v := f.lay.Videos[s.Video]
		label, class := f.lay.Label(s.Video), ""
		if label >= 0 {
			class = f.lay.Classes[label]
		}
		w.Write([]string{strconv.Itoa(i), "samples/" + f.lay.SampleName(i) + ".npy", v.Path, strconv.Itoa(s.Start),
			strconv.Itoa(f.lay.Spec.Stride), strconv.Itoa(label), class})
	}
	w.Flush()
	return b.Bytes()
}

// Layout is .vidfs/layout.json: what a client needs to read the mount without parsing headers.
type Layout struct {
	Samples        int    `json:"samples"`
	Frames         int    `json:"frames"`
	Height         int    `json:"height"`
	Width          int    `json:"width"`
	Channels       int    `json:"channels"`
	DType          string `json:"dtype"`
	SampleBytes    int64  `json:"sample_bytes"`
	NpyHeaderBytes int    `json:"npy_header_bytes"`
	Stride         int    `json:"stride"`
	Step           int    `json:"step,omitempty"`
	ClipsPerVideo  int    `json:"clips_per_video,omitempty"`
	Resize         string `json:"resize"`
	PadShort       bool   `json:"pad_short"`
	Videos         int    `json:"videos"`
	Classes        int    `json:"classes"`
	Source         string `json:"source"`
}

func (f *FS) layoutJSON() []byte {
	sp := f.lay.Spec
	b, _ := json.MarshalIndent(Layout{
		Samples: f.lay.Len(), Frames: sp.Frames, Height: sp.Height, Width: sp.Width, Channels: 3, DType: "uint8",
		SampleBytes: sp.SampleBytes(), NpyHeaderBytes: len(f.lay.NpyHeader()), Stride: sp.Stride, Step: sp.Step,
		ClipsPerVideo: sp.ClipsPerVideo, Resize: f.cfg.Resize.String(), PadShort: sp.PadShort,
		Videos: len(f.lay.Videos), Classes: len(f.lay.Classes), Source: f.cfg.Source,
	}, "", "  ")
	return append(b, '\n')
}

// readOnly refuses opens for writing.
func readOnly(flags uint32) syscall.Errno {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return syscall.EROFS
	}
	return 0
}

// tensorFile is an .npy header (or none) followed by samples first..first+count-1.
type tensorFile struct {
	gofs.Inode
	f     *FS
	hdr   []byte
	first int
	count int
}

var (
	_ gofs.NodeGetattrer = (*tensorFile)(nil)
	_ gofs.NodeOpener    = (*tensorFile)(nil)
	_ gofs.NodeReader    = (*tensorFile)(nil)
)

func (t *tensorFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	t.attr(&out.Attr)
	return 0
}

func (t *tensorFile) attr(a *fuse.Attr) {
	a.Mode = syscall.S_IFREG | 0o444
	a.Size = uint64(len(t.hdr)) + uint64(t.count)*uint64(t.f.lay.Spec.SampleBytes())
	a.Blksize = 1 << 20
	a.Blocks = (a.Size + 511) / 512
}

func (t *tensorFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := readOnly(flags); errno != 0 {
		return nil, 0, errno
	}
	// Direct I/O: every read reaches vidfs, which must see them to follow the plan, and reads are
	// not widened into neighbouring samples by the kernel's readahead.
	if t.f.directIO.Load() {
		return nil, fuse.FOPEN_DIRECT_IO, 0
	}
	return nil, 0, 0
}

func (t *tensorFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return t.f.read(ctx, t.hdr, t.first, t.count, dest, off)
}

// staticFile is a file with fixed contents.
type staticFile struct {
	gofs.Inode
	data []byte
}

var (
	_ gofs.NodeGetattrer = (*staticFile)(nil)
	_ gofs.NodeOpener    = (*staticFile)(nil)
	_ gofs.NodeReader    = (*staticFile)(nil)
)

func (s *staticFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(s.data))
	return 0
}

func (s *staticFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := readOnly(flags); errno != 0 {
		return nil, 0, errno
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (s *staticFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(s.data, dest, off)), 0
}

func sliceAt(data, dest []byte, off int64) []byte {
	if off >= int64(len(data)) {
		return nil
	}
	return data[off:min(int64(len(data)), off+int64(len(dest)))]
}

// readOnlyDir is a directory node of the samples/ tree: its attributes are fixed.
type readOnlyDir struct{ gofs.Inode }

var _ gofs.NodeGetattrer = (*readOnlyDir)(nil)

func (d *readOnlyDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o555
	return 0
}

// samplesDir is samples/<path>: folders of the source and the folders of its videos.
type samplesDir struct {
	readOnlyDir
	f    *FS
	path string
}

var (
	_ gofs.NodeLookuper  = (*samplesDir)(nil)
	_ gofs.NodeReaddirer = (*samplesDir)(nil)
)

func (d *samplesDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	entries, _ := d.f.lay.Dir(d.path)
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Name >= name })
	if i == len(entries) || entries[i].Name != name {
		return nil, syscall.ENOENT
	}
	p := path.Join(d.path, name)
	out.Mode = syscall.S_IFDIR | 0o555
	if v := entries[i].Video; v >= 0 {
		return d.NewInode(ctx, &videoDir{f: d.f, video: v}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoVideoDirs + uint64(v)}), 0
	}
	return d.NewInode(ctx, &samplesDir{f: d.f, path: p}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoPlainDirs + uint64(d.f.dirNumber[p])}), 0
}

func (d *samplesDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	entries, _ := d.f.lay.Dir(d.path)
	list := make([]fuse.DirEntry, len(entries))
	for i, e := range entries {
		list[i] = fuse.DirEntry{Name: e.Name, Mode: syscall.S_IFDIR}
	}
	return gofs.NewListDirStream(list), 0
}

// videoDir is samples/<video path>/: its samples as <k>.raw and <k>.npy.
type videoDir struct {
	readOnlyDir
	f     *FS
	video int
}

var (
	_ gofs.NodeLookuper  = (*videoDir)(nil)
	_ gofs.NodeReaddirer = (*videoDir)(nil)
)

func (d *videoDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	sample, npy, ok := d.f.lay.ParseSampleFile(d.video, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	t := &tensorFile{f: d.f, first: sample, count: 1}
	ino := inoSampleFiles + 2*uint64(sample)
	if npy {
		t.hdr = d.f.lay.SampleNpyHeader()
		ino++
	}
	t.attr(&out.Attr)
	return d.NewInode(ctx, t, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino}), 0
}

func (d *videoDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	first, end := d.f.lay.VideoSamples(d.video)
	list := make([]fuse.DirEntry, 0, 2*(end-first))
	for k := range end - first {
		list = append(list, fuse.DirEntry{Name: strconv.Itoa(k) + ".npy", Mode: syscall.S_IFREG},
			fuse.DirEntry{Name: strconv.Itoa(k) + ".raw", Mode: syscall.S_IFREG})
	}
	return gofs.NewListDirStream(list), 0
}

// orderFile is .vidfs/order (and .vidfs/order.npy): the plan. Writing it (truncating, as `>`
// and open(..., "w") do) replaces the plan when the file is closed; appending (`>>`, "a")
// queues the written plan behind the current one. A plan that does not parse is refused whole:
// close fails with EINVAL, the reason is logged, and the plan in force stays. Reading it gives
// the plan in force, as text.
type orderFile struct {
	gofs.Inode
	f *FS
}

var (
	_ gofs.NodeGetattrer = (*orderFile)(nil)
	_ gofs.NodeSetattrer = (*orderFile)(nil)
	_ gofs.NodeOpener    = (*orderFile)(nil)
)

func (o *orderFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o644
	return 0
}

// Setattr accepts truncation (the open's O_TRUNC says what it means).
func (o *orderFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok && size != 0 {
		return syscall.EINVAL
	}
	out.Mode = syscall.S_IFREG | 0o644
	return 0
}

func (o *orderFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		var b bytes.Buffer
		for i, s := range o.f.tracker.Plan() {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(int(s)))
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		return &bytesHandle{data: b.Bytes()}, fuse.FOPEN_DIRECT_IO, 0
	}
	return &orderWriter{f: o.f, appendPlan: flags&syscall.O_APPEND != 0, dirty: flags&syscall.O_TRUNC != 0}, fuse.FOPEN_DIRECT_IO, 0
}

// orderWriter collects what one open of the order file writes.
type orderWriter struct {
	f          *FS
	appendPlan bool
	buf        []byte
	dirty      bool          // there is something to apply at close
	tooLarge   syscall.Errno // EFBIG once a write went past the size limit
}

var (
	_ gofs.FileWriter  = (*orderWriter)(nil)
	_ gofs.FileFlusher = (*orderWriter)(nil)
	_ gofs.FileReader  = (*orderWriter)(nil)
)

func (w *orderWriter) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if w.appendPlan {
		off = int64(len(w.buf))
	}
	end := off + int64(len(data))
	if w.tooLarge != 0 || end > order.MaxBytes(w.f.lay.Len()) {
		w.tooLarge, w.dirty = syscall.EFBIG, true
		return 0, syscall.EFBIG
	}
	if end > int64(len(w.buf)) {
		w.buf = append(w.buf, make([]byte, end-int64(len(w.buf)))...)
	}
	copy(w.buf[off:], data)
	w.dirty = true
	return uint32(len(data)), 0
}

func (w *orderWriter) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(w.buf, dest, off)), 0
}

// Flush applies the plan written through this open (at close).
func (w *orderWriter) Flush(ctx context.Context) syscall.Errno {
	if !w.dirty {
		return 0
	}
	w.dirty = false
	var plan []int32
	var err error
	errno := syscall.EINVAL
	if w.tooLarge != 0 {
		err, errno = fmt.Errorf("more than %d bytes written: no plan for %d samples is that long", order.MaxBytes(w.f.lay.Len()), w.f.lay.Len()), w.tooLarge
	} else {
		plan, err = order.Parse(w.buf, w.f.lay.Len())
	}
	if err != nil {
		w.buf = nil
		w.f.log.Error("order refused; the previous plan stays", "reason", err)
		w.f.addProblem(Problem{Time: time.Now(), File: ".vidfs/order", Sample: -1, Reason: "order refused: " + err.Error()})
		return errno
	}
	w.f.SetPlan(plan, w.appendPlan)
	verb := "new plan"
	if w.appendPlan {
		verb = "plan appended"
	}
	pos, length := w.f.tracker.Position()
	w.f.log.Info(verb, "samples", len(plan), "position", pos, "length", length)
	return 0
}

// statsFile is .vidfs/stats: a JSON snapshot taken when it is opened.
type statsFile struct {
	gofs.Inode
	f *FS
}

var (
	_ gofs.NodeGetattrer = (*statsFile)(nil)
	_ gofs.NodeOpener    = (*statsFile)(nil)
)

func (s *statsFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	return 0
}

func (s *statsFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := readOnly(flags); errno != 0 {
		return nil, 0, errno
	}
	b, err := json.MarshalIndent(s.f.Stats(), "", "  ")
	if err != nil {
		return nil, 0, syscall.EIO
	}
	return &bytesHandle{data: append(b, '\n')}, fuse.FOPEN_DIRECT_IO, 0
}

// bytesHandle serves fixed bytes taken at open.
type bytesHandle struct{ data []byte }

var _ gofs.FileReader = (*bytesHandle)(nil)

func (h *bytesHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(h.data, dest, off)), 0
}
