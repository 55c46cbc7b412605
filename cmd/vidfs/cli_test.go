package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// vidfs runs a command line in-process and returns its exit status, stdout and stderr.
func vidfs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func TestHelp(t *testing.T) {
	code, out, _ := vidfs(t, "help")
	if code != 0 || !strings.Contains(out, "probe") || !strings.Contains(out, "clip") {
		t.Errorf("vidfs help: exit %d, %q", code, out)
	}
	for name := range commands() {
		code, out, _ := vidfs(t, name, "--help")
		if code != 0 || !strings.Contains(out, "usage: vidfs "+name) || !strings.Contains(out, "\n      --ffmpeg-log") { // the flags, as TestHelpListsEveryFlag checks
			t.Errorf("vidfs %s --help: exit %d, %q", name, code, out)
		}
	}
	if code, _, errs := vidfs(t, "frobnicate"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errs)
	}
}

func TestProbeCommand(t *testing.T) {
	code, out, errs := vidfs(t, "probe", testvideo.Path("h264_gop16.mp4"), testvideo.Path("vp9.webm"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for _, want := range []struct {
		codec  string
		frames int
	}{{"h264", 100}, {"vp9", 60}} {
		var info decode.Info
		if err := dec.Decode(&info); err != nil {
			t.Fatal(err)
		}
		if info.Codec != want.codec || info.Frames != want.frames || info.PTS != nil || len(info.Keyframes) == 0 {
			t.Errorf("got %s with %d frames, %d timestamps, %d keyframes; want %+v without timestamps",
				info.Codec, info.Frames, len(info.PTS), len(info.Keyframes), want)
		}
	}

	code, out, _ = vidfs(t, "probe", "--frames", testvideo.Path("vfr.mkv"))
	var info decode.Info
	if err := json.Unmarshal([]byte(out), &info); code != 0 || err != nil || len(info.PTS) != 60 || info.PTS[1] != 55 {
		t.Errorf("--frames: exit %d, %v, pts %v", code, err, info.PTS)
	}

	bad := testvideo.Path("empty.mp4")
	code, out, errs = vidfs(t, "probe", testvideo.Path("short8.mp4"), bad)
	if code != 1 || !strings.Contains(errs, bad+": not a readable video container: empty file") || !strings.Contains(out, `"frames": 8`) {
		t.Errorf("one bad file of two: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := vidfs(t, "probe"); code != 2 || !strings.Contains(errs, "no video given") {
		t.Errorf("no arguments: exit %d, %q", code, errs)
	}
}

func TestClipCommand(t *testing.T) {
	dir := t.TempDir()
	path := testvideo.Path("rotated.mp4")
	npy := filepath.Join(dir, "clip.npy")
	code, _, errs := vidfs(t, "clip", path, "--start", "3", "--frames", "5", "--stride", "2", "--size", "64x48", "--resize", "pad", "-o", npy)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "(5, 64, 48, 3) uint8 pad") {
		t.Errorf("report %q does not give the shape", errs)
	}
	// The bytes are what decode.DecodeClip makes, after a NumPy header.
	info, err := decode.Probe(path)
	if err != nil {
		t.Fatal(err)
	}
	o := decode.Output{Width: 48, Height: 64, Resize: decode.Pad}
	want := make([]byte, 5*o.FrameBytes())
	if _, err := decode.DecodeClip(context.Background(), info, decode.Clip{Start: 3, Frames: 5, Stride: 2}, o, want, 1); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(npy)
	if len(got) < len(want) || !bytes.Equal(got[len(got)-len(want):], want) {
		t.Fatalf("clip.npy holds %d bytes; want a header and the %d decoded bytes", len(got), len(want))
	}
	// NumPy reads it with the right shape, memory-mapped.
	py := `import numpy as np, sys; a = np.load(sys.argv[1], mmap_mode="r"); print(a.shape, a.dtype, int(a[2].sum()))`
	out, err := exec.Command("/usr/bin/python3", "-c", py, npy).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy (Debian's python3-numpy): %v\n%s", err, out)
	}
	var sum int
	for _, b := range want[2*o.FrameBytes() : 3*o.FrameBytes()] {
		sum += int(b)
	}
	if w := "(5, 64, 48, 3) uint8 " + itoa(sum); strings.TrimSpace(string(out)) != w {
		t.Errorf("numpy says %q, want %q", out, w)
	}

	// Raw bytes to stdout.
	code, out2, errs := vidfs(t, "clip", path, "--start", "3", "--frames", "5", "--stride", "2", "--size", "64x48", "--resize", "pad", "-o", "-")
	if code != 0 || out2 != string(want) {
		t.Errorf("-o -: exit %d, %d bytes, %s", code, len(out2), errs)
	}

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"clip", path}, 2, "no output file"},
		{[]string{"clip", path, "--size", "224", "-o", npy}, 2, `"224": want HEIGHTxWIDTH`},
		{[]string{"clip", path, "--resize", "squash", "-o", npy}, 2, "want crop, stretch or pad"},
		{[]string{"clip", path, "--start", "30", "-o", npy}, 1, "too few frames"},
		{[]string{"clip", testvideo.Path("random.mp4"), "-o", npy}, 1, "random.mp4: not a readable video container"},
	} {
		code, _, errs := vidfs(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.says) {
			t.Errorf("%v: exit %d, %q; want %d saying %q", tc.args, code, errs, tc.code, tc.says)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "1.5GiB": 3 << 29, "1000": 1000, "1MB": 1e6, "64 MiB": 64 << 20} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1G", "4 parsecs", "1.2.3"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
	for n, want := range map[int64]string{4 << 30: "4GiB", 268240896: "255.8MiB", 512: "512B", 1536: "1.5KiB"} {
		if s := formatBytes(n); s != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, s, want)
		}
	}
}

