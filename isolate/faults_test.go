//go:build vidfstest

package isolate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
	"github.com/vidfs/vidfs/isolate"
)

// Tests of faults in helpers, with the hooks of test builds (hooks_vidfstest.go).

// TestSandbox: from inside a helper, reading or looking up a file, making a socket, running a
// program, making a process or a namespace, tracing, signalling or limiting another process,
// taking a descriptor's signals, and executable memory all fail.
func TestSandbox(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 2})
	all := d.TrySandbox()
	if len(all) != 2 {
		t.Fatalf("%d helpers answered, want 2", len(all))
	}
	for _, got := range all {
		if len(got) < 13 {
			t.Fatalf("a helper tried %d things, want 13: %v", len(got), got)
		}
		for _, r := range got {
			if r.Err == "" {
				t.Errorf("a helper could %s", r.What)
			} else {
				t.Logf("%s: %s", r.What, r.Err)
			}
		}
	}
	if st := d.Isolation(); st.LandlockABI == 0 {
		t.Log("this kernel has no Landlock: seccomp alone refused the above")
	}
}

// poisoned links a test video under a name that makes the test hook crash its helper.
func poisoned(t *testing.T, mark string) *decode.Info {
	p := filepath.Join(t.TempDir(), mark+".mp4")
	if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), p); err != nil {
		t.Fatal(err)
	}
	return probe(t, p)
}

// TestPoison: a video that crashes its helper is decoded once more, alone; when that crashes
// too it is held damaged, with the signal, and the clips of other videos decoding beside it
// are decoded exactly.
func TestPoison(t *testing.T) {
	for _, tc := range []struct{ mark, signal string }{{"poison-segv", "SIGSEGV"}, {"poison-abort", "SIGABRT"}} {
		t.Run(tc.mark, func(t *testing.T) {
			d := start(t, isolate.Options{Helpers: 1, PerHelper: 4})
			bad := poisoned(t, tc.mark)
			jobs := clipsOf(t, []string{"h264_gop250.mp4", "vp9.webm", "mpeg4.avi"})
			var wg sync.WaitGroup
			for _, j := range jobs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want, _ := fresh(t, j)
					got := make([]byte, len(want))
					if _, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got); err != nil {
						t.Errorf("%s beside a poison video: %v", j.info.Path, err)
					} else if !bytes.Equal(got, want) {
						t.Errorf("%s beside a poison video: bytes differ", j.info.Path)
					}
				}()
			}
			_, err := d.DecodeClip(context.Background(), bad, decode.Clip{Start: 0, Frames: 2, Stride: 1}, out, make([]byte, 2*out.FrameBytes()))
			wg.Wait()
			if !errors.Is(err, decode.ErrCrashed) || !strings.Contains(err.Error(), tc.signal) {
				t.Fatalf("the poison video: %v, want crashed twice by %s", err, tc.signal)
			}
			if decode.Permanent(err) {
				t.Error("a crash is Permanent: the probe cache would remember it across mounts")
			}
			// Held: it fails at once, without a helper dying again.
			before := d.Isolation()
			_, err = d.DecodeClip(context.Background(), bad, decode.Clip{Start: 4, Frames: 2, Stride: 1}, out, make([]byte, 2*out.FrameBytes()))
			after := d.Isolation()
			if !errors.Is(err, decode.ErrCrashed) || after.Crashes != before.Crashes {
				t.Errorf("held video again: %v, crashes %d then %d", err, before.Crashes, after.Crashes)
			}
			if after.Held != 1 || after.Crashes < 2 || after.Retries < 1 {
				t.Errorf("stats %+v: want 1 held, 2 crashes, a retry", after)
			}
			waitServing(t, d, 1)
		})
	}
}

