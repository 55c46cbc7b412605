//go:build vidfstest

package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
)

// ioField is field of an io file's text (/proc/PID/io, /proc/PID/task/TID/io).
func ioField(t *testing.T, b []byte, field string) int64 {
	t.Helper()
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+": "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %q", field, b)
	return 0
}

// threadsIO sums field over the threads process pid has now: what the process itself did, unlike
// /proc/PID/io, to which the kernel adds what its children did once it reaped them (a decoder
// helper retired after the scan, whose reads of every video would count as the mount's).
func threadsIO(t *testing.T, pid int, field string) int64 {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/io", pid, task.Name()))
		if err != nil {
			continue // a thread that ended meanwhile
		}
		n += ioField(t, b, field)
	}
	return n
}

// TestProbeInHelpers: a first mount probes its videos in its sandboxed helpers: the mount process
// itself reads under a quarter of the videos' bytes during the scan (rchar), and a video whose
// probe crashes its helper (the test hook: poison-probe-segv, twice) is left out and listed with
// the reason, while every other video is laid out and read, and the mount lives.
func TestProbeInHelpers(t *testing.T) {
	args := []string{"--probe-cache", "", "--workers", "2", "--frames", "4", "--size", "32x32", "--cache-mem", "16MiB"}
	src := makeSource(t)
	var total int64
	filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			total += st.Size()
		}
		return nil
	})
	clean := startMount(t, src, args...)
	// All of it the scan's: nothing was read from the mount yet. Its threads' own: the helper
	// that probed is retired once the scan sized the helpers (Decoders.Fit), and the kernel then
	// adds all it read to the mount's /proc/PID/io.
	read := threadsIO(t, clean.cmd.Process.Pid, "rchar")
	t.Logf("the mount read %d bytes during its scan of %d bytes of videos", read, total)
	if read*4 >= total {
		t.Errorf("the mount process read %d bytes while its %d bytes of videos were probed: not under a quarter", read, total)
	}

	// A crash's report, which the mount reads from the helper's stderr, is no video's bytes: the
	// video whose probe crashes is another mount's.
	if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "walk", "poison-probe-segv.mp4")); err != nil {
		t.Fatal(err)
	}
	mp := startMount(t, src, args...)

	index := string(must(os.ReadFile(filepath.Join(mp.dir, "index.csv"))))
	if strings.Contains(index, "poison-probe-segv") {
		t.Error("the video whose probe crashed is laid out")
	}
	for rel := range sources {
		if rel != "bad/empty.mp4" && !strings.Contains(index, rel) {
			t.Errorf("%s, probed beside the poison video, is not laid out", rel)
		}
	}
	var st wire.Stats
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(mp.dir, ".vidfs/stats"))), &st); err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, p := range st.Errors {
		if strings.Contains(p.File, "poison-probe-segv") {
			listed = strings.Contains(p.Reason, "crashed") && strings.Contains(p.Reason, "SIGSEGV")
			t.Logf("listed: %s: %s", p.File, p.Reason)
		}
	}
	if !listed {
		t.Errorf("the poison video is not listed with its reason: %+v", st.Errors)
	}
	if h := st.Decode.Helpers; h == nil || h.VideosHeld != 1 {
		t.Errorf("helper stats %+v: want the poison video held", h)
	}
	if !strings.Contains(mp.log(), `msg="video left out" file=walk/poison-probe-segv.mp4`) {
		t.Errorf("the log does not name the video left out:\n%s", mp.log())
	}
	_, failed := samplesOf(t, mp.dir, nil, false)
	if len(failed) > 0 {
		t.Errorf("samples of the videos probed beside it failed: %v", failed)
	}
	mp.checkNoCrash(t)
}
