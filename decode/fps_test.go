package decode_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// fpsVideos are the test videos clips at a target rate are checked on (testdata/gen.sh): constant
// 24, 25, 30, 60 and 30000/1001 frames/s, variable frame rate (Matroska, and phone-like MP4), a
// first timestamp that is not 0 (MPEG-TS), AVIs without presentation timestamps (timed by their
// average rate, at 25 and 24 frames/s), clocks that tick once a frame (AVIs timed by their
// timestamps, an MP4 whose timescale is its rate), and other codecs. byPTS: timed by their
// timestamps.
var fpsVideos = []struct {
	name  string
	byPTS bool
}{
	{"cfr24.mp4", true}, {"h264_gop16.mp4", true}, {"cfr30.mp4", true}, {"cfr60.mp4", true}, {"ntsc.mp4", true},
	{"vfr.mkv", true}, {"vfr_phone.mp4", true}, {"start10.ts", true}, {"mpeg4.avi", false}, {"mpeg4_24.avi", false},
	{"hevc.mkv", true}, {"vp9.webm", true}, {"short8.mp4", true},
	{"tick25.avi", true}, {"tick30.mp4", true}, {"mjpeg.avi", true},
}

// fpsRates are the target rates the tests ask for; at 8 and 20 some instants fall halfway
// between two frames of a 25 and a 30 frames/s video.
var fpsRates = []string{"15", "24", "30000/1001", "30", "7.5", "8", "20"}

func rate(t testing.TB, s string) (decode.Rational, *big.Rat) {
	r, err := decode.ParseRate(s)
	if err != nil {
		t.Fatal(err)
	}
	return r, big.NewRat(int64(r.Num), int64(r.Den))
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]string{"15": "15/1", "29.97": "2997/100", "30000/1001": "30000/1001", " 7.5 ": "15/2", "60/2": "30/1"} {
		if r, err := decode.ParseRate(in); err != nil || r.String() != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "abc", "1/0", "20000", "15fps", "1e-9", "1e1", "0x10", "1_000", "+5", "0.05", "1/20"} {
		if r, err := decode.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, r)
		}
	}
	for r, want := range map[decode.Rational]string{{15, 1}: "15", {2997, 100}: "29.97", {30000, 1001}: "30000/1001", {15, 2}: "7.5"} {
		if got := r.FPSString(); got != want {
			t.Errorf("%v.FPSString() = %q, want %q", r, got, want)
		}
	}
}

// TestFPSMapping: for every test video and target rate, the length at that rate and the frame
// shown at every instant agree with the rule worked out from ffprobe -show_frames.
func TestFPSMapping(t *testing.T) {
	for _, v := range fpsVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			times := testvideo.ProbeTimes(t, testvideo.Path(v.name))
			if info.Frames != times.Frames {
				t.Fatalf("vidfs counts %d frames, ffprobe %d", info.Frames, times.Frames)
			}
			if info.TimedByPTS() != v.byPTS || times.ByPTS() != v.byPTS {
				t.Fatalf("timed by timestamps: vidfs %v, ffprobe's frames %v; want %v", info.TimedByPTS(), times.ByPTS(), v.byPTS)
			}
			if note := info.TimingNote(); (note == "") != v.byPTS {
				t.Errorf("timing note %q", note)
			}
			for _, s := range fpsRates {
				fps, exact := rate(t, s)
				n := info.FramesAt(fps)
				if want := times.Count(exact); n != want {
					t.Errorf("at %s fps: %d frames, want %d", s, n, want)
				}
				for m := range n + 3 {
					if got, want := info.FrameAt(m, fps), times.Expected(m, exact); got != want {
						t.Errorf("at %s fps, instant %d: frame %d, want %d", s, m, got, want)
					}
				}
			}
		})
	}
}

// TestFPSClips decodes clips at target rates from every fps test video, through one pool in
// shuffled order from several goroutines, and reads back from the pixels that each frame is the
// one ffprobe's timestamps say is shown at its instant: every instant of the video once, and
// random clips of several lengths and strides, some padded past the end.
func TestFPSClips(t *testing.T) {
	pool := newPool(t, decode.PoolOptions{Concurrency: 2, Idle: 3})
	defer pool.Close()
	for _, v := range fpsVideos {
		t.Run(v.name, func(t *testing.T) {
			info := probe(t, v.name)
			times := testvideo.ProbeTimes(t, testvideo.Path(v.name))
			o := stretchOutput(info)
			rnd := rand.New(rand.NewPCG(20, uint64(info.Frames)))
			var clips []decode.Clip
			for _, s := range fpsRates {
				fps, _ := rate(t, s)
				n := info.FramesAt(fps)
				clips = append(clips, decode.Clip{Start: 0, Frames: n, Stride: 1, FPS: fps})
				for range 6 {
					frames, stride := 1+rnd.IntN(8), 1+rnd.IntN(3)
					span := (frames-1)*stride + 1
					if span <= n {
						clips = append(clips, decode.Clip{Start: rnd.IntN(n - span + 1), Frames: frames, Stride: stride, FPS: fps})
					}
					clips = append(clips, decode.Clip{Start: max(0, n-2), Frames: frames, Stride: stride, FPS: fps, PadEnd: true})
				}
			}
			rnd.Shuffle(len(clips), func(i, j int) { clips[i], clips[j] = clips[j], clips[i] })
			checkClips(t, pool, info, o, clips, 2, func(c decode.Clip) []int {
				exact := big.NewRat(int64(c.FPS.Num), int64(c.FPS.Den))
				want := make([]int, c.Frames)
				for j := range want {
					want[j] = times.Expected(c.Start+j*c.Stride, exact)
				}
				return want
			})
		})
	}
}

