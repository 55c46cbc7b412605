package decode_test

import (
	"path/filepath"
	"testing"

	"github.com/vidfs/vidfs/decode"
)

// TestLandingsTaken: a seek to any keyframe but the first of a video whose frames are known by
// their packets (not by timestamps) lands where the demuxer put it, told surely, rather than
// going back to the start of the file. A landing not taken decodes the same frames from the
// start, so only this counts it: over every conformance video, the program stream of issue 48
// (keyframes of one size, places often unknown) among them.
func TestLandingsTaken(t *testing.T) {
	tried := 0
	for _, path := range conformanceVideos(t) {
		info, err := decode.Probe(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Timing == decode.TimingPTS || len(info.Keyframes) < 2 {
			continue // seeks by timestamp: no landing to tell
		}
		tried++
		rewound, err := decode.SeeksRewound(info)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Logf("%s (timing %v): %d keyframes, seeks that went back to the start: %v", filepath.Base(path), info.Timing, len(info.Keyframes), rewound)
		if len(rewound) > 0 {
			t.Errorf("%s: seeks to keyframes %v of %d went back to the start of the file", filepath.Base(path), rewound, len(info.Keyframes))
		}
	}
	if tried == 0 {
		t.Fatal("no video timed by its packets among the conformance videos")
	}
}
