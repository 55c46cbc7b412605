package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// decoded reads every sample of setup's videos through a mount without a disk tier or copy, and
// returns their digests; setup then names that mount's source, so that later mounts see the
// same files.
func decoded(t *testing.T, setup *mountSetup) [][32]byte {
	t.Helper()
	plain := *setup
	plain.tierDir = ""
	ref := mountVideos(t, plain)
	want := readAll(t, ref)
	ref.close()
	setup.src = ref.src
	return want
}

// fillWhole asks m's copy to decode every video whole and waits until it has, and has written
// what it decoded.
func fillWhole(t *testing.T, m *testMount) {
	t.Helper()
	if !m.fs.load.FillAll() {
		t.Fatal("the mount keeps no copy")
	}
	waitFills(t, m)
}

// waitFills waits until m's copy decodes no video whole and has none queued, and has written
// what it decoded.
func waitFills(t *testing.T, m *testMount) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c := m.fs.load.CopyStats()
		if c.FillQueued == 0 && c.Filling == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy did not fill: %+v", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.fs.load.Flush()
}

// TestCopyServesDecodedBytes: for every class of test video (each codec and container,
// rotations, odd sizes, VFR footage at --fps, each --resize, short videos padded, fast
// decoding), samples served from the training copy, after a remount, are byte-identical to
// decoding them, and none is decoded.
func TestCopyServesDecodedBytes(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}
	for _, tc := range []struct {
		name   string
		set    func(*mountSetup)
		codecs []diskstore.Codec
	}{
		{"every video", func(s *mountSetup) {}, diskstore.Codecs},
		{"crop", func(s *mountSetup) { s.resize = decode.Crop }, nil},
		{"stretch", func(s *mountSetup) { s.resize = decode.Stretch }, nil},
		{"pad", func(s *mountSetup) { s.resize = decode.Pad }, nil},
		{"fast", func(s *mountSetup) { s.fast = true }, nil},
		{"fps", func(s *mountSetup) {
			s.files = map[string]string{"a/vfr.mkv": "vfr.mkv", "a/phone.mp4": "vfr_phone.mp4", "b/cfr24.mp4": "cfr24.mp4", "b/gop16.mp4": "h264_gop16.mp4"}
			s.spec.FPS = layout.Rate{Num: 15, Den: 1}
		}, nil},
		{"short videos padded", func(s *mountSetup) { s.spec.Frames, s.spec.Stride, s.spec.PadShort = 16, 3, true }, nil},
		// At 15 fps a 30 fps video's last unit shows its last frame but one: a padded unit shows
		// its last frame, as a padded sample's decode repeats it.
		{"padded at a rate", func(s *mountSetup) {
			s.files = map[string]string{"a/tick30.mp4": "tick30.mp4", "a/cfr30.mp4": "cfr30.mp4", "b/vfr.mkv": "vfr.mkv"}
			s.spec.Frames, s.spec.Stride, s.spec.PadShort, s.spec.FPS = 8, 3, true, layout.Rate{Num: 15, Den: 1}
		}, nil},
		{"clips per video", func(s *mountSetup) { s.spec.ClipsPerVideo = 3 }, nil},
	} {
		codecs := tc.codecs
		if codecs == nil {
			codecs = []diskstore.Codec{diskstore.None}
		}
		// The reference, once for every codec: decoded in the test's process (what is decoded
		// does not depend on where; the mounts with a copy decode in helpers, as vidfs mount does).
		plain := mountSetup{files: allGood, spec: spec}
		tc.set(&plain)
		plain.src = sourceTree(t, plain.files, false)
		var want [][32]byte
		t.Run(tc.name+"/reference", func(t *testing.T) {
			m := mountVideos(t, plain)
			want = readAll(t, m)
			m.close()
		})
		for _, codec := range codecs {
			t.Run(tc.name+"/"+codec.String(), func(t *testing.T) {
				if want == nil {
					t.Fatal("no reference")
				}
				withCopy := plain
				withCopy.helpers = tc.name == "every video" // each class through the helpers into the copy
				withCopy.tierDir, withCopy.tierBytes, withCopy.tierCodec, withCopy.keep = t.TempDir(), 1<<30, codec, load.KeepCopy
				a := mountVideos(t, withCopy)
				fillWhole(t, a)
				st := a.fs.Stats()
				if st.Copy == nil || st.Copy.Complete == 0 || st.Copy.Corrupt != 0 {
					t.Fatalf("after filling: %+v", st.Copy)
				}
				a.close()

				b := mountVideos(t, withCopy)
				if got := readAll(t, b); !equalDigests(got, want) {
					for i := range want {
						if got[i] != want[i] {
							t.Errorf("sample %d (%s) from the copy differs from decoding it", i, b.fs.sampleFile(i))
						}
					}
				}
				st = b.fs.Stats()
				n := int64(b.lay.Len())
				if st.Copy.Hits != n || st.Decode.Clips != 0 {
					t.Errorf("remounted: %d of %d samples from the copy, %d decoded; want all from the copy", st.Copy.Hits, n, st.Decode.Clips)
				}
				t.Logf("%d videos, %d whole, %d frames, %d bytes", st.Copy.LayoutVideos, st.Copy.Complete, st.Copy.Frames, st.Copy.UsedBytes)
			})
		}
	}
}

