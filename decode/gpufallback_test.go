package decode

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"log/slog"
	"syscall"
	"testing"

	"github.com/vidfs/vidfs/internal/testvideo"
)

// standInGPUPool is a pool with a stand-in GPU (slots, no device) holding two idle stand-in GPU
// decoders of the video at path; its GPU decoders' clips go to gpuDecode, its CPU decoders' are
// decoded for real.
func standInGPUPool(t *testing.T, info *Info, gpuDecode func(c Clip) (clipWork, error)) (*Pool, *int) {
	t.Helper()
	g := &gpu{slots: make(chan struct{}, 2)}
	p := &Pool{opts: PoolOptions{Concurrency: 1, Idle: 2, Threads: 1, GPUDecoders: 2, Log: slog.New(slog.DiscardHandler)}, gpus: []*gpu{g},
		slots: make(chan struct{}, 1), idle: list.New(), cpuOnly: map[string]bool{}, logged: map[string]bool{}, states: map[string]*videoState{}}
	gpuDecodes := 0
	p.decodeOn = func(v *video, ctx context.Context, c Clip, o Output, dst []byte) (clipWork, error) {
		if v.g != nil {
			gpuDecodes++
			return gpuDecode(c)
		}
		return v.decodeClip(ctx, c, o, dst)
	}
	st := newVideoState(info, p.opts.Log)
	p.states[info.Path] = st
	for range 2 {
		if !g.take() {
			t.Fatal("no GPU slot for a stand-in decoder")
		}
		st.users++
		p.put(&video{info: info, state: st, g: g, prevLast: -1})
	}
	t.Cleanup(func() {
		p.gpus = nil // a stand-in: no device to free
		p.Close()
	})
	return p, &gpuDecodes
}

// TestGPUFallbackDecodesOnCPU: when NVDEC fails on a clip, the clip is decoded again on the CPU,
// not handed to another idle GPU decoder of the same video (which would fail the same way and
// fail the sample for good), and the video decodes on the CPU from then on.
func TestGPUFallbackDecodesOnCPU(t *testing.T) {
	for _, kind := range []error{ErrInternal, ErrCorrupt} {
		t.Run(kind.Error(), func(t *testing.T) {
			info, err := Probe(testvideo.Path("h264_gop16.mp4"))
			if err != nil {
				t.Fatal(err)
			}
			p, gpuDecodes := standInGPUPool(t, info, func(c Clip) (clipWork, error) {
				return clipWork{}, &Error{Path: info.Path, Frame: frame(c.Start), Kind: kind, Detail: "stand-in NVDEC failure"}
			})
			o := Output{Width: 32, Height: 24, Resize: Stretch}
			c := Clip{Start: 20, Frames: 4, Stride: 2}
			got, want := make([]byte, c.Frames*o.FrameBytes()), make([]byte, c.Frames*o.FrameBytes())
			if _, err := DecodeClip(context.Background(), info, c, o, want, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := p.DecodeClip(context.Background(), info, c, o, got); err != nil {
				t.Fatalf("clip after NVDEC failed on it: %v (%d GPU decodes), want it decoded on the CPU", err, *gpuDecodes)
			}
			st := p.Stats()
			if !bytes.Equal(got, want) || *gpuDecodes != 1 || st.GPUFallbacks != 1 || st.ClipsCPU != 1 || !p.cpuOnly[info.Path] {
				t.Errorf("same bytes %v, %d GPU decodes, %d fallbacks, %d CPU clips, CPU-only %v; want the CPU's bytes, 1, 1, 1, true",
					bytes.Equal(got, want), *gpuDecodes, st.GPUFallbacks, st.ClipsCPU, p.cpuOnly[info.Path])
			}
			if _, err := p.DecodeClip(context.Background(), info, c, o, got); err != nil || *gpuDecodes != 1 {
				t.Errorf("the next clip: %v after %d GPU decodes; want it on the CPU", err, *gpuDecodes)
			}
		})
	}
}

// TestGPUPathErrorStaysOnGPU: an error of the path to the file (an I/O error, the file changed)
// from a GPU decoder is no GPU failure: the clip fails with it, the video is not moved to the
// CPU, and its next clip decodes on the GPU.
func TestGPUPathErrorStaysOnGPU(t *testing.T) {
	for _, kind := range []error{ErrUnreadable, ErrChanged} {
		t.Run(kind.Error(), func(t *testing.T) {
			info, err := Probe(testvideo.Path("h264_gop16.mp4"))
			if err != nil {
				t.Fatal(err)
			}
			fail := true
			p, gpuDecodes := standInGPUPool(t, info, func(c Clip) (clipWork, error) {
				if fail {
					fail = false
					return clipWork{}, &Error{Path: info.Path, Kind: kind, Detail: "stand-in", Err: syscall.EIO}
				}
				return clipWork{Decoded: c.Frames, GPUFrames: c.Frames}, nil
			})
			o := Output{Width: 32, Height: 24, Resize: Stretch}
			c := Clip{Start: 20, Frames: 4, Stride: 2}
			dst := make([]byte, c.Frames*o.FrameBytes())
			if _, err := p.DecodeClip(context.Background(), info, c, o, dst); !errors.Is(err, kind) {
				t.Fatalf("clip whose GPU decoder met %v: %v; want that error", kind, err)
			}
			if st := p.Stats(); *gpuDecodes != 1 || st.GPUFallbacks != 0 || st.ClipsCPU != 0 || p.cpuOnly[info.Path] {
				t.Errorf("%d GPU decodes, %d fallbacks, %d CPU clips, CPU-only %v; want 1, 0, 0, false",
					*gpuDecodes, st.GPUFallbacks, st.ClipsCPU, p.cpuOnly[info.Path])
			}
			if _, err := p.DecodeClip(context.Background(), info, c, o, dst); err != nil {
				t.Fatal(err)
			}
			if st := p.Stats(); *gpuDecodes != 2 || st.ClipsGPU != 1 || st.ClipsCPU != 0 {
				t.Errorf("the next clip: %d GPU decodes, %d GPU clips, %d CPU clips; want it on the GPU's other idle decoder", *gpuDecodes, st.ClipsGPU, st.ClipsCPU)
			}
		})
	}
}
