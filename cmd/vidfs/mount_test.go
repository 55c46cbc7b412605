package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// The test binary runs as vidfs itself when asked to, so that mounts run in their own process.
func TestMain(m *testing.M) {
	if os.Getenv("VIDFS_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var sources = map[string]string{
	"walk/gop16.mp4": "h264_gop16.mp4", "walk/gop250.mp4": "h264_gop250.mp4", "walk/hevc.mkv": "hevc.mkv",
	"run/vp9.webm": "vp9.webm", "run/mpeg4.avi": "mpeg4.avi", "run/rotated.mp4": "rotated.mp4",
	"jump/vfr.mkv": "vfr.mkv", "jump/start.ts": "start10.ts", "jump/av1.mp4": "av1.mp4",
	"swim/odd.webm": "odd_321x241.webm", "swim/vp8.webm": "vp8.webm", "swim/theora.ogv": "theora.ogv",
	"swim/mjpeg.avi": "mjpeg.avi", "swim/flv.flv": "flv1.flv", "top.mp4": "short8.mp4", "bad/empty.mp4": "empty.mp4",
}

func makeSource(t *testing.T) string {
	src := t.TempDir()
	for dst, name := range sources {
		p := filepath.Join(src, dst)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(testvideo.Path(name), p); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// mountProc is a `vidfs mount` running in its own process.
type mountProc struct {
	cmd    *exec.Cmd
	dir    string
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

func startMount(t *testing.T, src string, args ...string) *mountProc {
	t.Helper()
	mp := &mountProc{dir: t.TempDir(), done: make(chan error, 1)}
	mp.cmd = exec.Command(os.Args[0], append([]string{"mount", src, mp.dir}, args...)...)
	mp.cmd.Env = append(os.Environ(), "VIDFS_TEST_MAIN=1")
	pipe, _ := mp.cmd.StderrPipe()
	if err := mp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mounted := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mp.mu.Lock()
			mp.stderr.WriteString(sc.Text() + "\n")
			mp.mu.Unlock()
			if strings.Contains(sc.Text(), "msg=mounted") {
				mounted <- true
			}
		}
		mp.done <- mp.cmd.Wait()
	}()
	t.Cleanup(func() {
		mp.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-mp.done:
		case <-time.After(10 * time.Second):
			mp.cmd.Process.Kill()
		}
		exec.Command("fusermount3", "-u", "-z", mp.dir).Run()
	})
	select {
	case <-mounted:
	case err := <-mp.done:
		t.Fatalf("vidfs mount exited: %v\n%s", err, mp.log())
	case <-time.After(60 * time.Second):
		t.Fatalf("vidfs mount did not come up\n%s", mp.log())
	}
	return mp
}

func (mp *mountProc) log() string {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.stderr.String()
}

// statusKB reads a field (VmRSS, VmHWM) of the process's /proc status, in KiB.
func (mp *mountProc) statusKB(t *testing.T, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", mp.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	t.Fatalf("no %s in /proc status", field)
	return 0
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+dir+" ")
}

// epochs reads every sample through clips.raw for several epochs (numbered from the first one
// given, which seeds its shuffle), writing a shuffled plan each.
const epochs = `
import json, os, random, sys
mnt, first, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lay = json.load(open(os.path.join(mnt, ".vidfs/layout.json")))
n, S = lay["samples"], lay["sample_bytes"]
fd = os.open(os.path.join(mnt, "clips.raw"), os.O_RDONLY)
for e in range(first, first + epochs):
    order = list(range(n))
    random.Random(e).shuffle(order)
    with open(os.path.join(mnt, ".vidfs/order"), "w") as f:
        f.write(" ".join(map(str, order)))
    for i in order:
        assert len(os.pread(fd, S, i * S)) == S
st = json.load(open(os.path.join(mnt, ".vidfs/stats")))
print(json.dumps({"samples": n, "sample_bytes": S, "hit_rate": st["cache"]["hit_rate"], "evicted": st["cache"]["evicted"],
                  "capacity": st["cache"]["capacity_samples"], "cache_bytes": st["memory"]["cache_bytes"]}))
`

