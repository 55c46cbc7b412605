package fs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testfd"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// TestDescriptorsShort: a decoder that cannot open its video because the process is out of file
// descriptors (a real EMFILE: the test lowers its own RLIMIT_NOFILE around the read) fails the
// read in progress with EIO, under --on-error substitute too (nothing stands in for a sample
// that may yet decode), and records nothing: once descriptors are back the same sample reads
// as DecodeClip makes it, no sample of its video is held failed, and it stands in for its
// damaged neighbour.
func TestDescriptorsShort(t *testing.T) {
	files := map[string]string{"c/a.mp4": "h264_gop16.mp4", "c/corrupt.mp4": "corrupt.mp4"}
	spec := layout.Spec{Frames: 4, Stride: 1, Step: 4, Height: 32, Width: 32}
	m := mountVideos(t, mountSetup{files: files, spec: spec, onError: OnErrorSubstitute})
	video := map[string]int{}
	for v, lv := range m.lay.Videos {
		video[lv.Path] = v
	}
	// The damaged video's first sample that fails for good, after one that decodes (found with
	// decoders of its own: the mount's keep theirs open).
	first, end := m.lay.VideoSamples(video["c/corrupt.mp4"])
	bad := -1
	info := m.fs.cfg.Infos.(load.InfoList)[video["c/corrupt.mp4"]]
	for s := first; s < end && bad < 0; s++ {
		smp := m.lay.Sample(s)
		_, err := decode.DecodeClip(context.Background(), info, decode.Clip{Start: smp.Start, Frames: spec.Frames, Stride: spec.Stride, PadEnd: smp.Pad},
			m.fs.out, make([]byte, spec.SampleBytes()), 1)
		if err != nil && s > first {
			bad = s
		}
	}
	if bad < 0 {
		t.Fatal("no sample of corrupt.mp4 fails after one that decodes: regenerate testdata")
	}
	i := bad - 1 // read while descriptors are short

	f, err := os.Open(filepath.Join(m.dir, "clips.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	S := spec.SampleBytes()
	buf := make([]byte, S)
	var shortErr error
	testfd.Short(t, 0, func() { _, shortErr = f.ReadAt(buf, int64(i)*S) }) // every open fails with EMFILE
	if !errors.Is(shortErr, syscall.EIO) {
		t.Errorf("sample %d read while descriptors are short: %v, want EIO", i, shortErr)
	}
	if st := m.stats(t); st.Decode.FailedTransient == 0 || st.Decode.Failed != 0 {
		t.Errorf("stats count %d decodes failed for good, %d transiently; want 0 and at least 1", st.Decode.Failed, st.Decode.FailedTransient)
	}
	if _, err := f.ReadAt(buf, int64(i)*S); err != nil {
		t.Fatalf("sample %d read once descriptors are back: %v", i, err)
	}
	if !bytes.Equal(buf, m.decoded(t, i)) {
		t.Errorf("sample %d read once descriptors are back differs from DecodeClip's", i)
	}
	// Its damaged neighbour: served with it, the nearest sample of its video.
	if _, err := f.ReadAt(buf, int64(bad)*S); err != nil {
		t.Fatalf("damaged sample %d under substitute: %v", bad, err)
	}
	if with, ok := m.fs.failed.servedFor(bad); !ok || with != i {
		t.Errorf("damaged sample %d served with %d (decided %v), want %d, which failed only while descriptors were short", bad, with, ok, i)
	}
	good := []int{i}
	for s := range m.lay.Len() {
		if m.lay.Sample(s).Video == video["c/a.mp4"] {
			good = append(good, s)
		}
	}
	for _, s := range good {
		if err := m.fs.cache.Failed(s); err != nil {
			t.Errorf("sample %d, which decodes, held failed: %v", s, err)
		}
	}
}
