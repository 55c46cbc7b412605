package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/leakcheck"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/isolate"
	"github.com/vidfs/vidfs/tier"
)

// The test binary runs as vidfs itself when asked to, so that mounts run in their own process.
func TestMain(m *testing.M) {
	if os.Getenv("VIDFS_TEST_MAIN") == "1" || isolate.IsHelper() {
		main()
		os.Exit(0)
	}
	os.Exit(leakcheck.Main(m))
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
	done   chan error    // the process's exit, once: a reader that takes it may put it back
	exited chan struct{} // closed once the process has exited, however many took done
}

func startMount(t *testing.T, src string, args ...string) *mountProc {
	t.Helper()
	return startMountIn(t, nil, src, args...)
}

// startMountIn starts vidfs mount through wrap, a command line that runs the rest of it (none:
// vidfs mount is run itself).
func startMountIn(t *testing.T, wrap []string, src string, args ...string) *mountProc {
	t.Helper()
	mp := &mountProc{dir: t.TempDir(), done: make(chan error, 1), exited: make(chan struct{})}
	line := slices.Concat(wrap, []string{os.Args[0], "mount", src, mp.dir}, args)
	mp.cmd = exec.Command(line[0], line[1:]...)
	mp.cmd.Env = mountEnv()
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
		close(mp.exited)
	}()
	t.Cleanup(func() {
		mp.cmd.Process.Signal(syscall.SIGTERM)
		// exited, not done: a test that took the exit from done without putting it back would
		// otherwise leave this waiting its 10 s for nothing.
		select {
		case <-mp.exited:
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

// mountEnv is the environment of a vidfs command the tests run in a process of its own: this
// one's, with the test binary running as vidfs. Under the race detector, the process exits as
// soon as it is done rather than after the detector's default second of grace (GORACE's
// atexit_sleep_ms, for reports other goroutines may still be writing: a mount has ended all of
// its own once it returns), which made every mount of these tests a second longer to stop; a
// race found still makes it exit 66, and its report is still written as the race is seen.
func mountEnv() []string {
	gorace := "atexit_sleep_ms=0"
	if v := os.Getenv("GORACE"); v != "" {
		gorace = v + " " + gorace
	}
	return append(os.Environ(), "VIDFS_TEST_MAIN=1", "GORACE="+gorace)
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
                  "capacity": st["cache"]["capacity_samples"], "cache_bytes": st["memory"]["cache_bytes"],
                  "tier_mapped_bytes": st["memory"]["tier_mapped_bytes"]}))
`

// TestMountMemoryBound: over epochs whose samples do not all fit in the cache, the mount process's
// resident memory stays within --cache-mem plus an overhead that does not grow with the samples
// read, with the disk tier on too.
func TestMountMemoryBound(t *testing.T) {
	t.Run("memory", func(t *testing.T) { memoryBound(t, 1) })
	for _, codec := range tier.Codecs {
		t.Run("disk tier "+codec.String(), func(t *testing.T) {
			// Two epochs to warm up: the first decodes and writes the tier, the second reads it back.
			memoryBound(t, 2, "--cache-dir", t.TempDir(), "--cache-disk", "1GiB", "--cache-keep", "samples", "--cache-disk-codec", codec.String())
		})
	}
	// The training copy, with its defaults (these samples share frames: auto keeps a training copy, and
	// fills whole videos read again within its budget).
	t.Run("training copy", func(t *testing.T) { memoryBound(t, 2, "--cache-dir", t.TempDir(), "--cache-disk", "1GiB") })
}

// procStatusKB reads a field of a process's /proc status, in KiB (0 when it is gone).
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// helperPids lists the mount's decoder helpers: its children (of any of its threads).
func helperPids(t *testing.T, mount int) []int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", mount))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", mount, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
	}
	return pids
}

// memoryBound reads a mount for warm epochs, which fill the cache and run every part (each
// video's decoder, the tier's writer and reader), then for 6 more, and bounds the peak resident
// memory (the mount's, and its decoder helpers' private memory) with what it measured before them: the idle process (the binary, the Go and race
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
		MappedBytes       int64   `json:"tier_mapped_bytes"` // samples lent by the tier (none), whose buffers wait emptied
	}
	read := func(first, n int) result {
		out, err := exec.Command("/usr/bin/python3", "-c", epochs, mp.dir, strconv.Itoa(first), strconv.Itoa(n)).CombinedOutput()
		if err != nil {
			t.Fatalf("reader: %v\n%s\nmount's log:\n%s", err, out, mp.log())
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("reader: %v\n%s", err, out)
		}
		return r
	}
	// The mount's footprint is its own resident memory and its decoder helpers' private memory
	// (their shared pages are the cache's buffers, which the mount maps too, and the binary),
	// sampled while it reads: a peak between samples is missed, a growth is not.
	footprint := func() int64 {
		n := mp.statusKB(t, "VmRSS")
		for _, pid := range helperPids(t, mp.cmd.Process.Pid) {
			n += procStatusKB(pid, "RssAnon")
		}
		return n << 10
	}
	peakOf := func(f func()) int64 {
		stop, done := make(chan struct{}), make(chan int64)
		go func() {
			peak := footprint()
			for tick := time.NewTicker(20 * time.Millisecond); ; {
				select {
				case <-stop:
					tick.Stop()
					done <- max(peak, footprint())
					return
				case <-tick.C:
					peak = max(peak, footprint())
				}
			}
		}()
		f()
		close(stop)
		return <-done
	}
	idle := footprint()
	var w result
	warmPeak := peakOf(func() { w = read(0, warm) })
	work := warmPeak - idle - cacheMem
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	buffers := func(r result) {
		if r.CacheBytes > cacheMem {
			t.Errorf("sample buffers of %.1f MiB exceed --cache-mem", mib(r.CacheBytes))
		}
	}
	buffers(w)
	if w.Samples <= w.Capacity || w.Evicted == 0 || w.CacheBytes+w.MappedBytes < int64(w.Capacity)*w.SampleBytes {
		t.Fatalf("after %d epochs, %d samples, %d fit in the cache, %d evicted, %.1f MiB of buffers: the warm-up must fill the cache and evict",
			warm, w.Samples, w.Capacity, w.Evicted, mib(w.CacheBytes))
	}
	var r result
	peak := max(warmPeak, peakOf(func() { r = read(warm, more) }))
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
	if want := fmt.Sprintf(`scanned %d videos in \S+: %d probed \([0-9]+/s\), 0 from the probe cache, 1 unreadable`, n, n); !regexp.MustCompile(want).MatchString(first.log()) {
		t.Errorf("first mount: no %q and its rate in\n%s", want, first.log())
	}
	if sc := scanStats(t, first.dir); sc.Videos != n || sc.Probed != n || sc.FromCache != 0 || sc.Unreadable != 1 {
		t.Errorf("first mount's stats: scan %+v, want %d videos probed", sc, n)
	}
	if !strings.Contains(first.log(), `msg="video left out" file=bad/empty.mp4`) {
		t.Errorf("the empty video is not reported:\n%s", first.log())
	}
	first.cmd.Process.Signal(syscall.SIGTERM)
	<-first.done

	second := startMount(t, src, "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", cache)
	if want := fmt.Sprintf(": 0 probed, %d from the probe cache, 1 unreadable", n); !strings.Contains(second.log(), want) {
		t.Errorf("second mount: no %q in\n%s", want, second.log())
	}
	if sc := scanStats(t, second.dir); sc.Videos != n || sc.Probed != 0 || sc.FromCache != n {
		t.Errorf("second mount's stats: scan %+v, want %d videos from the cache", sc, n)
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

// scanStats is the scan's figures in the stats of the mount at dir.
func scanStats(t *testing.T, dir string) wire.ScanStats {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".vidfs", "stats"))
	if err != nil {
		t.Fatal(err)
	}
	var st wire.Stats
	if err := json.Unmarshal(b, &st); err != nil || st.Scan == nil {
		t.Fatalf("stats: %v, scan %v", err, st.Scan)
	}
	return *st.Scan
}

// TestDaemon: vidfs mount --daemon returns once the mount serves, with its pid in the pid file and
// its log in the log file; vidfs umount stops it, and the pid file goes. A mount that cannot start
// makes --daemon fail, saying why.
func TestDaemon(t *testing.T) {
	src, mnt, dir := makeSource(t), t.TempDir(), t.TempDir()
	logFile, pidFile := filepath.Join(dir, "m.log"), filepath.Join(dir, "m.pid")
	vidfsProc := func(args ...string) (string, error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = mountEnv()
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
	exited := exitWatch(t, pid)
	if out, err := vidfsProc("umount", mnt); err != nil {
		t.Fatalf("umount: %v\n%s", err, out)
	}
	if !exited() {
		t.Fatal("the daemon did not exit after umount")
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid file left after the daemon exited: %v", err)
	}
	out, err = vidfsProc("mount", filepath.Join(src, "nope"), mnt, "--daemon", "--log-file", logFile, "--pid-file", pidFile)
	if err == nil || !strings.Contains(out, "did not start") || !strings.Contains(out, "no such file or directory") {
		t.Errorf("--daemon of a missing source: %v\n%s", err, out)
	}
}

// TestDaemonSpellings: every spelling of --daemon that pflag reads as true (it parses the value
// with strconv.ParseBool) sets vidfs mount's --daemon, and every spelling of false clears it, with
// the source and mount point left as its arguments. The spelling matters nowhere past the flag:
// runMount asks only whether --daemon is set, and the child a daemon starts, given the command
// line as it was written, knows itself by its ready pipe's variable (daemonChild), whatever its
// --daemon says. So one spelling of each is mounted for real: --daemon=1 (one of those that once
// made each child start another) starts one daemon, returns once it serves, and vidfs umount stops
// it; --daemon=0 serves in the foreground, in the process started. A mount that starts more
// processes for its mount point than a daemon needs is killed with all it started, so that a
// regression cannot fork without end. (Bare --daemon is TestDaemon's; the mounts here decode in
// process: which decoders a mount has does not depend on --daemon, and TestDaemon's daemon starts
// helpers.)
func TestDaemonSpellings(t *testing.T) {
	for _, c := range []struct {
		spellings []string
		want      bool
	}{
		{[]string{"", "=1", "=t", "=T", "=TRUE", "=true", "=True"}, true},
		{[]string{"=0", "=f", "=F", "=FALSE", "=false", "=False"}, false},
	} {
		for _, v := range c.spellings {
			// Before and after the arguments: a bare --daemon must not take the next one as its value.
			for _, line := range [][]string{{"--daemon" + v, "SRC", "MNT"}, {"SRC", "MNT", "--daemon" + v}} {
				fs := newFlagSet("mount", commands()["mount"])
				if err := fs.Parse(line); err != nil {
					t.Errorf("vidfs mount %v: %v", line, err)
					continue
				}
				got, err := fs.GetBool("daemon")
				if err != nil || got != c.want || !fs.Changed("daemon") || !slices.Equal(fs.Args(), []string{"SRC", "MNT"}) {
					t.Errorf("vidfs mount %v: --daemon %v (%v), arguments %q; want %v, SRC and MNT", line, got, err, fs.Args(), c.want)
				}
			}
		}
	}

	src, probeCache := makeSource(t), t.TempDir()
	flags := []string{"--size", "32x32", "--frames", "4", "--workers", "1", "--cache-mem", "16MiB", "--probe-cache", probeCache, "--decoders", "in-process"}
	t.Run("daemon=1", func(t *testing.T) { daemonOnce(t, src, append([]string{"--daemon=1"}, flags...)) })
	t.Run("daemon=0", func(t *testing.T) {
		mp := startMount(t, src, append([]string{"--daemon=0"}, flags...)...)
		if pids := mountProcesses(t, mp.dir); !slices.Equal(pids, []int{mp.cmd.Process.Pid}) {
			t.Errorf("--daemon=0: processes %v serve %s; want the one started, %d, in the foreground\n%s", pids, mp.dir, mp.cmd.Process.Pid, mp.log())
		}
		if strings.Contains(mp.log(), "waiting until it serves") {
			t.Errorf("--daemon=0 started a daemon:\n%s", mp.log())
		}
	})
}

// daemonOnce runs vidfs mount SRC MNT with args, which ask for a daemon, and checks that it
// returns once one daemon serves MNT, and that vidfs umount stops it.
func daemonOnce(t *testing.T, src string, args []string) {
	mnt, dir := t.TempDir(), t.TempDir()
	pidFile := filepath.Join(dir, "m.pid")
	cmd := exec.Command(os.Args[0], append([]string{"mount", src, mnt, "--log-file", filepath.Join(dir, "m.log"), "--pid-file", pidFile}, args...)...)
	cmd.Env = mountEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t.Cleanup(func() {
		killMountProcesses(t, mnt)
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Guard: a daemon needs two processes (the one started, its child) and, for moments, a
	// third (forked to run fusermount3). More means each starts another.
	const most = 3
	guard := time.NewTicker(20 * time.Millisecond)
	defer guard.Stop()
	giveUp := time.After(time.Minute)
	var err error
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-guard.C:
			if pids := mountProcesses(t, mnt); len(pids) > most {
				killMountProcesses(t, mnt)
				t.Fatalf("%v: %d processes serve %s at once (%v); killed them\n%s", args, len(pids), mnt, pids, out.String())
			}
		case <-giveUp:
			killMountProcesses(t, mnt)
			t.Fatalf("%v: no return within a minute; killed it\n%s", args, out.String())
		}
	}
	if err != nil || !strings.Contains(out.String(), "vidfs mounted on "+mnt) {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pids := mountProcesses(t, mnt); !slices.Equal(pids, []int{pid}) {
		t.Errorf("%v: processes %v serve %s; want the daemon alone, pid %d (its pid file)", args, pids, mnt, pid)
	}
	if _, err := readDataset(mnt); err != nil {
		t.Errorf("%v: the mount does not serve: %v", args, err)
	}
	gone := exitWatch(t, pid)
	if code, _, errs := vidfs(t, "umount", mnt); code != 0 {
		t.Fatalf("vidfs umount: exit %d, %s", code, errs)
	}
	if !gone() {
		// Its goroutines, for the failure: Go writes them to the log file on SIGQUIT.
		syscall.Kill(pid, syscall.SIGQUIT)
		time.Sleep(2 * time.Second)
		log, _ := os.ReadFile(filepath.Join(dir, "m.log"))
		t.Fatalf("the daemon (pid %d) still runs a minute after vidfs umount; its log:\n%s", pid, log)
	}
	if pids := mountProcesses(t, mnt); len(pids) > 0 {
		t.Errorf("%v: processes %v still serve %s after vidfs umount", args, pids, mnt)
	}
}

// mountProcesses lists the live `vidfs mount` processes whose mount point is mnt, in pid order.
func mountProcesses(t *testing.T, mnt string) []int {
	t.Helper()
	procs, err := procfs.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		args, err := p.CmdLine()
		if err == nil && len(args) > 3 && args[1] == "mount" && slices.Contains(args[2:], mnt) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// killMountProcesses kills every `vidfs mount` process of mnt, and those they start meanwhile.
func killMountProcesses(t *testing.T, mnt string) {
	t.Helper()
	for pids := mountProcesses(t, mnt); len(pids) > 0; pids = mountProcesses(t, mnt) {
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("killing %d: %v", pid, err)
			}
		}
	}
}

// exitWatch returns a function that waits until process pid, not necessarily a child of this
// one, has exited (a minute at most), and reports whether it has. Unlike kill(pid, 0), it sees
// the exit when it happens, not when init reaps the process.
func exitWatch(t *testing.T, pid int) func() bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return func() bool {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Until(deadline).Milliseconds()))
			if err != unix.EINTR {
				return n == 1
			}
		}
		return false
	}
}

// TestUnmountUnderReaders: however a mount is unmounted while 16 readers are in the middle of
// reads of clips.raw, the process never crashes, every read returns data or an error, and the
// exit status says what happened: 0 once unmounted, 3 when on a signal the FUSE connection
// could not be ended (here: fusectl hidden from the process).
func TestUnmountUnderReaders(t *testing.T) {
	t.Parallel() // it waits mostly, on unmounts; each case's mount is its own
	src := makeSource(t)
	flags := []string{"--size", "64x64", "--frames", "8", "--step", "4", "--cache-mem", "8MiB", "--workers", "2", "--probe-cache", ""}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			mp := startMount(t, src, flags...)
			r := startReaders(t, mp.dir)
			mp.cmd.Process.Signal(sig)
			if code := mp.exitStatus(t); code != 0 {
				t.Errorf("exit status %d after %v, want 0\n%s", code, sig, mp.log())
			}
			r.awaitEnd(t)
			r.check(t, true)
			mp.checkNoCrash(t)
			if mounted(mp.dir) || !strings.Contains(mp.log(), "msg=unmounting") {
				t.Errorf("after %v: mounted %v, log:\n%s", sig, mounted(mp.dir), mp.log())
			}
		})
	}
	t.Run("fusermount3 -u", func(t *testing.T) {
		mp := startMount(t, src, flags...)
		r := startReaders(t, mp.dir)
		if out, err := exec.Command("fusermount3", "-u", mp.dir).CombinedOutput(); err == nil || !mounted(mp.dir) {
			t.Fatalf("fusermount3 -u with 16 files open: %v, %s; mounted %v", err, out, mounted(mp.dir))
		}
		r.awaitMore(t, "after a refused unmount")
		r.stop(t)
		r.check(t, false)
		if out, err := exec.Command("fusermount3", "-u", mp.dir).CombinedOutput(); err != nil {
			t.Fatalf("fusermount3 -u once the readers closed their files: %v, %s", err, out)
		}
		mp.unmountedFromOutside(t)
	})
	t.Run("fusermount3 -uz", func(t *testing.T) {
		mp := startMount(t, src, flags...)
		r := startReaders(t, mp.dir)
		if out, err := exec.Command("fusermount3", "-u", "-z", mp.dir).CombinedOutput(); err != nil || mounted(mp.dir) {
			t.Fatalf("fusermount3 -uz: %v, %s; mounted %v", err, out, mounted(mp.dir))
		}
		r.awaitMore(t, "after a lazy unmount") // the files open keep the connection
		r.stop(t)
		r.check(t, false)
		mp.unmountedFromOutside(t) // once the last file is closed
	})
	t.Run("fusermount3 -uz, then SIGINT", func(t *testing.T) {
		// What a systemd unit does: ExecStop's vidfs umount detaches a busy mount lazily, then
		// the process gets its signal: it aborts the connection the readers still hold.
		mp := startMount(t, src, flags...)
		r := startReaders(t, mp.dir)
		if out, err := exec.Command("fusermount3", "-u", "-z", mp.dir).CombinedOutput(); err != nil || mounted(mp.dir) {
			t.Fatalf("fusermount3 -uz: %v, %s; mounted %v", err, out, mounted(mp.dir))
		}
		r.awaitMore(t, "after a lazy unmount")
		mp.cmd.Process.Signal(syscall.SIGINT)
		if code := mp.exitStatus(t); code != 0 {
			t.Errorf("exit status %d after a lazy unmount and SIGINT, want 0\n%s", code, mp.log())
		}
		r.awaitEnd(t)
		r.check(t, true)
		mp.checkNoCrash(t)
	})
	t.Run("SIGTERM without fusectl", func(t *testing.T) {
		// The mount in a mount namespace of its own, where a tmpfs hides fusectl: the mount
		// point is detached, but the connection the readers use cannot be aborted.
		hide := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs tmpfs /sys/fs/fuse && exec "$0" "$@"`}
		mp := startMountIn(t, hide, src, flags...)
		r := startReaders(t, fmt.Sprintf("/proc/%d/root%s", mp.cmd.Process.Pid, mp.dir))
		mp.cmd.Process.Signal(syscall.SIGTERM)
		if code := mp.exitStatus(t); code != 3 || !strings.Contains(mp.log(), "fusectl") {
			t.Errorf("exit status %d after SIGTERM with the connection left open, want 3 and why\n%s", code, mp.log())
		}
		r.awaitEnd(t)
		r.check(t, true)
		mp.checkNoCrash(t)
	})
}

