package decode_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// gpuPool returns a pool that decodes on the GPU, or skips the test, saying why: the NVDEC path
// can only be run where an NVIDIA GPU and its driver are.
func gpuPool(t *testing.T) *decode.Pool {
	t.Helper()
	p, err := decode.NewPool(decode.PoolOptions{Concurrency: 2, HWAccel: decode.HWCUDA})
	if err != nil {
		t.Skipf("NVDEC test not run: %v. It runs on machines with an NVIDIA GPU and driver.", err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestNVDECFrameExact runs the frame-exactness test through NVDEC: every clip has exactly its
// frames, within a PSNR of 35 dB of the CPU's decode of them.
func TestNVDECFrameExact(t *testing.T) {
	gpu := gpuPool(t)
	cpu := newPool(t, decode.PoolOptions{Concurrency: 1})
	for _, v := range goodVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			o := stretchOutput(info)
			for _, c := range clipCases(info) {
				got := make([]byte, c.Frames*o.FrameBytes())
				if _, err := gpu.DecodeClip(context.Background(), info, c, o, got); err != nil {
					t.Fatalf("clip %+v: %v", c, err)
				}
				if idx, w := readClip(t, info, o, got, c.Frames), want(c, info.Frames); fmt.Sprint(idx) != fmt.Sprint(w) {
					t.Fatalf("clip %+v: got frames %v, want %v", c, idx, w)
				}
				ref := make([]byte, len(got))
				if _, err := cpu.DecodeClip(context.Background(), info, c, o, ref); err != nil {
					t.Fatal(err)
				}
				if p := psnr(got, ref); p < 35 {
					t.Errorf("clip %+v: PSNR %.1f dB against the CPU, want at least 35", c, p)
				}
			}
		})
	}
	st := gpu.Stats()
	t.Logf("clips: %d, on NVDEC %d, moved to the CPU after NVDEC failed: %d videos", st.ClipsCPU+st.ClipsGPU, st.ClipsGPU, st.GPUFallbacks)
	if st.ClipsGPU == 0 {
		t.Error("no clip was decoded on the GPU")
	}
}

// TestNVDECRealFootage: Megamind at 720p and 1080p in H.264 and HEVC through NVDEC, against the
// CPU.
func TestNVDECRealFootage(t *testing.T) {
	gpu := gpuPool(t)
	for _, args := range []string{"-vf scale=1280:720 -g 48", "-vf scale=1920:1080 -g 48", "-vf scale=1920:1080 -g 48 -c:v libx265 -x265-params log-level=error"} {
		path := testvideo.Transcode(t, testvideo.Megamind, args)
		info, err := decode.Probe(path)
		if err != nil {
			t.Fatal(err)
		}
		o := decode.Output{Width: 224, Height: 224}
		c := decode.Clip{Start: 100, Frames: 16, Stride: 2}
		got, ref := make([]byte, 16*o.FrameBytes()), make([]byte, 16*o.FrameBytes())
		if _, err := gpu.DecodeClip(context.Background(), info, c, o, got); err != nil {
			t.Fatal(err)
		}
		if _, err := decode.DecodeClip(context.Background(), info, c, o, ref, 0); err != nil {
			t.Fatal(err)
		}
		if p := psnr(got, ref); p < 35 || math.IsNaN(p) {
			t.Errorf("%s: PSNR %.1f dB against the CPU", args, p)
		}
	}
}

