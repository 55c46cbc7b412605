package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
)

// TestScanProgress: while a first mount still probes its videos, and MNT is not mounted yet,
// vidfs stats MNT says how far it has got (and --json gives it as JSON); once the mount serves,
// stats are the mount's and the progress file is gone.
func TestScanProgress(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the mount writes its progress
	const videos = 6000                     // a few seconds of probing at one worker, so that the test sees it
	src := t.TempDir()
	for k := range videos {
		p := filepath.Join(src, fmt.Sprintf("class%d", k%3), fmt.Sprintf("v%04d.mp4", k))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Link(testvideo.Path("h264_gop16.mp4"), p); err != nil {
			t.Fatal(err)
		}
	}
	mnt := t.TempDir()
	cmd := exec.Command(os.Args[0], "mount", src, mnt, "--probe-workers", "1", "--probe-cache", "", "--size", "32x32", "--cache-mem", "16MiB")
	cmd.Env = mountEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
	})
	// Every 100 ms: the progress file changes once a second, for the 5 s or so of the scan that
	// follow its first second (about 900 probes a second); each look runs three vidfs commands in
	// this process, and looking 50 times a second took the CPU the one probing worker needs.
	var sawLine, sawJSON bool
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the mount did not come up in 2 minutes")
		}
		select {
		case err := <-done:
			t.Fatalf("vidfs mount exited: %v", err)
		default:
		}
		code, out, errs := vidfs(t, "stats", mnt)
		if code != 0 {
			if !strings.Contains(errs, "is not a vidfs mount") {
				t.Fatalf("vidfs stats while scanning: exit %d, %s", code, errs)
			}
			continue // the first second of the scan: nothing written yet
		}
		if !strings.Contains(out, "not mounted yet") {
			break // it serves
		}
		if !strings.Contains(out, fmt.Sprintf(" of %d, ", videos)) || !strings.Contains(out, fmt.Sprintf("pid %d", cmd.Process.Pid)) {
			t.Errorf("vidfs stats while scanning: %q", out)
		}
		sawLine = true
		// vidfs top, not on a terminal, says the same and stops (on one it shows it until the
		// mount serves).
		if code, _, errs := vidfs(t, "top", mnt); code != 1 || !strings.Contains(errs, "not mounted yet") && !strings.Contains(errs, "draws on a terminal") {
			t.Errorf("vidfs top while scanning: exit %d, %q", code, errs)
		}
		if code, out, _ := vidfs(t, "stats", mnt, "--json"); code == 0 {
			var sc wire.Scanning
			if json.Unmarshal([]byte(out), &sc) == nil && sc.PID != 0 {
				if sc.PID != cmd.Process.Pid || sc.Mountpoint != mnt || sc.Scan.Videos != videos || sc.Scan.Probed > videos {
					t.Errorf("vidfs stats --json while scanning: %+v", sc)
				}
				sawJSON = true
			}
		}
	}
	if !sawLine || !sawJSON {
		t.Errorf("the scan's progress was never shown (line %v, JSON %v)", sawLine, sawJSON)
	}
	if _, err := os.Stat(scanFile(mnt)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the progress file outlives the scan: %v", err)
	}
	st, err := readStats(mnt)
	if err != nil || st.Scan == nil || st.Scan.Videos != videos || st.Scan.SecondsLeft != 0 {
		t.Errorf("stats once mounted: %v, scan %+v", err, st.Scan)
	}
}
