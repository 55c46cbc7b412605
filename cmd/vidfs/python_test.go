package main

import (
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// pythonDir is the repository's python/ folder.
func pythonDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "python")
}

// runPython runs a script of testdata/ with Debian's python3, the repository's python/ folder on
// its path, and returns its output.
func runPython(t *testing.T, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", append([]string{filepath.Join("testdata", script)}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// The Python client's tests mount with in-process decoders: what they check is the client's and
// the plans', which do not depend on where a mount decodes (decoder helpers are TestHelperFaults',
// TestUnmountUnderReaders', and every test's that leaves --decoders at its default). Those whose
// plans nobody reads through (sampler.py and items.py write dozens, and read a few samples by
// index) keep one sample decoded ahead (--prefetch 1), not every sample of each plan written (the
// default, as many as the cache holds): decodes that nothing here looks at, most of their time.

// TestPlanSampler: PlanSampler splits, pads and shuffles as DistributedSampler does, writes each
// rank's plan, draws clips per epoch, and Dataset labels samples as index.csv does.
func TestPlanSampler(t *testing.T) {
	mp := startMount(t, makeSource(t), "--frames", "4", "--step", "4", "--size", "32x32", "--probe-cache", "", "--decoders", "in-process", "--prefetch", "1")
	if out := runPython(t, "sampler.py", mp.dir); strings.TrimSpace(out) != "ok" {
		t.Errorf("sampler.py: %s", out)
	}
}

// TestPythonItems: Dataset[i] does a bounded number of function calls whatever the mount's
// size, on a mount of over 900 samples (items.py counts calls and lines run), opens no file
// beyond clips.npy, and Dataset and PlanSampler read each control file once and index.csv never.
func TestPythonItems(t *testing.T) {
	mp := startMount(t, makeSource(t), "--frames", "2", "--step", "1", "--size", "8x8", "--probe-cache", "", "--decoders", "in-process", "--prefetch", "1")
	if out := runPython(t, "items.py", mp.dir); strings.TrimSpace(out) != "ok" {
		t.Errorf("items.py: %s", out)
	}
}

// TestPythonPackage: the python folder installs offline with pip into a virtual environment that
// sees Debian's packages, and importing it imports NumPy but not torch.
func TestPythonPackage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src") // pip builds in place: a copy keeps the repository clean
	if out, err := exec.Command("cp", "-r", pythonDir(), src).CombinedOutput(); err != nil {
		t.Fatalf("copying python/: %v\n%s", err, out)
	}
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		t.Fatalf("python3 -m venv (Debian's python3-venv): %v\n%s", err, out)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", src)
	if out, err := pip.CombinedOutput(); err != nil || !strings.Contains(string(out), "Successfully installed vidfs") {
		t.Fatalf("pip install --no-build-isolation: %v\n%s", err, out)
	}
	check := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import sys, vidfs; print(vidfs.__file__); print('torch' in sys.modules, 'numpy' in sys.modules)")
	check.Dir = dir
	out, err := check.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], venv) || lines[1] != "False True" {
		t.Errorf("the installed package: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(pythonDir(), "build")); err == nil {
		t.Error("installing wrote into the repository's python/ folder")
	}
}

// ddpSources is a dataset of short groups of pictures, in four classes, of about 300 samples of
// 4 frames: more than the DDP test's cache holds.
var ddpSources = map[string]string{
	"walk/a.mp4": "h264_gop16.mp4", "walk/b.mkv": "hevc.mkv", "walk/c.webm": "vp9.webm", "walk/d.avi": "mpeg4.avi",
	"run/a.mp4": "h264_gop16.mp4", "run/b.mkv": "vfr.mkv", "run/c.webm": "vp8.webm", "run/d.ts": "start10.ts",
	"jump/a.mp4": "h264_gop16.mp4", "jump/b.ogv": "theora.ogv", "jump/c.flv": "flv1.flv", "jump/d.avi": "mjpeg.avi",
	"swim/a.mp4": "h264_gop16.mp4", "swim/b.mkv": "hevc.mkv", "swim/c.webm": "vp9.webm", "swim/d.avi": "xvid_packed.avi",
}

