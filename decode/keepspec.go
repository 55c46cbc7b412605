package decode

import "slices"

// KeepSpec is the rule a store of frames (a training copy) keeps the frames a clip's decode
// passes through by: the frames whose bit is set in Need, at most Max of them, in increasing
// order, each FrameBytes long. It is written once here and followed on both sides of a process
// boundary: by the Keeper of the caller, by a sandboxed decoder that keeps frames for it, and
// by the caller's check of what that decoder says it kept.
type KeepSpec struct {
	Need       []uint64 // a bit per frame of the video: bit i%64 of Need[i/64] for frame i
	Max        int      // the most frames kept in one decode
	FrameBytes int      // each frame's size (Output.FrameBytes)
}

// Needs tells whether frame i's bit is set.
func (s *KeepSpec) Needs(i int) bool {
	return i >= 0 && i < len(s.Need)*64 && s.Need[i/64]&(1<<(i%64)) != 0
}

// Valid is how many of kept, frames a decoder says it kept following s, lead the list as s
// allows: needed, increasing, at most Max of them. A caller takes no more than these.
func (s *KeepSpec) Valid(kept []int) int {
	last := -1
	for j, i := range kept {
		if j >= s.Max || i <= last || !s.Needs(i) {
			return j
		}
		last = i
	}
	return len(kept)
}

// FrameKeeper is a Keeper that keeps the frames Spec wants: their numbers in Kept, in
// increasing order, and their bytes one after another in Frames, which is never grown past its
// capacity (memory lent for them: give it room for Spec.Max frames).
type FrameKeeper struct {
	Spec   KeepSpec
	Kept   []int
	Frames []byte // len(Kept)*Spec.FrameBytes bytes
}

// Want tells whether frame i is wanted (Keeper): its bit is set, and there is room.
func (k *FrameKeeper) Want(i int) bool {
	return k.Spec.Needs(i) && len(k.Kept) < k.Spec.Max
}

// Keep takes a copy of frame i (Keeper) if it comes after those kept and there is room.
func (k *FrameKeeper) Keep(i int, rgb []byte) {
	fb := k.Spec.FrameBytes
	if len(rgb) != fb || len(k.Kept) >= k.Spec.Max || len(k.Frames)+fb > cap(k.Frames) ||
		(len(k.Kept) > 0 && i <= k.Kept[len(k.Kept)-1]) {
		return
	}
	k.Kept = append(k.Kept, i)
	k.Frames = append(k.Frames, rgb...)
}

// Drop forgets the frames kept from frame from on (Keeper).
func (k *FrameKeeper) Drop(from int) {
	n, _ := slices.BinarySearch(k.Kept, from)
	k.Kept, k.Frames = k.Kept[:n], k.Frames[:n*k.Spec.FrameBytes]
}
