package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
)

// fpsSources are videos of many frame rates (testdata/gen.sh): constant 24, 25, 30, 60 and
// 30000/1001 frames/s, variable frame rate (phone-like MP4, Matroska), a first timestamp of 10 s
// (MPEG-TS) and an AVI without presentation timestamps, at 24 frames/s.
var fpsSources = map[string]string{
	"film/cfr24.mp4": "cfr24.mp4", "film/gop16.mp4": "h264_gop16.mp4", "tv/cfr30.mp4": "cfr30.mp4", "tv/ntsc.mp4": "ntsc.mp4",
	"sport/cfr60.mp4": "cfr60.mp4", "phone/vfr.mp4": "vfr_phone.mp4", "phone/vfr.mkv": "vfr.mkv",
	"cut/start10.ts": "start10.ts", "cut/old.avi": "mpeg4_24.avi",
}

// fpsLayout is the layout the --fps tests mount: 4 frames 2 apart at 15 frames/s (0.53 s), a
// sample every 3 frames, each frame stretched whole to 48x64 so that its index can be read.
var fpsLayout = []string{"--fps", "15", "--frames", "4", "--stride", "2", "--step", "3", "--size", "48x64", "--resize", "stretch",
	"--probe-cache", ""}

// indexRows reads a mount's index.csv as a header and rows.
func indexRows(t *testing.T, mnt string) ([]string, [][]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(mnt, "index.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("index.csv: %d rows, %v", len(rows), err)
	}
	return rows[0], rows[1:]
}

// readSample reads sample i of a mount's clips.raw.
func readSample(t *testing.T, f *os.File, i int, size int) []byte {
	t.Helper()
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, int64(i)*int64(size)); n != size {
		t.Fatalf("sample %d: read %d bytes: %v", i, n, err)
	}
	return buf
}

// frameIndices reads back the index pattern of each 48x64 frame of a sample.
func frameIndices(t *testing.T, sample []byte, dispW, dispH int) []int {
	const w, h = 64, 48
	got := make([]int, len(sample)/(w*h*3))
	for k := range got {
		i, err := testvideo.ReadIndex(sample[k*w*h*3:(k+1)*w*h*3], w, h, dispW, dispH, testvideo.Full(dispW, dispH), testvideo.Full(w, h))
		if err != nil {
			i = -1
		}
		got[k] = i
	}
	return got
}