// TestDDP: one mount, read by a real torch.distributed run of 4 ranks x 2 DataLoader workers with
// PlanSampler over 2 epochs, the dataset larger than the cache, each worker reading no faster than
// the decoders get the rank's next samples ready (ddp.py's wait_ready: a pace the decoders set, not
// a clock): from each rank's second batch on, its hit rate is at least 0.9; each sample is decoded
// about once per epoch; the ranks read what DistributedSampler splits with the same seed, and the
// bytes a single process reads.
func TestDDP(t *testing.T) {
	t.Parallel() // it waits mostly, on torchrun's ranks; its rendezvous port is its own
	mp := startMount(t, linkSources(t, ddpSources), "--frames", "4", "--step", "4", "--size", "32x32", "--workers", "2",
		"--cache-mem", "1MiB", "--probe-cache", "")
	lay, err := readDataset(mp.dir)
	if err != nil {
		t.Fatal(err)
	}
	if capacity := (1 << 20) / lay.SampleBytes; int64(lay.Samples) <= capacity {
		t.Fatalf("%d samples fit the cache (%d): the test needs more", lay.Samples, capacity)
	}
	out := runPython(t, "ddp.py", mp.dir, strconv.Itoa(rendezvousPort(t)), "4")
	var sum struct {
		Samples, Read, Distinct int
		Decodes                 int64
		EvictedUnread           int64 `json:"evicted_unread"`
		Seconds                 float64
		Split                   bool `json:"split_ok"`
		Bytes                   bool `json:"bytes_ok"`
		Ranks                   []struct {
			Name    string
			Hits    int64   `json:"hits_after_first_batch"`
			Misses  int64   `json:"misses_after_first_batch"`
			HitRate float64 `json:"hit_rate"`
			WaitS   float64 `json:"wait_s"`
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("ddp.py: %v\n%s", err, out)
	}
	t.Logf("%d samples, %d reads (%d distinct) by 4 ranks over 2 epochs in %.1f s; %d decodes, %d prefetched and evicted unread; ranks: %+v",
		sum.Samples, sum.Read, sum.Distinct, sum.Seconds, sum.Decodes, sum.EvictedUnread, sum.Ranks)
	if !sum.Split || !sum.Bytes || len(sum.Ranks) != 4 {
		t.Errorf("split as DistributedSampler: %v; bytes as a single process reads them: %v", sum.Split, sum.Bytes)
	}
	for _, r := range sum.Ranks {
		if r.HitRate < 0.9 || r.Hits+r.Misses == 0 {
			t.Errorf("%s: hit rate %.3f after its first batch (%d hits, %d misses), want at least 0.9", r.Name, r.HitRate, r.Hits, r.Misses)
		}
	}
	// Once an epoch at most: a sample still held from one epoch is read in the next without a
	// decode, so there may be fewer; every sample read was decoded at least once.
	if sum.Decodes < int64(sum.Distinct) || float64(sum.Decodes) > 1.1*float64(sum.Read) {
		t.Errorf("%d decodes for %d reads of %d samples over 2 epochs: want about one a read at most, one a sample at least", sum.Decodes, sum.Read, sum.Distinct)
	}
}

// rendezvousPort is a free port for torch.distributed's rendezvous, below the kernel's range of
// ephemeral ports: a port the kernel handed out (127.0.0.1:0) and let go could be handed to
// another test's connection before rank 0 binds it (it was once: EADDRINUSE).
func rendezvousPort(t *testing.T) int {
	t.Helper()
	low := 32768 // the kernel's default start of net.ipv4.ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	for range 100 {
		port := 10000 + rand.IntN(max(low-10000, 1))
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatalf("no free port between 10000 and %d", low)
	return 0
}
