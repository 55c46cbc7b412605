package fs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// waitWhole waits until m's copy holds n videos whole, with nothing left to write, or fails.
func waitWhole(t *testing.T, m *testMount, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m.fs.load.Flush()
		c := m.fs.load.CopyStats()
		if c.Complete >= n && c.Filling == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy did not come to hold %d videos whole: %+v", n, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCopyIdleFills: under --copy-fill auto, a plan written and nothing read (a trainer bound by
// its GPU, its cores idle) has the copy decode the plan's videos whole at SCHED_IDLE, in the CPU
// the readers leave, with no budget granted (no reader read): every video with samples becomes
// whole, every whole decode is such an idle one, and every sample then reads from the copy, as
// decoding it gives, with no decode. (The cache holds a few samples: its prefetches, which decode
// ahead of the plan, keep few frames of their own.)
func TestCopyIdleFills(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "b/hevc.mkv": "hevc.mkv", "b/vp9.webm": "vp9.webm"},
		spec: spec, tierDir: t.TempDir(), tierBytes: 1 << 30, keep: load.KeepCopy, fill: load.FillAuto,
		cacheBytes: 16 * spec.SampleBytes(), prefetch: 2, helpers: true}
	want := decoded(t, &setup)
	m := mountVideos(t, setup)
	n := m.lay.Len()
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	writeOrder(t, m, append(all, all...)) // two epochs planned, as PlanSampler writes them
	waitWhole(t, m, m.fs.Stats().Copy.VideosWithSamples)
	st := m.fs.Stats()
	if st.Copy.IdleFills == 0 || st.Copy.IdleFills != st.Copy.WholeFills {
		t.Errorf("%d whole decodes, %d of them idle; want every one idle", st.Copy.WholeFills, st.Copy.IdleFills)
	}
	if h := st.Decode.Helpers; h == nil || h.Background == 0 || h.IdleDecodes != h.Background {
		t.Errorf("helpers' stats %+v: want the idle fills' clips decoded at SCHED_IDLE", h)
	}
	if st.Copy.FillBudget.GrantedSeconds != 0 {
		t.Errorf("%.3f s of budget granted; want none: nothing was read", st.Copy.FillBudget.GrantedSeconds)
	}
	got := readAll(t, m)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("sample %d (%s) from the copy differs from decoding it", i, m.fs.sampleFile(i))
		}
	}
	if after := m.fs.Stats(); after.Decode.Clips != st.Decode.Clips {
		t.Errorf("%d samples decoded after the copy was whole; want every one from it", after.Decode.Clips-st.Decode.Clips)
	}
}

// TestCopyStableWhenFull: a copy whose bound holds part of the whole copy says so (its estimate
// within a quarter of what the copy takes once every video that fits is in, fits below 1), takes
// videos until the room is promised and refuses the rest before decoding them, and keeps the same
// videos epoch after epoch: nothing is evicted for another video a plan wants, and a second epoch
// decodes no video whole.
func TestCopyStableWhenFull(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 1, Step: 2, Height: 32, Width: 48}
	files := map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "a/gop250.mp4": "h264_gop250.mp4", "b/hevc.mkv": "hevc.mkv",
		"b/vp9.webm": "vp9.webm", "c/mpeg4.avi": "mpeg4.avi", "c/av1.mp4": "av1.mp4"}
	probe := mountVideos(t, mountSetup{files: files, spec: spec, tierDir: t.TempDir(), tierBytes: 1 << 30, tierCodec: diskstore.None, keep: load.KeepCopy, fill: load.FillClips})
	whole := probe.fs.load.CopyStats().EstimatedBytes // codec none: exact, a frame its raw bytes
	src := probe.src
	probe.close()

	bound := whole / 2
	setup := mountSetup{files: files, src: src, spec: spec, tierDir: t.TempDir(), tierBytes: bound, tierCodec: diskstore.None, keep: load.KeepCopy, fill: load.FillVideos}
	m := mountVideos(t, setup)
	n := m.lay.Len()
	order := make([]int, 0, 2*n)
	for e := range 2 {
		for i := range n {
			order = append(order, (i*7+e*3)%n) // a different order each epoch
		}
	}
	writeOrder(t, m, order)
	readOutcomes(t, m, order[:n])
	waitFills(t, m)
	held := map[int]bool{}
	for v := range m.lay.Videos {
		if m.fs.load.Whole(v) {
			held[v] = true
		}
	}
	st1 := m.fs.Stats().Copy
	if len(held) == 0 || len(held) == len(m.lay.Videos) {
		t.Fatalf("%d of %d videos whole with the bound at half the copy: %+v", len(held), len(m.lay.Videos), st1)
	}
	if st1.Refused == 0 || st1.Fits >= 1 || st1.Fits < 0.4 {
		t.Errorf("stats %+v: want videos refused room, and fits about a half", st1)
	}
	if d := float64(st1.EstimatedBytes-whole) / float64(whole); d < -0.25 || d > 0.25 {
		t.Errorf("estimated %d bytes, the whole copy %d", st1.EstimatedBytes, whole)
	}
	readOutcomes(t, m, order[n:])
	waitFills(t, m)
	st2 := m.fs.Stats().Copy
	for v := range m.lay.Videos {
		if m.fs.load.Whole(v) != held[v] {
			t.Errorf("video %s whole after epoch 1: %v, after epoch 2: %v; want the same set", m.lay.Videos[v].Path, held[v], !held[v])
		}
	}
	if st2.Evicted != 0 || st2.WholeFills != st1.WholeFills {
		t.Errorf("epoch 2: %d videos evicted, %d whole decodes started (%d in epoch 1); want none evicted, none started",
			st2.Evicted, st2.WholeFills, st1.WholeFills)
	}
	if st2.UsedBytes > bound {
		t.Errorf("the copy takes %d bytes, over its bound %d", st2.UsedBytes, bound)
	}
}