// TestNVDECClassVideos: the videos whose decoders number frames otherwise than their packets
// suggest (B-frames in AVI, a cut MPEG-2 program stream, no reorder hint, packed B-frames,
// rotation with mirroring) give through NVDEC the frames the CPU gives, or the same error.
func TestNVDECClassVideos(t *testing.T) {
	gpu := gpuPool(t)
	cpu := newPool(t, decode.PoolOptions{Concurrency: 1})
	for _, v := range classVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			o := stretchOutput(info)
			for _, c := range clipCases(info) {
				got, ref := make([]byte, c.Frames*o.FrameBytes()), make([]byte, c.Frames*o.FrameBytes())
				_, gerr := gpu.DecodeClip(context.Background(), info, c, o, got)
				_, cerr := cpu.DecodeClip(context.Background(), info, c, o, ref)
				if fmt.Sprint(gerr) != fmt.Sprint(cerr) {
					t.Fatalf("clip %+v: NVDEC %v, CPU %v", c, gerr, cerr)
				}
				if p := psnr(got, ref); gerr == nil && (p < 35 || math.IsNaN(p)) {
					t.Errorf("clip %+v: PSNR %.1f dB against the CPU, want at least 35", c, p)
				}
			}
		})
	}
}

// TestNVDECRefused: streams NVDEC cannot decode (H.264 4:4:4 and 10-bit: no NVDEC before
// Blackwell has them) decode on the CPU in the same pool, exactly as a CPU pool does, and count
// as CPU clips.
func TestNVDECRefused(t *testing.T) {
	gpu := gpuPool(t)
	cpu := newPool(t, decode.PoolOptions{Concurrency: 1})
	paths := []string{testvideo.Path("h264_refresh444.mp4"),
		testvideo.Transcode(t, testvideo.Megamind, "-g 48 -frames:v 96 -pix_fmt yuv420p10le -profile:v high10")}
	clips := 0
	for _, path := range paths {
		info, err := decode.Probe(path)
		if err != nil {
			t.Fatal(err)
		}
		o := decode.Output{Width: 64, Height: 48, Resize: decode.Stretch}
		for _, c := range []decode.Clip{{Start: 0, Frames: 8, Stride: 1}, {Start: info.Frames / 2, Frames: 8, Stride: 2}, {Start: 1, Frames: 4, Stride: 3}} {
			got, ref := make([]byte, c.Frames*o.FrameBytes()), make([]byte, c.Frames*o.FrameBytes())
			if _, err := gpu.DecodeClip(context.Background(), info, c, o, got); err != nil {
				t.Fatalf("%s clip %+v through the GPU pool: %v", path, c, err)
			}
			if _, err := cpu.DecodeClip(context.Background(), info, c, o, ref); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(ref) {
				t.Errorf("%s clip %+v: the GPU pool's CPU fallback differs from the CPU pool (PSNR %.1f dB)", path, c, psnr(got, ref))
			}
			clips++
		}
	}
	if st := gpu.Stats(); st.ClipsGPU != 0 || st.ClipsCPU != int64(clips) {
		t.Errorf("%d clips on NVDEC, %d on the CPU; want 0 and %d", st.ClipsGPU, st.ClipsCPU, clips)
	}
}

// TestNVDECManyVideos: with more videos than GPU decoders, read in turn, every clip still
// decodes on the GPU: a new video takes the slot of an idle decoder of an earlier one rather than
// going to the CPU while the GPU idles.
func TestNVDECManyVideos(t *testing.T) {
	gpuPool(t) // or skip
	pool := newPool(t, decode.PoolOptions{Concurrency: 2, Idle: 8, GPUDecoders: 2, HWAccel: decode.HWCUDA})
	defer pool.Close()
	var infos []*decode.Info
	for _, name := range []string{"h264_gop16.mp4", "h264_gop250.mp4", "hevc.mkv", "vp9.webm", "vfr.mkv", "cfr24.mp4", "cfr30.mp4", "rotated.mp4"} {
		infos = append(infos, probe(t, name))
	}
	o := decode.Output{Width: 32, Height: 32, Resize: decode.Stretch}
	buf := make([]byte, 4*o.FrameBytes())
	clips := 0
	for round := range 3 {
		for _, info := range infos {
			if _, err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: round * 4, Frames: 4, Stride: 1}, o, buf); err != nil {
				t.Fatalf("%s: %v", info.Path, err)
			}
			clips++
		}
	}
	st := pool.Stats()
	t.Logf("%d clips: %d on NVDEC, %d on the CPU; %d idle GPU decoders closed for another video", clips, st.ClipsGPU, st.ClipsCPU, st.GPUReclaims)
	if st.ClipsGPU != int64(clips) || st.GPUReclaims == 0 {
		t.Errorf("%d of %d clips on NVDEC, %d reclaims; want all, and reclaims", st.ClipsGPU, clips, st.GPUReclaims)
	}
}

