package catalog

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// sharedWriters and sharedRounds: how many processes write one probe cache at once in
// TestProbeCacheSharedWriters, and how many times each.
const sharedWriters, sharedRounds = 6, 5

// TestProbeCacheSharedWriters: several processes (as mounts on several nodes sharing the probe
// cache's directory) scan the same videos and each marks keyframes of its own video unusable,
// round after round, at once. No process's marks are lost, no segment is damaged, and a last scan
// finds every table in the cache.
func TestProbeCacheSharedWriters(t *testing.T) {
	if os.Getenv("VIDFS_SHARED_CHILD") != "" {
		return // the child's work is TestProbeCacheSharedChild's
	}
	src, cacheDir := t.TempDir(), t.TempDir()
	for k := range sharedWriters {
		if err := os.Link(testvideo.Path("h264_gop16.mp4"), filepath.Join(src, fmt.Sprintf("v%d.mp4", k))); err != nil {
			t.Fatal(err)
		}
	}
	var cmds []*exec.Cmd
	for k := range sharedWriters {
		cmd := exec.Command(os.Args[0], "-test.run=^TestProbeCacheSharedChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "VIDFS_SHARED_CHILD="+strconv.Itoa(k), "VIDFS_SHARED_SRC="+src, "VIDFS_SHARED_CACHE="+cacheDir)
		cmds = append(cmds, cmd)
	}
	outs := make([][]byte, len(cmds))
	done := make(chan int)
	for i, cmd := range cmds {
		go func() {
			outs[i], _ = cmd.CombinedOutput()
			done <- i
		}()
	}
	for range cmds {
		i := <-done
		if !cmds[i].ProcessState.Success() {
			t.Errorf("writer %d: %s", i, outs[i])
		}
	}

	names, _ := filepath.Glob(filepath.Join(CachePath(cacheDir, src), "*"+segSuffix))
	for _, n := range names {
		s, err := readSegment(n, src)
		if err != nil {
			t.Errorf("damaged segment: %v", err)
			continue
		}
		s.f.Close()
	}
	var last Progress
	tables, vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	defer tables.Close()
	t.Logf("%d segments left", len(names))
	if last.Cached != sharedWriters {
		t.Errorf("last scan: %+v, want every video from the cache", last)
	}
	for k, v := range vs {
		info, err := tables.Info(v.Table, v.Brief.Path)
		if err != nil {
			t.Fatal(err)
		}
		if marked, want := markedFrames(info), childMarks(k); fmt.Sprint(marked) != fmt.Sprint(want) {
			t.Errorf("%s: keyframes %v marked, want %v (%d segments)", v.Rel, marked, want, len(names))
		}
	}
}

// childMarks are the frames writer k marks unusable in its video, one a round.
func childMarks(k int) []int {
	var fs []int
	for r := range sharedRounds {
		fs = append(fs, 16*(1+r))
	}
	return fs
}

// TestProbeCacheSharedChild is one writer of TestProbeCacheSharedWriters, run in a process of its
// own; alone, it does nothing.
func TestProbeCacheSharedChild(t *testing.T) {
	k, err := strconv.Atoi(os.Getenv("VIDFS_SHARED_CHILD"))
	if err != nil {
		return
	}
	src, cacheDir := os.Getenv("VIDFS_SHARED_SRC"), os.Getenv("VIDFS_SHARED_CACHE")
	for _, f := range childMarks(k) {
		tables, vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		tables.Close()
		if err := RememberUnusableOf(cacheDir, Dir(src), map[string][]int{vs[k].Brief.Path: {f}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProbeCacheVanishingSegment: a segment the listing shows but that is gone when opened, every
// time (another node's merges removing segments between each listing and opening, as in
// TestProbeCacheSharedWriters; here a dangling link, so that it happens every time), costs
// neither the segments that are there nor a keyframe marked unusable meanwhile.
func TestProbeCacheVanishingSegment(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	var last Progress
	opts := Options{Root: src, CacheDir: cacheDir, Progress: func(p Progress) { last = p }}
	scanFirst(t, opts)
	gone := filepath.Join(CachePath(cacheDir, src), fmt.Sprintf("%020d-gone%s", 0, segSuffix))
	if err := os.Symlink(gone+".removed", gone); err != nil {
		t.Fatal(err)
	}
	if err := RememberUnusableOf(cacheDir, Dir(src), map[string][]int{filepath.Join(src, "a.mp4"): {32}}); err != nil {
		t.Fatal(err)
	}
	if marked := markedFrames(scanFirst(t, opts)); fmt.Sprint(marked) != "[32]" || last.Cached != 1 {
		t.Errorf("with a segment that vanishes: keyframes %v marked, want [32]; %d of 1 from the cache", marked, last.Cached)
	}
}

// scanFirst scans with opts and returns the full probe table of the first video found.
func scanFirst(t *testing.T, opts Options) *decode.Info {
	t.Helper()
	tables, vs, err := Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tables.Close()
	info, err := tables.Info(vs[0].Table, vs[0].Brief.Path)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// markedFrames are the frames of info's keyframes marked unusable.
func markedFrames(info *decode.Info) []int {
	var marked []int
	for _, k := range info.Keyframes {
		if k.Unusable {
			marked = append(marked, k.Frame)
		}
	}
	return marked
}

// TestReprobedKeepsMarks: a video whose newest table lacks marks an older one has, and whose
// newest table cannot be read back (its segment damaged, or on a shared filesystem removed by
// another node's merge), is probed again; the fresh table carries the marks known for it.
func TestReprobedKeepsMarks(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	opts := Options{Root: src, CacheDir: cacheDir}
	scanFirst(t, opts)
	store := CachePath(cacheDir, src)
	first, _ := filepath.Glob(filepath.Join(store, "*"+segSuffix))
	if len(first) != 1 {
		t.Fatalf("segments after the first scan: %v", first)
	}
	if err := RememberUnusableOf(cacheDir, Dir(src), map[string][]int{filepath.Join(src, "a.mp4"): {32}}); err != nil {
		t.Fatal(err)
	}
	// A newer segment with the unmarked table (as a node that had not seen the mark writes),
	// whose record is damaged.
	newer := filepath.Join(store, "99999999999999999999-newer"+segSuffix)
	copyFile(t, first[0], newer)
	s, err := readSegment(newer, src)
	if err != nil {
		t.Fatal(err)
	}
	e := s.index[0]
	s.f.Close()
	f, err := os.OpenFile(newer, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, e.Len), e.Off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if marked := markedFrames(scanFirst(t, opts)); fmt.Sprint(marked) != "[32]" {
		t.Errorf("probed again: keyframes %v marked, want [32]", marked)
	}
}
