package decode_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// flakyFile is a file whose reads fail with EIO where they touch [failFrom, failTo): a disk or
// a network file system failing under a decoder. Reads bypass the page cache, so that each one
// reaches it.
type flakyFile struct {
	fs.Inode
	data             []byte
	failFrom, failTo atomic.Int64
	failed           atomic.Int64 // reads failed
}

var (
	_ fs.NodeOpener    = (*flakyFile)(nil)
	_ fs.NodeReader    = (*flakyFile)(nil)
	_ fs.NodeGetattrer = (*flakyFile)(nil)
)

func (f *flakyFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *flakyFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	end := min(off+int64(len(dest)), int64(len(f.data)))
	if off < f.failTo.Load() && end > f.failFrom.Load() {
		f.failed.Add(1)
		return nil, syscall.EIO
	}
	if off >= end {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(f.data[off:end]), 0
}

func (f *flakyFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(f.data))
	return 0
}

type flakyRoot struct {
	fs.Inode
	file *flakyFile
}

func (r *flakyRoot) OnAdd(ctx context.Context) {
	r.AddChild("video.mp4", r.NewPersistentInode(ctx, r.file, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// mountFlaky serves the test video name as dir/video.mp4 from a FUSE file system whose reads
// of it can be made to fail.
func mountFlaky(t *testing.T, name string) (*flakyFile, string) {
	t.Helper()
	data, err := os.ReadFile(testvideo.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyFile{data: data}
	dir := t.TempDir()
	srv, err := fs.Mount(dir, &flakyRoot{file: f}, &fs.Options{})
	if err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	t.Cleanup(func() { srv.Unmount() })
	return f, filepath.Join(dir, "video.mp4")
}

// TestReadErrorMidDecode: an I/O error while the decoder reads packets (reads of a byte two
// thirds into the file fail with EIO, those of its header do not) is the path's failure, ErrUnreadable with the cause, which
// may pass; not ErrCorrupt, the video's own damage, which a cache keeps for good. Once the reads
// succeed again, the same clip decodes.
func TestReadErrorMidDecode(t *testing.T) {
	f, path := mountFlaky(t, "h264_gop250.mp4")
	info, err := decode.Probe(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(f.data))
	f.failFrom.Store(2 * n / 3) // one byte of a packet well after the header and the first packets
	f.failTo.Store(2*n/3 + 1)
	o := decode.Output{Width: 32, Height: 24, Resize: decode.Stretch}
	c := decode.Clip{Start: 0, Frames: info.Frames - 1, Stride: 1}
	dst := make([]byte, c.Frames*o.FrameBytes())
	_, err = decode.DecodeClip(context.Background(), info, c, o, dst, 1)
	if f.failed.Load() == 0 {
		t.Fatalf("no read failed (decode: %v): the test reads no part of the file's middle", err)
	}
	if err == nil || errors.Is(err, decode.ErrCorrupt) || !errors.Is(err, decode.ErrUnreadable) || !errors.Is(err, syscall.EIO) || decode.Permanent(err) {
		t.Errorf("decode while reads fail with EIO: %v; want ErrUnreadable wrapping EIO, not permanent", err)
	}
	f.failFrom.Store(0)
	f.failTo.Store(0)
	if _, err := decode.DecodeClip(context.Background(), info, c, o, dst, 1); err != nil {
		t.Errorf("decode once reads succeed: %v", err)
	}
}
