package decode_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// The decode benchmarks: clips of T=16 frames, stride 1 and 4, cropped to 224x224, at random
// starts (the same ones for every contender) in Megamind transcoded to H.264 with GOP 16 and
// GOP 250, on one core. Beside vidfs's decoder the same run measures PyAV doing the same clips
// (Debian's python3-av, one thread) and the floor, `ffmpeg -threads 1` decoding the whole file.
// scripts/bench-decode.sh runs them and writes docs/benchmarks.md.

const benchClips = 100

type benchCase struct {
	name   string
	gop    int
	stride int
}

var benchCases = []benchCase{{"gop16/stride1", 16, 1}, {"gop16/stride4", 16, 4}, {"gop250/stride1", 250, 1}, {"gop250/stride4", 250, 4}}

func benchVideo(b *testing.B, gop int) (string, *decode.Info) {
	path := testvideo.Transcode(b, testvideo.Megamind, "-g "+strconv.Itoa(gop)+" -keyint_min "+strconv.Itoa(gop))
	info, err := decode.Probe(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, info
}

func benchStarts(info *decode.Info, stride int) []decode.Clip {
	rnd := rand.New(rand.NewPCG(7, uint64(stride)))
	clips := make([]decode.Clip, benchClips)
	for i := range clips {
		clips[i] = decode.Clip{Start: rnd.IntN(info.Frames - 15*stride), Frames: 16, Stride: stride}
	}
	return clips
}

// BenchmarkDecodeClip: vidfs's pool, one clip at a time, one decoder thread.
func BenchmarkDecodeClip(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			_, info := benchVideo(b, bc.gop)
			clips := benchStarts(info, bc.stride)
			o := decode.Output{Width: 224, Height: 224, Resize: decode.Crop}
			pool := newPool(b, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer pool.Close()
			buf := make([]byte, 16*o.FrameBytes())
			var cpu0 = cpuSeconds()
			b.ResetTimer()
			for range b.N {
				for _, c := range clips {
					if err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			secs := b.Elapsed().Seconds()
			n := float64(b.N * len(clips))
			b.ReportMetric(n/secs, "clips/s")
			b.ReportMetric(n/(cpuSeconds()-cpu0), "clips/cpu-s")
			b.ReportMetric(float64(pool.Stats().Frames)/n, "decoded-frames/clip")
		})
	}
}

// BenchmarkPyAV: the same clips through bench/pyav_clips.py. It also reports, from
// bench/decode_floor.py, how many frames per clip an exact decoder must decode at least
// (floor-frames/clip) and how many lie between the keyframe and the clip's end (all-frames/clip).
func BenchmarkPyAV(b *testing.B) {
	script, _ := filepath.Abs(filepath.Join("..", "bench", "pyav_clips.py"))
	floorScript, _ := filepath.Abs(filepath.Join("..", "bench", "decode_floor.py"))
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			path, info := benchVideo(b, bc.gop)
			var spec struct {
				Path  string    `json:"path"`
				W     int       `json:"width"`
				H     int       `json:"height"`
				Clips [][]int64 `json:"clips"`
			}
			spec.Path, spec.W, spec.H = path, 224, 224
			for _, c := range benchStarts(info, bc.stride) {
				idx, _ := c.Indices(info.Frames)
				pts := make([]int64, len(idx))
				for k, i := range idx {
					pts[k] = info.PTS[i]
				}
				spec.Clips = append(spec.Clips, pts)
			}
			f := filepath.Join(b.TempDir(), "spec.json")
			data, _ := json.Marshal(spec)
			if err := os.WriteFile(f, data, 0o644); err != nil {
				b.Fatal(err)
			}
			var total, secs, cpu float64
			for range b.N {
				out, err := exec.Command("/usr/bin/python3", script, f).Output()
				if err != nil {
					b.Fatalf("%s (needs Debian's python3-av): %v", script, err)
				}
				var r struct {
					Clips      float64
					Seconds    float64
					CPUSeconds float64 `json:"cpu_seconds"`
				}
				if err := json.Unmarshal(out, &r); err != nil {
					b.Fatalf("%s printed %q: %v", script, out, err)
				}
				total += r.Clips
				secs += r.Seconds
				cpu += r.CPUSeconds
			}
			b.ReportMetric(total/secs, "clips/s")
			b.ReportMetric(total/cpu, "clips/cpu-s")

			// What the clips cost in frames: the floor for an exact decoder, and every frame
			// from the keyframe on (decoding without skipping, as PyAV does).
			out, err := exec.Command("/usr/bin/python3", floorScript, f).Output()
			if err != nil {
				b.Fatalf("%s: %v", floorScript, err)
			}
			var fl struct {
				Floor float64 `json:"floor_frames_per_clip"`
				All   float64 `json:"all_frames_per_clip"`
			}
			if err := json.Unmarshal(out, &fl); err != nil {
				b.Fatalf("%s printed %q: %v", floorScript, out, err)
			}
			b.ReportMetric(fl.Floor, "floor-frames/clip")
			b.ReportMetric(fl.All, "all-frames/clip")
		})
	}
}

// BenchmarkFFmpegFloor: Debian's ffmpeg CLI decoding the whole file on one thread, no scaling.
func BenchmarkFFmpegFloor(b *testing.B) {
	for _, gop := range []int{16, 250} {
		b.Run("gop"+strconv.Itoa(gop), func(b *testing.B) {
			path, info := benchVideo(b, gop)
			var secs float64
			for range b.N {
				start := time.Now()
				out, err := exec.Command("ffmpeg", "-v", "error", "-threads", "1", "-i", path, "-f", "null", "-").CombinedOutput()
				if err != nil {
					b.Fatalf("ffmpeg: %v\n%s", err, out)
				}
				secs += time.Since(start).Seconds()
			}
			b.ReportMetric(float64(b.N*info.Frames)/secs, "frames/s")
		})
	}
}

var cpuRe = regexp.MustCompile(`\S+`)

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	f := cpuRe.FindAllString(string(b), -1)
	if len(f) < 15 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[13], 64)
	s, _ := strconv.ParseFloat(f[14], 64)
	return (u + s) / 100 // clock ticks; 100 per second on Linux
}
