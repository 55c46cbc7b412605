package decode_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

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
				if err := gpu.DecodeClip(context.Background(), info, c, o, got); err != nil {
					t.Fatalf("clip %+v: %v", c, err)
				}
				if idx, w := readClip(t, info, o, got, c.Frames), want(c, info.Frames); fmt.Sprint(idx) != fmt.Sprint(w) {
					t.Fatalf("clip %+v: got frames %v, want %v", c, idx, w)
				}
				ref := make([]byte, len(got))
				if err := cpu.DecodeClip(context.Background(), info, c, o, ref); err != nil {
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
		if err := gpu.DecodeClip(context.Background(), info, c, o, got); err != nil {
			t.Fatal(err)
		}
		if err := decode.DecodeClip(context.Background(), info, c, o, ref, 0); err != nil {
			t.Fatal(err)
		}
		if p := psnr(got, ref); p < 35 || math.IsNaN(p) {
			t.Errorf("%s: PSNR %.1f dB against the CPU", args, p)
		}
	}
}

// BenchmarkNVDEC: clips/s for T=16, 224x224 from 720p and 1080p H.264 and HEVC (Megamind scaled
// up), NVDEC against the CPU's every core, and the hardware's ceiling: NVDEC decoding every frame
// of the file and downloading it (what `ffmpeg -hwaccel cuda -i FILE -f null -` does), in
// frames/s. Runs only where a GPU is; see docs/benchmarks.md.
func BenchmarkNVDEC(b *testing.B) {
	if _, err := decode.NewPool(decode.PoolOptions{HWAccel: decode.HWCUDA}); err != nil {
		b.Skipf("NVDEC benchmark not run: %v", err)
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
		o := decode.Output{Width: 224, Height: 224}
		for _, mode := range []struct {
			name string
			opts decode.PoolOptions
		}{
			{"nvdec", decode.PoolOptions{Concurrency: 8, HWAccel: decode.HWCUDA}},
			{"cpu-all-cores", decode.PoolOptions{Concurrency: runtime.NumCPU(), HWAccel: decode.HWNone}},
		} {
			b.Run(v.name+"/"+mode.name, func(b *testing.B) {
				pool := newPool(b, mode.opts)
				defer pool.Close()
				b.ResetTimer()
				for range b.N {
					var wg sync.WaitGroup
					work := make(chan decode.Clip)
					for range mode.opts.Concurrency {
						wg.Go(func() {
							buf := make([]byte, 16*o.FrameBytes())
							for c := range work {
								if err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
									b.Error(err)
								}
							}
						})
					}
					for _, c := range clips {
						work <- c
					}
					close(work)
					wg.Wait()
				}
				b.ReportMetric(float64(b.N*len(clips))/b.Elapsed().Seconds(), "clips/s")
				b.ReportMetric(float64(pool.Stats().ClipsGPU)/float64(b.N*len(clips)), "on-gpu")
			})
		}
		b.Run(v.name+"/nvdec-ceiling", func(b *testing.B) {
			pool := newPool(b, decode.PoolOptions{Concurrency: 1, HWAccel: decode.HWCUDA})
			defer pool.Close()
			tiny := decode.Output{Width: 16, Height: 16, Resize: decode.Stretch}
			buf := make([]byte, info.Frames*tiny.FrameBytes())
			b.ResetTimer()
			for range b.N {
				if err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: 0, Frames: info.Frames, Stride: 1}, tiny, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*info.Frames)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}