// TestMountMemoryBound: over epochs whose samples do not all fit in the cache, the mount process's
// resident memory stays within --cache-mem plus an overhead that does not grow with the samples
// read, with the disk tier on too.
func TestMountMemoryBound(t *testing.T) {
	t.Run("memory", func(t *testing.T) { memoryBound(t, 1) })
	t.Run("disk tier", func(t *testing.T) {
		// Two epochs to warm up: the first decodes and writes the tier, the second reads it back.
		memoryBound(t, 2, "--cache-dir", t.TempDir(), "--cache-disk", "1GiB")
	})
}

// memoryBound reads a mount for warm epochs, which fill the cache and run every part (each
// video's decoder, the tier's writer and reader), then for 6 more, and bounds the peak resident
// memory with what it measured before them: the idle process (the binary, the Go and race
// runtimes), --cache-mem, and twice the working memory beside the cache at the warm epochs' peak
// (FFmpeg's decoders, the Go heap with FUSE buffers, the tier's backlog and zstd's state, the race
// detector's shadow of them: about 45 MiB without the race detector, up to 175 MiB with it and the
// tier). Twice, because the Go heap may grow to twice what it holds live before it is collected
// (GOGC=100), and the decoders open are a different mix of videos each epoch. A leak that grows
// with the samples read outgrows it: a sample kept for each one read is 225 MiB over the 6 epochs
// (600 samples of 384 KiB), of which the warm-up's 100 or 200 reads put at most 75 MiB into the
// working memory it measured; under the race detector, its shadow of the leak adds more.
func memoryBound(t *testing.T, warm int, extra ...string) {
	const cacheMem, more = 24 << 20, 6
	mp := startMount(t, makeSource(t), append([]string{"--cache-mem", "24MiB", "--workers", "2", "--frames", "8", "--stride", "2",
		"--step", "8", "--size", "128x128", "--probe-cache", ""}, extra...)...)
	type result struct {
		Samples, Capacity int
		SampleBytes       int64 `json:"sample_bytes"`
		Evicted           int64
		HitRate           float64 `json:"hit_rate"`
		CacheBytes        int64   `json:"cache_bytes"`
	}
	read := func(first, n int) result {
		out, err := exec.Command("/usr/bin/python3", "-c", epochs, mp.dir, strconv.Itoa(first), strconv.Itoa(n)).CombinedOutput()
		if err != nil {
			t.Fatalf("reader: %v\n%s", err, out)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("reader: %v\n%s", err, out)
		}
		return r
	}
	idle := mp.statusKB(t, "VmRSS") << 10
	w := read(0, warm)
	warmPeak := mp.statusKB(t, "VmHWM") << 10
	work := warmPeak - idle - cacheMem
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	buffers := func(r result) {
		if r.CacheBytes > cacheMem {
			t.Errorf("sample buffers of %.1f MiB exceed --cache-mem", mib(r.CacheBytes))
		}
	}
	buffers(w)
	if w.Samples <= w.Capacity || w.Evicted == 0 || w.CacheBytes < int64(w.Capacity)*w.SampleBytes {
		t.Fatalf("after %d epochs, %d samples, %d fit in the cache, %d evicted, %.1f MiB of buffers: the warm-up must fill the cache and evict",
			warm, w.Samples, w.Capacity, w.Evicted, mib(w.CacheBytes))
	}
	r := read(warm, more)
	peak := mp.statusKB(t, "VmHWM") << 10
	t.Logf("%d+%d epochs of %d samples (%d fit in the cache, %d evicted, hit rate %.2f): resident memory %.1f MiB idle, %.1f MiB at the warm-up's peak (%.1f MiB working beside the cache), %.1f MiB peak; bound %.1f + %d + 2 x %.1f = %.1f MiB",
		warm, more, r.Samples, r.Capacity, r.Evicted, r.HitRate, mib(idle), mib(warmPeak), mib(work), mib(peak),
		mib(idle), cacheMem>>20, mib(work), mib(idle+cacheMem+2*work))
	buffers(r)
	if peak > idle+cacheMem+2*work {
		t.Errorf("peak resident memory %.1f MiB exceeds the idle process, --cache-mem and twice the warm-up's working memory: it grew by %.1f MiB with %d more epochs",
			mib(peak), mib(peak-warmPeak), more)
	}
}