// TestNVDECSeekHistory: H.264 on NVDEC goes on from an IDR picture after a seek without flushing
// the decoder (which would re-create it). A decoder that has seeked back and forth in a video
// gives, clip for clip, the bytes of a decoder freshly opened for that clip alone.
func TestNVDECSeekHistory(t *testing.T) {
	gpuPool(t) // or skip
	reused := newPool(t, decode.PoolOptions{Concurrency: 1, Idle: 16, HWAccel: decode.HWCUDA})
	defer reused.Close()
	fresh := newPool(t, decode.PoolOptions{Concurrency: 1, Idle: 1, HWAccel: decode.HWCUDA})
	defer fresh.Close()
	decode.DisableAdoption(fresh)
	var infos []*decode.Info
	for _, name := range []string{"h264_gop16.mp4", "h264_gop250.mp4", "vfr.mkv", "start10.ts", "rotated.mp4", "h264_bframes.avi", "h264_noreorder.mp4", "mirrored.mp4"} {
		infos = append(infos, probe(t, name))
	}
	real, err := decode.Probe(testvideo.Transcode(t, testvideo.Megamind, "-vf scale=1280:720 -g 48"))
	if err != nil {
		t.Fatal(err)
	}
	infos = append(infos, real)
	rnd := rand.New(rand.NewPCG(22, 1))
	o := decode.Output{Width: 64, Height: 48, Resize: decode.Stretch}
	var jobs []clipJob
	for range 12 {
		for _, info := range infos { // one video after another: fresh opens a decoder per clip
			stride := 1 + rnd.IntN(3)
			jobs = append(jobs, clipJob{info, decode.Clip{Start: rnd.IntN(info.Frames - 7*stride), Frames: 8, Stride: stride}})
		}
	}
	for _, j := range jobs {
		sameAsFresh(t, reused, fresh, j.info, j.c, o)
	}
	st := reused.Stats()
	t.Logf("%d clips: %d on NVDEC, %d seeks, %d of them without a flush; the fresh pool opened %d decoders",
		len(jobs), st.ClipsGPU, st.Seeks, st.FlushesSaved, fresh.Stats().Opens)
	if st.ClipsGPU != int64(len(jobs)) || st.FlushesSaved == 0 || fresh.Stats().Opens < int64(len(jobs)) {
		t.Errorf("want every clip on NVDEC, seeks without a flush, and a fresh decoder per clip")
	}
}

