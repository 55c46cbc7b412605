package isolate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/leakcheck"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/isolate"
)

func TestMain(m *testing.M) {
	if isolate.IsHelper() {
		os.Exit(isolate.Main()) // the helpers these tests start are this binary
	}
	testvideo.QuietFFmpeg()
	os.Exit(leakcheck.Main(m))
}

// videos are the test videos that decode (every container and codec testdata has).
var videos = []string{"av1.mp4", "cfr24.mp4", "cfr60.mp4", "flv1.flv", "h264_bframes.avi", "h264_gop16.mp4",
	"h264_gop250.mp4", "h264_noreorder.mp4", "hevc.mkv", "mirrored.mp4", "mjpeg.avi", "mpeg2_cut.mpg", "mpeg4.avi",
	"ntsc.mp4", "odd_321x241.webm", "rotated.mp4", "short8.mp4", "start10.ts", "theora.ogv", "vfr.mkv", "vp8.webm", "vp9.webm"}

var out = decode.Output{Width: 48, Height: 32, Resize: decode.Crop}

func probe(t testing.TB, path string) *decode.Info {
	t.Helper()
	info, err := decode.Probe(path)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func testLog(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(tw{t}, nil)) }

type tw struct{ t testing.TB }

func (w tw) Write(b []byte) (int, error) { w.t.Log(string(bytes.TrimSpace(b))); return len(b), nil }

func start(t testing.TB, opts isolate.Options) *isolate.Decoders {
	t.Helper()
	if opts.Log == nil {
		opts.Log = testLog(t)
	}
	d, err := isolate.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// clips are a few clips of every video, from its start, its end, and between.
type job struct {
	info *decode.Info
	clip decode.Clip
}

func clipsOf(t testing.TB, names []string) []job {
	var jobs []job
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range names {
		info := probe(t, testvideo.Path(name))
		n := info.Frames
		for _, s := range []int{0, n / 2, max(0, n-8), r.IntN(n)} {
			jobs = append(jobs, job{info, decode.Clip{Start: s, Frames: 4, Stride: 2, PadEnd: true}})
		}
	}
	return jobs
}

// fresh decodes a clip in this process: what helpers must give.
func fresh(t testing.TB, j job) ([]byte, error) {
	buf := make([]byte, j.clip.Frames*out.FrameBytes())
	_, err := decode.DecodeClip(context.Background(), j.info, j.clip, out, buf, 1)
	return buf, err
}

// TestExact: every clip of every test video decodes in helpers to a fresh decode's bytes, into
// the cache's memory (Buffers: written by the kernel from the helper's window) and into memory of
// the caller's own (copied).
func TestExact(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 2, PerHelper: 2})
	jobs := clipsOf(t, videos)
	arena, err := d.Buffers(int64(4*out.FrameBytes()), len(jobs))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		want, werr := fresh(t, j)
		wg.Add(1)
		go func() {
			defer wg.Done()
			shared, err := arena.Alloc()
			if err != nil {
				t.Error(err)
				return
			}
			defer arena.Free(shared)
			for _, dst := range [][]byte{shared, make([]byte, len(want))} {
				// The helper's thread CPU clock (threadcpu, clock_gettime under its seccomp
				// filter) reports the decode's CPU.
				res, err := d.DecodeClip(context.Background(), j.info, j.clip, out, dst)
				if cpu := res.CPU; err == nil && cpu <= 0 {
					t.Errorf("%s clip %d: the helper reported %v of CPU", filepath.Base(j.info.Path), j.clip.Start, cpu)
				}
				if (err == nil) != (werr == nil) {
					t.Errorf("%s clip %d: helper %v, in-process %v", filepath.Base(j.info.Path), j.clip.Start, err, werr)
					continue
				}
				if err == nil && !bytes.Equal(dst, want) {
					t.Errorf("%s clip %d: helper's bytes differ from a fresh decode's", filepath.Base(j.info.Path), j.clip.Start)
				}
			}
		}()
	}
	wg.Wait()
	st := d.Stats()
	if st.ClipsCPU != int64(2*len(jobs)) {
		t.Errorf("helpers counted %d clips, want %d", st.ClipsCPU, 2*len(jobs))
	}
}

