//go:build vidfstest

package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/internal/wire"
)

// Faults in the mount's decoder helpers, with the hooks of test builds (isolate's
// hooks_vidfstest.go: a video named poison-segv crashes the helper decoding it).

// TestHelperFaults: under 16 readers with a plan, helpers killed by SIGSEGV, SIGKILL and
// SIGABRT, and one stopped, cost no read of a good video; a poison video's samples fail with
// EIO, listed with the signal; the mount serves on, and every sample equals an in-process
// mount's.
func TestHelperFaults(t *testing.T) {
	src := makeSource(t)
	if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), filepath.Join(src, "walk", "poison-segv.mp4")); err != nil {
		t.Fatal(err)
	}
	args := []string{"--workers", "4", "--frames", "4", "--stride", "2", "--step", "16", "--size", "32x32", "--probe-cache", ""}
	const deadline = 3 * time.Second
	mp := startMount(t, src, append(args, "--decode-deadline", deadline.String())...)
	ref := startMount(t, src, append(args, "--decoders", "in-process")...)
	lay, err := readDataset(mp.dir)
	if err != nil {
		t.Fatal(err)
	}
	poison := map[int]bool{}
	rows, err := csv.NewReader(strings.NewReader(string(must(os.ReadFile(filepath.Join(mp.dir, "index.csv")))))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows[1:] {
		if strings.Contains(row[1], "poison-segv") {
			i, _ := strconv.Atoi(row[0])
			poison[i] = true
		}
	}
	if len(poison) == 0 {
		t.Fatal("the poison video has no samples")
	}
	// A plan of every sample, shuffled, that the readers follow, 16 of them.
	order := make([]string, lay.Samples)
	for k := range order {
		order[k] = strconv.Itoa((k * 7919) % lay.Samples)
	}
	if err := os.WriteFile(filepath.Join(mp.dir, ".vidfs/order"), []byte(strings.Join(order, " ")), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failed := map[int]error{}
	var longest time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range nReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(filepath.Join(mp.dir, "clips.raw"))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			buf := make([]byte, lay.SampleBytes)
			for k := r; ; k += nReaders {
				select {
				case <-stop:
					return
				default:
				}
				i := (k * 7919) % lay.Samples
				began := time.Now()
				_, err := f.ReadAt(buf, int64(i)*lay.SampleBytes)
				took := time.Since(began)
				mu.Lock()
				longest = max(longest, took)
				if err != nil {
					failed[i] = err
				}
				mu.Unlock()
			}
		}()
	}
	pid := mp.cmd.Process.Pid
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGKILL, syscall.SIGABRT, syscall.SIGSTOP} {
		time.Sleep(500 * time.Millisecond)
		// The helper a fault hits is one that serves: not one started for a lone retry of the
		// last fault's clips (a retry stopped dies twice, and holds its video). They are waited
		// for: every helper of the mount serves.
		var pids []int
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var st wire.Stats
			if err := json.Unmarshal(must(os.ReadFile(filepath.Join(mp.dir, ".vidfs/stats"))), &st); err != nil {
				t.Fatal(err)
			}
			pids = helperPids(t, pid)
			if h := st.Decode.Helpers; h != nil && h.Serving > 0 && h.Serving == len(pids) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the mount's helpers did not all serve in 30 s: %d processes, %+v", len(pids), st.Decode.Helpers)
			}
		}
		if err := syscall.Kill(pids[0], sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(deadline + 2*time.Second)
	close(stop)
	wg.Wait()
	for i, err := range failed {
		if !poison[i] {
			t.Errorf("sample %d of a good video failed: %v", i, err)
		} else if !strings.Contains(err.Error(), "input/output error") {
			t.Errorf("poison sample %d: %v, want EIO", i, err)
		}
	}
	if longest > deadline+30*time.Second {
		t.Errorf("a read waited %v; the deadline is %v", longest, deadline)
	}
	mp.checkNoCrash(t)
	// Every sample once more: a good one as the in-process mount gives it, a poison one EIO.
	a, err := os.Open(filepath.Join(mp.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open(filepath.Join(ref.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, want := make([]byte, lay.SampleBytes), make([]byte, lay.SampleBytes)
	for i := range lay.Samples {
		_, err := a.ReadAt(got, int64(i)*lay.SampleBytes)
		if poison[i] {
			if err == nil {
				t.Errorf("poison sample %d read", i)
			}
			continue
		}
		if _, werr := b.ReadAt(want, int64(i)*lay.SampleBytes); err != nil || werr != nil {
			t.Fatalf("sample %d: %v; in-process %v", i, err, werr)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("sample %d differs from the in-process mount's", i)
		}
	}
	failedCSV := string(must(os.ReadFile(filepath.Join(mp.dir, ".vidfs/failed"))))
	if !strings.Contains(failedCSV, "poison-segv.mp4") || !strings.Contains(failedCSV, "SIGSEGV") {
		t.Errorf(".vidfs/failed does not list the poison video with its signal:\n%s", failedCSV)
	}
	var st wire.Stats
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(mp.dir, ".vidfs/stats"))), &st); err != nil {
		t.Fatal(err)
	}
	h := st.Decode.Helpers
	if h == nil || h.VideosHeld != 1 || h.Started < 5 || h.Serving != len(helperPids(t, pid)) {
		t.Errorf("helper stats %+v", h)
	}
	t.Logf("helpers %+v; longest read %v", h, longest)
	if unix.Kill(pid, 0) != nil {
		t.Fatal("the mount died")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