// TestFPSMount mounts videos of many frame rates with --fps 15 and checks, against timestamps
// read with ffprobe -show_frames (not vidfs's probe): each video's sample count and index.csv's
// start_time and end_time; and the frames of random samples and of every video's last one,
// read from the pixels, through the mount, through vidfs clip, and from the disk tier after a
// remount. The AVI is said to be timed by its average rate, in the log and by vidfs verify; a
// mount at another rate does not read the tier's entries.
func TestFPSMount(t *testing.T) {
	src, tierDir := linkSources(t, fpsSources), t.TempDir()
	mountFlags := append([]string{"--cache-mem", "16MiB", "--workers", "2", "--cache-dir", tierDir, "--cache-disk", "256MiB", "--cache-keep", "samples"}, fpsLayout...)
	mp := startMount(t, src, mountFlags...)
	if log := mp.log(); !strings.Contains(log, `msg="video timed by its average frame rate" file=cut/old.avi`) || strings.Count(log, "timed by its average") != 1 {
		t.Errorf("the AVI's timing is not said once in the log:\n%s", log)
	}

	var lay wire.Dataset
	if b, err := os.ReadFile(filepath.Join(mp.dir, ".vidfs", "layout.json")); err != nil || json.Unmarshal(b, &lay) != nil || lay.FPS != 15 {
		t.Fatalf("layout.json: %s (%v), want fps 15", b, err)
	}
	head, rows := indexRows(t, mp.dir)
	if got := strings.Join(head, ","); got != "index,path,video,start,stride,label,class,start_time,end_time" {
		t.Fatalf("index.csv header %s", got)
	}
	fps := big.NewRat(15, 1)
	times := map[string]testvideo.Times{}
	perVideo := map[string][]int{} // the samples of each video
	for i, r := range rows {
		video, start := r[2], atoi(t, r[3])
		perVideo[video] = append(perVideo[video], i)
		st, _ := strconv.ParseFloat(r[7], 64)
		end, _ := strconv.ParseFloat(r[8], 64)
		if want := float64(start) / 15; fmt.Sprintf("%.6f", want) != r[7] || fmt.Sprintf("%.6f", want+8.0/15) != r[8] || end <= st {
			t.Errorf("index.csv row %v: want start_time %.6f, end_time %.6f", r, want, want+8.0/15)
		}
	}
	for video, name := range fpsSources {
		times[video] = testvideo.ProbeTimes(t, testvideo.Path(name))
		n := times[video].Count(fps) // frames at 15 fps; a sample spans 7, one starts every 3
		if want := (n-7)/3 + 1; len(perVideo[video]) != want {
			t.Errorf("%s: %d samples; %d frames at 15 fps make %d", video, len(perVideo[video]), n, want)
		}
	}

	// Random samples, and the last of each video.
	rnd := rand.New(rand.NewPCG(15, 1))
	pick := map[int]bool{}
	for len(pick) < 16 {
		pick[rnd.IntN(len(rows))] = true
	}
	for _, s := range perVideo {
		pick[s[len(s)-1]] = true
	}
	const size = 4 * 48 * 64 * 3
	raw, err := os.Open(filepath.Join(mp.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	served := map[int][]byte{}
	for i := range pick {
		r := rows[i]
		video, start := r[2], atoi(t, r[3])
		got := readSample(t, raw, i, size)
		served[i] = got
		tm := times[video]
		want := make([]int, 4)
		for j := range want {
			want[j] = tm.Expected(start+2*j, fps)
		}
		info, err := decode.Probe(filepath.Join(src, video)) // for its picture size
		if err != nil {
			t.Fatal(err)
		}
		if got := frameIndices(t, got, info.DisplayWidth, info.DisplayHeight); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sample %d (%s from %d at 15 fps): frames %v, want %v", i, video, start, got, want)
		}
		// vidfs clip gives the same bytes.
		code, out, errs := vidfs(t, "clip", filepath.Join(src, video), "--fps", "15", "--start", r[3], "--frames", "4", "--stride", "2",
			"--size", "48x64", "--resize", "stretch", "--hwaccel", "none", "-o", "-")
		if code != 0 || !bytes.Equal([]byte(out), got) {
			t.Errorf("vidfs clip of sample %d: exit %d, %d bytes, equal %v: %s", i, code, len(out), bytes.Equal([]byte(out), got), errs)
		}
	}
	raw.Close()
	mp.stop(t)

	// From the disk tier, after a remount: the same bytes, none decoded.
	mp = startMount(t, src, mountFlags...)
	raw, err = os.Open(filepath.Join(mp.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range served {
		if got := readSample(t, raw, i, size); !bytes.Equal(got, want) {
			t.Errorf("sample %d from the tier differs from what was served", i)
		}
	}
	raw.Close()
	st := mountStats(t, mp.dir)
	if st.Tier == nil || st.Tier.Hits != int64(len(served)) || st.Decode.Clips != 0 {
		t.Errorf("remount: tier %+v, %d decoded; want %d hits and nothing decoded", st.Tier, st.Decode.Clips, len(served))
	}
	mp.stop(t)

	// Another rate is another key: the tier has nothing for it.
	other := append([]string{}, mountFlags...)
	other[len(other)-len(fpsLayout)+1] = "24"
	mp = startMount(t, src, other...)
	raw, err = os.Open(filepath.Join(mp.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range served {
		readSample(t, raw, i, size)
	}
	raw.Close()
	if st := mountStats(t, mp.dir); st.Tier.Hits != 0 || st.Decode.Clips != int64(len(served)) {
		t.Errorf("--fps 24 over the tier of --fps 15: %d hits, %d decoded; want none and %d", st.Tier.Hits, st.Decode.Clips, len(served))
	}

	// vidfs verify says which video is timed by its average rate.
	code, out, errs := vidfs(t, append([]string{"verify", src, "--json"}, fpsLayout...)...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Summary.TimedByRate != 1 {
		t.Fatalf("verify --fps: exit %d, %v, %+v\n%s", code, err, rep.Summary, errs)
	}
	for _, r := range rep.Videos {
		if (r.Note != "") != (r.File == "cut/old.avi") || r.Checked != len(perVideo[r.File]) {
			t.Errorf("verify: %+v; want %d samples checked, and a note for the AVI alone", r, len(perVideo[r.File]))
		}
	}
	if _, out, _ := vidfs(t, append([]string{"verify", src}, fpsLayout...)...); !strings.Contains(out, "AVG RATE  cut/old.avi: timed at its average frame rate, 24 fps") {
		t.Errorf("verify's report does not say how the AVI is timed:\n%s", out)
	}
}

// TestFPSPython: on an --fps mount, Mount.index() gives each sample's start_time and end_time,
// and PlanSampler draws random and uniform clips per video as on any mount.
func TestFPSPython(t *testing.T) {
	// In-process decoders, one sample decoded ahead: fps.py reads no sample, and the Python client's
	// view of the layout and its plans do not depend on either (python_test.go).
	mp := startMount(t, linkSources(t, fpsSources), append([]string{"--cache-mem", "16MiB", "--workers", "2", "--decoders", "in-process", "--prefetch", "1"}, fpsLayout...)...)
	if out := runPython(t, "fps.py", mp.dir); strings.TrimSpace(out) != "ok" {
		t.Errorf("fps.py: %s", out)
	}
}

// stop ends a mount and waits for its process (which writes what the disk tier has queued),
// leaving its exit for the test's cleanup.
func (mp *mountProc) stop(t *testing.T) {
	t.Helper()
	mp.cmd.Process.Signal(syscall.SIGTERM)
	err := <-mp.done
	mp.done <- err
	if err != nil {
		t.Fatalf("mount exited: %v\n%s", err, mp.log())
	}
}

// mountStats reads a mount's .vidfs/stats.
func mountStats(t *testing.T, mnt string) wire.Stats {
	t.Helper()
	var st wire.Stats
	b, err := os.ReadFile(filepath.Join(mnt, ".vidfs", "stats"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf(".vidfs/stats: %v\n%s", err, b)
	}
	return st
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFPSProbeCommand: vidfs probe --fps says how long a video is at that rate and how it is
// timed; a rate that is not one is refused as a usage error.
func TestFPSProbeCommand(t *testing.T) {
	code, out, errs := vidfs(t, "probe", "--fps", "15", testvideo.Path("cfr60.mp4"), testvideo.Path("mpeg4_24.avi"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for _, want := range []struct {
		frames  int
		timedBy string
	}{{45, "timestamps"}, {30, "average frame rate"}} { // 3 s and 2 s at 15 fps
		var r struct {
			Frames int `json:"frames"`
			AtFPS  struct {
				Frames  int    `json:"frames"`
				TimedBy string `json:"timed_by"`
			} `json:"at_fps"`
		}
		if err := dec.Decode(&r); err != nil || r.AtFPS.Frames != want.frames || r.AtFPS.TimedBy != want.timedBy || r.Frames == 0 {
			t.Errorf("probe --fps 15: %+v, %v; want %+v", r, err, want)
		}
	}
	for _, args := range [][]string{{"probe", "--fps", "0", testvideo.Path("cfr60.mp4")},
		{"clip", testvideo.Path("cfr60.mp4"), "--fps", "fast", "-o", "-"}, {"verify", t.TempDir(), "--fps", "-1"}} {
		if code, _, errs := vidfs(t, args...); code != 2 || !strings.Contains(errs, "want a positive number such as 15, 29.97 or 30000/1001") {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, errs)
		}
	}
}

// TestFPSHalfwayClip: vidfs clip --fps of a 25 frames/s AVI, whose clock ticks once a frame,
// shows at 0.5 s frame 12 (0.48 to 0.52 s), not the 13 that rounding 12.5 ticks up gave, and
// vidfs probe counts the 6 instants of 8 frames/s in its 0.64 s.
func TestFPSHalfwayClip(t *testing.T) {
	path := testvideo.Path("tick25.avi")
	code, out, errs := vidfs(t, "clip", path, "--fps", "8", "--start", "0", "--frames", "3", "--stride", "2",
		"--size", "48x64", "--resize", "stretch", "--hwaccel", "none", "-o", "-")
	if code != 0 || len(out) != 3*48*64*3 {
		t.Fatalf("vidfs clip: exit %d, %d bytes: %s", code, len(out), errs)
	}
	if got := frameIndices(t, []byte(out), 160, 120); fmt.Sprint(got) != "[0 6 12]" {
		t.Errorf("vidfs clip --fps 8 --stride 2 --frames 3 of a 25 fps AVI: frames %v, want [0 6 12]", got)
	}
	code, out, errs = vidfs(t, "probe", "--fps", "8", path)
	var r struct {
		AtFPS struct {
			Frames int `json:"frames"`
		} `json:"at_fps"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.AtFPS.Frames != 6 {
		t.Errorf("vidfs probe --fps 8 of a 0.64 s video: exit %d, %+v, %v: %s; want 6 frames", code, r, err, errs)
	}
}