// TestErrorsCross: a damaged video fails in a helper as it does in-process: the same kind,
// file, frame and reason; and the CPU the failed decode spent is told (decode.Result.CPU).
func TestErrorsCross(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1})
	info := probe(t, testvideo.Path("corrupt.mp4"))
	failed := 0
	for s := 0; s+8 <= info.Frames; s += 4 {
		j := job{info, decode.Clip{Start: s, Frames: 8, Stride: 1}}
		_, werr := fresh(t, j)
		buf := make([]byte, 8*out.FrameBytes())
		res, err := d.DecodeClip(context.Background(), info, j.clip, out, buf)
		if fmt.Sprint(err) != fmt.Sprint(werr) {
			t.Errorf("clip %d: helper %v, in-process %v", s, err, werr)
		}
		if werr != nil {
			failed++
			if !errors.Is(err, decode.ErrCorrupt) || !decode.Permanent(err) {
				t.Errorf("clip %d: %v is not the corrupt kind", s, err)
			}
			// What a failed decode spent is told too: the budget of a training copy's fills
			// counts it.
			if res.CPU <= 0 {
				t.Errorf("clip %d failed in the helper: %v of CPU told, want what it spent", s, res.CPU)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no clip of corrupt.mp4 failed: the test shows nothing")
	}
	gone := &decode.Info{Path: filepath.Join(t.TempDir(), "gone.mp4"), Frames: 10}
	_, err := d.DecodeClip(context.Background(), gone, decode.Clip{Start: 0, Frames: 1, Stride: 1}, out, make([]byte, out.FrameBytes()))
	if !errors.Is(err, decode.ErrUnreadable) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want cannot read file (no such file)", err)
	}
}

// readerAtSource is a decode.Source over a file, as a bucket's objects are: the helper reads it
// through the mount.
type readerAtSource struct {
	io.ReaderAt
	size  int64
	reads *int64
	mu    *sync.Mutex
}

func (s readerAtSource) Size() int64 { return s.size }
func (s readerAtSource) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	*s.reads++
	s.mu.Unlock()
	return s.ReaderAt.ReadAt(p, off)
}

// TestStreamed: videos that are no local file (Options.Open) decode exactly, their bytes read
// by the mount for the helper.
func TestStreamed(t *testing.T) {
	var reads int64
	var mu sync.Mutex
	open := func(path string) (decode.Source, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return readerAtSource{ReaderAt: bytes.NewReader(b), size: int64(len(b)), reads: &reads, mu: &mu}, nil
	}
	d := start(t, isolate.Options{Helpers: 1, Open: open})
	for _, j := range clipsOf(t, []string{"h264_gop16.mp4", "vp9.webm", "mpeg4.avi", "hevc.mkv"}) {
		want, werr := fresh(t, j)
		got := make([]byte, len(want))
		_, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got)
		if werr != nil || err != nil {
			t.Fatalf("%s: helper %v, in-process %v", j.info.Path, err, werr)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s clip %d: streamed bytes differ", filepath.Base(j.info.Path), j.clip.Start)
		}
	}
	if reads == 0 {
		t.Error("the Source was never read: the helper read the file itself")
	}
}

// recordKeeper keeps what a decode passes through, as load's training copy does.
type recordKeeper struct {
	want   func(i int) bool
	max    int
	frames map[int][]byte
	order  []int
}

func (k *recordKeeper) Want(i int) bool { return k.want(i) && len(k.order) < k.max }
func (k *recordKeeper) Keep(i int, rgb []byte) {
	if len(k.order) > 0 && i <= k.order[len(k.order)-1] {
		return
	}
	k.frames[i] = bytes.Clone(rgb)
	k.order = append(k.order, i)
}
func (k *recordKeeper) Drop(from int) {
	n, _ := slices.BinarySearch(k.order, from)
	for _, i := range k.order[n:] {
		delete(k.frames, i)
	}
	k.order = k.order[:n]
}

