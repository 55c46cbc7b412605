package decode_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// fastCodecs are the codecs --decode fast is measured on: Megamind (real footage) transcoded by
// Debian's ffmpeg CLI, 720x528, a keyframe every 48 frames.
var fastCodecs = []struct{ name, args string }{
	{"h264", "-g 48"},
	{"hevc", "-c:v libx265 -g 48 -x265-params log-level=error"},
	{"vp9", "-c:v libvpx-vp9 -g 48 -b:v 1M -deadline realtime -cpu-used 8"},
	{"mpeg4", "-c:v mpeg4 -g 48 -q:v 4"},
}

func fastVideo(tb testing.TB, args string) *decode.Info {
	info, err := decode.Probe(testvideo.Transcode(tb, testvideo.Megamind, args))
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

// quality compares clips decoded fast with the same clips decoded exactly, frame by frame.
type quality struct {
	se     float64 // squared error, summed
	n      float64 // bytes compared
	minDB  float64 // the worst frame's PSNR
	frames int
}

func (q *quality) add(fast, exact []byte, frameBytes int) {
	if q.frames == 0 {
		q.minDB = math.Inf(1)
	}
	for k := 0; k+frameBytes <= len(exact); k += frameBytes {
		q.minDB = min(q.minDB, psnr(fast[k:k+frameBytes], exact[k:k+frameBytes]))
		q.frames++
	}
	for i := range exact {
		d := float64(fast[i]) - float64(exact[i])
		q.se += d * d
	}
	q.n += float64(len(exact))
}

// meanDB is the PSNR of the mean squared error over every frame.
func (q *quality) meanDB() float64 {
	if q.se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/(q.se/q.n))
}

// TestFastDecode: Output.Fast gives the same frames as exact decoding, close in pixels, on each
// codec it is measured on; and it is a different output for stores of decoded samples.
func TestFastDecode(t *testing.T) {
	exactOut := decode.Output{Width: 224, Height: 224, Resize: decode.Crop}
	fastOut := exactOut
	fastOut.Fast = true
	if exactOut.Key() == fastOut.Key() {
		t.Fatalf("fast and exact outputs share the key %q", exactOut.Key())
	}
	for _, c := range fastCodecs {
		t.Run(c.name, func(t *testing.T) {
			info := fastVideo(t, c.args)
			pool := newPool(t, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer pool.Close()
			var q quality
			rnd := rand.New(rand.NewPCG(3, 5))
			for range 4 {
				clip := decode.Clip{Start: rnd.IntN(info.Frames - 32), Frames: 8, Stride: 4}
				exact := make([]byte, 8*exactOut.FrameBytes())
				fast := make([]byte, len(exact))
				// Fast first, then exact, on one decoder: switching back must give exact bytes.
				if _, err := pool.DecodeClip(context.Background(), info, clip, fastOut, fast); err != nil {
					t.Fatal(err)
				}
				if _, err := pool.DecodeClip(context.Background(), info, clip, exactOut, exact); err != nil {
					t.Fatal(err)
				}
				fresh := make([]byte, len(exact))
				if _, err := decode.DecodeClip(context.Background(), info, clip, exactOut, fresh, 1); err != nil {
					t.Fatal(err)
				}
				if string(fresh) != string(exact) {
					t.Fatalf("clip %+v: exact decoding after fast decoding differs from a fresh exact decode", clip)
				}
				q.add(fast, exact, exactOut.FrameBytes())
			}
			t.Logf("%s: %d frames, fast against exact: PSNR %.1f dB overall, %.1f dB the worst frame", c.name, q.frames, q.meanDB(), q.minDB)
			// Far below what fast decoding measures (docs/usage.md), far above a wrong frame's.
			if q.minDB < 28 {
				t.Errorf("fast decoding's worst frame is %.1f dB from exact: a different frame?", q.minDB)
			}
		})
	}
}

// BenchmarkFastVsExact: the same clips (T=16, stride 2, 224x224 crop) decoded exactly and fast,
// taking turns ten clips at a time on one decoder thread each, per codec. Reports the speed-up
// in CPU time (x-cpu: exact CPU s / fast CPU s), each one's clips per CPU second, and fast's PSNR
// against exact (the mean squared error's, and the worst frame's).
func BenchmarkFastVsExact(b *testing.B) {
	for _, c := range fastCodecs {
		b.Run(c.name, func(b *testing.B) {
			info := fastVideo(b, c.args)
			exactOut := decode.Output{Width: 224, Height: 224, Resize: decode.Crop}
			fastOut := exactOut
			fastOut.Fast = true
			exactPool := newPool(b, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer exactPool.Close()
			fastPool := newPool(b, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer fastPool.Close()
			rnd := rand.New(rand.NewPCG(11, 2))
			clips := make([]decode.Clip, 60)
			for i := range clips {
				clips[i] = decode.Clip{Start: rnd.IntN(info.Frames - 31), Frames: 16, Stride: 2}
			}
			size := 16 * exactOut.FrameBytes()
			exact, fast := make([][]byte, len(clips)), make([][]byte, len(clips))
			for i := range clips {
				exact[i], fast[i] = make([]byte, size), make([]byte, size)
			}
			pass := func(pool *decode.Pool, o decode.Output, cs []decode.Clip, bufs [][]byte) (wall, cpu float64) {
				start, cpu0 := time.Now(), cpuSeconds()
				for i, cl := range cs {
					if _, err := pool.DecodeClip(context.Background(), info, cl, o, bufs[i]); err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start).Seconds(), cpuSeconds() - cpu0
			}
			var exactCPU, fastCPU, exactWall, fastWall float64
			b.ResetTimer()
			for range b.N {
				for i := 0; i < len(clips); i += 10 {
					w, c := pass(exactPool, exactOut, clips[i:i+10], exact[i:i+10])
					exactWall, exactCPU = exactWall+w, exactCPU+c
					w, c = pass(fastPool, fastOut, clips[i:i+10], fast[i:i+10])
					fastWall, fastCPU = fastWall+w, fastCPU+c
				}
			}
			b.StopTimer()
			var q quality
			for i := range clips {
				q.add(fast[i], exact[i], exactOut.FrameBytes())
			}
			n := float64(b.N * len(clips))
			b.ReportMetric(exactCPU/fastCPU, "x-cpu")
			b.ReportMetric(exactWall/fastWall, "x-wall")
			b.ReportMetric(n/exactCPU, "exact-clips/cpu-s")
			b.ReportMetric(n/fastCPU, "fast-clips/cpu-s")
			b.ReportMetric(q.meanDB(), "psnr-dB")
			b.ReportMetric(q.minDB, "min-psnr-dB")
		})
	}
}
