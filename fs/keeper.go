package fs

// Keeping, for the training copy, the frames a sample's decode passes through.

import (
	"slices"

	"github.com/vidfs/vidfs/decode"
)

// passKeeper takes, for the training copy, frames a sample's decode passes through that other
// samples of its video use (decode.Keeper): at most a sample's worth, so that keeping them
// costs the first epoch a bounded part of a decode.
type passKeeper struct {
	need   []uint64 // a bit per frame of the video: some sample uses it
	needed int      // how many bits are set
	max    int
	fb     int
	units  []int
	frames []byte
	own    bool // counted frames of the video's own numbering (no --fps): decode.Clip.Keep applies
}

// keeper returns a passKeeper for a decode of a sample of video v, from the pool.
func (t *trainingCopy) keeper(f *FS, v int) *passKeeper {
	k, ok := t.keepers.Get().(*passKeeper)
	if !ok {
		k = &passKeeper{}
	}
	k.max, k.fb = f.lay.Spec.Frames, f.out.FrameBytes()
	if t.mode == FillAuto {
		// Under auto the copy takes each sample's own frames, and whole videos within the
		// budget: converting the frames a decode passes would cost each clip's decode more than
		// the budget reckons it at, and the whole videos come to hold them anyway. So no frame
		// is wanted, and what the copy needs of the video is counted once a video length.
		k.max, k.need, k.needed = 0, k.need[:0], t.neededOf(f, v)
	} else {
		k.need, k.needed = f.needBits(v, k.need)
		if !t.admit(v) {
			k.max = 0 // no room for the video: no frame is converted for the copy
		}
	}
	k.units, k.frames = k.units[:0], slices.Grow(k.frames[:0], k.max*k.fb) // grown once, not by doubling
	k.own = !f.lay.Spec.FPS.Set()
	return k
}

// decodeKeeper is k as the decoder takes it: nil when there is none, or when frames are counted
// at --fps (the decoder's frames are not the copy's then).
func (k *passKeeper) decodeKeeper() decode.Keeper {
	if k == nil || !k.own {
		return nil
	}
	return k
}

// Want tells whether the decode is to hand over frame i (decode.Keeper): some sample of the
// video uses it, and there is room for it.
func (k *passKeeper) Want(i int) bool {
	return i >= 0 && i < len(k.need)*64 && k.need[i/64]&(1<<(i%64)) != 0 && len(k.units) < k.max
}

// Keep takes a copy of frame i, converted (decode.Keeper), if it comes after those taken.
func (k *passKeeper) Keep(i int, rgb []byte) {
	if len(rgb) == k.fb && (len(k.units) == 0 || i > k.units[len(k.units)-1]) {
		k.units = append(k.units, i)
		k.frames = append(k.frames, rgb...)
	}
}

// Drop forgets the frames taken from frame from on (decode.Keeper): the decode starts again,
// failed, or came upon damage or frames not known sound yet after them.
func (k *passKeeper) Drop(from int) {
	n, _ := slices.BinarySearch(k.units, from)
	k.units, k.frames = k.units[:n], k.frames[:n*k.fb]
}