// TestFPSBrokenTimestamps: timestamps that jump (a transport stream's clock reset forward) are
// not trusted: the video is timed by its average rate, and says why.
func TestFPSBrokenTimestamps(t *testing.T) {
	info := &decode.Info{Timing: decode.TimingPTS, Frames: 10, TimeBase: decode.Rational{Num: 1, Den: 90000},
		AvgFrameRate: decode.Rational{Num: 25, Den: 1}, PTS: []int64{0, 3600, 7200, 10800, 14400, 90000 * 3600, 90000*3600 + 3600,
			90000*3600 + 7200, 90000*3600 + 10800, 90000*3600 + 14400}}
	fps, _ := rate(t, "50")
	if info.TimedByPTS() || info.FramesAt(fps) != 20 || info.FrameAt(11, fps) != 5 {
		t.Errorf("timed by timestamps %v, %d frames at 50 fps, instant 11 shows %d; want the average rate: 20 and 5",
			info.TimedByPTS(), info.FramesAt(fps), info.FrameAt(11, fps))
	}
	if note := info.TimingNote(); !strings.Contains(note, "its timestamps span 3600.160 s for 10 frames, which its average frame rate puts at 0.360 s") {
		t.Errorf("note %q", note)
	}
	for k := range info.PTS { // mended: 25 fps
		info.PTS[k] = int64(k) * 3600
	}
	if !info.TimedByPTS() || info.FramesAt(fps) != 20 || info.TimingNote() != "" {
		t.Errorf("mended: timed by timestamps %v, %d frames", info.TimedByPTS(), info.FramesAt(fps))
	}
}

// TestFPSHalfway: where a video's clock ticks once a frame, its frames' times are exact, and at an
// instant halfway between two frames the earlier is shown (the frame whose display interval
// holds the instant, as torchcodec's get_frames_played_at has it): 0.5 s of a 25 frames/s AVI
// is frame 12 (0.48 to 0.52 s), not 13; instant m at 20 frames/s of a 30 frames/s MP4 whose
// timescale is 30 is frame 1.5m rounded down. And a video timed by its rate, whose decoded
// frames' clock ticks once a frame (an AVI), is timed by that clock where the average frame
// rate FFmpeg guessed differs from it: frame m is shown at instant m of its own rate, not the
// frame before.
func TestFPSHalfway(t *testing.T) {
	avi := probe(t, "tick25.avi") // 16 frames: 0.64 s
	fps8, _ := rate(t, "8")
	if idx, err := avi.ClipFrames(decode.Clip{Start: 0, Frames: 3, Stride: 2, FPS: fps8}); err != nil || fmt.Sprint(idx) != "[0 6 12]" {
		t.Errorf("tick25.avi, 3 frames 2 apart at 8 fps: %v, %v; want [0 6 12]", idx, err)
	}
	if n := avi.FramesAt(fps8); n != 6 { // 0, 0.125, ..., 0.625 s
		t.Errorf("tick25.avi at 8 fps: %d frames, want 6", n)
	}
	mp4 := probe(t, "tick30.mp4") // 30 frames: 1 s
	fps20, _ := rate(t, "20")
	if n := mp4.FramesAt(fps20); n != 20 {
		t.Errorf("tick30.mp4 at 20 fps: %d frames, want 20", n)
	}
	for m := range 20 {
		if got := mp4.FrameAt(m, fps20); got != 3*m/2 {
			t.Errorf("tick30.mp4 at 20 fps, instant %d: frame %d, want %d", m, got, 3*m/2)
		}
	}

	// A decoded AVI at 30000/1001 frames/s whose average rate was guessed as 29.97.
	info := &decode.Info{Timing: decode.TimingDecoded, Frames: 300, TimeBase: decode.Rational{Num: 1001, Den: 30000},
		AvgFrameRate: decode.Rational{Num: 2997, Den: 100}, PTS: make([]int64, 300)}
	for k := range info.PTS {
		info.PTS[k] = int64(k) + 2 // as the decoder stamps B-frames out of an AVI: one tick a frame
	}
	ntsc, _ := rate(t, "30000/1001")
	if n := info.FramesAt(ntsc); n != 300 {
		t.Errorf("AVI at its own rate: %d frames, want 300", n)
	}
	for m := range 300 {
		if got := info.FrameAt(m, ntsc); got != m {
			t.Fatalf("AVI at its own rate, instant %d: frame %d, want %d", m, got, m)
		}
	}
	if r := info.TimingRate(); r != (decode.Rational{Num: 30000, Den: 1001}) {
		t.Errorf("AVI timed at %v, want its clock's 30000/1001", r)
	}
}

