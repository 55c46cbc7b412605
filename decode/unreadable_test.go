package decode

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/internal/testfd"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestProbeOutOfDescriptors: a probe that cannot open the file because the process has no
// descriptor left (EMFILE) fails with an error of the path, not of the video: not Permanent,
// of kind ErrUnreadable, saying EMFILE. The limit is the process's: no test of this package runs
// in parallel with this one (none calls t.Parallel).
func TestProbeOutOfDescriptors(t *testing.T) {
	path := testvideo.Path("h264_gop16.mp4")
	if _, err := Probe(path); err != nil {
		t.Fatal(err)
	}
	var err error
	testfd.Short(t, 0, func() { _, err = Probe(path) })
	if err == nil {
		t.Fatal("probed with no descriptor left")
	}
	if Permanent(err) || !errors.Is(err, ErrUnreadable) || !errors.Is(err, syscall.EMFILE) {
		t.Errorf("probe with no descriptor left: %v (permanent %v), want a passing ErrUnreadable wrapping EMFILE", err, Permanent(err))
	}
	if _, err := Probe(path); err != nil {
		t.Errorf("probe once descriptors are back: %v", err)
	}
}

// TestProbeReadFails: a video whose reads fail (here a FUSE file answering EIO, as a failing
// disk or a network filesystem would) is not probed, with an error of the path: EIO, not
// Permanent; whether the reads fail from its first byte (the container cannot be opened), only
// in its packets (the header reads), or only when the probe reads the video a second time to
// decode it. A directory is not Permanent either.
func TestProbeReadFails(t *testing.T) {
	const name = "h264_gop250.mp4" // 250 frames, its moov at the end
	data, err := os.ReadFile(testvideo.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(testvideo.Path(name)); err != nil {
		t.Fatal(err)
	}
	moov := int64(bytes.Index(data, []byte("moov"))) - 4
	if moov < int64(len(data))/2 {
		t.Fatalf("%s: moov at %d of %d bytes, want it at the end", name, moov, len(data))
	}
	// A video whose frames only decoding tells (TimingDecoded): its probe reads it twice, the
	// second time to decode it.
	avi, err := os.ReadFile(testvideo.Path("mpeg4.avi"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := Probe(testvideo.Path("mpeg4.avi")); err != nil || info.Timing != TimingDecoded {
		t.Fatalf("mpeg4.avi: %v, want a probe that decodes it", err)
	}
	// Other containers, failing in the middle of their packets, where their demuxers may answer
	// the failed read with the end of the file rather than the error.
	files := map[string]*failingFile{}
	var middles []string
	for _, v := range []string{"mpeg4.avi", "h264_bframes.avi", "hevc.mkv", "vp9.webm", "start10.ts", "theora.ogv", "flv1.flv"} {
		b, err := os.ReadFile(testvideo.Path(v))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Probe(testvideo.Path(v)); err != nil {
			t.Fatal(err)
		}
		name := "middle-" + v
		files[name] = &failingFile{data: b, from: int64(len(b)) / 2, to: int64(len(b))*3/4 + 1}
		middles = append(middles, name)
	}
	files["first.mp4"] = &failingFile{data: data, from: 0, to: int64(len(data))}
	files["packets.mp4"] = &failingFile{data: data, from: moov / 2, to: moov} // the second half of the packets
	files["good.mp4"] = &failingFile{data: data}
	// Its packets read the first time, not the second.
	files["decoded.avi"] = &failingFile{data: avi, from: int64(len(avi)) / 4, to: int64(len(avi)) / 2, fromOpen: 2}
	dir := mountFailing(t, files)
	if _, err := Probe(filepath.Join(dir, "good.mp4")); err != nil {
		t.Fatalf("the video read through FUSE with no failure: %v", err)
	}
	for _, name := range append([]string{"first.mp4", "packets.mp4", "decoded.avi"}, middles...) {
		info, err := Probe(filepath.Join(dir, name))
		if err == nil {
			t.Errorf("%s: probed though its reads fail: %d frames, truncated %v, %q", name, info.Frames, info.Truncated, info.Warnings)
			continue
		}
		if Permanent(err) || !errors.Is(err, ErrUnreadable) || !errors.Is(err, syscall.EIO) {
			t.Errorf("%s: %v (permanent %v), want a passing ErrUnreadable wrapping EIO", name, err, Permanent(err))
		}
	}
	if _, err := Probe(t.TempDir()); err == nil || Permanent(err) {
		t.Errorf("probe of a directory: %v (permanent %v), want an error that is not permanent", err, Permanent(err))
	}
}

// failingFile is a read-only FUSE file of data whose reads that touch bytes [from, to) fail with
// EIO, through the opens numbered fromOpen (from 1; 0 as 1) on. Reads go to it as they are asked
// (direct I/O), not through the kernel's page cache.
type failingFile struct {
	gofs.Inode
	data     []byte
	from, to int64
	fromOpen int32
	opens    atomic.Int32
}

// openNumber is a failingFile's handle: which of its opens it is.
type openNumber int32

var (
	_ gofs.NodeGetattrer = (*failingFile)(nil)
	_ gofs.NodeOpener    = (*failingFile)(nil)
	_ gofs.NodeReader    = (*failingFile)(nil)
)

func (f *failingFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(f.data))
	return 0
}

func (f *failingFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return openNumber(f.opens.Add(1)), fuse.FOPEN_DIRECT_IO, 0
}

func (f *failingFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	end := min(off+int64(len(dest)), int64(len(f.data)))
	if off >= end {
		return fuse.ReadResultData(nil), 0
	}
	if off < f.to && end > f.from && int32(fh.(openNumber)) >= f.fromOpen {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(f.data[off:end]), 0
}

// mountFailing mounts files (by name) on a FUSE filesystem of their own, unmounted at the end of
// the test, and returns its directory.
func mountFailing(t *testing.T, files map[string]*failingFile) string {
	t.Helper()
	dir := t.TempDir()
	root := &gofs.Inode{}
	server, err := gofs.Mount(dir, root, &gofs.Options{OnAdd: func(ctx context.Context) {
		for name, f := range files {
			root.AddChild(name, root.NewPersistentInode(ctx, f, gofs.StableAttr{Mode: syscall.S_IFREG}), false)
		}
	}})
	if err != nil {
		t.Fatalf("mounting a FUSE filesystem: %v", err)
	}
	t.Cleanup(func() {
		if err := server.Unmount(); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}