// TestNVDECAdopt: an idle GPU decoder goes on to another video encoded alike (same codec, size
// and parameter sets) instead of a new one being opened, and gives, clip for clip, the bytes of
// a decoder opened for that video alone: H.264 transcodes of different parts of the footage,
// copies of test videos, HEVC, and videos of other sizes among them.
func TestNVDECAdopt(t *testing.T) {
	gpuPool(t) // or skip
	dir := t.TempDir()
	var paths []string
	for _, args := range []string{"-vf scale=1280:720 -g 48", "-ss 3 -frames:v 96 -vf scale=1280:720 -g 48", "-ss 6 -frames:v 96 -vf scale=1280:720 -g 48"} {
		paths = append(paths, testvideo.Transcode(t, testvideo.Megamind, args))
	}
	for _, name := range []string{"h264_gop16.mp4", "hevc.mkv", "vfr.mkv"} {
		for k := range 2 {
			p := filepath.Join(dir, fmt.Sprintf("%d-%s", k, name))
			if err := os.Link(testvideo.Path(name), p); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	var infos []*decode.Info
	for _, p := range paths {
		info, err := decode.Probe(p)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	// Four kinds of stream (720p H.264; 320x240 H.264 of two encodings; HEVC), four GPU decoders,
	// and one idle CPU decoder: idle GPU decoders stay open beyond Idle, one of each kind.
	reused := newPool(t, decode.PoolOptions{Concurrency: 1, Idle: 1, GPUDecoders: 4, HWAccel: decode.HWCUDA})
	defer reused.Close()
	fresh := newPool(t, decode.PoolOptions{Concurrency: 1, Idle: 1, HWAccel: decode.HWCUDA})
	defer fresh.Close()
	decode.DisableAdoption(fresh)
	rnd := rand.New(rand.NewPCG(22, 2))
	o := decode.Output{Width: 64, Height: 48, Resize: decode.Stretch}
	clips := 0
	for range 40 {
		info := infos[rnd.IntN(len(infos))]
		sameAsFresh(t, reused, fresh, info, decode.Clip{Start: rnd.IntN(info.Frames - 7), Frames: 8, Stride: 1}, o)
		clips++
	}
	st := reused.Stats()
	t.Logf("%d clips of %d videos: %d decoders opened, %d adopted, %d on NVDEC", clips, len(infos), st.Opens, st.Adoptions, st.ClipsGPU)
	if st.Adoptions == 0 || st.Opens > 4 || st.ClipsGPU != int64(clips) {
		t.Errorf("want adoptions, a decoder opened for each of the 4 kinds at most, and every clip on NVDEC")
	}
}

// gpuDecoderCounts are the --gpu-decoders values BenchmarkNVDEC sweeps. An H100 has 7 NVDEC
// engines; SPDL found 7 decodes in flight the best there.
var gpuDecoderCounts = []int{1, 2, 4, 7, 8, 16}

// BenchmarkNVDEC: clips/s for T=16, stride 2, 224x224 from 720p and 1080p H.264 and HEVC
// (Megamind scaled up), through NVDEC with 1 to 16 decoders at once, against the CPU's every core,
// and NVDEC's ceiling: every frame of the file decoded and downloaded (what `ffmpeg -hwaccel cuda
// -i FILE -f null -` does), by 1 and by 8 decoders at once, in frames/s. Each NVDEC run also reports
// the frames it decoded per second (to set beside the ceiling) and the GPU memory in use at its
// peak (nvidia-smi), for the --gpu-decoders sweep. Runs only where a GPU is: bench/gpu.sh.
func BenchmarkNVDEC(b *testing.B) {
	if p, err := decode.NewPool(decode.PoolOptions{HWAccel: decode.HWCUDA}); err != nil {
		b.Skipf("NVDEC benchmark not run: %v", err)
	} else {
		p.Close()
	}
	for _, v := range []struct{ name, args string }{
		{"h264-720p", "-vf scale=1280:720 -g 48"}, {"h264-1080p", "-vf scale=1920:1080 -g 48"},
		{"hevc-720p", "-vf scale=1280:720 -g 48 -c:v libx265 -x265-params log-level=error"},
		{"hevc-1080p", "-vf scale=1920:1080 -g 48 -c:v libx265 -x265-params log-level=error"},
	} {
		path := testvideo.Transcode(b, testvideo.Megamind, v.args)
		info, err := decode.Probe(path)
		if err != nil {
			b.Fatal(err)
		}
		clips := benchStarts(info, 2)
		type mode struct {
			name string
			opts decode.PoolOptions
		}
		modes := []mode{{"cpu-all-cores", decode.PoolOptions{Concurrency: runtime.NumCPU(), HWAccel: decode.HWNone}}}
		for _, n := range gpuDecoderCounts {
			modes = append(modes, mode{fmt.Sprintf("nvdec-%d", n), decode.PoolOptions{Concurrency: n, GPUDecoders: n, HWAccel: decode.HWCUDA}})
		}
		for _, m := range modes {
			b.Run(v.name+"/"+m.name, func(b *testing.B) {
				peak := watchGPUMemory(b)
				pool := newPool(b, m.opts)
				defer pool.Close()
				o := decode.Output{Width: 224, Height: 224}
				cpu0 := cpuSeconds()
				b.ResetTimer()
				for range b.N {
					decodeAll(b, pool, clipsOf(info, clips), o, m.opts.Concurrency)
				}
				b.StopTimer()
				n, st := float64(b.N*len(clips)), pool.Stats()
				b.ReportMetric(n/b.Elapsed().Seconds(), "clips/s")
				b.ReportMetric(n/(cpuSeconds()-cpu0), "clips/cpu-s")
				b.ReportMetric(float64(st.Frames)/b.Elapsed().Seconds(), "frames/s")
				b.ReportMetric(float64(st.Frames)/n, "decoded-frames/clip")
				b.ReportMetric(float64(st.ClipsGPU)/n, "on-gpu")
				if mib := peak(); mib >= 0 {
					b.ReportMetric(mib, "gpu-MiB")
				}
			})
		}
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/nvdec-ceiling-%d", v.name, n), func(b *testing.B) {
				pool := newPool(b, decode.PoolOptions{Concurrency: n, GPUDecoders: n, HWAccel: decode.HWCUDA})
				defer pool.Close()
				whole := make([]decode.Clip, n)
				for i := range whole {
					whole[i] = decode.Clip{Start: 0, Frames: info.Frames, Stride: 1}
				}
				b.ResetTimer()
				for range b.N {
					decodeAll(b, pool, clipsOf(info, whole), decode.Output{Width: 16, Height: 16, Resize: decode.Stretch}, n)
				}
				b.ReportMetric(float64(b.N*n*info.Frames)/b.Elapsed().Seconds(), "frames/s")
				b.ReportMetric(float64(pool.Stats().ClipsGPU)/float64(b.N*n), "on-gpu")
			})
		}
	}
}