// TestEpochsFile: .vidfs/epochs takes the epochs a run has left (PlanSampler(epochs=...)), which
// the stats show, and refuses what is not such a number; .vidfs/fill refuses what is not a
// request it takes, and reads as nothing.
func TestEpochsFile(t *testing.T) {
	setup := mountSetup{files: map[string]string{"a/gop16.mp4": "h264_gop16.mp4"}, spec: layout.Spec{Frames: 4, Stride: 1, Height: 32, Width: 48},
		tierDir: t.TempDir(), tierBytes: 1 << 30, keep: load.KeepCopy, fill: load.FillAuto}
	m := mountVideos(t, setup)
	p := filepath.Join(m.dir, ".vidfs", "epochs")
	if err := os.WriteFile(p, []byte("10\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := m.fs.Stats().Copy.FillBudget.EpochsLeft; got != 10 {
		t.Errorf("epochs left %d, want 10", got)
	}
	for _, bad := range []string{"ten", "-1", "2000000"} {
		if err := os.WriteFile(p, []byte(bad), 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("writing %q: %v, want EINVAL", bad, err)
		}
	}
	// .vidfs/fill, the other request file, refuses what it cannot take alike.
	fill := filepath.Join(m.dir, ".vidfs", "fill")
	for _, bad := range []string{"some", "share x samples n0 n0 n1", "share 1 clips n0 n0 n1", "share 1 samples n9 n0 n1"} {
		if err := os.WriteFile(fill, []byte(bad+"\n"), 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("writing %q to .vidfs/fill: %v, want EINVAL", bad, err)
		}
	}
	if b, err := os.ReadFile(fill); err != nil || len(b) != 0 {
		t.Errorf("reading .vidfs/fill: %q, %v; want nothing", b, err)
	}
}

// TestCopyMeasuresByLoads: a copy whose codec's ratio nothing told yet measures what a frame
// takes by the first samples its readers' loads decode, and decodes none of its own for that;
// a mount nobody reads measures by samples it decodes itself once it waited for loads.
func TestCopyMeasuresByLoads(t *testing.T) {
	spec := layout.Spec{Frames: 4, Stride: 2, Step: 3, Height: 32, Width: 48}
	files := map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "b/hevc.mkv": "hevc.mkv", "b/vp9.webm": "vp9.webm"}
	setup := mountSetup{files: files, spec: spec, tierDir: t.TempDir(), tierBytes: 1 << 30, tierCodec: diskstore.Huff,
		keep: load.KeepCopy, fill: load.FillClips}
	m := mountVideos(t, setup)
	if !m.fs.load.CopyStats().EstimateAssumed {
		t.Fatal("a new copy with huff knows a frame's size before anything was packed")
	}
	// Three samples of three videos, read as readers do.
	var read []int
	for v := range m.lay.Videos {
		first, end := m.lay.VideoSamples(v)
		if end > first {
			read = append(read, first)
			readSample(t, m, first)
		}
	}
	if len(read) < 3 {
		t.Fatalf("%d videos with samples, want 3", len(read))
	}
	st := m.fs.Stats()
	if st.Copy.EstimateAssumed {
		t.Errorf("after %d samples decoded for readers, a frame's size is still assumed", len(read))
	}
	// No decode beyond the readers' (wait past the mount's own measuring's time, to see none).
	time.Sleep(3 * time.Second)
	st = m.fs.Stats()
	if st.Decode.Clips != int64(len(read)) || st.Decode.FillClips != 0 {
		t.Errorf("%d samples read: %d decoded for them, %d besides; want none besides", len(read), st.Decode.Clips, st.Decode.FillClips)
	}
	m.close()

	idle := setup
	idle.src, idle.tierDir = m.src, t.TempDir()
	n := mountVideos(t, idle)
	deadline := time.Now().Add(time.Minute)
	for n.fs.load.CopyStats().EstimateAssumed {
		if time.Now().After(deadline) {
			t.Fatal("a mount nobody reads did not measure a frame's size in a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := n.fs.Stats(); st.Decode.Clips != 0 || st.Decode.FillClips == 0 {
		t.Errorf("a mount nobody reads: %d decoded for readers, %d for itself; want none, and some", st.Decode.Clips, st.Decode.FillClips)
	}
}
