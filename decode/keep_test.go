package decode_test

import (
	"bytes"
	"context"
	"errors"
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
func (k *keeper) Drop(from int) {
	n := 0
	for _, i := range k.order {
		if i < from {
			k.order[n] = i
			n++
		} else {
			delete(k.kept, i)
		}
	}
	if n < len(k.order) {
		k.discarded++
	}
	k.order = k.order[:n]
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
			if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
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
				if _, err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: i, Frames: 1, Stride: 1}, o, one); err != nil {
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
		if _, err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: i, Frames: 1, Stride: 1}, o, one); err == nil {
			alone[i] = one
		}
	}
	if len(alone) == info.Frames {
		t.Fatal("every frame decodes alone: no damage to test")
	}
	kept := 0
	// Clips of two frames 17 apart: what they pass between them is kept once the frames after
	// it (decode.Info.RefWindow) have come out.
	for s := 0; s+17 < info.Frames; s += 3 {
		k := &keeper{want: map[int]bool{}, kept: map[int][]byte{}}
		for i := range info.Frames {
			k.want[i] = true
		}
		buf := make([]byte, 2*fb)
		pool.DecodeClip(context.Background(), info, decode.Clip{Start: s, Frames: 2, Stride: 17, Keep: k}, o, buf)
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

// TestStrictDamage: a Strict clip fails at damage decoded on the way to its frames, where the
// same clip decoded as usual succeeds (its own frames lie in sound groups of pictures); and
// decoding a damaged video in order in Strict clips, as a store of frames does, gives only frames
// byte-identical to decoding each alone, up to the damage, and the clips' path, the CPU.
func TestStrictDamage(t *testing.T) {
	info := probe(t, "corrupt.mp4")
	pool := newPool(t, decode.PoolOptions{Concurrency: 1})
	defer pool.Close()
	o := stretchOutput(info)
	fb := o.FrameBytes()
	alone := map[int][]byte{} // each frame decoded as a clip of its own; nil: it fails
	for i := range info.Frames {
		one := make([]byte, fb)
		if _, err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: i, Frames: 1, Stride: 1}, o, one); err == nil {
			alone[i] = one
		}
	}
	firstBad := -1
	for i := range info.Frames {
		if alone[i] == nil {
			firstBad = i
			break
		}
	}
	if firstBad < 0 {
		t.Fatal("every frame decodes alone: no damage to test")
	}
	// A clip of two frames: one before the damaged group, one after the next keyframe.
	g := info.KeyframeAtOrBefore(firstBad)
	if g == 0 || g+1 >= len(info.Keyframes) {
		t.Fatalf("damage at frame %d, in group %d of %d: want it between keyframes", firstBad, g, len(info.Keyframes))
	}
	a, b := info.Keyframes[g].Frame-1, info.Keyframes[g+1].Frame+1
	if alone[a] == nil || alone[b] == nil {
		t.Fatalf("frames %d and %d should decode alone", a, b)
	}
	c := decode.Clip{Start: a, Frames: 2, Stride: b - a}
	buf := make([]byte, 2*fb)
	if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
		t.Fatalf("clip %d, %d decoded as usual: %v", a, b, err)
	}
	// Its Keeper is given no frame decoded after the damage, in the damaged group or after it.
	k := &keeper{want: map[int]bool{}, kept: map[int][]byte{}}
	for i := range info.Frames {
		k.want[i] = true
	}
	c.Keep = k
	if _, err := pool.DecodeClip(context.Background(), info, c, o, buf); err != nil {
		t.Fatalf("clip %d, %d with a keeper: %v", a, b, err)
	}
	for _, i := range k.order {
		if i >= firstBad {
			t.Errorf("frame %d kept, after the damage at %d", i, firstBad)
		}
	}
	c.Keep = nil
	c.Strict = true
	_, err := pool.DecodeClip(context.Background(), info, c, o, buf)
	if !errors.Is(err, decode.ErrCorrupt) {
		t.Fatalf("strict clip %d, %d past damage at %d: got %v, want ErrCorrupt", a, b, firstBad, err)
	}
	// The video in order, 8 frames a clip, stride 1, until a clip fails: what came before is
	// exactly each frame alone.
	good := 0
	for start := 0; start < info.Frames; start += 8 {
		n := min(8, info.Frames-start)
		buf := make([]byte, n*fb)
		res, err := pool.DecodeClip(context.Background(), info, decode.Clip{Start: start, Frames: n, Stride: 1, Strict: true}, o, buf)
		if err != nil {
			if start+n <= firstBad {
				t.Fatalf("clip %d-%d, before the damage at %d, failed: %v", start, start+n-1, firstBad, err)
			}
			break
		}
		if res.Path != decode.PathCPU {
			t.Errorf("clip at %d decoded on %v, want the CPU", start, res.Path)
		}
		for j := range n {
			if !bytes.Equal(buf[j*fb:(j+1)*fb], alone[start+j]) {
				t.Errorf("frame %d of the video in order differs from decoding it alone", start+j)
			}
			good++
		}
	}
	if good == 0 {
		t.Fatal("nothing decoded in order")
	}
	t.Logf("damage at %d; %d frames decoded in order before the first strict clip failed", firstBad, good)
}

// TestKeeperSameOutcome: a Keeper does not change what a clip's decode gives, on damaged and
// truncated videos too: every clip, decoded with a Keeper that wants every frame and without
// one (each in a pool of its own, in the same order), fails alike or gives the same bytes.
func TestKeeperSameOutcome(t *testing.T) {
	for _, name := range []string{"corrupt.mp4", "truncated.mp4"} {
		t.Run(name, func(t *testing.T) {
			info := probe(t, name)
			with, without := newPool(t, decode.PoolOptions{Concurrency: 1}), newPool(t, decode.PoolOptions{Concurrency: 1})
			defer with.Close()
			defer without.Close()
			o := stretchOutput(info)
			for _, stride := range []int{1, 3} {
				for s := 0; s+2*stride < info.Frames; s += 2 {
					c := decode.Clip{Start: s, Frames: 3, Stride: stride}
					a, b := make([]byte, 3*o.FrameBytes()), make([]byte, 3*o.FrameBytes())
					_, errB := without.DecodeClip(context.Background(), info, c, o, b)
					k := &keeper{want: map[int]bool{}, kept: map[int][]byte{}}
					for i := range info.Frames {
						k.want[i] = true
					}
					c.Keep = k
					_, errA := with.DecodeClip(context.Background(), info, c, o, a)
					switch {
					case (errA == nil) != (errB == nil):
						t.Errorf("clip %d, stride %d: with a keeper %v, without %v", s, stride, errA, errB)
					case errA == nil && !bytes.Equal(a, b):
						t.Errorf("clip %d, stride %d: with a keeper other bytes", s, stride)
					}
				}
			}
		})
	}
}