// waitServing waits until n helpers serve (dead ones are replaced).
func waitServing(t *testing.T, d *isolate.Decoders, n int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); d.Isolation().Helpers < n; {
		if time.Now().After(end) {
			t.Fatalf("%d helpers serve after 30 s, want %d", d.Isolation().Helpers, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKilled: helpers killed under load by SIGSEGV, SIGKILL and SIGABRT cost nothing: their
// clips are decoded again, exactly, and the helpers replaced.
func TestKilled(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 3, PerHelper: 2})
	jobs := clipsOf(t, videos)
	want := make([][]byte, len(jobs))
	for i, j := range jobs {
		var err error
		if want[i], err = fresh(t, j); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	decoded, failed := 0, 0
	for r := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := r; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := k % len(jobs)
				got := make([]byte, len(want[i]))
				_, err := d.DecodeClip(context.Background(), jobs[i].info, jobs[i].clip, out, got)
				mu.Lock()
				if err != nil {
					failed++
					t.Errorf("%s: %v", jobs[i].info.Path, err)
				} else {
					decoded++
					if !bytes.Equal(got, want[i]) {
						t.Errorf("%s clip %d: bytes differ after a helper was killed", jobs[i].info.Path, jobs[i].clip.Start)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGKILL, syscall.SIGABRT} {
		time.Sleep(300 * time.Millisecond)
		// A helper listed may be gone by the time it is signalled (one its deadline killed on a
		// busy machine, say: reaped, and listed until its reader sees it end): the others listed
		// then, and the list again a moment later, for up to 3 s.
		var err error = syscall.ESRCH
		for end := time.Now().Add(3 * time.Second); errors.Is(err, syscall.ESRCH) && time.Now().Before(end); {
			pids := d.Pids()
			if len(pids) == 0 {
				t.Fatal("no helper serves")
			}
			for _, pid := range pids {
				if err = syscall.Kill(pid, sig); !errors.Is(err, syscall.ESRCH) {
					break
				}
			}
			if errors.Is(err, syscall.ESRCH) {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		waitServing(t, d, 3)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	st := d.Isolation()
	t.Logf("%d clips decoded, %d failed; %+v", decoded, failed, st)
	if st.Retries == 0 || st.Started < 6 {
		t.Errorf("stats %+v: want retries, and 3 helpers replaced", st)
	}
	if st.Held != 0 {
		t.Errorf("%d videos held damaged for a helper killed from outside", st.Held)
	}
}

// TestStopped: a helper stopped (SIGSTOP) is caught by the deadline: killed, its clip decoded
// again elsewhere, and the caller waits about the deadline, not for ever.
func TestStopped(t *testing.T) {
	const deadline = 2 * time.Second
	d := start(t, isolate.Options{Helpers: 1, PerHelper: 1, Deadline: deadline})
	pid := d.Pids()[0]
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	j := clipsOf(t, []string{"h264_gop16.mp4"})[1]
	want, _ := fresh(t, j)
	got := make([]byte, len(want))
	began := time.Now()
	_, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got)
	took := time.Since(began)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after a stopped helper: %v (equal %v)", err, bytes.Equal(got, want))
	}
	if took < deadline || took > deadline+20*time.Second {
		t.Errorf("the clip took %v; the deadline is %v", took, deadline)
	}
	if st := d.Isolation(); st.Hangs != 1 || st.Crashes != 0 {
		t.Errorf("stats %+v: want one hang", st)
	}
	waitServing(t, d, 1)
	if d.Pids()[0] == pid {
		t.Error("the stopped helper still serves")
	}
}

// TestHang: a video whose decode never ends is killed at the deadline, tried once more, and held.
func TestHang(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1, Deadline: time.Second})
	bad := poisoned(t, "poison-hang")
	_, err := d.DecodeClip(context.Background(), bad, decode.Clip{Start: 0, Frames: 2, Stride: 1}, out, make([]byte, 2*out.FrameBytes()))
	if !errors.Is(err, decode.ErrCrashed) || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("a hanging video: %v", err)
	}
	if st := d.Isolation(); st.Hangs != 2 || st.Held != 1 {
		t.Errorf("stats %+v: want 2 hangs, 1 held", st)
	}
}

// TestProbePoison: a video whose probe crashes its helper, or hangs it, is tried once more
// alone and then held (decode.ErrCrashed, with the signal or the deadline), while the other
// videos probed beside it, in the same helper, get their tables; later probes of it fail at once.
func TestProbePoison(t *testing.T) {
	for _, tc := range []struct{ mark, reason string }{{"poison-probe-segv", "SIGSEGV"}, {"poison-probe-hang", "deadline"}} {
		t.Run(tc.mark, func(t *testing.T) {
			d := start(t, isolate.Options{Helpers: 1, PerHelper: 4, Deadline: 3 * time.Second})
			bad := filepath.Join(t.TempDir(), tc.mark+".mp4")
			if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), bad); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, name := range []string{"h264_gop250.mp4", "vp9.webm", "mpeg4.avi", "hevc.mkv", "vfr.mkv", "theora.ogv"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want := probe(t, testvideo.Path(name))
					got, err := d.Probe(context.Background(), testvideo.Path(name))
					if err != nil || got.Frames != want.Frames || len(got.Keyframes) != len(want.Keyframes) {
						t.Errorf("%s beside a poison video: %v", name, err)
					}
				}()
			}
			_, err := d.Probe(context.Background(), bad)
			wg.Wait()
			if !errors.Is(err, decode.ErrCrashed) || !strings.Contains(err.Error(), tc.reason) || decode.Permanent(err) {
				t.Fatalf("the poison video: %v, want crashed twice (%s), not permanent", err, tc.reason)
			}
			before := d.Isolation()
			if _, err := d.Probe(context.Background(), bad); !errors.Is(err, decode.ErrCrashed) {
				t.Errorf("probed again: %v", err)
			}
			if after := d.Isolation(); after.Held != 1 || after.Crashes+after.Hangs != before.Crashes+before.Hangs {
				t.Errorf("stats %+v then %+v: want 1 held, no more deaths", before, after)
			}
			waitServing(t, d, 1)
		})
	}
}