// TestCopyRandomClips: with clips filling the copy, a clip never read is served from the frames
// of others read before it, across epochs and mounts: random starts need no decode once the
// frames they use are in.
func TestCopyRandomClips(t *testing.T) {
	// A start every frame, frames 2 apart: sample k uses frames k, k+2, k+4, k+6.
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 1, Height: 32, Width: 48}
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "b/vp9.webm": "vp9.webm"}, spec: spec,
		tierDir: t.TempDir(), tierBytes: 1 << 30, keep: load.KeepCopy, fill: load.FillClips}
	want := decoded(t, &setup)

	a := mountVideos(t, setup)
	first, _ := a.lay.VideoSamples(0)
	// Epoch 1: samples 0 and 8 (frames 0-6 and 8-14, even ones), decoded.
	for _, k := range []int{0, 8} {
		if d := readSample(t, a, first+k); d != want[first+k] {
			t.Fatalf("sample %d: differs from decoding it", first+k)
		}
	}
	a.fs.load.Flush()
	decoded := a.fs.Stats().Decode.Clips
	// Epoch 2: samples 2, 4, 6 (frames 2-12), never read: all their frames are in.
	for _, k := range []int{2, 4, 6} {
		if d := readSample(t, a, first+k); d != want[first+k] {
			t.Fatalf("sample %d from the copy: differs from decoding it", first+k)
		}
	}
	st := a.fs.Stats()
	if st.Decode.Clips != decoded || st.Copy.Hits != 3 {
		t.Errorf("clips whose frames other clips kept: %d decoded, %d from the copy; want 0 and 3", st.Decode.Clips-decoded, st.Copy.Hits)
	}
	// Sample 1 uses odd frames, which no clip read had: decoded.
	readSample(t, a, first+1)
	if st := a.fs.Stats(); st.Decode.Clips != decoded+1 {
		t.Errorf("a clip of frames never kept: %d decoded, want 1", st.Decode.Clips-decoded)
	}
	a.close()

	// Another mount, other clips of the same frames (step and stride differ): served from the copy.
	other := setup
	other.spec.Step, other.spec.Frames = 2, 3
	b := mountVideos(t, other)
	bf, _ := b.lay.VideoSamples(0)
	readSample(t, b, bf+2) // frames 4, 6, 8
	if st := b.fs.Stats(); st.Copy.Hits != 1 || st.Decode.Clips != 0 {
		t.Errorf("remounted with other clips: %d from the copy, %d decoded; want 1 and 0", st.Copy.Hits, st.Decode.Clips)
	}
}

