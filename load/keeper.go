package load

// Keeping, for the training copy, the frames a sample's decode passes through.

import (
	"slices"

	"github.com/vidfs/vidfs/decode"
)

// passKeeper takes, for the training copy, frames a sample's decode passes through that other
// samples of its video use (decode.Keeper, by the rule of decode.KeepSpec): at most a sample's
// worth, so that keeping them costs the first epoch a bounded part of a decode. Spec.Need has a
// bit per frame of the video that some sample uses.
type passKeeper struct {
	decode.FrameKeeper
	needed int  // how many bits of Spec.Need are set
	own    bool // counted frames of the video's own numbering (no --fps): decode.Clip.Keep applies
}

// keeper returns a passKeeper for a decode of a sample of video v, from the pool.
func (t *trainingCopy) keeper(l *Loader, v int) *passKeeper {
	k, ok := t.keepers.Get().(*passKeeper)
	if !ok {
		k = &passKeeper{}
	}
	s := &k.Spec
	s.Max, s.FrameBytes = l.lay.Spec.Frames, l.out.FrameBytes()
	if t.mode == FillAuto {
		// Under auto the copy takes each sample's own frames, and whole videos within the
		// budget: converting the frames a decode passes would cost each clip's decode more than
		// the budget reckons it at, and the whole videos come to hold them anyway. So no frame
		// is wanted, and what the copy needs of the video is counted once a video length.
		s.Max, s.Need, k.needed = 0, s.Need[:0], t.neededOf(l, v)
	} else {
		s.Need, k.needed = l.needBits(v, s.Need)
		if !t.admit(v) {
			s.Max = 0 // no room for the video: no frame is converted for the copy
		}
	}
	k.Kept, k.Frames = k.Kept[:0], slices.Grow(k.Frames[:0], s.Max*s.FrameBytes) // grown once, not by doubling
	k.own = !l.lay.Spec.FPS.Set()
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
