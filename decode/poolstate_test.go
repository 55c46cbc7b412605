package decode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestPoolStateBounded: the pool keeps what decoding taught it of a video (the keyframes found
// unusable) after the video's decoders are closed, so that the marks reach the probe cache, but
// nothing for videos that taught it nothing once their decoders are closed: over an epoch of a
// large dataset it holds state for the videos with open decoders and the damaged ones, not for
// every video it ever decoded.
func TestPoolStateBounded(t *testing.T) {
	p, err := NewPool(PoolOptions{Concurrency: 1, Idle: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	o := Output{Width: 32, Height: 32, Resize: Stretch}
	decodeClip := func(info *Info, c Clip) {
		t.Helper()
		if _, err := p.DecodeClip(context.Background(), info, c, o, make([]byte, c.Frames*o.FrameBytes())); err != nil {
			t.Fatalf("%s, clip %+v: %v", info.Path, c, err)
		}
	}
	// Keyframes of an intra-refresh stream found unusable.
	refresh, err := Probe(testvideo.Path("h264_refresh444.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range refresh.Keyframes[1:] {
		decodeClip(refresh, Clip{Start: k.Frame + 1, Frames: 2, Stride: 1})
	}
	want := fmt.Sprint(p.UnusableKeyframes()[refresh.Path])
	if want == "[]" {
		t.Fatal("no keyframe found unusable")
	}

	dir := t.TempDir()
	const videos = 20
	for i := range videos {
		path := filepath.Join(dir, fmt.Sprintf("v%02d.mp4", i))
		if err := os.Symlink(testvideo.Path("h264_gop16.mp4"), path); err != nil {
			t.Fatal(err)
		}
		info, err := Probe(path)
		if err != nil {
			t.Fatal(err)
		}
		decodeClip(info, Clip{Start: 0, Frames: 2, Stride: 1})
	}
	p.mu.Lock()
	states := len(p.states)
	p.mu.Unlock()
	if states > 2+1 {
		t.Errorf("state kept for %d videos after %d decoded with at most 2 decoders idle; want at most the 2 and the damaged one", states, videos+1)
	}
	if got := fmt.Sprint(p.UnusableKeyframes()[refresh.Path]); got != want {
		t.Errorf("unusable keyframes of %s after its decoders closed: %s, want %s", refresh.Path, got, want)
	}
}
