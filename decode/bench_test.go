package decode_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
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
			pool := newPool(b, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer pool.Close()
			var r passResult
			b.ResetTimer()
			for range b.N {
				r.add(vidfsPass(b, pool, info, clips))
			}
			b.ReportMetric(r.clips/r.secs, "clips/s")
			b.ReportMetric(r.clips/r.cpu, "clips/cpu-s")
			b.ReportMetric(float64(pool.Stats().Frames)/r.clips, "decoded-frames/clip")
		})
	}
}

// BenchmarkVersusPyAV: vidfs and PyAV on the same clips, taking turns ten clips at a time (PyAV
// in a bench/pyav_clips.py process), so that both see the same machine: these machines
// are noisy over seconds. Reports vidfs/PyAV in wall time (x-wall) and in CPU time (x-cpu),
// beside each one's clips/s. scripts/bench-decode.sh writes its medians into docs/benchmarks.md.
func BenchmarkVersusPyAV(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(bc.name, func(b *testing.B) {
			path, info := benchVideo(b, bc.gop)
			clips := benchStarts(info, bc.stride)
			spec := writeSpec(b, path, info, clips)
			pool := newPool(b, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer pool.Close()
			py := startPyAV(b, spec)
			defer py.close()
			b.ResetTimer()
			v := takeTurns(b, pool, info, clips, py, nil)
			b.ReportMetric(float64(pool.Stats().Frames)/v.clips, "vidfs-frames/clip")
			floor, all := decodeFloor(b, spec)
			b.ReportMetric(floor, "floor-frames/clip")
			b.ReportMetric(all, "all-frames/clip")
		})
	}
}

// takeTurns has vidfs's pool and PyAV decode the clips b.N times, ten clips at a time each, the
// one going first alternating; after each ten, PyAV's from clip k on, it calls after(k) (if not
// nil). It reports each one's clips/s and vidfs/PyAV in wall time (x-wall) and CPU time
// (x-cpu), and returns vidfs's passes.
func takeTurns(b *testing.B, pool *decode.Pool, info *decode.Info, clips []decode.Clip, py *pyavServer, after func(k int)) passResult {
	var v, p passResult
	for range b.N {
		for k := 0; k < len(clips); k += 10 {
			end := min(k+10, len(clips))
			if k/10%2 == 0 { // alternate who goes first
				v.add(vidfsPass(b, pool, info, clips[k:end]))
				p.add(py.decode(b, k, end))
			} else {
				p.add(py.decode(b, k, end))
				v.add(vidfsPass(b, pool, info, clips[k:end]))
			}
			if after != nil {
				after(k)
			}
		}
	}
	b.ReportMetric(v.clips/v.secs, "vidfs-clips/s")
	b.ReportMetric(p.clips/p.secs, "pyav-clips/s")
	b.ReportMetric((v.clips/v.secs)/(p.clips/p.secs), "x-wall")
	b.ReportMetric((v.clips/v.cpu)/(p.clips/p.cpu), "x-cpu")
	return v
}

// benchScript returns the path of a script in bench/.
func benchScript(name string) string {
	p, _ := filepath.Abs(filepath.Join("..", "bench", name))
	return p
}

// pyavServer is a bench/pyav_clips.py (or pyav_fps_clips.py) process, decoding clips on request.
type pyavServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	pts [][]int64 // pyav_fps_clips.py: the timestamps of the frames of each clip last decoded
}

func startPyAV(b *testing.B, spec string) *pyavServer {
	return startPyAVScript(b, "pyav_clips.py", spec)
}

func startPyAVScript(b *testing.B, name, spec string) *pyavServer {
	script := benchScript(name)
	cmd := exec.Command("/usr/bin/python3", script, spec)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s (needs Debian's python3-av): %v", script, err)
	}
	return &pyavServer{cmd: cmd, in: in, out: bufio.NewScanner(out)}
}

// decode has PyAV decode clips first..end-1 of the spec.
func (s *pyavServer) decode(b *testing.B, first, end int) passResult {
	if _, err := fmt.Fprintf(s.in, "%d %d\n", first, end); err != nil {
		b.Fatal(err)
	}
	if !s.out.Scan() {
		b.Fatalf("pyav_clips.py stopped: %v", s.out.Err())
	}
	var r struct {
		Clips      float64
		Seconds    float64
		CPUSeconds float64   `json:"cpu_seconds"`
		PTS        [][]int64 `json:"pts"`
	}
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		b.Fatalf("pyav_clips.py printed %q: %v", s.out.Bytes(), err)
	}
	s.pts = r.PTS
	return passResult{r.Clips, r.Seconds, r.CPUSeconds}
}

func (s *pyavServer) close() {
	s.in.Close()
	s.cmd.Wait()
}

// passResult adds up passes over a clip list: clips, wall seconds, CPU seconds.
type passResult struct{ clips, secs, cpu float64 }

func (r *passResult) add(o passResult) {
	r.clips += o.clips
	r.secs += o.secs
	r.cpu += o.cpu
}

