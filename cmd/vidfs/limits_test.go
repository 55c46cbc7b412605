//go:build vidfstest

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
)

// TestHelperHog: a video whose decode allocates without end (the test hook: poison-hog) is
// stopped by its helper's data limit: its samples fail with EIO, it is held, and every other
// sample reads while the mount lives; helpers run with oom_score_adj 1000.
func TestHelperHog(t *testing.T) {
	src := makeSource(t)
	if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "walk", "poison-hog.mp4")); err != nil {
		t.Fatal(err)
	}
	mp := startMount(t, src, "--probe-cache", "", "--workers", "4", "--frames", "4", "--size", "32x32", "--cache-mem", "16MiB")
	for _, pid := range helperPids(t, mp.cmd.Process.Pid) {
		adj, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
		if err != nil || strings.TrimSpace(string(adj)) != "1000" {
			t.Errorf("helper %d: oom_score_adj %q (%v), want 1000", pid, adj, err)
		}
	}
	hog := map[int]bool{}
	for _, i := range samplesOfVideo(t, mp.dir, "walk/poison-hog.mp4") {
		hog[i] = true
	}
	_, failed := samplesOf(t, mp.dir, nil, false)
	for i, err := range failed {
		if !hog[i] {
			t.Errorf("sample %d of another video failed: %v", i, err)
		} else if !errors.Is(err, syscall.EIO) {
			t.Errorf("sample %d of the video that allocates without end: %v, want EIO", i, err)
		}
	}
	if len(failed) == 0 {
		t.Error("the video that allocates without end read")
	}
	var st wire.Stats
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(mp.dir, ".vidfs/stats"))), &st); err != nil {
		t.Fatal(err)
	}
	if h := st.Decode.Helpers; h == nil || h.VideosHeld != 1 || h.Crashes < 2 {
		t.Errorf("helper stats %+v: want the video held after two deaths", h)
	}
	if syscall.Kill(mp.cmd.Process.Pid, 0) != nil {
		t.Fatal("the mount died")
	}
	mp.checkNoCrash(t)
}