// TestFPSRoundedTicks: containers with a coarse clock (Matroska and WebM: milliseconds) store each
// frame's time rounded to the nearest tick, so half the frames are stamped after their true time.
// They are still the frames shown at their instants, and a video's length at a rate is not
// stretched by the rounding: a 10-minute 29.97 fps video at its own rate is frames 0, 1, 2, ...
// and 18,000 long; a 30 fps video at 15 fps is frames 0, 2, 4, ... Where an instant falls between
// frames, the frame shown is, to within a tick, the last whose true time is at or before it: a
// frame truly at the instant may be stamped half a tick late, and one stamped there may truly be
// half a tick later still, so no rule can tell them apart more finely.
func TestFPSRoundedTicks(t *testing.T) {
	stamped := func(n int, num, den int64) *decode.Info { // frame k at k*den/num s, in ms, rounded
		info := &decode.Info{Timing: decode.TimingPTS, Frames: n, TimeBase: decode.Rational{Num: 1, Den: 1000},
			AvgFrameRate: decode.Rational{Num: int(num), Den: int(den)}, PTS: make([]int64, n)}
		for k := range info.PTS {
			info.PTS[k] = (2*int64(k)*den*1000 + num) / (2 * num)
		}
		return info
	}
	for _, c := range []struct {
		info      *decode.Info
		fps       string
		every     int // instant m shows frame m*every
		instants  int
		videoName string
	}{
		{stamped(18000, 30000, 1001), "30000/1001", 1, 18000, "10 min at 29.97 fps"},
		{stamped(18000, 30000, 1001), "15", 0, 9009, "10 min at 29.97 fps"},
		{stamped(900, 30, 1), "15", 2, 450, "30 s at 30 fps"},
		{stamped(900, 30, 1), "30", 1, 900, "30 s at 30 fps"},
		{stamped(1500, 25, 1), "5", 5, 300, "60 s at 25 fps"},
	} {
		fps, _ := rate(t, c.fps)
		if n := c.info.FramesAt(fps); n != c.instants {
			t.Errorf("%s, at %s fps: %d frames long, want %d", c.videoName, c.fps, n, c.instants)
		}
		bad := 0
		for m := range c.instants {
			got := c.info.FrameAt(m, fps)
			want := m * c.every
			if c.every == 0 { // 29.97 -> 15: frame k's true time k*1001/30000 s is within a
				// millisecond at or before m/15 s, and frame k+1's is not
				at := func(k int) float64 { return float64(k) * 1001 / 30 } // ms
				if at(got) <= float64(m)*1000/15+1 && (got+1 == c.info.Frames || at(got+1) > float64(m)*1000/15-1) {
					want = got
				} else {
					want = -1
				}
			}
			if got != want {
				if bad++; bad <= 3 {
					t.Errorf("%s, at %s fps: instant %d shows frame %d, want %d", c.videoName, c.fps, m, got, want)
				}
			}
		}
		if bad > 3 {
			t.Errorf("%s, at %s fps: %d instants of %d show the wrong frame", c.videoName, c.fps, bad, c.instants)
		}
	}
}

// TestFPSTooFew: a clip at a target rate that runs past the video's end fails with
// ErrTooFewFrames unless padded, and a bad rate is a bad request.
func TestFPSTooFew(t *testing.T) {
	info := probe(t, "cfr60.mp4") // 3 s: 45 frames at 15 fps
	fps, _ := rate(t, "15")
	if n := info.FramesAt(fps); n != 45 {
		t.Fatalf("3 s at 15 fps: %d frames, want 45", n)
	}
	o := stretchOutput(info)
	buf := make([]byte, 8*o.FrameBytes())
	_, err := decode.DecodeClip(context.Background(), info, decode.Clip{Start: 40, Frames: 8, Stride: 1, FPS: fps}, o, buf, 1)
	if !isKind(err, decode.ErrTooFewFrames) || !strings.Contains(err.Error(), "at 15 fps") {
		t.Errorf("past the end: got %v, want ErrTooFewFrames at 15 fps", err)
	}
	if _, err := info.ClipFrames(decode.Clip{Start: 0, Frames: 2, Stride: 1, FPS: decode.Rational{Num: 15}}); !errors.Is(err, decode.ErrBadRequest) {
		t.Errorf("rate 15/0: got %v, want ErrBadRequest", err)
	}
	idx, err := info.ClipFrames(decode.Clip{Start: 40, Frames: 8, Stride: 1, FPS: fps, PadEnd: true})
	if err != nil || fmt.Sprint(idx) != "[160 164 168 172 176 179 179 179]" {
		t.Errorf("padded: %v, %v", idx, err)
	}
}

