package decode

import "testing"

// TestDrainPays: when a clip's end drains the decoder instead of decoding on.
func TestDrainPays(t *testing.T) {
	gop16 := &Info{Frames: 100, Keyframes: []Keyframe{{Frame: 0}, {Frame: 16}, {Frame: 32}, {Frame: 48}, {Frame: 64}, {Frame: 80}, {Frame: 96}}}
	gop250 := &Info{Frames: 300, Keyframes: []Keyframe{{Frame: 0}, {Frame: 250}}}
	shortTail := &Info{Frames: 270, Keyframes: []Keyframe{{Frame: 0}, {Frame: 250}}}
	span := func(start, n, stride int) []int {
		idx := make([]int, n)
		for k := range idx {
			idx[k] = start + k*stride
		}
		return idx
	}
	for _, tc := range []struct {
		name     string
		info     *Info
		prevLast int
		idx      []int
		want     bool
	}{
		{"first clip, short GOP", gop16, -1, span(20, 4, 1), true},
		{"random jump back", gop16, 70, span(20, 4, 1), true},
		{"stride 4 across GOPs", gop16, -1, span(3, 16, 4), true},
		{"follows on from the last clip", gop16, 23, span(24, 4, 1), false},
		{"follows on after a gap within the GOP", gop16, 19, span(24, 4, 1), false},
		{"starts past the next keyframe", gop16, 10, span(40, 4, 1), true},
		{"long GOP", gop250, -1, span(20, 16, 4), false},
		{"ends just before the keyframe of a long GOP", gop250, -1, span(230, 16, 1), false},
		{"long last GOP", gop250, -1, span(260, 16, 1), false},
		{"short last GOP", shortTail, -1, span(252, 16, 1), true},
	} {
		v := &video{info: tc.info, prevLast: tc.prevLast}
		if got := v.drainPays(tc.idx); got != tc.want {
			t.Errorf("%s: drainPays(%v) after %d = %v, want %v", tc.name, tc.idx, tc.prevLast, got, tc.want)
		}
	}
}
