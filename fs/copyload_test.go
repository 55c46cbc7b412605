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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

var loadRounds = flag.Int("copy.load-rounds", 1, "TestCopyPropertyLoad: how many random layouts besides the fixed ones")

// delayDecoder holds each decode back a random while (up to max) before it starts, so that
// samples' decodes and whole videos' decodes of the same video interleave in new ways.
type delayDecoder struct {
	load.Decoder
	max time.Duration
}

func (d delayDecoder) DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error) {
	select {
	case <-time.After(rand.N(d.max)):
	case <-ctx.Done():
		return decode.Result{}, ctx.Err()
	}
	return d.Decoder.DecodeClip(ctx, info, c, o, dst)
}

// delayShared is a delayDecoder of a decoder with buffers of its own (isolate's helpers').
type delayShared struct {
	delayDecoder
	SharedBuffers
}

// withDelays wraps a mount's decoder in a delayDecoder.
func withDelays(max time.Duration) func(load.Decoder) load.Decoder {
	return func(d load.Decoder) load.Decoder {
		dd := delayDecoder{Decoder: d, max: max}
		if sb, ok := d.(SharedBuffers); ok {
			return delayShared{dd, sb}
		}
		return dd
	}
}

// readOutcomesAtOnce reads samples through m's clips.raw with readers goroutines at once, each
// taking the next sample of the list as it is free.
func readOutcomesAtOnce(t *testing.T, m *testMount, samples []int, readers int) map[int]outcome {
	t.Helper()
	f, err := os.Open(filepath.Join(m.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	S := m.lay.Spec.SampleBytes()
	var mu sync.Mutex // guards next, out and failure
	next, out := 0, make(map[int]outcome, len(samples))
	var failure error
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, S)
			for {
				mu.Lock()
				if next == len(samples) || failure != nil {
					mu.Unlock()
					return
				}
				i := samples[next]
				next++
				mu.Unlock()
				o := outcome{failed: true}
				if _, err := f.ReadAt(buf, int64(i)*S); err == nil {
					o = outcome{sum: sha256.Sum256(buf)}
				} else if !errors.Is(err, syscall.EIO) {
					mu.Lock()
					failure = fmt.Errorf("sample %d: %w", i, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				out[i] = o
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	return out
}

// loadVideos is TestCopyPropertyLoad's source: the real files that vidfs served otherwise under
// load (testdata/real.sh), one video of each class that numbers frames its own way or starts
// decoding elsewhere than at its keyframes, and damaged ones (TestCopyProperty has the rest).
// It returns them all, and the test videos alone.
func loadVideos(t *testing.T) (all, classes map[string]string) {
	all, classes = map[string]string{}, map[string]string{}
	for _, name := range []string{"h264_editstart.mp4", "h264_editend.mp4", "mpeg2_cut.mpg", "xvid_packed.avi",
		"h264_bframes.avi", "h264_refresh444.mp4", "corrupt.mp4", "truncated.mp4"} {
		all["class/"+name], classes["class/"+name] = name, name
	}
	for _, name := range []string{"movie-hello.mpeg", "tour.mp4"} {
		all["real/"+name] = testvideo.Real(t, name)
	}
	return all, classes
}

// TestCopyPropertyLoad: TestCopyProperty under load. Many readers at once, whole videos decoded
// into the copy several at a time in chunks of a few frames (so that chunks end everywhere), each
// decode held back a random while (so that a sample's decode and a whole decode of its video
// interleave in new ways), over real files that the copy once served otherwise only under load
// and videos of each class, in the layouts that showed it and random ones: every sample read is
// what a mount without a disk gives, or a fresh decode of it alone, in the first epoch, after
// vidfs copy, and remounted. go test -run TestCopyPropertyLoad -copy.seed N tries other layouts.
func TestCopyPropertyLoad(t *testing.T) {
	r := rand.New(rand.NewPCG(*propSeed, 0x10ad))
	type round struct {
		spec   layout.Spec
		resize decode.Resize
		fast   bool
		fill   load.Fill
		codec  diskstore.Codec
	}
	rounds := []round{
		// movie-hello.mpeg's sample at frame 92 differed here (a whole decode's landing after a
		// seek on a keyframe of another's size and no place), and tour.mp4's at 10.625 s
		// (frames shown that refer to a P-frame its edit list cuts off).
		{layout.Spec{Frames: 8, Stride: 2, Step: 4, Height: 64, Width: 64, PadShort: true}, decode.Crop, false, load.FillVideos, diskstore.None},
		{layout.Spec{Frames: 8, Stride: 2, Step: 5, Height: 64, Width: 64, PadShort: true, FPS: layout.Rate{Num: 24, Den: 1}}, decode.Stretch, true, load.FillVideos, diskstore.Zstd},
	}
	fixed := len(rounds)
	fills := []load.Fill{load.FillAuto, load.FillClips, load.FillVideos}
	for range *loadRounds {
		spec, resize, fast := propLayout(r)
		rounds = append(rounds, round{spec, resize, fast, fills[r.IntN(len(fills))], diskstore.Codecs[r.IntN(len(diskstore.Codecs))]})
	}
	files, classes := loadVideos(t)
	for n, rd := range rounds {
		s := rd.spec
		name := fmt.Sprintf("%d/T%d_s%d_step%d_cpv%d_fps%v_%v_fast%v/%v/%v", n, s.Frames, s.Stride, s.Step, s.ClipsPerVideo, s.FPS.Num, rd.resize, rd.fast, rd.fill, rd.codec)
		t.Run(name, func(t *testing.T) {
			plain := mountSetup{files: files, spec: s, resize: rd.resize, fast: rd.fast}
			if n >= fixed {
				plain.files = classes // the real files are long: in the layouts that showed them only
			}
			ref := mountVideos(t, plain) // the reference: decoded in the test's process
			n := ref.lay.Len()
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			want := readOutcomes(t, ref, all)
			check := newPropCheck(ref, want)
			ref.close()

			busy := plain
			busy.helpers = true // the mount's path: decoders in sandboxed helpers
			busy.src, busy.workers, busy.fillChunk, busy.wrap = ref.src, 3, 1+r.IntN(3), withDelays(3*time.Millisecond)
			busy.tierDir, busy.tierBytes, busy.tierCodec, busy.keep, busy.fill = t.TempDir(), 1<<30, rd.codec, load.KeepCopy, rd.fill
			busy.cacheBytes = int64(2*(2*3+2)+4) * s.SampleBytes() // little beyond the loads' room: reads go to the copy
			a := mountVideos(t, busy)
			order := r.Perm(n)
			if r.IntN(2) == 0 {
				writeOrder(t, a, append(order, r.Perm(n)...)) // planned: fills start ahead of the readers
			}
			check.check(t, a, readOutcomesAtOnce(t, a, order, 6), "epoch 1, 6 readers")
			fillWhole(t, a)
			check.check(t, a, readOutcomesAtOnce(t, a, r.Perm(n), 6), "after vidfs copy, 6 readers")
			a.close()

			b := mountVideos(t, busy)
			check.check(t, b, readOutcomesAtOnce(t, b, r.Perm(n), 6), "remounted, 6 readers")
			st := b.fs.Stats()
			// The reads compared were the copy's: vidfs copy made every clean video whole, and
			// the remount served their samples from it, decoding none.
			clean := 0
			for v := range b.lay.Videos {
				first, end := b.lay.VideoSamples(v)
				ok := first < end
				for i := first; i < end; i++ {
					ok = ok && !want[i].failed
				}
				if ok {
					clean += end - first
					if !b.fs.load.Whole(v) {
						t.Errorf("video %s decodes cleanly, but is not whole in the copy after vidfs copy", b.lay.Videos[v].Path)
					}
				}
			}
			if st.Copy.Hits < int64(clean) || st.Decode.Clips != 0 {
				t.Errorf("remounted: %d samples from the copy, %d decoded; want the %d samples of clean videos from the copy, none decoded", st.Copy.Hits, st.Decode.Clips, clean)
			}
			t.Logf("%d samples of %d videos: %d from the copy, %d decoded on the remount (fill chunk %d)",
				n, len(b.lay.Videos), st.Copy.Hits, st.Decode.Clips, busy.fillChunk)
		})
	}
}