// readSample reads sample i of m through the mount and returns its digest.
func readSample(t *testing.T, m *testMount, i int) [32]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(m.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	S := m.lay.Spec.SampleBytes()
	buf := make([]byte, S)
	if _, err := f.ReadAt(buf, int64(i)*S); err != nil {
		t.Fatalf("sample %d: %v", i, err)
	}
	return sha256.Sum256(buf)
}

// TestCopyDamageAndChange: a copy damaged on disk (a byte flipped, a file cut short) is decoded
// again, never served wrong; a video changed under the mount is not served from its copy; and
// the copy keeps to its bound.
func TestCopyDamageAndChange(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}
	files := map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "a/hevc.mkv": "hevc.mkv", "b/vp9.webm": "vp9.webm"}
	setup := mountSetup{files: files, spec: spec, tierDir: t.TempDir(), tierBytes: 1 << 30, keep: load.KeepCopy, copyFiles: true}
	a := mountVideos(t, setup)
	want := readAll(t, a)
	fillWhole(t, a)
	a.close()
	setup.src = a.src

	var copies []string
	filepath.Walk(filepath.Join(setup.tierDir, "frames"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			copies = append(copies, p)
		}
		return nil
	})
	if len(copies) != len(files) {
		t.Fatalf("%d copies for %d videos", len(copies), len(files))
	}
	b0, _ := os.ReadFile(copies[0])
	b0[len(b0)-100] ^= 0x20
	os.WriteFile(copies[0], b0, 0o644)
	b1, _ := os.ReadFile(copies[1])
	os.WriteFile(copies[1], b1[:len(b1)/2], 0o644)

	b := mountVideos(t, setup)
	if got := readAll(t, b); !equalDigests(got, want) {
		t.Fatal("a mount over a damaged copy served other bytes than the decoder's")
	}
	st := b.fs.Stats()
	if st.Copy.Corrupt == 0 || st.Decode.Clips == 0 {
		t.Errorf("damaged copies: %d found damaged, %d decoded again", st.Copy.Corrupt, st.Decode.Clips)
	}
	b.close()

	// Mounted again: the damaged frames were written anew, and every sample is served.
	c := mountVideos(t, setup)
	if got := readAll(t, c); !equalDigests(got, want) {
		t.Fatal("after the rewrite: other bytes")
	}
	if st := c.fs.Stats(); st.Copy.Hits != int64(c.lay.Len()) || st.Copy.Corrupt != 0 {
		t.Errorf("after the rewrite: %d of %d from the copy, %d damaged", st.Copy.Hits, c.lay.Len(), st.Copy.Corrupt)
	}
	c.close()

	// A video touched under a mount, before its samples are read: not served from its copy.
	d := mountVideos(t, setup)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(setup.src, "a/gop16.mp4"), later, later); err != nil {
		t.Fatal(err)
	}
	touched := samplesOf(d.lay, "a/gop16.mp4")
	if got := readAll(t, d); !equalDigests(got, want) {
		t.Error("samples differ after a video was touched")
	}
	if st := d.fs.Stats(); st.Copy.Hits != int64(d.lay.Len())-touched || st.Decode.Clips != touched {
		t.Errorf("a video of %d samples touched: %d from the copy, %d decoded; want %d and %d",
			touched, st.Copy.Hits, st.Decode.Clips, int64(d.lay.Len())-touched, touched)
	}
	d.close()

	// A small bound: the copy never holds more.
	small := setup
	small.tierDir, small.tierBytes = t.TempDir(), 64<<10
	e := mountVideos(t, small)
	readAll(t, e)
	e.fs.load.Flush()
	used := int64(0)
	filepath.Walk(small.tierDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Name() != "lock" {
			used += fi.Size()
		}
		return nil
	})
	if used > small.tierBytes {
		t.Errorf("a copy bound to %d bytes holds %d", small.tierBytes, used)
	}
}

