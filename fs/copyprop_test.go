package fs

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

var (
	propSeed   = flag.Uint64("copy.seed", 39, "TestCopyProperty: the seed of its random layouts")
	propRounds = flag.Int("copy.rounds", 12, "TestCopyProperty: how many layouts (12: each fill with each codec once)")
)

// everyVideo is a source tree of every test video: the decodable ones, the damaged and
// truncated ones, and those vidfs leaves out.
func everyVideo(t *testing.T) map[string]string {
	t.Helper()
	names, err := os.ReadDir(filepath.Dir(testvideo.Path("h264_gop16.mp4")))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for i, n := range names {
		if strings.HasSuffix(n.Name(), ".damage") {
			continue
		}
		files[fmt.Sprintf("c%d/%s", i%3, n.Name())] = n.Name()
	}
	return files
}

// propLayout draws a layout: frames, stride, step or clips per video, a target rate or none,
// padding or not, the fit and the decoding.
func propLayout(r *rand.Rand) (layout.Spec, decode.Resize, bool) {
	sizes := [][2]int{{16, 24}, {24, 16}, {32, 48}, {24, 24}}
	sz := sizes[r.IntN(len(sizes))]
	s := layout.Spec{Frames: 1 + r.IntN(6), Stride: 1 + r.IntN(3), Step: 1 + r.IntN(5), Height: sz[0], Width: sz[1], PadShort: r.IntN(2) == 0}
	if r.IntN(4) == 0 {
		s.Step, s.ClipsPerVideo = 0, 1+r.IntN(3)
	}
	rates := []layout.Rate{{}, {}, {Num: 10, Den: 1}, {Num: 15, Den: 1}, {Num: 24, Den: 1}, {Num: 30000, Den: 1001}}
	s.FPS = rates[r.IntN(len(rates))]
	return s, decode.Resize(r.IntN(3)), r.IntN(4) == 0
}

// outcome is what reading a sample gave: its digest, or that it failed (EIO).
type outcome struct {
	sum    [32]byte
	failed bool
}

// readOutcomes reads samples (in that order) through m's clips.raw.
func readOutcomes(t *testing.T, m *testMount, samples []int) map[int]outcome {
	t.Helper()
	f, err := os.Open(filepath.Join(m.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	S := m.lay.Spec.SampleBytes()
	buf := make([]byte, S)
	out := make(map[int]outcome, len(samples))
	for _, i := range samples {
		if _, err := f.ReadAt(buf, int64(i)*S); err != nil {
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("sample %d: %v", i, err)
			}
			out[i] = outcome{failed: true}
			continue
		}
		out[i] = outcome{sum: sha256.Sum256(buf)}
	}
	return out
}

// TestCopyProperty: for every test video, over random layouts (frames, stride, step, clips per
// video, --fps, --short, --resize, --decode), each fill (auto, clips, videos) with each codec,
// every sample read from the training copy is what a mount without a disk gives, byte for
// byte: read in the same mount in a planned random order over two epochs, again after vidfs copy
// (FillAll) from a cache too small to hold them, and after a remount, which decodes nothing of
// the videos the copy holds whole. Decoding a damaged video's samples may depend on where the
// decoder came from (a decoder that passed the damage fails samples of its group of pictures
// that a fresh one decodes), in a mount without a disk too: a sample of a damaged video may fail
// where the reference served it, and bytes that differ from the reference's must be those of a
// fresh decode of the sample alone. go test -run TestCopyProperty -copy.seed N tries others.
func TestCopyProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(*propSeed, 0x5eed))
	type combo struct {
		fill  load.Fill
		codec diskstore.Codec
	}
	var combos []combo
	for _, fill := range []load.Fill{load.FillAuto, load.FillClips, load.FillVideos} {
		for _, codec := range diskstore.Codecs {
			combos = append(combos, combo{fill, codec})
		}
	}
	r.Shuffle(len(combos), func(i, j int) { combos[i], combos[j] = combos[j], combos[i] })
	files := everyVideo(t)
	began := time.Now()
	for round := range *propRounds {
		spec, resize, fast := propLayout(r)
		cb := combos[round%len(combos)]
		name := fmt.Sprintf("%d/T%d_s%d_step%d_cpv%d_fps%v_pad%v_%v_fast%v/%v/%v", round, spec.Frames, spec.Stride, spec.Step,
			spec.ClipsPerVideo, spec.FPS.Num, spec.PadShort, resize, fast, cb.fill, cb.codec)
		t.Run(name, func(t *testing.T) {
			plain := mountSetup{files: files, spec: spec, resize: resize, fast: fast}
			ref := mountVideos(t, plain)
			n := ref.lay.Len()
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			want := readOutcomes(t, ref, all)
			ref.close()

			withCopy := plain
			withCopy.src = ref.src
			withCopy.tierDir, withCopy.tierBytes, withCopy.tierCodec, withCopy.keep, withCopy.fill = t.TempDir(), 1<<30, cb.codec, load.KeepCopy, cb.fill
			withCopy.cacheBytes = int64(2*(2*2+2)+4) * spec.SampleBytes() // little beyond the loads' room: reads go to the copy
			check := newPropCheck(ref, want)
			a := mountVideos(t, withCopy)
			// Two epochs in a random order, planned (auto fills what the plans read again).
			order := append(r.Perm(n), r.Perm(n)...)
			writeOrder(t, a, order)
			check.check(t, a, readOutcomes(t, a, order[:n]), "epoch 1")
			check.check(t, a, readOutcomes(t, a, order[n:]), "epoch 2")
			fillWhole(t, a)
			check.check(t, a, readOutcomes(t, a, r.Perm(n)), "after vidfs copy")
			a.close()

			b := mountVideos(t, withCopy)
			got := readOutcomes(t, b, r.Perm(n))
			check.check(t, b, got, "remounted")
			st := b.fs.Stats()
			// What a remount decodes: only samples of videos the copy does not hold whole
			// (damaged ones, and the samples that fail).
			notWhole := 0
			for i := range n {
				if !b.fs.load.Whole(b.lay.Sample(i).Video) {
					notWhole++
				}
			}
			if st.Decode.Clips > int64(notWhole) {
				t.Errorf("remounted: %d samples decoded, but only %d are of videos the copy does not hold whole", st.Decode.Clips, notWhole)
			}
			// Every video whose samples all decode is whole.
			for v := range b.lay.Videos {
				first, end := b.lay.VideoSamples(v)
				clean := first < end
				for i := first; i < end; i++ {
					clean = clean && !want[i].failed
				}
				if clean && !b.fs.load.Whole(v) {
					t.Errorf("video %s decodes cleanly, but is not whole in the copy after vidfs copy", b.lay.Videos[v].Path)
				}
			}
			t.Logf("%d samples of %d videos: %d from the copy, %d decoded on the remount; %d frames, %d bytes",
				n, len(b.lay.Videos), st.Copy.Hits, st.Decode.Clips, st.Copy.Frames, st.Copy.UsedBytes)
		})
	}
	t.Logf("%d layouts in %v (seed %d)", *propRounds, time.Since(began).Round(time.Second), *propSeed)
}