// vidfsPass decodes every clip once through pool, 224x224 crop.
func vidfsPass(b *testing.B, pool *decode.Pool, info *decode.Info, clips []decode.Clip) passResult {
	o := decode.Output{Width: 224, Height: 224, Resize: decode.Crop}
	buf := make([]byte, 16*o.FrameBytes())
	start, cpu0 := time.Now(), cpuSeconds()
	for _, c := range clips {
		if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
			b.Fatal(err)
		}
	}
	return passResult{float64(len(clips)), time.Since(start).Seconds(), cpuSeconds() - cpu0}
}

// writeSpec writes the clips as bench/pyav_clips.py's JSON spec (the frames' timestamps).
func writeSpec(b *testing.B, path string, info *decode.Info, clips []decode.Clip) string {
	var spec struct {
		Path  string    `json:"path"`
		W     int       `json:"width"`
		H     int       `json:"height"`
		Clips [][]int64 `json:"clips"`
	}
	spec.Path, spec.W, spec.H = path, 224, 224
	for _, c := range clips {
		idx, _ := info.ClipFrames(c)
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
	return f
}

// The --fps benchmarks: clips of T=16 frames 1/15 s apart (--fps 15), cropped to 224x224, at
// random starts, from Megamind's 270 frames retimed to 60, 30 and 24 frames/s (the same pictures,
// shown faster or slower; H.264, GOP 2 s, x264's B-frames) on one core. Beside vidfs, PyAV does the
// same resampling as a Dataset would (bench/pyav_fps_clips.py: seek, decode, pick each instant's
// frame by timestamp), and bench/decode_floor.py counts the frames an exact decoder must decode.

// fpsCases are the source rates sampled at 15 frames/s.
var fpsCases = []int{60, 30, 24}

// BenchmarkFPSVersusPyAV: vidfs and PyAV on the same clips at 15 frames/s, taking turns ten clips
// at a time as in BenchmarkVersusPyAV; PyAV's frames are checked to be vidfs's. Reports, beside
// clips/s and the ratios, frames decoded per frame served: vidfs's, the exact floor's, and every
// frame from the keyframe to the clip's last (decoding without skipping).
func BenchmarkFPSVersusPyAV(b *testing.B) {
	fps := decode.Rational{Num: 15, Den: 1}
	for _, src := range fpsCases {
		b.Run(strconv.Itoa(src)+"fps", func(b *testing.B) {
			path := testvideo.Transcode(b, testvideo.Megamind, fmt.Sprintf("-vf setpts=N/%d/TB -r %d -g %d", src, src, 2*src))
			info, err := decode.Probe(path)
			if err != nil {
				b.Fatal(err)
			}
			n := info.FramesAt(fps)
			rnd := rand.New(rand.NewPCG(15, uint64(src)))
			clips := make([]decode.Clip, benchClips)
			for i := range clips {
				clips[i] = decode.Clip{Start: rnd.IntN(n - 15), Frames: 16, Stride: 1, FPS: fps}
			}
			floorSpec := writeSpec(b, path, info, clips)
			spec := writeFPSSpec(b, path, fps, clips)
			pool := newPool(b, decode.PoolOptions{Concurrency: 1, Threads: 1})
			defer pool.Close()
			py := startPyAVScript(b, "pyav_fps_clips.py", spec)
			defer py.close()
			b.ResetTimer()
			v := takeTurns(b, pool, info, clips, py, func(k int) {
				for j, pts := range py.pts {
					idx, _ := info.ClipFrames(clips[k+j])
					for f, i := range idx {
						if pts[f] != info.PTS[i] {
							b.Fatalf("clip %+v frame %d: PyAV picked the frame at %d, vidfs frame %d at %d", clips[k+j], f, pts[f], i, info.PTS[i])
						}
					}
				}
			})
			b.ReportMetric(float64(pool.Stats().Frames)/v.clips/16, "vidfs-frames/served")
			floor, all := decodeFloor(b, floorSpec)
			b.ReportMetric(floor/16, "floor-frames/served")
			b.ReportMetric(all/16, "all-frames/served")
		})
	}
}

// writeFPSSpec writes the clips as bench/pyav_fps_clips.py's JSON spec.
func writeFPSSpec(b *testing.B, path string, fps decode.Rational, clips []decode.Clip) string {
	spec := map[string]any{"path": path, "width": 224, "height": 224, "fps": []int{fps.Num, fps.Den}}
	var cs [][3]int
	for _, c := range clips {
		cs = append(cs, [3]int{c.Start, c.Frames, c.Stride})
	}
	spec["clips"] = cs
	f := filepath.Join(b.TempDir(), "fps-spec.json")
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(f, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return f
}

// decodeFloor returns, from bench/decode_floor.py, the frames per clip an exact decoder must
// decode, and the frames from the keyframe to the clip's last frame (decoding without skipping).
func decodeFloor(b *testing.B, spec string) (floor, all float64) {
	script := benchScript("decode_floor.py")
	out, err := exec.Command("/usr/bin/python3", script, spec).Output()
	if err != nil {
		b.Fatalf("%s: %v", script, err)
	}
	var fl struct {
		Floor float64 `json:"floor_frames_per_clip"`
		All   float64 `json:"all_frames_per_clip"`
	}
	if err := json.Unmarshal(out, &fl); err != nil {
		b.Fatalf("%s printed %q: %v", script, out, err)
	}
	return fl.Floor, fl.All
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

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