// TestKeep: the frames a decode passes through, kept for the training copy, are those an
// in-process decode keeps, byte for byte.
func TestKeep(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1})
	for _, name := range []string{"h264_gop250.mp4", "h264_bframes.avi", "vp9.webm"} {
		info := probe(t, testvideo.Path(name))
		c := decode.Clip{Start: info.Frames / 2, Frames: 4, Stride: 3}
		even := func(i int) bool { return i%2 == 0 }
		pool, err := decode.NewPool(decode.PoolOptions{Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		var keeps [2]*recordKeeper
		for k, dec := range []interface {
			DecodeClip(context.Context, *decode.Info, decode.Clip, decode.Output, []byte) (decode.Result, error)
		}{pool, d} {
			keeps[k] = &recordKeeper{want: even, max: c.Frames, frames: map[int][]byte{}}
			c.Keep = keeps[k]
			if _, err := dec.DecodeClip(context.Background(), info, c, out, make([]byte, c.Frames*out.FrameBytes())); err != nil {
				t.Fatal(err)
			}
		}
		pool.Close()
		if len(keeps[0].order) == 0 {
			t.Fatalf("%s: in-process decode kept nothing: the test shows nothing", name)
		}
		if !slices.Equal(keeps[0].order, keeps[1].order) {
			t.Errorf("%s: kept %v in-process, %v in a helper", name, keeps[0].order, keeps[1].order)
			continue
		}
		for _, i := range keeps[0].order {
			if !bytes.Equal(keeps[0].frames[i], keeps[1].frames[i]) {
				t.Errorf("%s: kept frame %d differs", name, i)
			}
		}
	}
}

// TestCancel: a caller that gives up gets its context's error once the helper let go of its
// buffer, and the helper serves on.
func TestCancel(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1, PerHelper: 1})
	info := probe(t, testvideo.Path("h264_gop250.mp4"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.DecodeClip(ctx, info, decode.Clip{Start: 200, Frames: 8, Stride: 4}, out, make([]byte, 8*out.FrameBytes()))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	j := job{info, decode.Clip{Start: 10, Frames: 4, Stride: 1}}
	want, _ := fresh(t, j)
	got := make([]byte, len(want))
	if _, err := d.DecodeClip(context.Background(), info, j.clip, out, got); err != nil || !bytes.Equal(got, want) {
		t.Errorf("after a cancel: %v, equal %v", err, bytes.Equal(got, want))
	}
	_ = time.Second
}

// TestProbe: every test video, damaged ones too, probed in a helper gives the table an
// in-process probe gives, or the same error, from a local file and streamed through the mount.
func TestProbe(t *testing.T) {
	names, err := filepath.Glob(filepath.Join(testvideo.Dir(), "*"))
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, filepath.Join(t.TempDir(), "gone.mp4"))
	open := func(path string) (decode.Source, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var reads int64
		return readerAtSource{ReaderAt: bytes.NewReader(b), size: int64(len(b)), reads: &reads, mu: new(sync.Mutex)}, nil
	}
	for _, streamed := range []bool{false, true} {
		opts := isolate.Options{Helpers: 2}
		var in decode.Opener
		if streamed {
			opts.Open, in = open, open
		}
		d := start(t, opts)
		var wg sync.WaitGroup
		good := 0
		for _, p := range names {
			want, werr := decode.ProbeFrom(p, in)
			if werr == nil {
				good++
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := d.Probe(context.Background(), p)
				if fmt.Sprint(err) != fmt.Sprint(werr) || decode.Permanent(err) != decode.Permanent(werr) {
					t.Errorf("%s (streamed %v): helper %v, in-process %v", filepath.Base(p), streamed, err, werr)
					return
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s (streamed %v): the helper's table differs from an in-process probe's", filepath.Base(p), streamed)
				}
			}()
		}
		wg.Wait()
		if good < 25 {
			t.Fatalf("%d videos probed: the test shows little", good)
		}
	}
}

// sharedWritable sums the sizes of the shared memory a process has mapped writable (rw-s in
// /proc/PID/maps): what it could write that another process reads.
func sharedWritable(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "rw-s" {
			continue
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			t.Fatal(err)
		}
		n += hi - lo
	}
	return n
}

// TestSharedMemoryBound: a helper can write no more shared memory than the clips it decodes at
// once and the frames they keep (its windows, /proc/PID/maps), however many clips it decoded and
// however large the cache's memory its clips go to (256 MiB).
func TestSharedMemoryBound(t *testing.T) {
	const each = 2
	d := start(t, isolate.Options{Helpers: 2, PerHelper: each})
	jobs := clipsOf(t, videos)
	arena, err := d.Buffers(int64(4*out.FrameBytes()), (256<<20)/(4*out.FrameBytes()))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := j.clip
			c.Keep = &recordKeeper{want: func(int) bool { return true }, max: c.Frames, frames: map[int][]byte{}}
			dst, err := arena.Alloc()
			if err != nil {
				t.Error(err)
				return
			}
			d.DecodeClip(context.Background(), j.info, c, out, dst)
		}()
	}
	wg.Wait()
	page := int64(os.Getpagesize())
	bound := each * ((2*4*int64(out.FrameBytes()) + page - 1) / page * page) // a sample and its frames kept, each clip
	for _, pid := range d.Pids() {
		n := sharedWritable(t, pid)
		t.Logf("helper %d: %d bytes of shared memory writable, bound %d", pid, n, bound)
		if n == 0 || n > bound {
			t.Errorf("helper %d can write %d bytes of shared memory; its clips at once hold %d", pid, n, bound)
		}
	}
}

