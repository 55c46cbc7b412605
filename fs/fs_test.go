package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/leakcheck"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/isolate"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

func TestMain(m *testing.M) {
	if isolate.IsHelper() {
		os.Exit(isolate.Main()) // the mounts' decoder helpers are this binary
	}
	testvideo.QuietFFmpeg()
	os.Exit(leakcheck.Main(m))
}

// testMount is a real FUSE mount of test videos.
type testMount struct {
	fs    *FS
	m     *Mount
	dir   string
	src   string
	lay   *layout.Layout
	close func() // unmounts and closes, once (also at the test's end)
	// unmounted, if set, is called by close between unmounting and closing: every request has
	// been answered by then.
	unmounted func()
}

type mountSetup struct {
	// helpers decodes in sandboxed helper processes (this test binary), as vidfs mount does;
	// without, in the test's process (decode.Pool), which is what a test of fs's own logic needs
	// and much quicker under the race detector. Tests of the path through helpers set it.
	helpers    bool
	files      map[string]string // path under SRC -> test video name
	spec       layout.Spec
	resize     decode.Resize
	fast       bool
	cacheBytes int64
	workers    int
	prefetch   int
	onError    OnError
	copyFiles  bool   // copy the videos into SRC rather than link them (to change them)
	src        string // SRC to use (a fresh one when "")
	tierDir    string
	tierBytes  int64
	tierCodec  diskstore.Codec
	keep       load.Keep
	fill       load.Fill
	// wrap, if set, is put around the mount's decoder (a test's delays); fillChunk, if set, is
	// how many frames a whole video's decode converts at a time (trainingCopy.chunk).
	wrap      func(load.Decoder) load.Decoder
	fillChunk int
}

// allGood is a source tree of every decodable test video, in class folders.
var allGood = map[string]string{
	"walk/gop16.mp4": "h264_gop16.mp4", "walk/gop250.mp4": "h264_gop250.mp4", "walk/hevc.mkv": "hevc.mkv",
	"run/vp9.webm": "vp9.webm", "run/mpeg4.avi": "mpeg4.avi", "run/rotated.mp4": "rotated.mp4",
	"jump/vfr.mkv": "vfr.mkv", "jump/start.ts": "start10.ts", "jump/deeper/av1.mp4": "av1.mp4",
	"swim/odd.webm": "odd_321x241.webm", "swim/vp8.webm": "vp8.webm", "swim/theora.ogv": "theora.ogv",
	"swim/mjpeg.avi": "mjpeg.avi", "swim/flv.flv": "flv1.flv", "top.mp4": "short8.mp4",
}

