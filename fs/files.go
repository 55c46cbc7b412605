package fs

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strconv"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// tensorFile is an .npy header (or none) followed by samples first..first+count-1.
type tensorFile struct {
	frozen
	f     *FS
	hdr   []byte
	first int
	count int
}

func (t *tensorFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	t.attr(&out.Attr)
	return 0
}

func (t *tensorFile) attr(a *fuse.Attr) {
	t.f.attr(a, syscall.S_IFREG|0o444, uint64(len(t.hdr))+uint64(t.count)*uint64(t.f.lay.Spec.SampleBytes()))
	a.Blksize = 1 << 20
}

func (t *tensorFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := refuseWrites(flags); errno != 0 {
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
	res, errno := t.f.read(ctx, t.hdr, t.first, t.count, dest, off)
	if errno == 0 && t.f.directIO.Load() {
		t.f.pages.read(t, off, res.Size())
	}
	return res, errno
}

// staticFile is a file with fixed contents.
type staticFile struct {
	frozen
	f    *FS
	data []byte
}

func (s *staticFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	s.f.attr(&out.Attr, syscall.S_IFREG|0o444, uint64(len(s.data)))
	return 0
}

func (s *staticFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if errno := refuseWrites(flags); errno != 0 {
		return nil, 0, errno
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (s *staticFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(s.data, dest, off)), 0
}

// bytesHandle serves fixed bytes taken at open.
type bytesHandle struct{ data []byte }

func (h *bytesHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(sliceAt(h.data, dest, off)), 0
}

func sliceAt(data, dest []byte, off int64) []byte {
	if off >= int64(len(data)) {
		return nil
	}
	return data[off:min(int64(len(data)), off+int64(len(dest)))]
}

// jsonBytes is v as indented JSON and a newline, as the .vidfs files hold it.
func jsonBytes(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // the wire types always marshal
	}
	return append(b, '\n')
}

// indexCSV lists every sample: index, path of its .npy file, source video, start, stride,
// label (class number, -1 for none) and class name; under a target frame rate (--fps), where
// start and stride count frames at that rate, also start_time and end_time, in seconds
// (layout.Layout.Times).
func (f *FS) indexCSV() []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	timed := f.lay.Spec.FPS.Set()
	head := []string{"index", "path", "video", "start", "stride", "label", "class"}
	if timed {
		head = append(head, "start_time", "end_time")
	}
	w.Write(head)
	for i := range f.lay.Len() {
		s := f.lay.Sample(i)
		v := f.lay.Videos[s.Video]
		label, class := f.lay.Label(s.Video), ""
		if label >= 0 {
			class = f.lay.Classes[label]
		}
		row := []string{strconv.Itoa(i), "samples/" + f.lay.SampleName(i) + ".npy", v.Path, strconv.Itoa(s.Start),
			strconv.Itoa(f.lay.Spec.Stride), strconv.Itoa(label), class}
		if timed {
			start, end := f.lay.Times(i)
			row = append(row, strconv.FormatFloat(start, 'f', 6, 64), strconv.FormatFloat(end, 'f', 6, 64))
		}
		w.Write(row)
	}
	w.Flush()
	return b.Bytes()
}