// TestUnmountWithOpenFiles: SIGINT unmounts and ends the process although a file is still open,
// whose reads then fail.
func TestUnmountWithOpenFiles(t *testing.T) {
	mp := startMount(t, makeSource(t), "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", "")
	f, err := os.Open(filepath.Join(mp.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	mp.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-mp.done:
		if err != nil {
			t.Errorf("vidfs mount exited with %v\n%s", err, mp.log())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("vidfs mount still running 15 s after SIGINT with a file open\n%s", mp.log())
	}
	if mounted(mp.dir) {
		t.Errorf("%s still mounted", mp.dir)
	}
	if _, err := f.ReadAt(buf, 0); err == nil {
		t.Error("read from a file of an unmounted vidfs succeeded")
	}
	if !strings.Contains(mp.log(), "msg=unmounting") {
		t.Errorf("no unmount logged:\n%s", mp.log())
	}
}

// TestProbeCacheAndUmount: a second mount of the same source takes every probe table from the
// cache; `vidfs umount` cleans up after a mount whose process was killed.
func TestProbeCacheAndUmount(t *testing.T) {
	src, cache := makeSource(t), t.TempDir()
	first := startMount(t, src, "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", cache)
	n := len(sources)
	if want := fmt.Sprintf("probing videos: %d/%d (0 from cache", n, n); !strings.Contains(first.log(), want) {
		t.Errorf("first mount: no %q in\n%s", want, first.log())
	}
	if !strings.Contains(first.log(), `msg="video left out" file=bad/empty.mp4`) {
		t.Errorf("the empty video is not reported:\n%s", first.log())
	}
	first.cmd.Process.Signal(syscall.SIGTERM)
	<-first.done

	second := startMount(t, src, "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", cache)
	if want := fmt.Sprintf("probing videos: %d/%d (%d from cache", n, n, n); !strings.Contains(second.log(), want) {
		t.Errorf("second mount: no %q in\n%s", want, second.log())
	}
	second.cmd.Process.Kill()
	<-second.done
	if _, err := os.Stat(filepath.Join(second.dir, "clips.npy")); err == nil {
		t.Fatal("mount of a killed process still answers")
	}
	code, _, errs := vidfs(t, "umount", second.dir)
	if code != 0 || mounted(second.dir) {
		t.Errorf("vidfs umount after kill: exit %d, %s; still mounted: %v", code, errs, mounted(second.dir))
	}
}

// TestDaemon: vidfs mount --daemon returns once the mount serves, with its pid in the pid file and
// its log in the log file; vidfs umount stops it, and the pid file goes. A mount that cannot start
// makes --daemon fail, saying why.
func TestDaemon(t *testing.T) {
	src, mnt, dir := makeSource(t), t.TempDir(), t.TempDir()
	logFile, pidFile := filepath.Join(dir, "m.log"), filepath.Join(dir, "m.pid")
	vidfsProc := func(args ...string) (string, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "VIDFS_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := vidfsProc("mount", src, mnt, "--daemon", "--log-file", logFile, "--pid-file", pidFile, "--size", "32x32", "--probe-cache", "")
	if err != nil || !strings.Contains(out, "vidfs mounted on "+mnt) {
		t.Fatalf("mount --daemon: %v\n%s", err, out)
	}
	defer exec.Command("fusermount3", "-u", "-z", mnt).Run()
	b, err := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil || !strings.Contains(out, fmt.Sprintf("pid %d", pid)) {
		t.Fatalf("pid file %q (%v) names no live process; mount said %s", b, err, out)
	}
	if _, err := os.Stat(filepath.Join(mnt, ".vidfs", "stats")); err != nil {
		t.Errorf("the mount does not serve after --daemon returned: %v", err)
	}
	if l, _ := os.ReadFile(logFile); !strings.Contains(string(l), "msg=mounted") {
		t.Errorf("log file lacks the mount's log:\n%s", l)
	}
	if out, err := vidfsProc("umount", mnt); err != nil {
		t.Fatalf("umount: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not exit after umount")
		}
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file left after the daemon exited: %v", err)
	}
	out, err = vidfsProc("mount", filepath.Join(src, "nope"), mnt, "--daemon", "--log-file", logFile, "--pid-file", pidFile)
	if err == nil || !strings.Contains(out, "did not start") || !strings.Contains(out, "no such file or directory") {
		t.Errorf("--daemon of a missing source: %v\n%s", err, out)
	}
}
