package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// verifySources is a source tree of good videos, one of each class that numbers frames its own
// way, and damaged videos.
var verifySources = map[string]string{
	"good/gop16.mp4": "h264_gop16.mp4", "good/vp9.webm": "vp9.webm", "good/mpeg4.avi": "mpeg4.avi", "good/short.mp4": "short8.mp4",
	"classes/packed.avi": "xvid_packed.avi", "classes/refresh.mp4": "h264_refresh444.mp4", "classes/cut.mpg": "mpeg2_cut.mpg",
	"classes/mirrored.mp4": "mirrored.mp4", "classes/bframes.avi": "h264_bframes.avi",
	"bad/corrupt.mp4": "corrupt.mp4", "bad/truncated.mp4": "truncated.mp4", "bad/empty.mp4": "empty.mp4",
	"bad/random.mp4": "random.mp4", "bad/unknown.avi": "unknown_codec.avi",
}

func linkSources(t *testing.T, files map[string]string) string {
	src := t.TempDir()
	for dst, name := range files {
		p := filepath.Join(src, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(testvideo.Path(name), p); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// TestVerify: vidfs verify reports every video (ok, left out with the reason, or the samples that
// fail, at which frame), exits 1 for a damaged tree and 0 for a clean one, and fails exactly the
// samples a mount with the same flags answers with EIO.
func TestVerify(t *testing.T) {
	src := linkSources(t, verifySources)
	layoutFlags := []string{"--frames", "4", "--stride", "2", "--step", "4", "--size", "32x32", "--probe-cache", ""}
	code, out, errs := vidfs(t, append([]string{"verify", src, "--json"}, layoutFlags...)...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("verify --json: exit %d, %v\n%s%s", code, err, out, errs)
	}
	if !strings.Contains(errs, "verifying: ") || !strings.Contains(errs, "vidfs verify: 14 videos: 9 ok") {
		t.Errorf("verify's stderr lacks progress or its verdict:\n%s", errs)
	}
	status := map[string]videoReport{}
	for _, r := range rep.Videos {
		status[r.File] = r
	}
	for file, want := range map[string]string{
		"bad/empty.mp4": "left out", "bad/random.mp4": "left out", "bad/unknown.avi": "left out", "bad/corrupt.mp4": "failing",
		"good/gop16.mp4": "ok", "classes/packed.avi": "ok", "classes/cut.mpg": "ok", "classes/bframes.avi": "ok",
	} {
		if got := status[file]; got.Status != want || (want == "left out" && got.Reason == "") {
			t.Errorf("%s: %+v, want %s", file, got, want)
		}
	}
	s := rep.Summary
	if s.Videos != 14 || s.LeftOut != 3 || s.OK+s.Failing+s.NoSamples != 11 || s.Failed == 0 || s.Checked == 0 {
		t.Errorf("summary %+v", s)
	}
	var failed []int
	for _, r := range rep.Videos {
		for _, f := range r.Failures {
			if f.Frame == nil || f.Kind != "corrupt or truncated data" || f.Reason == "" {
				t.Errorf("%s: failure %+v: want the frame, kind and reason", r.File, f)
			}
			failed = append(failed, f.Sample)
		}
	}
	slices.Sort(failed)

	// The mount fails the same samples.
	mp := startMount(t, src, append([]string{"--cache-mem", "16MiB", "--workers", "2"}, layoutFlags...)...)
	lay, err := readDataset(mp.dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(mp.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var eio []int
	buf := make([]byte, lay.SampleBytes)
	for i := range lay.Samples {
		if _, err := f.ReadAt(buf, int64(i)*lay.SampleBytes); errors.Is(err, syscall.EIO) {
			eio = append(eio, i)
		} else if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	if fmt.Sprint(eio) != fmt.Sprint(failed) || lay.Samples != s.Checked {
		t.Errorf("the mount fails samples %v of %d; verify failed %v of %d", eio, lay.Samples, failed, s.Checked)
	}

	// Human output, and --all-frames, on the damaged video alone; a clean tree passes.
	one := linkSources(t, map[string]string{"corrupt.mp4": "corrupt.mp4"})
	code, out, _ = vidfs(t, append([]string{"verify", one, "--all-frames"}, layoutFlags...)...)
	if code != 1 || !strings.Contains(out, "FAILING   corrupt.mp4:") || !strings.Contains(out, "runs of frames fail") || !strings.Contains(out, "at frame ") {
		t.Errorf("verify --all-frames of a damaged video: exit %d\n%s", code, out)
	}
	clean := linkSources(t, map[string]string{"a/x.mp4": "h264_gop16.mp4", "b/y.avi": "xvid_packed.avi"})
	if code, out, errs := vidfs(t, append([]string{"verify", clean}, layoutFlags...)...); code != 0 || !strings.Contains(out, "2 videos: 2 ok") {
		t.Errorf("verify of a clean tree: exit %d\n%s%s", code, out, errs)
	}
}

// TestReasonsOddPaths: files whose paths hold ": " and "frame 3: " get their reason alone, neither
// the path nor a piece of it, in vidfs verify's report and in vidfs stats's list of errors.
func TestReasonsOddPaths(t *testing.T) {
	dir := "bad: odd/frame 3: x"
	src := linkSources(t, map[string]string{dir + "/empty.mp4": "empty.mp4", dir + "/corrupt.mp4": "corrupt.mp4",
		"good.mp4": "h264_gop16.mp4"})
	layoutFlags := []string{"--frames", "4", "--stride", "2", "--step", "4", "--size", "32x32", "--probe-cache", ""}
	_, out, errs := vidfs(t, append([]string{"verify", src, "--json"}, layoutFlags...)...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s%s", err, out, errs)
	}
	const notVideo = "not a readable video container: empty file"
	failures := 0
	for _, r := range rep.Videos {
		switch r.File {
		case dir + "/empty.mp4":
			if r.Status != "left out" || r.Reason != notVideo {
				t.Errorf("verify: %s %s, %q; want left out, %q", r.File, r.Status, r.Reason, notVideo)
			}
		case dir + "/corrupt.mp4":
			for _, f := range r.Failures {
				failures++
				if !strings.HasPrefix(f.Reason, f.Kind) || f.Frame == nil || strings.Contains(f.Reason, "corrupt.mp4") {
					t.Errorf("verify: failure %+v of %s: want its frame, and the reason alone", f, r.File)
				}
			}
		}
	}
	if failures == 0 {
		t.Errorf("verify reports no failing sample of %s/corrupt.mp4: %+v", dir, rep.Videos)
	}

	mp := startMount(t, src, append([]string{"--cache-mem", "16MiB"}, layoutFlags...)...)
	_, out, errs = vidfs(t, "stats", mp.dir)
	if want := dir + "/empty.mp4 (whole video): " + notVideo + "\n"; !strings.Contains(out, want) {
		t.Errorf("vidfs stats lacks %q:\n%s%s", want, out, errs)
	}
}