// TestScribble: a helper whose decoder writes past the end of its clip's frames (the test hook:
// poison-scribble, a buffer overflow) faults, as it reaches no memory of the mount's but its
// window; its video is held after a second fault, the clips decoded beside it in the same helper
// are exact, and no sample in the cache's memory (Buffers), decoded before, changes. (On main,
// whose helpers mapped the cache's memory whole, the same overflow rewrote the samples beside.)
func TestScribble(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1, PerHelper: 4})
	jobs := clipsOf(t, []string{"h264_gop250.mp4", "vp9.webm", "mpeg4.avi", "hevc.mkv"})
	arena, err := d.Buffers(int64(4*out.FrameBytes()), 64)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(jobs))
	done := make([][]byte, len(jobs)) // decoded before: samples in memory
	for i, j := range jobs {
		if want[i], err = fresh(t, j); err != nil {
			t.Fatal(err)
		}
		if done[i], err = arena.Alloc(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DecodeClip(context.Background(), j.info, j.clip, out, done[i]); err != nil {
			t.Fatal(err)
		}
	}
	bad := poisoned(t, "poison-scribble")
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := arena.Alloc()
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got); err != nil || !bytes.Equal(got, want[i]) {
				t.Errorf("%s beside a scribbling video: %v (equal %v)", j.info.Path, err, bytes.Equal(got, want[i]))
			}
		}()
	}
	dst, _ := arena.Alloc()
	_, err = d.DecodeClip(context.Background(), bad, decode.Clip{Start: 0, Frames: 4, Stride: 1}, out, dst)
	wg.Wait()
	if !errors.Is(err, decode.ErrCrashed) || !strings.Contains(err.Error(), "SIGSEGV") {
		t.Fatalf("the scribbling video: %v, want crashed twice by SIGSEGV", err)
	}
	for i := range jobs {
		if !bytes.Equal(done[i], want[i]) {
			t.Errorf("sample %d, decoded before, changed", i)
		}
	}
}

