package catalog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testfd"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestScanOutOfDescriptors: a scan during which the process runs out of file descriptors (EMFILE)
// reports the videos it could not open, but does not remember them as unusable: the probe cache
// holds no error for them, and the next scan probes them and finds them. Here one descriptor is
// left: the first video is probed with it, the probe cache's segment then holds it, and the
// second video's probe finds none. The limit is the process's: no test of this package runs in
// parallel with this one (none calls t.Parallel).
func TestScanOutOfDescriptors(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	for _, name := range []string{"a.mp4", "b.mp4"} {
		if err := os.Link(testvideo.Path("h264_gop16.mp4"), filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		vs     []Video
		err    error
		tables *Tables
		logged bytes.Buffer
	)
	testfd.Short(t, 1, func() {
		tables, vs, err = Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Workers: 1,
			Log: slog.New(slog.NewTextHandler(&logged, nil))})
	})
	if err != nil {
		t.Fatal(err)
	}
	tables.Close()
	// Which video meets EMFILE depends on what the scan opens first (a probe, the segment it
	// writes); at least one must, and each that does must fail with a passing error, logged.
	probed := 0
	for _, v := range vs {
		if v.Err == nil {
			probed++
			continue
		}
		if !errors.Is(v.Err, syscall.EMFILE) || decode.Permanent(v.Err) {
			t.Errorf("%s: %v (permanent %v), want a passing error saying EMFILE", v.Rel, v.Err, decode.Permanent(v.Err))
		}
		if !strings.Contains(logged.String(), v.Rel) {
			t.Errorf("log %q: want a warning naming %s", logged.String(), v.Rel)
		}
	}
	if len(vs) != 2 || probed == 2 {
		t.Fatalf("scan with one descriptor: %+v; want a video failing with EMFILE", vs)
	}
	if errs := cachedErrors(t, cacheDir, src); len(errs) > 0 {
		t.Errorf("the probe cache remembers %v", errs)
	}

	var last Progress
	tables, vs, err = Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	defer tables.Close()
	for _, v := range vs {
		if v.Err != nil || v.Brief == nil || v.Brief.Frames != 100 {
			t.Errorf("next scan: %s: %v", v.Rel, v.Err)
		}
	}
	if last.Done != 2 || last.Cached != probed || last.Failed != 0 {
		t.Errorf("next scan: progress %+v, want the %d probed before from the cache and the rest probed", last, probed)
	}
}

// cachedErrors lists the errors the probe cache of src under cacheDir holds, by video: those of
// each video's newest entry, which a scan takes.
func cachedErrors(t *testing.T, cacheDir, src string) map[string]string {
	t.Helper()
	segs := openSegments(cacheDir, src)
	if len(segs) == 0 {
		t.Fatal("no probe cache segment written")
	}
	defer newTables(segs, nil).Close()
	errs := map[string]string{}
	for _, s := range segs {
		for _, e := range s.index {
			delete(errs, e.Rel)
			if e.Err != nil {
				errs[e.Rel] = e.Err.Kind + ": " + e.Err.Detail
			}
		}
	}
	return errs
}

// TestScanOldTransientError: a probe cache written by an older vidfs, which remembered any error,
// may hold an error of the path (a descriptor limit, an I/O error): the scan probes such a video
// again rather than leave it out. An error the video itself proves (not a container) is still
// taken from the cache.
func TestScanOldTransientError(t *testing.T) {
	src, cacheDir := t.TempDir(), t.TempDir()
	copyFile(t, testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "a.mp4"))
	copyFile(t, testvideo.Path("vp9.webm"), filepath.Join(src, "b.webm"))
	copyFile(t, testvideo.Path("random.mp4"), filepath.Join(src, "c.mp4"))
	tables, vs, err := Scan(context.Background(), Options{Root: src, CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	tables.Close()
	if vs[0].Err != nil || vs[1].Err != nil || !decode.Permanent(vs[2].Err) {
		t.Fatalf("first scan: %+v", vs)
	}
	// A newer segment, as an older vidfs wrote it: a.mp4 unreadable (EMFILE), b.webm failing with
	// an error of no known kind, c.mp4 not a video (as it is, but saying something else, so
	// that the test sees where the error came from).
	w, err := newSegWriter(storeDir(cacheDir, src), src)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []cachedError{
		{Kind: decode.ErrUnreadable.Error(), Detail: syscall.EMFILE.Error()},
		{Detail: "something went wrong"},
		{Kind: decode.ErrNotVideo.Error(), Detail: "remembered"},
	} {
		w.index = append(w.index, indexEntry{Rel: vs[i].Rel, Size: vs[i].File.Size, ModTime: vs[i].File.ModTime, Err: &c})
	}
	s, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	s.f.Close()

	var last Progress
	tables, vs, err = Scan(context.Background(), Options{Root: src, CacheDir: cacheDir, Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	defer tables.Close()
	if vs[0].Err != nil || vs[0].Brief == nil || vs[1].Err != nil || vs[1].Brief == nil {
		t.Errorf("scan over a cache holding errors of the path: a.mp4 %v, b.webm %v; want both probed again", vs[0].Err, vs[1].Err)
	}
	if !errors.Is(vs[2].Err, decode.ErrNotVideo) || !strings.Contains(vs[2].Err.Error(), "remembered") {
		t.Errorf("c.mp4: %v, want the cached ErrNotVideo", vs[2].Err)
	}
	if last.Done != 3 || last.Cached != 1 || last.Failed != 1 {
		t.Errorf("progress %+v, want 2 probed again and 1 failure from the cache", last)
	}
	if errs := cachedErrors(t, cacheDir, src); len(errs) != 1 || !strings.HasPrefix(errs["c.mp4"], decode.ErrNotVideo.Error()) {
		t.Errorf("the probe cache remembers %v; want c.mp4's ErrNotVideo only", errs)
	}
}
