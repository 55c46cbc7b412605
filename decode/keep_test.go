package decode_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/vidfs/vidfs/decode"
)

// keeper is a decode.Keeper that wants every frame in want and keeps copies of what it is given.
type keeper struct {
	want      map[int]bool
	kept      map[int][]byte
	order     []int
	discarded int
}

func (k *keeper) Want(i int) bool { return k.want[i] }
func (k *keeper) Keep(i int, rgb []byte) {
	k.kept[i] = bytes.Clone(rgb)
	k.order = append(k.order, i)
}
func (k *keeper) Discard() {
	k.kept = map[int][]byte{}
	k.order = nil
	k.discarded++
}

// TestKeeper: a clip's decode gives its Keeper the frames it passes through that the Keeper
// wants, in order, each byte-identical to decoding that frame as a clip of its own, and never
// one of the clip's own; frames it does not want are not given.
func TestKeeper(t *testing.T) {
	for _, name := range []string{"h264_gop16.mp4", "h264_gop250.mp4", "hevc.mkv", "vp9.webm", "av1.mp4", "mpeg4.avi", "h264_bframes.avi"} {
		t.Run(name, func(t *testing.T) {
			info := probe(t, name)
			pool := newPool(t, decode.PoolOptions{Concurrency: 1})
			defer pool.Close()
			o := decode.Output{Width: 48, Height: 32}
			fb := o.FrameBytes()
			start := min(info.Frames-4, 37)
			k := &keeper{want: map[int]bool{}, kept: map[int][]byte{}}
			for i := 0; i < info.Frames; i += 2 { // the even frames, as a grid of stride 2 uses
				k.want[i] = true
			}
			c := decode.Clip{Start: start, Frames: 2, Stride: 2, Keep: k}
			buf := make([]byte, 2*fb)
			if err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
				t.Fatal(err)
			}
			kf := info.KeyframeAtOrBefore(start)
			if len(k.kept) == 0 && start-kf > 2 {
				t.Fatalf("a clip at %d, its keyframe at %d: nothing kept", start, kf)
			}
			for j, i := range k.order {
				if !k.want[i] || i == start || i == start+2 || (j > 0 && i <= k.order[j-1]) {
					t.Errorf("frame %d kept (order %v)", i, k.order)
				}
				one := make([]byte, fb)
				if err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: i, Frames: 1, Stride: 1}, o, one); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(one, k.kept[i]) {
					t.Errorf("frame %d kept on the way to %d differs from decoding it alone", i, start)
				}
			}
			t.Logf("clip at %d (keyframe %d): kept %v", start, kf, k.order)
		})
	}
}

// TestKeeperDamage: on a video with damaged bytes, a frame that does not decode alone (damaged,
// or predicted from damage) is never given to a Keeper, and what is given is what the frame
// decodes to alone.
func TestKeeperDamage(t *testing.T) {
	info := probe(t, "corrupt.mp4")
	pool := newPool(t, decode.PoolOptions{Concurrency: 1})
	defer pool.Close()
	o := stretchOutput(info)
	fb := o.FrameBytes()
	alone := map[int][]byte{} // each frame decoded as a clip of its own; nil: it fails
	for i := range info.Frames {
		one := make([]byte, fb)
		if err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: i, Frames: 1, Stride: 1}, o, one); err == nil {
			alone[i] = one
		}
	}
	if len(alone) == info.Frames {
		t.Fatal("every frame decodes alone: no damage to test")
	}
	kept := 0
	for s := 0; s+1 < info.Frames; s += 3 {
		k := &keeper{want: map[int]bool{}, kept: map[int][]byte{}}
		for i := range info.Frames {
			k.want[i] = true
		}
		buf := make([]byte, fb)
		pool.DecodeClip(context.Background(), info, decode.Clip{Start: s, Frames: 1, Stride: 1, Keep: k}, o, buf)
		for _, i := range k.order {
			kept++
			switch {
			case alone[i] == nil:
				t.Errorf("frame %d, which does not decode alone, kept on the way to %d", i, s)
			case !bytes.Equal(alone[i], k.kept[i]):
				t.Errorf("frame %d kept on the way to %d differs from decoding it alone", i, s)
			}
		}
	}
	if kept == 0 {
		t.Fatal("nothing kept")
	}
}