// stallingSource is a video whose reads stall, each answered with EIO after stall, until
// released: an object store that stops answering for a while.
type stallingSource struct {
	readerAtSource
	release <-chan struct{}
	stall   time.Duration
}

func (s stallingSource) ReadAt(p []byte, off int64) (int, error) {
	select {
	case <-s.release:
		return s.readerAtSource.ReadAt(p, off)
	case <-time.After(s.stall):
		return 0, syscall.EIO
	}
}

// TestStalledSource: a source that stalls for longer than the deadline gives its clip the
// source's error, a transient one; the helper is not killed as hung nor the video held, and once
// the source answers again its clips decode exactly.
func TestStalledSource(t *testing.T) {
	release := make(chan struct{})
	open := func(path string) (decode.Source, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var reads int64
		return stallingSource{readerAtSource{bytes.NewReader(b), int64(len(b)), &reads, new(sync.Mutex)}, release, 3 * time.Second}, nil
	}
	d := start(t, isolate.Options{Helpers: 1, Open: open, Deadline: time.Second})
	j := clipsOf(t, []string{"h264_gop16.mp4"})[1]
	want, _ := fresh(t, j)
	got := make([]byte, len(want))
	_, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got)
	if !errors.Is(err, decode.ErrUnreadable) || !errors.Is(err, syscall.EIO) || decode.Permanent(err) {
		t.Fatalf("with the source stalled: %v, want the source's EIO", err)
	}
	if st := d.Isolation(); st.Hangs != 0 || st.Crashes != 0 || st.Held != 0 {
		t.Errorf("stats %+v: a stalled source killed a helper", st)
	}
	close(release)
	if _, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got); err != nil || !bytes.Equal(got, want) {
		t.Errorf("once the source answers: %v (equal %v)", err, bytes.Equal(got, want))
	}
}

// procField reads a line of a file of /proc/PID that starts with prefix, the rest of it.
func procField(t *testing.T, pid int, file, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q in /proc/%d/%s", prefix, pid, file)
	return ""
}

// TestLimits: a helper runs with oom_score_adj 1000 and a data limit, soft and hard (it cannot
// raise it), sized for 4K pictures until Fit says the videos are smaller, when it is replaced by
// one with a smaller limit; a video of larger pictures then gets a helper started for it.
func TestLimits(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1})
	helper := func(not int) int {
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if pids := d.Pids(); len(pids) == 1 && pids[0] != not {
				return pids[0]
			}
		}
		t.Fatalf("no helper but %d serves after 30 s", not)
		return 0
	}
	limit := func(pid int) int64 {
		f := strings.Fields(procField(t, pid, "limits", "Max data size"))
		soft, err1 := strconv.ParseInt(f[0], 10, 64)
		hard, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || soft != hard {
			t.Fatalf("data limit %v: want soft and hard the same", f)
		}
		return soft
	}
	first := helper(0)
	if got := procField(t, first, "oom_score_adj", ""); got != "1000" {
		t.Errorf("oom_score_adj %s, want 1000", got)
	}
	big := limit(first)
	d.Fit(isolate.Picture(64, 64)) // smaller than any test video
	second := helper(first)
	fitted := limit(second)
	larger := clipsOf(t, []string{"h264_gop16.mp4"})[0]
	want, _ := fresh(t, larger)
	got := make([]byte, len(want))
	if _, err := d.DecodeClip(context.Background(), larger.info, larger.clip, out, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a video larger than Fit said: %v (equal %v)", err, bytes.Equal(got, want))
	}
	grown := limit(helper(second))
	t.Logf("data limits: %d for 4K, %d fitted to 64x64, %d grown for %dx%d", big, fitted, grown, larger.info.Width, larger.info.Height)
	if !(fitted < grown && grown < big) {
		t.Errorf("data limits %d, %d, %d: want fitted < grown < 4K's", fitted, grown, big)
	}
}

// TestStartFails: a helper that dies before it says hello fails New with its reason, at once
// (on main, New waited for ever on the hello it had already read).
func TestStartFails(t *testing.T) {
	d, err := isolate.New(isolate.Options{Helpers: 1, Exe: "/bin/false", Log: testLog(t)})
	if err == nil {
		d.Close()
		t.Fatal("a helper that exits at once started")
	}
	if !strings.Contains(err.Error(), "failed to start") {
		t.Errorf("New: %v", err)
	}
}
