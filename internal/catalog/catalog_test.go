package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
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
		tables, vs, err := Scan(context.Background(), Options{Root: src, Workers: 2, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tables.Close() })
		for _, v := range vs { // every full table reads back, and agrees with its brief
			if v.Err != nil {
				continue
			}
			info, err := tables.Info(v.Table, v.Brief.Path)
			if err != nil || info.Frames != v.Brief.Frames || len(info.PTS) != info.Frames || info.Path != v.Brief.Path {
				t.Fatalf("table of %s: %v, %d frames, %d timestamps, brief %d frames", v.Rel, err, info.Frames, len(info.PTS), v.Brief.Frames)
			}
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
	if vs[1].Err == nil || !strings.Contains(vs[1].Err.Error(), "empty file") || vs[2].Brief == nil || vs[2].Brief.Frames != 100 || vs[3].Brief.Codec != "hevc" {
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
	if last.Cached != 4 || vs[2].Brief.Frames != 100 || vs[2].Brief.Path != filepath.Join(src, "walk", "a.mp4") {
		t.Errorf("second scan: progress %+v, %+v", last, vs[2].Brief)
	}
	if err := vs[1].Err; !errors.Is(err, decode.ErrNotVideo) || err.Error() != firstErr {
		t.Errorf("error from the cache: %v, want %q of kind ErrNotVideo", err, firstErr)
	}
	copyFile(t, testvideo.Path("short8.mp4"), filepath.Join(src, "walk", "a.mp4"))
	os.Chtimes(filepath.Join(src, "walk", "a.mp4"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	vs = scan()
	if last.Cached != 3 || vs[2].Brief.Frames != 8 {
		t.Errorf("after a change: progress %+v, frames %d", last, vs[2].Brief.Frames)
	}
	if _, _, err := Scan(context.Background(), Options{Root: filepath.Join(src, "nope")}); err == nil {
		t.Error("missing root accepted")
	}
}

// TestRememberUnusable: keyframes marked unusable reach the cached tables, and the next scan's.
func TestRememberUnusable(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	opts := Options{Root: src, CacheDir: cacheDir}
	if err := RememberUnusableOf(cacheDir, Dir(src), map[string][]int{scanFirst(t, opts).Path: {32, 48}}); err != nil {
		t.Fatal(err)
	}
	marked := markedFrames(scanFirst(t, opts))
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
	tables, vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	tables.Close()
	before := dirContents(t, CachePath(cacheDir, src))

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
	err = RememberUnusableOf(cacheDir, Dir(src), map[string][]int{vs[0].Brief.Path: {32}})
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}

	if !errors.Is(err, syscall.EFBIG) {
		t.Errorf("RememberUnusable with the write refused: %v, want EFBIG", err)
	}
	if after := dirContents(t, CachePath(cacheDir, src)); after != before {
		t.Errorf("the probe cache changed though it could not be written: %s, was %s", after, before)
	}
}

// dirContents is the names and contents of the files in dir, as one string.
func dirContents(t *testing.T, dir string) string {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %x\n", n.Name(), sha256.Sum256(data))
	}
	return b.String()
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
	tables, vs, err := Scan(context.Background(), Options{Root: src, CacheDir: filepath.Join(file, "probe"),
		Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil || len(vs) != 1 || vs[0].Brief == nil {
		t.Fatalf("scan: %v, %+v", err, vs)
	}
	defer tables.Close()
	if info, err := tables.Info(vs[0].Table, vs[0].Brief.Path); err != nil || len(info.PTS) != 100 {
		t.Errorf("table kept outside the cache: %v", err)
	}
	if !strings.Contains(logged.String(), "not a directory") {
		t.Errorf("log %q: want the probe cache's error", logged.String())
	}
}

// TestScanCacheFailsMidway: a probe cache that refuses writes partway through a first scan (here
// the file size limit, as a full disk would) loses that scan only its caching: the scan finds every
// video and keeps every table, warning on its log with the file and the reason. The limit is the
// process's, so the tables kept outside the cache (a temporary file) meet it too, and are kept in
// memory in the end.
func TestScanCacheFailsMidway(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	video := filepath.Join(t.TempDir(), "v.mp4")
	copyFile(t, testvideo.Path("h264_gop16.mp4"), video)
	const n = 300 // several times the writer's buffer of tables: the limit is met partway
	for i := range n {
		if err := os.Link(video, filepath.Join(src, fmt.Sprintf("v%03d.mp4", i))); err != nil {
			t.Fatal(err)
		}
	}
	var lim unix.Rlimit // the process's: no test of this package runs in parallel with this one
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = 64 << 10
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &low); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	tables, vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Workers: 2,
		Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	if err != nil || len(vs) != n {
		t.Fatalf("scan with the probe cache refusing writes partway: %v, %d videos; want %d", err, len(vs), n)
	}
	defer tables.Close()
	for _, v := range vs {
		if v.Err != nil {
			t.Fatalf("%s: %v", v.Rel, v.Err)
		}
		if info, err := tables.Info(v.Table, v.Brief.Path); err != nil || len(info.PTS) != 100 {
			t.Fatalf("table of %s: %v", v.Rel, err)
		}
	}
	if log := logged.String(); !strings.Contains(log, CachePath(cacheDir, src)) || !strings.Contains(log, "file too large") {
		t.Errorf("log %q: want a warning naming the probe cache's file and the reason", log)
	}
	if temps, _ := filepath.Glob(filepath.Join(CachePath(cacheDir, src), ".tmp-*")); len(temps) > 0 {
		t.Errorf("temporary files left in the probe cache: %v", temps)
	}
}