// TestCopyKeepsFramesPassed: the frames a decode passes through on its way to a clip (from the
// keyframe it starts at), which other clips use, are kept too: a clip before the one read is
// served from the copy without being read or decoded itself.
func TestCopyKeepsFramesPassed(t *testing.T) {
	// Starts every 2 frames, frames 2 apart: the even frames. gop16.mp4 has a keyframe every 16.
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 2, Height: 32, Width: 48}
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4"}, spec: spec, tierDir: t.TempDir(), tierBytes: 1 << 30,
		keep: load.KeepCopy, fill: load.FillClips}
	want := decoded(t, &setup)
	m := mountVideos(t, setup)
	// Sample 4 holds frames 8-14; its decode starts at frame 0 and passes 0, 2, 4 and 6.
	if readSample(t, m, 4) != want[4] {
		t.Fatal("sample 4 differs from decoding it")
	}
	m.fs.load.Flush()
	decoded := m.fs.Stats().Decode.Clips
	if readSample(t, m, 0) != want[0] {
		t.Fatal("sample 0 from the copy differs from decoding it")
	}
	if st := m.fs.Stats(); st.Decode.Clips != decoded || st.Copy.Hits != 1 {
		t.Errorf("sample 0, whose frames sample 4's decode passed: %d decoded, %d from the copy; want 0 and 1", st.Decode.Clips-decoded, st.Copy.Hits)
	}
}

// TestCopyAskedAgainAtLoad: a sample that missed the copy when the cache queued it (a plan looks
// an epoch ahead) and whose frames came while it waited for a decoder is served from the copy
// when it comes to one, not decoded; frames kept a moment ago and not yet written are served too.
func TestCopyAskedAgainAtLoad(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 2, Height: 32, Width: 48}
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4"}, spec: spec, tierDir: t.TempDir(), tierBytes: 1 << 30,
		keep: load.KeepCopy, fill: load.FillClips}
	want := decoded(t, &setup)
	m := mountVideos(t, setup)
	// Sample 46 holds frames 92-98; its decode starts at the keyframe at 80 and keeps 80-86,
	// sample 40's frames.
	readSample(t, m, 46)
	before := m.fs.Stats()
	buf := make([]byte, m.lay.Spec.SampleBytes())
	if err := loadOf(m.fs)(context.Background(), 40, buf); err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(buf) != want[40] {
		t.Fatal("sample 40 from the copy differs from decoding it")
	}
	st := m.fs.Stats()
	// (Its miss when queued, which this test skips, is taken back: the misses count one fewer.)
	if st.Decode.Clips != before.Decode.Clips || st.Copy.Hits != before.Copy.Hits+1 || st.Copy.Misses > before.Copy.Misses {
		t.Errorf("sample 40 loaded after sample 46 kept its frames: %d decoded, %d from the copy, %d misses counted; want 0, 1, none more",
			st.Decode.Clips-before.Decode.Clips, st.Copy.Hits-before.Copy.Hits, st.Copy.Misses-before.Copy.Misses)
	}
}

