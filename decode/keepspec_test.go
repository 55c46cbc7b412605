package decode_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/vidfs/vidfs/decode"
)

// TestKeepSpec: a FrameKeeper wants the frames whose bit is set while it has room, keeps them in
// increasing order within the memory lent, and drops from a frame on; Valid takes of a list said
// kept only the lead that follows the same rule.
func TestKeepSpec(t *testing.T) {
	spec := decode.KeepSpec{Need: make([]uint64, 2), Max: 3, FrameBytes: 2}
	for _, i := range []int{1, 5, 64, 70, 100} {
		spec.Need[i/64] |= 1 << (i % 64)
	}
	for i, want := range map[int]bool{-1: false, 0: false, 1: true, 64: true, 127: false, 128: false, 1000: false} {
		if got := spec.Needs(i); got != want {
			t.Errorf("Needs(%d) = %v, want %v", i, got, want)
		}
	}

	k := &decode.FrameKeeper{Spec: spec, Frames: make([]byte, 0, spec.Max*spec.FrameBytes)}
	if k.Want(0) || !k.Want(1) {
		t.Errorf("Want(0) %v, Want(1) %v: want only frames whose bit is set", k.Want(0), k.Want(1))
	}
	k.Keep(5, []byte{5, 5})
	k.Keep(1, []byte{1, 1})    // before the last kept: refused
	k.Keep(64, []byte{6})      // short: refused
	k.Keep(64, []byte{64, 64}) // kept
	k.Keep(70, []byte{70, 70}) // kept: the third, Max
	if k.Want(100) {
		t.Error("Want(100) with Max frames kept: want false")
	}
	k.Keep(100, []byte{100, 100}) // past Max: refused
	if want := []int{5, 64, 70}; !slices.Equal(k.Kept, want) || !bytes.Equal(k.Frames, []byte{5, 5, 64, 64, 70, 70}) {
		t.Fatalf("kept %v %v, want %v", k.Kept, k.Frames, want)
	}
	k.Drop(64)
	if !slices.Equal(k.Kept, []int{5}) || !bytes.Equal(k.Frames, []byte{5, 5}) {
		t.Errorf("after Drop(64): %v %v, want [5] [5 5]", k.Kept, k.Frames)
	}

	// Memory lent for one frame holds one, whatever Max says.
	lent := make([]byte, 4)
	one := &decode.FrameKeeper{Spec: spec, Frames: lent[:0:2]}
	one.Keep(1, []byte{1, 1})
	one.Keep(5, []byte{5, 5})
	if !slices.Equal(one.Kept, []int{1}) || lent[2] != 0 {
		t.Errorf("in room for one frame: kept %v, memory %v", one.Kept, lent)
	}

	for _, c := range []struct {
		kept []int
		want int
	}{
		{nil, 0},
		{[]int{1, 5, 64}, 3},
		{[]int{1, 5, 64, 70}, 3}, // past Max
		{[]int{5, 1}, 1},         // out of order
		{[]int{1, 2, 5}, 1},      // 2 not needed
		{[]int{1, 1}, 1},         // twice
		{[]int{-1}, 0},
	} {
		if got := spec.Valid(c.kept); got != c.want {
			t.Errorf("Valid(%v) = %d, want %d", c.kept, got, c.want)
		}
	}
}