// BenchmarkNVDECMixed: clips as a mount reads them, each of another video: 40 videos (10 hard
// links to each of the 720p and 1080p H.264 and HEVC transcodes), random clips of T=16, stride 2,
// 224x224, by 8 callers at once, NVDEC with 8 and 32 GPU decoders against all CPU cores. It
// reports decoders opened and adopted per clip beside clips/s, to tell the decoding of many videos
// apart from what a mount adds.
func BenchmarkNVDECMixed(b *testing.B) {
	if p, err := decode.NewPool(decode.PoolOptions{HWAccel: decode.HWCUDA}); err != nil {
		b.Skipf("NVDEC benchmark not run: %v", err)
	} else {
		p.Close()
	}
	dir := b.TempDir()
	var infos []*decode.Info
	for _, args := range []string{"-vf scale=1280:720 -g 48", "-vf scale=1920:1080 -g 48",
		"-vf scale=1280:720 -g 48 -c:v libx265 -x265-params log-level=error", "-vf scale=1920:1080 -g 48 -c:v libx265 -x265-params log-level=error"} {
		src := testvideo.Transcode(b, testvideo.Megamind, args)
		for k := range 10 {
			p := filepath.Join(dir, fmt.Sprintf("%d-%s", k, filepath.Base(src)))
			if err := os.Link(src, p); err != nil {
				b.Fatal(err)
			}
			info, err := decode.Probe(p)
			if err != nil {
				b.Fatal(err)
			}
			infos = append(infos, info)
		}
	}
	rnd := rand.New(rand.NewPCG(22, 3))
	jobs := make([]clipJob, 200)
	for i := range jobs {
		info := infos[rnd.IntN(len(infos))]
		jobs[i] = clipJob{info, decode.Clip{Start: rnd.IntN(info.Frames - 30), Frames: 16, Stride: 2}}
	}
	o := decode.Output{Width: 224, Height: 224, Resize: decode.Crop}
	for _, m := range []struct {
		name string
		opts decode.PoolOptions
	}{
		{"cpu-all-cores", decode.PoolOptions{Concurrency: runtime.NumCPU(), HWAccel: decode.HWNone}},
		{"nvdec-8-of-8", decode.PoolOptions{Concurrency: 8, GPUDecoders: 8, HWAccel: decode.HWCUDA}},
		{"nvdec-8-of-32", decode.PoolOptions{Concurrency: 8, GPUDecoders: 32, HWAccel: decode.HWCUDA}},
		{"nvdec-16-of-32", decode.PoolOptions{Concurrency: 16, GPUDecoders: 32, HWAccel: decode.HWCUDA}},
	} {
		b.Run(m.name, func(b *testing.B) {
			pool := newPool(b, m.opts)
			defer pool.Close()
			cpu0 := cpuSeconds()
			b.ResetTimer()
			for range b.N {
				decodeAll(b, pool, jobs, o, m.opts.Concurrency)
			}
			b.StopTimer()
			n, st := float64(b.N*len(jobs)), pool.Stats()
			b.ReportMetric(n/b.Elapsed().Seconds(), "clips/s")
			b.ReportMetric(n/(cpuSeconds()-cpu0), "clips/cpu-s")
			b.ReportMetric(float64(st.Opens)/n, "opens/clip")
			b.ReportMetric(float64(st.Adoptions)/n, "adoptions/clip")
			b.ReportMetric(float64(st.ClipsGPU)/n, "on-gpu")
		})
	}
}

