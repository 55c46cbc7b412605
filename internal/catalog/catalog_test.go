package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScan(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "walk", "a.mp4"))
	copyFile(t, testvideo.Path("vp9.webm"), filepath.Join(src, "run", "b.webm"))
	copyFile(t, testvideo.Path("empty.mp4"), filepath.Join(src, "run", "empty.mp4"))
	copyFile(t, testvideo.Path("corrupt.mp4.damage"), filepath.Join(src, "run", "notes.txt"))
	copyFile(t, testvideo.Path("vp9.webm"), filepath.Join(src, ".hidden", "c.webm"))
	if err := os.Symlink(testvideo.Path("hevc.mkv"), filepath.Join(src, "walk", "linked.mkv")); err != nil {
		t.Fatal(err)
	}
	var last Progress
	scan := func() []Video {
		vs, err := Scan(context.Background(), Options{Root: src, Workers: 2, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	vs := scan()
	var names []string
	for _, v := range vs {
		names = append(names, v.Rel)
	}
	if got := strings.Join(names, " "); got != "run/b.webm run/empty.mp4 walk/a.mp4 walk/linked.mkv" {
		t.Fatalf("found %s", got)
	}
	if vs[1].Err == nil || !strings.Contains(vs[1].Err.Error(), "empty file") || vs[2].Info == nil || vs[2].Info.Frames != 100 || vs[3].Info.Codec != "hevc" {
		t.Errorf("probe results: %+v", vs)
	}
	if !last.Final || last.Done != 4 || last.Failed != 1 || last.Cached != 0 {
		t.Errorf("progress %+v", last)
	}
	if _, err := os.Stat(CachePath(cacheDir, src)); err != nil {
		t.Fatalf("no probe cache written: %v", err)
	}
	// A second scan probes nothing, and its errors are the same kind, saying the same; a changed
	// file is probed again.
	firstErr := vs[1].Err.Error()
	vs = scan()
	if last.Cached != 4 || vs[2].Info.Frames != 100 || vs[2].Info.Path != filepath.Join(src, "walk", "a.mp4") {
		t.Errorf("second scan: progress %+v, %+v", last, vs[2].Info)
	}
	if err := vs[1].Err; !errors.Is(err, decode.ErrNotVideo) || err.Error() != firstErr {
		t.Errorf("error from the cache: %v, want %q of kind ErrNotVideo", err, firstErr)
	}
	copyFile(t, testvideo.Path("short8.mp4"), filepath.Join(src, "walk", "a.mp4"))
	os.Chtimes(filepath.Join(src, "walk", "a.mp4"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	vs = scan()
	if last.Cached != 3 || vs[2].Info.Frames != 8 {
		t.Errorf("after a change: progress %+v, frames %d", last, vs[2].Info.Frames)
	}
	if _, err := Scan(context.Background(), Options{Root: filepath.Join(src, "nope")}); err == nil {
		t.Error("missing root accepted")
	}
}

// TestRememberUnusable: keyframes marked unusable reach the cached tables, and the next scan's.
func TestRememberUnusable(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	scan := func() []Video {
		vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir})
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	vs := scan()
	if err := RememberUnusable(cacheDir, src, map[string][]int{vs[0].Info.Path: {32, 48}}); err != nil {
		t.Fatal(err)
	}
	var marked []int
	for _, k := range scan()[0].Info.Keyframes {
		if k.Unusable {
			marked = append(marked, k.Frame)
		}
	}
	if fmt.Sprint(marked) != "[32 48]" {
		t.Errorf("keyframes unusable after a rescan: %v, want [32 48]", marked)
	}
}

// TestRememberUnusableNotWritten: a probe cache that cannot be written is RememberUnusable's error
// (which the mount logs), and the cache as it was stays whole. Here the kernel refuses the write
// (RLIMIT_FSIZE 0: "file too large"), as a full disk or a quota would; file modes would not stop
// the root user the tests run as.
func TestRememberUnusableNotWritten(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(CachePath(cacheDir, src))
	if err != nil {
		t.Fatal(err)
	}

	// The limit is the process's: no test of this package may run in parallel with this one
	// (none calls t.Parallel).
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &low); err != nil {
		t.Fatal(err)
	}
	err = RememberUnusable(cacheDir, src, map[string][]int{vs[0].Info.Path: {32}})
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}

	if !errors.Is(err, syscall.EFBIG) {
		t.Errorf("RememberUnusable with the write refused: %v, want EFBIG", err)
	}
	if after, _ := os.ReadFile(CachePath(cacheDir, src)); string(after) != string(before) {
		t.Error("the probe cache changed though it could not be written")
	}
	if names, _ := os.ReadDir(cacheDir); len(names) != 1 {
		t.Errorf("%d files in the cache directory, want the cache alone", len(names))
	}
}

// TestScanCacheNotWritten: a scan whose probe cache cannot be written (its directory's parent is a
// regular file) finds its videos all the same, and warns on its log.
func TestScanCacheNotWritten(t *testing.T) {
	src := t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer // Scan logs after its probes are done, on the caller's goroutine
	vs, err := Scan(context.Background(), Options{Root: src, CacheDir: filepath.Join(file, "probe"),
		Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil || len(vs) != 1 || vs[0].Info == nil {
		t.Fatalf("scan: %v, %+v", err, vs)
	}
	if !strings.Contains(logged.String(), "not a directory") {
		t.Errorf("log %q: want the probe cache's error", logged.String())
	}
}