// TestMarksChecked: a helper's unusable-keyframe marks count only for the video of the decode
// they come with, and only where they are keyframes of its table after the first: marks a lying
// helper adds (the test hook: poison-marks) of frames out of range, of no keyframe, of the first
// keyframe, and of another video's keyframes, are refused, and the other video gets none.
func TestMarksChecked(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1})
	other := probe(t, testvideo.Path("h264_gop250.mp4"))
	base := probe(t, testvideo.Path("h264_gop16.mp4"))
	own := map[int]bool{}
	for _, k := range base.Keyframes {
		own[k.Frame] = true
	}
	var theirs []string
	for _, k := range other.Keyframes[1:] {
		if !own[k.Frame] && len(theirs) < 2 {
			theirs = append(theirs, strconv.Itoa(k.Frame))
		}
	}
	if len(theirs) == 0 {
		t.Fatal("the other video has no keyframe of its own: the test shows nothing")
	}
	p := filepath.Join(t.TempDir(), "poison-marks-of-"+strings.Join(theirs, "-")+".mp4")
	if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), p); err != nil {
		t.Fatal(err)
	}
	liar := probe(t, p)
	for _, info := range []*decode.Info{other, liar} {
		if _, err := d.DecodeClip(context.Background(), info, decode.Clip{Start: 0, Frames: 2, Stride: 1}, out, make([]byte, 2*out.FrameBytes())); err != nil {
			t.Fatal(err)
		}
	}
	marks := d.UnusableKeyframes()
	if m, ok := marks[other.Path]; ok {
		t.Errorf("the other video got marks %v from a helper that decoded it cleanly", m)
	}
	want := []int{liar.Keyframes[len(liar.Keyframes)-1].Frame}
	if got := marks[liar.Path]; !slices.Equal(got, want) {
		t.Errorf("the lying helper's video: marks %v taken, want %v (its one true keyframe)", got, want)
	}
}

// TestHog: a helper that allocates without end (the test hook: poison-hog) is stopped by its
// data limit, while the clips decoded beside it in the same helper are decoded exactly; its video
// is held as one that crashes twice.
func TestHog(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1, PerHelper: 4})
	bad := poisoned(t, "poison-hog")
	jobs := clipsOf(t, []string{"h264_gop250.mp4", "vp9.webm", "mpeg4.avi"})
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want, _ := fresh(t, j)
			got := make([]byte, len(want))
			if _, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s beside a video that allocates without end: %v (equal %v)", j.info.Path, err, bytes.Equal(got, want))
			}
		}()
	}
	_, err := d.DecodeClip(context.Background(), bad, decode.Clip{Start: 0, Frames: 2, Stride: 1}, out, make([]byte, 2*out.FrameBytes()))
	wg.Wait()
	// The Go runtime says "out of memory"; with the race detector, its allocator fails first.
	if !errors.Is(err, decode.ErrCrashed) || !strings.Contains(err.Error(), "out of memory") && !strings.Contains(err.Error(), "errno: 12") {
		t.Fatalf("the video that allocates without end: %v, want crashed twice, out of memory", err)
	}
	waitServing(t, d, 1)
}

// TestMountFailureNotRetried: a failure of the mount's own part of a decode (its write of the
// frames into the cache: the test hook, poison-mount, fails it as a full memfd would) is returned
// as it is, an internal failure naming the video, and not tried again in a fresh helper as a
// helper's internal failure is: no helper is to blame, and every read of it would start one.
func TestMountFailureNotRetried(t *testing.T) {
	d := start(t, isolate.Options{Helpers: 1})
	bad := poisoned(t, "poison-mount")
	before := d.Isolation()
	for range 3 {
		_, err := d.DecodeClip(context.Background(), bad, decode.Clip{Start: 0, Frames: 2, Stride: 1}, out, make([]byte, 2*out.FrameBytes()))
		if !errors.Is(err, decode.ErrInternal) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), bad.Path) {
			t.Fatalf("the mount's write failing: %v, want an internal failure of %s, ENOSPC", err, bad.Path)
		}
	}
	if after := d.Isolation(); after.Retries != before.Retries || after.Started != before.Started {
		t.Errorf("the mount's own failure, 3 times: %d retries and %d helpers started, want none", after.Retries-before.Retries, after.Started-before.Started)
	}
	// The helper serves on.
	j := clipsOf(t, []string{"vp9.webm"})[0]
	want, err := fresh(t, j)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := d.DecodeClip(context.Background(), j.info, j.clip, out, got); err != nil || !bytes.Equal(got, want) {
		t.Errorf("a clip after the mount's failures: %v, or bytes differ", err)
	}
}