// clipJob is a clip of a video.
type clipJob struct {
	info *decode.Info
	c    decode.Clip
}

// clipsOf makes jobs of clips of one video.
func clipsOf(info *decode.Info, clips []decode.Clip) []clipJob {
	jobs := make([]clipJob, len(clips))
	for i, c := range clips {
		jobs[i] = clipJob{info, c}
	}
	return jobs
}

// decodeAll decodes the jobs' clips into o by workers callers at once.
func decodeAll(b *testing.B, pool *decode.Pool, jobs []clipJob, o decode.Output, workers int) {
	var wg sync.WaitGroup
	work := make(chan clipJob)
	for range workers {
		wg.Go(func() {
			var buf []byte
			for j := range work {
				if n := j.c.Frames * o.FrameBytes(); len(buf) < n {
					buf = make([]byte, n)
				}
				if _, err := pool.DecodeClip(context.Background(), j.info, j.c, o, buf[:j.c.Frames*o.FrameBytes()]); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
}

// sameAsFresh decodes clip c of the video through reused and through fresh, a pool whose
// decoders are opened for the clip, and fails the test where the bytes differ.
func sameAsFresh(t *testing.T, reused, fresh *decode.Pool, info *decode.Info, c decode.Clip, o decode.Output) {
	t.Helper()
	got, want := make([]byte, c.Frames*o.FrameBytes()), make([]byte, c.Frames*o.FrameBytes())
	if _, err := reused.DecodeClip(context.Background(), info, c, o, got); err != nil {
		t.Fatalf("%s clip %+v: %v", info.Path, c, err)
	}
	if _, err := fresh.DecodeClip(context.Background(), info, c, o, want); err != nil {
		t.Fatalf("%s clip %+v, fresh decoder: %v", info.Path, c, err)
	}
	if string(got) != string(want) {
		t.Errorf("%s clip %+v: differs from a fresh decoder's (PSNR %.1f dB)", info.Path, c, psnr(got, want))
	}
}

// watchGPUMemory samples the GPU memory in use (nvidia-smi, every 250 ms) until the benchmark
// ends; the function it returns gives the peak so far less the memory in use when it was called,
// in MiB, or -1 where nvidia-smi is missing.
func watchGPUMemory(b *testing.B) func() float64 {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return func() float64 { return -1 }
	}
	var mu sync.Mutex
	peak := -1.0
	sample := func() {
		out, err := exec.Command("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits").Output()
		if err != nil {
			return
		}
		if mib, err := strconv.ParseFloat(strings.TrimSpace(strings.Split(string(out), "\n")[0]), 64); err == nil {
			mu.Lock()
			peak = max(peak, mib)
			mu.Unlock()
		}
	}
	sample()
	base := peak
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	})
	b.Cleanup(func() { close(done); wg.Wait() })
	return func() float64 {
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak - base
	}
}
