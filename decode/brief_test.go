package decode

import (
	"os"
	"strings"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// TestBrief: a brief table (no per-frame arrays) answers the questions of timing and length at a
// rate as its full table does, for every test video that probes.
func TestBrief(t *testing.T) {
	entries, err := os.ReadDir(testvideo.Dir())
	if err != nil {
		t.Fatal(err)
	}
	rates := []Rational{{1, 1}, {5, 1}, {24, 1}, {30000, 1001}, {60, 1}}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".damage") {
			continue
		}
		info, err := Probe(testvideo.Path(e.Name()))
		if err != nil {
			continue
		}
		n++
		b := info.Brief()
		if b.PTS != nil || b.Keyframes != nil || b.FramePackets != nil || b.PacketFrames != nil || b.Frames != info.Frames {
			t.Errorf("%s: brief keeps per-frame tables or loses its length: %+v", e.Name(), b)
		}
		if b.TimedByPTS() != info.TimedByPTS() || b.TimingRate() != info.TimingRate() || b.TimingNote() != info.TimingNote() {
			t.Errorf("%s: brief timing %v %v %q, full %v %v %q", e.Name(), b.TimedByPTS(), b.TimingRate(), b.TimingNote(),
				info.TimedByPTS(), info.TimingRate(), info.TimingNote())
		}
		for _, r := range rates {
			if got, want := b.FramesAt(r), info.FramesAt(r); got != want {
				t.Errorf("%s at %v fps: brief %d frames, full %d", e.Name(), r, got, want)
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d test videos probed", n)
	}
}
