package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestCopyCommand: vidfs copy makes a mount's training copy whole, with its progress on stderr
// and a summary on stdout; a mount over the copy then serves every sample from it, the same
// bytes, with nothing decoded. A mount without a copy is refused with the reason.
func TestCopyCommand(t *testing.T) {
	src := t.TempDir()
	// short8.mp4 is too short for a sample of these (10 frames): vidfs copy does not wait for it.
	for dst, name := range map[string]string{"a/gop16.mp4": "h264_gop16.mp4", "a/hevc.mkv": "hevc.mkv", "b/vp9.webm": "vp9.webm", "b/short.mp4": "short8.mp4"} {
		p := filepath.Join(src, dst)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(testvideo.Path(name), p); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--frames", "4", "--stride", "3", "--step", "3", "--short", "skip", "--size", "32x48", "--cache-mem", "16MiB", "--workers", "2", "--probe-cache", ""}
	plain := startMount(t, src, flags...)
	code, _, stderr := vidfs(t, "copy", plain.dir)
	if code != 1 || !strings.Contains(stderr, "keeps no training copy") {
		t.Errorf("vidfs copy of a mount without a copy: exit %d, %q", code, stderr)
	}
	want := sampleDigests(t, plain.dir)

	dir := t.TempDir()
	withCopy := append(flags, "--cache-dir", dir, "--cache-keep", "copy")
	a := startMount(t, src, withCopy...)
	code, stdout, stderr := vidfs(t, "copy", a.dir, "--every", "100ms")
	if code != 0 || !strings.Contains(stdout, "3 of 3 videos whole") || !strings.Contains(stdout, "1 more too short for a sample") || !strings.Contains(stderr, "left") {
		t.Fatalf("vidfs copy: exit %d\nstdout %s\nstderr %s\nmount log %s", code, stdout, stderr, a.log())
	}
	st, err := readStats(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Copy == nil || st.Copy.Complete != 3 || st.Copy.WrittenFrames == 0 {
		t.Errorf("after vidfs copy: %+v", st.Copy)
	}
	a.stop(t)

	// Mounted again over the copy: every sample from it, the same bytes, none decoded.
	b := startMount(t, src, withCopy...)
	if got := sampleDigests(t, b.dir); !slices.Equal(got, want) {
		t.Error("samples from the copy differ from decoding them")
	}
	if st, _ := readStats(b.dir); st.Copy.Hits != int64(len(want)) || st.Copy.Misses != 0 || st.Decode.Clips != 0 {
		t.Errorf("a mount over the copy: %d copy hits, %d misses, %d decoded; want %d, 0, 0", st.Copy.Hits, st.Copy.Misses, st.Decode.Clips, len(want))
	}
}

// sampleDigests reads every sample of the mount at dir and returns their digests.
func sampleDigests(t *testing.T, dir string) [][32]byte {
	t.Helper()
	lay, err := readDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	S := len(b) / lay.Samples
	out := make([][32]byte, lay.Samples)
	for i := range out {
		out[i] = sha256.Sum256(b[i*S : (i+1)*S])
	}
	return out
}