// TestCopyFillVideos: with --copy-fill videos, the first sample of a video loaded starts the
// video's whole decode at that sample and is served from it; once the decode is through, every
// other sample of the video is served from the copy, byte-identical to decoding it, with no
// decode.
func TestCopyFillVideos(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "b/hevc.mkv": "hevc.mkv"}, spec: spec,
		tierDir: t.TempDir(), tierBytes: 1 << 30, keep: load.KeepCopy, fill: load.FillVideos}
	want := decoded(t, &setup)
	m := mountVideos(t, setup)
	first, end := m.lay.VideoSamples(1)
	mid := (first + end) / 2
	if readSample(t, m, mid) != want[mid] {
		t.Fatal("the first sample read differs from decoding it")
	}
	if st := m.fs.Stats(); st.Copy.WholeFills != 1 || st.Copy.Hits != 1 {
		t.Errorf("the first sample read: %d whole decodes started, %d samples from the copy; want 1 and 1 (it waits for its frames)",
			st.Copy.WholeFills, st.Copy.Hits)
	}
	waitFills(t, m)
	if !m.fs.load.Whole(1) {
		t.Fatalf("video 1 not whole after a sample of it was read: %+v", m.fs.load.CopyStats())
	}
	before := m.fs.Stats()
	for i := first; i < end; i++ {
		if readSample(t, m, i) != want[i] {
			t.Fatalf("sample %d differs from decoding it", i)
		}
	}
	st := m.fs.Stats()
	if st.Decode.Clips != before.Decode.Clips || st.Copy.Misses != 0 {
		t.Errorf("the video's other samples: %d decoded, %d copy misses; want none", st.Decode.Clips-before.Decode.Clips, st.Copy.Misses)
	}
}

// TestCopyKeptAcrossFlags: a training copy is never thrown away by a changed flag. A remount
// with the default --cache-keep, a larger --cache-disk and other clips (each sample with frames
// of its own, all fitting: what auto would keep as samples in an empty directory) keeps frames,
// every file of the copy in place; a mount asking for samples there fails, naming the flag, and
// removes nothing.
func TestCopyKeptAcrossFlags(t *testing.T) {
	dir := t.TempDir()
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "b/hevc.mkv": "hevc.mkv"},
		spec: layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}, tierDir: dir, tierBytes: 1 << 30, keep: load.KeepCopy}
	m := mountVideos(t, setup)
	fillWhole(t, m)
	m.close()
	before, _ := entryFiles(t, filepath.Join(dir, "frames"))
	if len(before) == 0 {
		t.Fatal("no copy made")
	}
	again := setup
	again.src = m.src
	again.keep, again.tierBytes = load.KeepAuto, 4<<30
	again.spec = layout.Spec{Frames: 4, Stride: 1, Step: 4, Height: 32, Width: 48}
	b := mountVideos(t, again)
	if !b.fs.load.HasCopy() {
		t.Fatal("remounted with the default --cache-keep over a copy: it keeps samples")
	}
	readAll(t, b)
	b.close()
	after, _ := entryFiles(t, filepath.Join(dir, "frames"))
	for _, f := range before {
		if !slices.Contains(after, f) {
			t.Errorf("%s gone after a remount with other flags", f)
		}
	}
	lay, infos, skipped := probeTree(t, m.src, again.spec)
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: load.Decoders(2, 0), Idle: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	f, err := New(Config{Source: m.src, Layout: lay, Infos: load.InfoList(infos), Decoder: pool, CacheBytes: 64 << 20, Workers: 2, Skipped: skipped,
		Disk: load.Disk{Dir: dir, Bytes: 4 << 30, Keep: load.KeepSamples}})
	if err == nil {
		f.Close()
		t.Fatal("--cache-keep samples over a training copy: mounted")
	}
	if !strings.Contains(err.Error(), "--cache-keep") || !strings.Contains(err.Error(), dir) {
		t.Errorf("the error does not name the flag and the directory: %v", err)
	}
	if left, _ := entryFiles(t, filepath.Join(dir, "frames")); len(left) != len(after) {
		t.Errorf("a refused mount left %d of the copy's %d files", len(left), len(after))
	}
}

// pathDecoder is a fakeDecoder whose every other clip comes from NVDEC, as a pool whose GPU
// decoders are sometimes all busy gives them: those frames differ (the top bit of each byte
// flipped), as NVDEC's, which deblocks, differ from the CPU's under --decode fast.
type pathDecoder struct {
	*fakeDecoder
	calls atomic.Int64
}