// TestHWAccelFlag: --hwaccel cuda fails at once with a clear message where there is no usable
// GPU (and decodes on it where there is); auto decodes wherever it can and says where.
func TestHWAccelFlag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "c.raw")
	path := testvideo.Path("h264_gop16.mp4")
	code, _, errs := vidfs(t, "clip", path, "--frames", "4", "--size", "32x32", "--hwaccel", "cuda", "-o", out)
	_, noGPU := decode.NewPool(decode.PoolOptions{HWAccel: decode.HWCUDA})
	switch {
	case noGPU != nil && (code != 1 || !strings.Contains(errs, "--hwaccel cuda: no usable NVIDIA GPU")):
		t.Errorf("clip --hwaccel cuda without a GPU: exit %d, %q", code, errs)
	case noGPU == nil && (code != 0 || !strings.Contains(errs, "decoded on the GPU (NVDEC)")):
		t.Errorf("clip --hwaccel cuda with a GPU: exit %d, %q", code, errs)
	}
	code, _, errs = vidfs(t, "clip", path, "--frames", "4", "--size", "32x32", "--hwaccel", "auto", "-o", out)
	if code != 0 || !strings.Contains(errs, "decoded on the ") {
		t.Errorf("clip --hwaccel auto: exit %d, %q", code, errs)
	}
	if code, _, errs := vidfs(t, "clip", path, "--hwaccel", "vaapi", "-o", out); code != 2 || !strings.Contains(errs, "want none, auto or cuda") {
		t.Errorf("--hwaccel vaapi: exit %d, %q", code, errs)
	}
	if noGPU != nil {
		code, _, errs := vidfs(t, "mount", t.TempDir(), t.TempDir(), "--hwaccel", "cuda", "--probe-cache", "")
		if code != 1 || !strings.Contains(errs, "no usable NVIDIA GPU") {
			t.Errorf("mount --hwaccel cuda without a GPU: exit %d, %q", code, errs)
		}
	}
}