// refFrames lists, with ffprobe decoding only reference frames (-skip_frame noref), which frames
// of path are reference frames.
func refFrames(t *testing.T, path string, times testvideo.Times) map[int]bool {
	out, err := exec.Command("ffprobe", "-v", "error", "-threads", "1", "-skip_frame", "noref", "-select_streams", "v:0",
		"-show_entries", "frame=pts", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe -skip_frame noref: %v", err)
	}
	index := map[int64]int{}
	for k, p := range times.PTS {
		index[p] = k
	}
	ref := map[int]bool{}
	for _, line := range strings.Fields(string(out)) {
		p, err := strconv.ParseInt(strings.TrimSuffix(line, ","), 10, 64)
		if err != nil {
			t.Fatalf("ffprobe printed %q", line)
		}
		ref[index[p]] = true
	}
	return ref
}

// TestFPSDecodesOnlyWhatIsShown: clips that skip frames (60 fps at 15, 30 at 15) do not decode the
// non-reference frames they skip: the frames out of the decoder are at most the floor (every
// reference frame from the keyframe to the clip's last frame, and the clip's own), well under
// every frame from the keyframe on.
func TestFPSDecodesOnlyWhatIsShown(t *testing.T) {
	for _, name := range []string{"cfr60.mp4", "cfr30.mp4"} {
		t.Run(name, func(t *testing.T) {
			info := probe(t, name)
			times := testvideo.ProbeTimes(t, testvideo.Path(name))
			ref := refFrames(t, testvideo.Path(name), times)
			fps, _ := rate(t, "15")
			o := stretchOutput(info)
			var floor, all, decoded int
			rnd := rand.New(rand.NewPCG(5, 5))
			n := info.FramesAt(fps)
			for range 10 {
				c := decode.Clip{Start: rnd.IntN(n - 7), Frames: 8, Stride: 1, FPS: fps}
				idx, _ := info.ClipFrames(c)
				kf := info.Keyframes[info.KeyframeAtOrBefore(idx[0])].Frame
				need := map[int]bool{}
				for _, i := range idx {
					need[i] = true
				}
				for i := kf; i <= idx[len(idx)-1]; i++ {
					if ref[i] || need[i] {
						floor++
					}
				}
				all += idx[len(idx)-1] + 1 - kf
				// A decoder of its own for each clip, which starts at the keyframe, as the floor does.
				pool := newPool(t, decode.PoolOptions{Concurrency: 1, Threads: 1})
				if _, err := pool.DecodeClip(context.Background(), info, c, o, make([]byte, 8*o.FrameBytes())); err != nil {
					t.Fatal(err)
				}
				decoded += int(pool.Stats().Frames)
				pool.Close()
			}
			t.Logf("decoded %d frames for 80 served; floor %d, keyframe to last frame %d", decoded, floor, all)
			if decoded > floor || 3*decoded > 2*all {
				t.Errorf("decoded %d frames for 80 served; want at most the floor, %d, and well under all from the keyframe, %d", decoded, floor, all)
			}
		})
	}
}

// TestFPSClockTicks: a video timed by its rate is timed by its clock only where the clock ticks
// at about the rate of its frames: timestamps one 90 kHz tick a frame are broken, and it is timed
// at its average frame rate.
func TestFPSClockTicks(t *testing.T) {
	info := &decode.Info{Timing: decode.TimingDecoded, Frames: 50, TimeBase: decode.Rational{Num: 1, Den: 90000},
		AvgFrameRate: decode.Rational{Num: 25, Den: 1}, PTS: make([]int64, 50)}
	for k := range info.PTS {
		info.PTS[k] = int64(k)
	}
	fps, _ := rate(t, "5")
	if r, n := info.TimingRate(), info.FramesAt(fps); r != (decode.Rational{Num: 25, Den: 1}) || n != 10 || info.FrameAt(3, fps) != 15 {
		t.Errorf("timed at %v, %d frames at 5 fps, instant 3 shows %d; want 25 fps, 10 and 15", r, n, info.FrameAt(3, fps))
	}
}
