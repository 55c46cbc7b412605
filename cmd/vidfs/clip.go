package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/s3src"
	"github.com/vidfs/vidfs/layout"
)

func clipCommand() *command {
	var (
		start, frames, stride, threads int
		size                           = sizeValue{224, 224}
		resize                         = resizeValue{decode.Crop}
		mode                           decodeValue
		out                            string
		padEnd                         bool
		hw                             = hwValue{decode.HWAuto}
		gpus                           gpusValue
		fps                            rateValue
	)
	return &command{
		summary: "decode one clip to a raw RGB24 or .npy file",
		usage:   "PATH --start S [--frames T] [--stride K] [--fps F] [--size HxW] [--resize MODE] [--decode exact|fast] -o FILE",
		help: `Decodes frames S, S+K, ..., S+(T-1)K of the video (frame indices in presentation order,
counted from 0, as ` + "`vidfs probe`" + ` counts them), turns them upright, fits them to H x W and
writes them as uint8 RGB: T*H*W*3 bytes, shape (T, H, W, 3). This is exactly what a sample of
` + "`vidfs mount`" + ` with the same clip spec holds. FILE ending in .npy gets a NumPy header;
- writes raw bytes to stdout.

With --fps F, S and K count frames at F instead: frame j is the frame shown (S + j*K)/F seconds
after the video's first frame, as a sample of ` + "`vidfs mount --fps F`" + ` starting at S holds.

Resize modes: crop (scale the short side to fit, cut the long side's overflow evenly: the usual
training transform), stretch (scale each side to fit), pad (fit the long side, black bars).`,
		flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&start, "start", 0, "first frame index")
			fs.IntVarP(&frames, "frames", "t", 16, "frames in the clip (T)")
			fs.IntVar(&stride, "stride", 1, "distance between the clip's frames")
			fs.Var(&fps, "fps", fpsHelp)
			fs.Var(&size, "size", "output size, height x width")
			fs.Var(&resize, "resize", "how frames are fitted: crop, stretch or pad")
			fs.Var(&mode, "decode", "exact (bit-exact) or fast (not bit-exact: skips H.264/HEVC deblocking, area scaling)")
			fs.BoolVar(&padEnd, "pad-end", false, "repeat the last frame where the clip runs past the end of the video")
			fs.StringVarP(&out, "output", "o", "", "output file (.npy: NumPy array; -: stdout); required")
			fs.IntVar(&threads, "threads", 0, "decoder threads on the CPU (0: automatic)")
			fs.Var(&hw, "hwaccel", "decode on an NVIDIA GPU (NVDEC) where the codec allows: auto, cuda (require one) or none")
			fs.Var(&gpus, "gpus", "the NVIDIA GPUs opened, as vidfs mount takes them; the clip decodes on the first")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want exactly one video"}
			}
			if out == "" {
				return usageError{"no output file: give -o FILE (or -o - for stdout)"}
			}
			if s3src.IsURL(args[0]) {
				return fmt.Errorf("%s: clip decodes a local file; copy the object first (aws s3 cp %s .)", args[0], args[0])
			}
			began := time.Now()
			info, err := decode.Probe(args[0])
			if err != nil {
				return err
			}
			o := decode.Output{Width: size.w, Height: size.h, Resize: resize.r, Fast: mode.fast}
			c := decode.Clip{Start: start, Frames: frames, Stride: stride, PadEnd: padEnd, FPS: fps.r}
			buf := make([]byte, frames*o.FrameBytes())
			where, err := decodeOne(ctx, e, info, c, o, buf, threads, hw.h, gpus.gpus)
			if err != nil {
				return err
			}
			if err := writeClip(e.stdout, out, buf, frames, o); err != nil {
				return err
			}
			if out != "-" {
				at := ""
				if fps.r.Valid() {
					at = " at " + fps.r.FPSString() + " fps"
					if note := info.TimingNote(); note != "" {
						at += " (" + note + ")"
					}
				}
				fmt.Fprintf(e.stderr, "wrote %s: %d frames from %d (stride %d%s) of %s, %s (%d bytes), decoded on the %s in %.0f ms\n",
					out, frames, start, stride, at, args[0], shapeString(frames, o), len(buf), where, time.Since(began).Seconds()*1000)
			}
			return nil
		},
	}
}

// decodeOne decodes one clip on the CPU, or through a pool on the GPU when hw asks for it and
// there is one; it says where.
func decodeOne(ctx context.Context, e *env, info *decode.Info, c decode.Clip, o decode.Output, buf []byte, threads int, hw decode.HWAccel, gpus []int) (string, error) {
	if hw == decode.HWNone {
		_, err := decode.DecodeClip(ctx, info, c, o, buf, threads)
		return "CPU", err
	}
	log, _ := newLogger(e.stderr, "warn")
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: 1, Threads: max(threads, 1), HWAccel: hw, GPUs: gpus, Log: log})
	if err != nil {
		return "", err
	}
	defer pool.Close()
	res, err := pool.DecodeClip(ctx, info, c, o, buf)
	if err != nil {
		return "", err
	}
	switch res.Path {
	case decode.PathGPU:
		return "GPU (NVDEC)", nil
	case decode.PathMixed:
		return "GPU (NVDEC), then the CPU", nil
	}
	return "CPU", nil
}

func shapeString(frames int, o decode.Output) string {
	return fmt.Sprintf("(%d, %d, %d, 3) uint8 %s", frames, o.Height, o.Width, o.Resize)
}

// writeClip writes the clip to path (- for stdout), with a .npy header when path ends in .npy.
func writeClip(stdout io.Writer, path string, buf []byte, frames int, o decode.Output) error {
	var w io.Writer = stdout
	var f *os.File
	if path != "-" {
		var err error
		if f, err = os.Create(path); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	if strings.HasSuffix(strings.ToLower(path), ".npy") {
		bw.Write(layout.Spec{Frames: frames, Height: o.Height, Width: o.Width}.NpyHeader(64))
	}
	bw.Write(buf)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if f != nil {
		return f.Close()
	}
	return nil
}