func mountVideos(t *testing.T, s mountSetup) *testMount {
	t.Helper()
	src, dir := s.src, t.TempDir()
	if src == "" {
		src = sourceTree(t, s.files, s.copyFiles)
	}
	lay, in, skipped := probeTree(t, src, s.spec)
	if s.cacheBytes == 0 {
		s.cacheBytes = 64 << 20
	}
	if s.workers == 0 {
		s.workers = 2
	}
	var pool load.Decoder
	if !s.helpers {
		p, err := decode.NewPool(decode.PoolOptions{Concurrency: load.Decoders(s.workers, 0), Idle: s.workers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pool = p
	} else {
		// As vidfs mount decodes by default: in sandboxed helper processes (this test binary).
		d, err := isolate.New(isolate.Options{Helpers: (load.Decoders(s.workers, 0) + 1) / 2, PerHelper: 2,
			Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		pool = d
	}
	if s.wrap != nil {
		pool = s.wrap(pool)
	}
	f, err := New(Config{Source: src, Layout: lay, Infos: load.InfoList(in), Resize: s.resize, Fast: s.fast, Decoder: pool, CacheBytes: s.cacheBytes,
		Workers: s.workers, Prefetch: s.prefetch, Skipped: skipped, OnError: s.onError, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Disk: load.Disk{Dir: s.tierDir, Bytes: s.tierBytes, Codec: s.tierCodec, Keep: s.keep, Fill: s.fill, FillChunk: s.fillChunk}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.Mount(dir, MountOptions{})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	var once sync.Once
	tm := &testMount{fs: f, m: m, dir: dir, src: src, lay: lay}
	tm.close = func() {
		once.Do(func() {
			if err := m.Unmount(); err != nil {
				t.Errorf("unmount: %v", err)
			}
			if tm.unmounted != nil {
				tm.unmounted()
			}
			f.Close()
		})
	}
	t.Cleanup(tm.close)
	return tm
}

// sourceTree makes a source directory of files (path under SRC -> a test video's name, or a
// path), linking the videos or, with copies, copying them; it lasts as long as t.
func sourceTree(t *testing.T, files map[string]string, copies bool) string {
	t.Helper()
	src := t.TempDir()
	for dst, name := range files {
		p := filepath.Join(src, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		link := os.Symlink
		if copies {
			link = copyFile
		}
		from := name // a test video's name, or a path (testvideo.Real's)
		if !filepath.IsAbs(name) {
			from = testvideo.Path(name)
		}
		if err := link(from, p); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// probeTree probes the videos under src and lays out those that can be read; the rest are
// problems, as vidfs mount reports them.
// copyFile copies the file at from to a new file to.
func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func probeTree(t *testing.T, src string, spec layout.Spec) (*layout.Layout, []*decode.Info, []wire.Problem) {
	t.Helper()
	tables, videos, err := catalog.Scan(context.Background(), catalog.Options{Root: src})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tables.Close() })
	var lv []layout.Video
	var skipped []wire.Problem
	byPath := map[string]*decode.Info{}
	for _, v := range videos {
		if v.Err == nil {
			info, err := tables.Info(v.Table, v.Brief.Path)
			if err != nil {
				t.Fatal(err)
			}
			frames := v.Brief.Frames
			if spec.FPS.Set() { // its length at that rate, as vidfs mount lays it out
				frames = info.FramesAt(decode.Rational{Num: spec.FPS.Num, Den: spec.FPS.Den})
			}
			lv = append(lv, layout.Video{Path: v.Rel, Frames: frames, Size: v.File.Size, ModTime: v.File.ModTime})
			byPath[v.Rel] = info
		} else {
			skipped = append(skipped, wire.Problem{File: v.Rel, Sample: -1, Reason: v.Err.Error()})
		}
	}
	lay, err := layout.New(spec, lv)
	if err != nil {
		t.Fatal(err)
	}
	infos := make([]*decode.Info, len(lay.Videos))
	for i, v := range lay.Videos {
		infos[i] = byPath[v.Path]
	}
	return lay, infos, skipped
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// python runs a Python program (Debian's python3 with python3-numpy) with the mount as argv[1].
func (tm *testMount) python(t *testing.T, program string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", append([]string{"-c", program, tm.dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

func (tm *testMount) stats(t *testing.T) wire.Stats {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tm.dir, ".vidfs", "stats"))
	if err != nil {
		t.Fatal(err)
	}
	var st wire.Stats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("stats %q: %v", b, err)
	}
	return st
}

// decoded is what decode.DecodeClip makes of sample i: the reference for every read.
func (tm *testMount) decoded(t *testing.T, i int) []byte {
	t.Helper()
	s := tm.lay.Sample(i)
	sp := tm.lay.Spec
	buf := make([]byte, sp.SampleBytes())
	o := decode.Output{Width: sp.Width, Height: sp.Height, Resize: tm.fs.out.Resize}
	if _, err := decode.DecodeClip(context.Background(), tm.fs.cfg.Infos.(load.InfoList)[s.Video], decode.Clip{Start: s.Start, Frames: sp.Frames, Stride: sp.Stride, PadEnd: s.Pad}, o, buf, 1); err != nil {
		t.Fatalf("DecodeClip(sample %d): %v", i, err)
	}
	return buf
}

// sampleName returns sample i's path under samples/ without its extension: "class/a.mp4/3".
func sampleName(l *layout.Layout, i int) string {
	s := l.Sample(i)
	return l.Videos[s.Video].Path + "/" + strconv.Itoa(s.K)
}

// rawSize is the size of clips.raw: every sample, back to back.
func rawSize(l *layout.Layout) int64 { return int64(l.Len()) * l.Spec.SampleBytes() }

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestNumpyReadsSamples: np.load(mmap_mode="r") on clips.npy has the right shape and its samples
// are what decode.DecodeClip makes; the per-sample files and clips.raw hold the same bytes.
func TestNumpyReadsSamples(t *testing.T) {
	tm := mountVideos(t, mountSetup{files: allGood, spec: layout.Spec{Frames: 4, Stride: 2, Step: 8, Height: 24, Width: 40, PadShort: true}, helpers: true})
	n := tm.lay.Len()
	picks := []int{0, 1, n / 3, n / 2, n - 2, n - 1}
	var idx []string
	for _, i := range picks {
		idx = append(idx, sampleName(tm.lay, i))
	}
	out := tm.python(t, `
import hashlib, json, os, sys
import numpy as np
mnt, picks, names = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
a = np.load(os.path.join(mnt, "clips.npy"), mmap_mode="r")
print("shape", a.shape, a.dtype)
raw = np.memmap(os.path.join(mnt, "clips.raw"), dtype=np.uint8, mode="r").reshape(a.shape)
for i, name in zip(picks, names):
    x = np.array(a[i])
    per = np.load(os.path.join(mnt, "samples", name + ".npy"))
    with open(os.path.join(mnt, "samples", name + ".raw"), "rb") as f:
        r = f.read()
    assert per.shape == x.shape and (per == x).all(), "per-sample .npy differs for %d" % i
    assert r == x.tobytes(), "per-sample .raw differs for %d" % i
    assert (raw[i] == x).all(), "clips.raw differs for %d" % i
    print(i, hashlib.sha256(x.tobytes()).hexdigest())
`, mustJSON(picks), mustJSON(idx))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := "shape (" + itoa(n) + ", 4, 24, 40, 3) uint8"
	if lines[0] != want {
		t.Fatalf("numpy says %q, want %q", lines[0], want)
	}
	for k, i := range picks {
		if got, w := lines[k+1], itoa(i)+" "+sha(tm.decoded(t, i)); got != w {
			t.Errorf("sample %d: numpy read %s, DecodeClip makes %s", i, got, w)
		}
	}
	// index.csv: one row per sample, naming files that exist.
	b, err := os.ReadFile(filepath.Join(tm.dir, "index.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(rows) != n+1 || rows[0] != "index,path,video,start,stride,label,class" {
		t.Fatalf("index.csv has %d rows, header %q", len(rows), rows[0])
	}
	for _, r := range []string{rows[1], rows[n]} {
		f := strings.Split(r, ",")
		if _, err := os.Stat(filepath.Join(tm.dir, f[1])); err != nil {
			t.Errorf("index.csv row %q: %v", r, err)
		}
	}
	classes, _ := os.ReadFile(filepath.Join(tm.dir, "classes.txt"))
	if string(classes) != "jump\nrun\nswim\nwalk\n" {
		t.Errorf("classes.txt %q", classes)
	}
	// The mount is read-only but for the order file.
	for _, p := range []string{"clips.npy", "index.csv", ".vidfs/stats", "samples/walk/gop16.mp4/0.raw"} {
		if f, err := os.OpenFile(filepath.Join(tm.dir, p), os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Errorf("%s opened for writing", p)
		}
	}
	if err := os.WriteFile(filepath.Join(tm.dir, "new.txt"), nil, 0o644); err == nil {
		t.Error("created a file in the mount")
	}
	// Reads are answered from the cache's buffers, pinned until the answer is written: once every
	// request is answered, none is pinned.
	tm.unmounted = func() {
		if p := tm.fs.cache.Stats().Pinned; p != 0 {
			t.Errorf("%d samples still pinned once every read was answered", p)
		}
	}
	tm.close()
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func itoa(i int) string { return mustJSON(i) }