// propCheck holds what a mount without a disk gave (want), and the videos whose samples may fail
// in one mount and not in another.
type propCheck struct {
	want map[int]outcome
	// damaged holds the videos with a sample that fails, or cut short: which of their samples
	// fail depends on where the decoder came from, in a mount without a disk too (a decoder that
	// passed the damage fails samples of its group of pictures that a fresh one decodes).
	damaged map[int]bool
}

func newPropCheck(ref *testMount, want map[int]outcome) *propCheck {
	damaged := map[int]bool{}
	for i, o := range want {
		if o.failed {
			damaged[ref.lay.Sample(i).Video] = true
		}
	}
	for v := range ref.lay.Videos {
		if info, err := ref.fs.cfg.Infos.Info(v); err == nil && info.Truncated {
			damaged[v] = true
		}
	}
	return &propCheck{want: want, damaged: damaged}
}

// check fails the test for each sample m gave otherwise than the mount without a disk, and
// otherwise than a fresh decode of it alone.
func (p *propCheck) check(t *testing.T, m *testMount, got map[int]outcome, when string) {
	t.Helper()
	for i, g := range got {
		if g == p.want[i] || g.failed && p.damaged[m.lay.Sample(i).Video] {
			continue
		}
		if fresh := freshOutcome(t, m, i); g != fresh {
			t.Errorf("%s: sample %d (%s): %s, a mount without a disk %s, a fresh decode %s",
				when, i, m.fs.sampleFile(i), describe(g), describe(p.want[i]), describe(fresh))
		}
	}
}

// freshOutcome decodes sample i of m alone, with a decoder of its own, as vidfs clip does.
func freshOutcome(t *testing.T, m *testMount, i int) outcome {
	t.Helper()
	info, err := m.fs.cfg.Infos.Info(m.lay.Sample(i).Video)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, m.lay.Spec.SampleBytes())
	if _, err := decode.DecodeClip(context.Background(), info, load.SampleClip(m.lay, i), m.fs.out, buf, 1); err != nil {
		return outcome{failed: true}
	}
	return outcome{sum: sha256.Sum256(buf)}
}

func describe(o outcome) string {
	if o.failed {
		return "failed"
	}
	return fmt.Sprintf("%x", o.sum[:6])
}

// writeOrder writes samples to m's plan (.vidfs/order), as a trainer would.
func writeOrder(t *testing.T, m *testMount, samples []int) {
	t.Helper()
	var b strings.Builder
	for _, i := range samples {
		fmt.Fprintln(&b, i)
	}
	if err := os.WriteFile(filepath.Join(m.dir, ".vidfs", "order"), []byte(b.String()), 0); err != nil {
		t.Fatal(err)
	}
}
