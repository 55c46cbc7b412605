package fs

import (
	"context"
	"encoding/json"
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