func (d *pathDecoder) DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error) {
	if _, err := d.fakeDecoder.DecodeClip(ctx, info, c, o, dst); err != nil {
		return decode.Result{}, err
	}
	gpu := d.calls.Add(1)%2 == 0
	if gpu {
		for i := range dst[:c.Frames*o.FrameBytes()] {
			dst[i] ^= 0x80
		}
	}
	return decode.Result{Path: map[bool]decode.Path{false: decode.PathCPU, true: decode.PathGPU}[gpu]}, nil
}

// TestCopyOnePath: a video's copy holds the frames of one decode path: frames decoded on the
// other path are not kept beside them, so that every sample served from the copy is all of one
// path; and a whole video's decode whose chunks come from both is given up.
func TestCopyOnePath(t *testing.T) {
	f, _ := fakeFSWith(t, 64, 2, nil, OnErrorEIO, func(cfg *Config) {
		// Samples that overlap, so that one sample's frames come from the decodes of others.
		lay, err := layout.New(layout.Spec{Frames: 4, Stride: 1, Step: 2, Height: 4, Width: 4}, fakeVideos)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Layout = lay
		cfg.Decoder = &pathDecoder{fakeDecoder: cfg.Decoder.(*fakeDecoder)}
		cfg.Disk = load.Disk{Dir: t.TempDir(), Bytes: 1 << 30, Keep: load.KeepCopy, Fill: load.FillClips}
		cfg.Current = func(string) bool { return true }
	})
	buf := make([]byte, f.lay.Spec.SampleBytes())
	for i := range f.lay.Len() {
		if err := loadOf(f)(context.Background(), i, buf); err != nil {
			t.Fatal(err)
		}
	}
	f.load.FillAll()
	deadline := time.Now().Add(time.Minute)
	for c := f.load.CopyStats(); c.Filling > 0 || c.FillQueued > 0; c = f.load.CopyStats() {
		if time.Now().After(deadline) {
			t.Fatalf("the fills did not end: %+v", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.load.Flush()
	hits := 0
	fb := f.out.FrameBytes()
	for i := range f.lay.Len() {
		if !fetchOf(f)(context.Background(), i, buf).OK {
			continue
		}
		hits++
		w := want(f, i)
		gpu := buf[0] != w[0]
		for k := range f.lay.Spec.Frames {
			if frameGPU := buf[k*fb] != w[k*fb]; frameGPU != gpu {
				t.Errorf("sample %d from the copy: frame 0 from the %v, frame %d from the other path", i, map[bool]string{false: "CPU", true: "GPU"}[gpu], k)
			}
		}
	}
	st := f.load.CopyStats()
	if hits == 0 {
		t.Fatal("nothing served from the copy: nothing to check")
	}
	if st.WholeFillsFailed == 0 {
		t.Errorf("whole decodes whose chunks came from both paths: %d started, none given up", st.WholeFills)
	}
	t.Logf("%d of %d samples from the copy; %d whole decodes, %d given up", hits, f.lay.Len(), st.WholeFills, st.WholeFillsFailed)
}

// slowFills is a fakeDecoder whose whole videos' chunks (Strict clips) take a while, and which
// counts the samples' own decodes by start.
type slowFills struct {
	*fakeDecoder
	mu      sync.Mutex
	samples map[[2]int]int
}

func (d *slowFills) DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error) {
	if c.Strict {
		time.Sleep(100 * time.Millisecond)
	} else {
		d.mu.Lock()
		d.samples[[2]int{d.video[info.Path], c.Start}]++
		d.mu.Unlock()
	}
	return d.fakeDecoder.DecodeClip(ctx, info, c, o, dst)
}

// TestCopyFillWaitBounded: with --copy-fill videos, the first sample of a video read starts its
// whole decode at that sample and is served from it, without a decode of its own; a sample the
// whole decode will reach only much later (its second pass) is decoded as it is, while the whole
// decode goes on: no load waits for a whole video.
func TestCopyFillWaitBounded(t *testing.T) {
	var dec *slowFills
	f, _ := fakeFSWith(t, 64, 2, nil, OnErrorEIO, func(cfg *Config) {
		dec = &slowFills{fakeDecoder: cfg.Decoder.(*fakeDecoder), samples: map[[2]int]int{}}
		cfg.Decoder = dec
		cfg.Disk = load.Disk{Dir: t.TempDir(), Bytes: 1 << 30, Keep: load.KeepCopy, Fill: load.FillVideos}
		cfg.Current = func(string) bool { return true }
	})
	buf := make([]byte, f.lay.Spec.SampleBytes())
	first, end := f.lay.VideoSamples(0) // 64 frames: 16 samples, four 16-frame chunks a pass
	mid := (first + end) / 2
	if err := loadOf(f)(context.Background(), mid, buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, want(f, mid)) {
		t.Fatal("the sample served from the whole decode differs from decoding it")
	}
	if n := dec.samples[[2]int{0, f.lay.Sample(mid).Start}]; n != 0 {
		t.Errorf("the first sample read was decoded %d times of its own; want it served from the whole decode", n)
	}
	if err := loadOf(f)(context.Background(), first, buf); err != nil {
		t.Fatal(err)
	}
	if !f.load.Filling(0) {
		t.Error("the load of a sample the whole decode reaches last waited for it to end")
	}
	if n := dec.samples[[2]int{0, 0}]; n != 1 || !bytes.Equal(buf, want(f, first)) {
		t.Errorf("the sample the whole decode reaches last: decoded %d times of its own; want once, as it is", n)
	}
}

// TestCopyFillVideosQueued: --copy-fill videos with one fill slot and a plan of one sample of
// each of several videos, loaded ahead together: every video read ends whole in the copy, those
// whose loads found the slot taken too (queued for it, or taken from the plan's next videos);
// nothing is left behind in the queue.
func TestCopyFillVideosQueued(t *testing.T) {
	files := map[string]string{}
	for i, name := range []string{"h264_gop16.mp4", "hevc.mkv", "vp9.webm", "mpeg4.avi", "vp8.webm", "av1.mp4"} {
		files[fmt.Sprintf("c/v%d%s", i, filepath.Ext(name))] = name
	}
	setup := mountSetup{files: files, spec: layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48},
		tierDir: t.TempDir(), tierBytes: 1 << 30, keep: load.KeepCopy, fill: load.FillVideos, workers: 1, prefetch: 64}
	want := decoded(t, &setup)
	m := mountVideos(t, setup)
	// A sample of each video, once: a slot missed at its load comes no second time.
	var order []int
	for v := range m.lay.Videos {
		if first, end := m.lay.VideoSamples(v); end > first {
			order = append(order, (first+end)/2)
		}
	}
	writeOrder(t, m, order)
	for _, i := range order {
		if readSample(t, m, i) != want[i] {
			t.Fatalf("sample %d differs from decoding it", i)
		}
	}
	waitFills(t, m)
	for v := range m.lay.Videos {
		if first, end := m.lay.VideoSamples(v); end > first && !m.fs.load.Whole(v) {
			t.Errorf("video %d (%s) not whole after its samples were read: %+v", v, m.lay.Videos[v].Path, m.fs.load.CopyStats())
		}
	}
	if left := m.fs.load.CopyStats().FillQueued; left != 0 {
		t.Errorf("%d videos left queued", left)
	}
}

// loadOf is the load f's cache calls (cache.Options.Load): a sample loaded as the cache would.
func loadOf(f *FS) func(ctx context.Context, i int, buf []byte) error {
	var o cache.Options
	f.load.Wire(&o)
	return o.Load
}

// fetchOf is the cache's quick lane of f (cache.Options.Fetch): a sample from the disk, if there.
func fetchOf(f *FS) func(ctx context.Context, i int, buf []byte) cache.Fetched {
	var o cache.Options
	f.load.Wire(&o)
	return o.Fetch
}