// readers are 16 threads reading whole samples of clips.raw, each on a descriptor of its own,
// until a read fails or they are stopped.
type readers struct {
	stopping chan struct{}

	mu     sync.Mutex // guards what follows; change is broadcast on every change
	change *sync.Cond
	reads  []int   // reads that returned data, by reader
	failed []error // the error of a reader's failed read, which ended it
	empty  int     // reads that returned neither data nor an error
	ended  int     // readers that ended
	began  int     // readers started
}

const nReaders = 16

// startReaders starts the readers of clips.raw of the mount at mnt, and returns once each has
// read a sample.
func startReaders(t *testing.T, mnt string) *readers {
	t.Helper()
	lay, err := readDataset(mnt)
	if err != nil {
		t.Fatal(err)
	}
	r := &readers{stopping: make(chan struct{}), reads: make([]int, nReaders), failed: make([]error, nReaders)}
	r.change = sync.NewCond(&r.mu)
	t.Cleanup(func() { r.stop(t) }) // before any starts, so that a failed open below stops the others
	for id := range nReaders {
		fd, err := unix.Open(filepath.Join(mnt, "clips.raw"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.mu.Lock()
		r.began++
		r.mu.Unlock()
		go r.read(id, fd, lay.Samples, lay.SampleBytes)
	}
	r.awaitMore(t, "at first")
	return r
}

// read is reader id's loop on fd, which it closes when it ends.
func (r *readers) read(id, fd, samples int, S int64) {
	defer func() {
		unix.Close(fd)
		r.mu.Lock()
		r.ended++
		r.change.Broadcast()
		r.mu.Unlock()
	}()
	buf := make([]byte, S)
	for k := 0; ; k++ {
		select {
		case <-r.stopping:
			return
		default:
		}
		i := (id*7919 + k*104729) % samples // spread over the samples: hits and misses
		n, err := unix.Pread(fd, buf, int64(i)*S)
		if err == unix.EINTR {
			continue // a signal to this thread interrupted it (FUSE passes that on): read again, as os.File does
		}
		r.mu.Lock()
		switch {
		case err != nil:
			r.failed[id] = err
		case n == 0:
			r.empty++
		default:
			r.reads[id]++
		}
		r.change.Broadcast()
		r.mu.Unlock()
		if err != nil || n == 0 {
			return
		}
	}
}

// await waits until ok, called with r.mu held, holds; a minute at most.
func (r *readers) await(t *testing.T, what string, ok func() bool) {
	t.Helper()
	expired := false
	timer := time.AfterFunc(time.Minute, func() {
		r.mu.Lock()
		expired = true
		r.change.Broadcast()
		r.mu.Unlock()
	})
	defer timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for !ok() {
		if expired {
			t.Fatalf("readers: not %s after a minute (reads %v, failed %v, ended %d)", what, r.reads, r.failed, r.ended)
		}
		r.change.Wait()
	}
}

// awaitMore waits until every reader has read another sample.
func (r *readers) awaitMore(t *testing.T, when string) {
	t.Helper()
	r.mu.Lock()
	before := append([]int(nil), r.reads...)
	r.mu.Unlock()
	r.await(t, "each reading a sample "+when, func() bool {
		for id, n := range r.reads {
			if n == before[id] && r.failed[id] == nil {
				return false
			}
		}
		return true
	})
}

// awaitEnd waits until every reader has ended.
func (r *readers) awaitEnd(t *testing.T) {
	t.Helper()
	r.await(t, "ended", func() bool { return r.ended == r.began })
}

// stop stops the readers, and waits until they have closed their files.
func (r *readers) stop(t *testing.T) {
	t.Helper()
	select {
	case <-r.stopping:
	default:
		close(r.stopping)
	}
	r.awaitEnd(t)
}

// check checks what the readers got: every read data or an error, and an error to end each
// reader when the mount went away under them (failing), else none.
func (r *readers) check(t *testing.T, failing bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.empty > 0 {
		t.Errorf("%d reads returned neither data nor an error", r.empty)
	}
	for id, err := range r.failed {
		if failing && err == nil {
			t.Errorf("reader %d read on after the mount went away (%d reads)", id, r.reads[id])
		}
		if !failing && err != nil {
			t.Errorf("reader %d: %v", id, err)
		}
	}
	t.Logf("reads by reader: %v; errors: %v", r.reads, r.failed)
}

// exitStatus waits for the mount process to end (a minute at most) and returns its exit status,
// -1 if a signal ended it.
func (mp *mountProc) exitStatus(t *testing.T) int {
	t.Helper()
	select {
	case err := <-mp.done:
		mp.done <- err // for the cleanup
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(time.Minute):
		t.Fatalf("vidfs mount still runs a minute on\n%s", mp.log())
		return 0
	}
}

// checkNoCrash checks the mount's stderr for a panic, a fault, or a data race.
func (mp *mountProc) checkNoCrash(t *testing.T) {
	t.Helper()
	for _, line := range strings.Split(mp.log(), "\n") {
		if strings.Contains(line, `msg="a decoder helper died`) || strings.Contains(line, "the decoder crashed on it") {
			continue // a helper's crash, which the mount survives, names its signal
		}
		for _, s := range []string{"panic:", "SIGSEGV", "fatal error:", "DATA RACE"} {
			if strings.Contains(line, s) {
				t.Fatalf("vidfs mount crashed (%s):\n%s", s, mp.log())
			}
		}
	}
}

// unmountedFromOutside checks that the mount process ended, once unmounted by another, with
// status 0, having said so, and without a crash.
func (mp *mountProc) unmountedFromOutside(t *testing.T) {
	t.Helper()
	if code := mp.exitStatus(t); code != 0 || !strings.Contains(mp.log(), `msg="unmounted from outside"`) {
		t.Errorf("exit status %d, want 0, saying so\n%s", code, mp.log())
	}
	mp.checkNoCrash(t)
	if _, err := os.Stat(filepath.Join(mp.dir, "clips.raw")); err == nil {
		t.Errorf("%s still serves", mp.dir)
	}
}

// TestMountHitsMemoryBound: many threads reading samples the cache holds (hits: nothing decoded,
// nothing evicted) do not make the mount's resident memory grow with the reads. The cache is
// warmed (every sample read twice), then 16 goroutines pread whole samples at random, in two
// halves of hitReads/2 reads. The peak resident memory over both, beside the warm process's, must
// stay within hitsBound (the FUSE requests served at once and their buffers, with the Go heap's
// room to grow before a collection), and the second half must add at most hitsGrowth to the
// first's peak: memory that grows with the reads, a buffer held for every few reads, outgrows it.
// The mount runs on 2 CPUs (GOMAXPROCS), busy with the readers, as where the growth was seen.
func TestMountHitsMemoryBound(t *testing.T) {
	const readers, hitReads = 16, 60000
	mp := startMountIn(t, []string{"env", "GOMAXPROCS=2"}, makeSource(t), "--cache-mem", "64MiB", "--workers", "2",
		"--frames", "8", "--stride", "2", "--step", "8", "--size", "128x128", "--probe-cache", "")
	n, S, f := readEvery(t, mp.dir, 2)
	st := mountStats(t, mp.dir)
	if st.Cache.ReadySamples != n || st.Cache.Evicted != 0 {
		t.Fatalf("warm-up: %d of %d samples ready, %d evicted: the cache must hold them all", st.Cache.ReadySamples, n, st.Cache.Evicted)
	}
	hits := st.Cache.Hits
	// Peaks from here on: clear_refs 5 resets VmHWM to the current VmRSS.
	resetPeak := func() {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", mp.cmd.Process.Pid), []byte("5"), 0); err != nil {
			t.Fatal(err)
		}
	}
	resetPeak()
	warm := mp.statusKB(t, "VmRSS") << 10
	var peaks [2]int64
	for half := range peaks {
		var wg sync.WaitGroup
		var mu sync.Mutex // guards failures
		var failures []string
		for k := range readers {
			wg.Go(func() {
				b := make([]byte, S)
				r := uint64(half*readers+k)*0x9e3779b97f4a7c15 + 1 // xorshift: random samples
				for range hitReads / 2 / readers {
					r ^= r << 13
					r ^= r >> 7
					r ^= r << 17
					i := int(r % uint64(n))
					if got, err := f.ReadAt(b, int64(i)*S); err != nil || int64(got) != S {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("sample %d: %d bytes, %v", i, got, err))
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("reads failed: %v", failures)
		}
		peaks[half] = mp.statusKB(t, "VmHWM") << 10
	}
	st = mountStats(t, mp.dir)
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	t.Logf("%d hits by %d readers (%d samples of %d KiB in the cache): resident %.1f MiB warm, peak %.1f MiB after half the reads, %.1f MiB after all; memory %+v",
		st.Cache.Hits-hits, readers, n, S>>10, mib(warm), mib(peaks[0]), mib(peaks[1]), st.Memory)
	if st.Cache.Hits-hits != hitReads || st.Cache.Evicted != 0 {
		t.Errorf("%d hits, %d evicted: want %d hits and nothing evicted", st.Cache.Hits-hits, st.Cache.Evicted, hitReads)
	}
	if raceDetector() {
		t.Log("resident memory not bounded under the race detector, whose own grows with the goroutines go-fuse starts and ends; make test runs this test again without it")
		return
	}
	if grew := peaks[1] - warm; grew > hitsBound {
		t.Errorf("resident memory grew by %.1f MiB over %d cached reads (%.1f to %.1f MiB), bound %.0f MiB",
			mib(grew), hitReads, mib(warm), mib(peaks[1]), mib(hitsBound))
	}
	if grew := peaks[1] - peaks[0]; grew > hitsGrowth {
		t.Errorf("resident memory grew by %.1f MiB over the second %d cached reads (peak %.1f to %.1f MiB), bound %.0f MiB",
			mib(grew), hitReads/2, mib(peaks[0]), mib(peaks[1]), mib(hitsGrowth))
	}
}

// readEvery opens the mount at dir's clips.raw and reads every sample times times, so that the
// cache (and a disk tier) hold them: it returns the number of samples, their size, and the file,
// closed at the test's end.
func readEvery(t *testing.T, dir string, times int) (n int, S int64, f *os.File) {
	t.Helper()
	lay, err := readDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(filepath.Join(dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	buf := make([]byte, lay.SampleBytes)
	for range times {
		for i := range lay.Samples {
			if _, err := f.ReadAt(buf, int64(i)*lay.SampleBytes); err != nil {
				t.Fatalf("sample %d: %v", i, err)
			}
		}
	}
	return lay.Samples, lay.SampleBytes, f
}

// raceDetector tells whether the test binary was built with -race.
func raceDetector() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// hitsBound is what cached reads may add to a warm mount's resident memory: the FUSE requests
// served at once (16 here) and their buffers of a sample each (6 MiB), twice for the Go heap's
// room to grow. hitsGrowth is what
// the second half of the reads may add to the first's peak: the Go heap reaching its goal.
const hitsBound, hitsGrowth = 24 << 20, 6 << 20

// TestMountMemoryParts: the stats' memory parts add up to the mount's resident memory, each
// counted as resident. After 16 readers of cached samples as large as a FUSE request (1 MiB,
// whose reply buffers go-fuse takes from the Go heap and vidfs never touches), the parts must add
// up to VmRSS, with native (what is left of it) at least the resident pages of the files the
// process maps (the binary, the C libraries), which no other part holds, and the Go heap at
// most the anonymous memory resident beside the cache.
func TestMountMemoryParts(t *testing.T) {
	const readers, reads = 16, 4000
	mp := startMountIn(t, []string{"env", "GOMAXPROCS=2"}, makeSource(t), "--cache-mem", "128MiB", "--workers", "2",
		"--frames", "8", "--stride", "4", "--step", "64", "--size", "256x256", "--probe-cache", "")
	n, S, f := readEvery(t, mp.dir, 1)
	var wg sync.WaitGroup
	for k := range readers {
		wg.Go(func() {
			b := make([]byte, S)
			for j := range reads / readers {
				i := (k*7 + j) % n
				if _, err := f.ReadAt(b, int64(i)*S); err != nil {
					t.Errorf("sample %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := mountStats(t, mp.dir)
	rss := mp.statusKB(t, "VmRSS") << 10
	files, anon := mappedRss(t, mp.cmd.Process.Pid)
	m := st.Memory
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	t.Logf("%d samples of %d KiB, %d ready; VmRSS %.1f MiB, of which files mapped %.1f and anonymous %.1f; memory %+v",
		n, S>>10, st.Cache.ReadySamples, mib(rss), mib(files), mib(anon), m)
	// What the process may do between the stats and this test's reading: its resident memory as a
	// whole, and the files and anonymous memory it maps (but a few heap spans) much less.
	const tolerance, slack = 8 << 20, 2 << 20
	if d := m.ResidentBytes - rss; d > tolerance || d < -tolerance {
		t.Errorf("resident_bytes %.1f MiB, VmRSS %.1f MiB", mib(m.ResidentBytes), mib(rss))
	}
	parts := m.CacheBytes + m.TierMappedBytes + m.GoHeapBytes + m.GoRuntimeBytes
	if sum := parts + m.NativeBytes; sum != m.ResidentBytes {
		t.Errorf("parts add up to %.1f MiB (%.1f measured, %.1f native), not the %.1f MiB resident",
			mib(sum), mib(parts), mib(m.NativeBytes), mib(m.ResidentBytes))
	}
	if m.NativeBytes < files-slack {
		t.Errorf("native %.1f MiB, less than the %.1f MiB of files mapped resident: the other parts count %.1f MiB that is not resident",
			mib(m.NativeBytes), mib(files), mib(files-m.NativeBytes))
	}
	if m.GoHeapBytes > anon-m.CacheBytes+slack {
		t.Errorf("go_heap_bytes %.1f MiB, more than the %.1f MiB of anonymous memory resident beside the cache's %.1f MiB",
			mib(m.GoHeapBytes), mib(anon-m.CacheBytes), mib(m.CacheBytes))
	}
	if want := int64(st.Cache.ReadySamples) * S; m.CacheBytes < want || m.CacheBytes > st.Cache.CapacityBytes+int64(os.Getpagesize())*int64(st.Cache.CapacitySamples) {
		t.Errorf("cache_bytes %.1f MiB: %d samples ready (%.1f MiB) in a cache of %.1f MiB", mib(m.CacheBytes), st.Cache.ReadySamples, mib(want), mib(st.Cache.CapacityBytes))
	}
}

// mappedRss sums the resident pages of process pid's mappings from /proc/PID/smaps: those of
// files, and the anonymous ones.
func mappedRss(t *testing.T, pid int) (files, anon int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	file := false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			file = len(fields) >= 6 && strings.HasPrefix(fields[5], "/")
		case len(fields) == 3 && fields[0] == "Rss:":
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			if file {
				files += kb << 10
			} else {
				anon += kb << 10
			}
		}
	}
	return files, anon
}

// TestMountMemoryPartsTier: tier_mapped_bytes is what is resident of the disk tier's files the
// mount maps, as the mount's /proc/PID/smaps has them, with --cache-dir given through a symbolic
// link (smaps names files by their real paths). Two epochs over a cache that holds 64 of the 100
// samples: the first decodes and writes the tier (stored as they are, which the cache maps), the
// second loads from it.
func TestMountMemoryPartsTier(t *testing.T) {
	real, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "tier")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	mp := startMount(t, makeSource(t), "--cache-mem", "24MiB", "--workers", "2", "--frames", "8", "--stride", "2", "--step", "8",
		"--size", "128x128", "--probe-cache", "", "--cache-dir", link, "--cache-disk", "1GiB", "--cache-keep", "samples", "--cache-disk-codec", "none")
	readEvery(t, mp.dir, 2) // the second epoch from the tier
	st := mountStats(t, mp.dir)
	mapped := tierRss(t, mp.cmd.Process.Pid, real)
	t.Logf("tier: %d hits, %d written; %.1f MiB of its files resident in the mount; memory %+v",
		st.Tier.Hits, st.Tier.Written, float64(mapped)/(1<<20), st.Memory)
	if st.Tier.Hits == 0 || mapped == 0 {
		t.Fatalf("%d tier hits, %d bytes of tier files resident: the second epoch must map samples from the tier", st.Tier.Hits, mapped)
	}
	if d := st.Memory.TierMappedBytes - mapped; d > 2<<20 || d < -2<<20 {
		t.Errorf("tier_mapped_bytes %d, smaps %d bytes resident of files under %s", st.Memory.TierMappedBytes, mapped, real)
	}
}

// tierRss sums the resident pages of process pid's mappings of files under dir (a real path).
func tierRss(t *testing.T, pid int, dir string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir+"/")
		case len(fields) == 3 && fields[0] == "Rss:" && in:
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			sum += kb << 10
		}
	}
	return sum
}
