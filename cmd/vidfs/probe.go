package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/decode"
)

func probeCommand() *command {
	var (
		frames bool
		fps    rateValue
		s3     s3Options
	)
	return &command{
		summary: "print each video's probe table as JSON",
		usage:   "PATH|s3://BUCKET/KEY... [--frames] [--fps F]",
		help: `Reads each video's container once (no decoding) and prints what vidfs knows of it, one
JSON object per file: codec, size, rotation, time base, frame rate, exact frame count, how
frames are timed, and where the keyframes are. A file that cannot be read is reported on
stderr with the reason, and makes the exit status 1.

With --fps F, each object also has "at_fps": the video's length in frames at F (how many frames a
mount with --fps F counts), whether frames are timed by their timestamps or by the average frame
rate, and with --frames, which frame is shown at each instant.`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&frames, "frames", false, "also print every frame's presentation timestamp (\"pts\")")
			fs.Var(&fps, "fps", "also say how the video counts at this frame rate (\"at_fps\"), as --fps of mount does")
			s3.register(fs)
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) == 0 {
				return usageError{"no video given"}
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			failed := 0
			log, _ := newLogger(e.stderr, "error")
			prober := probeFrom{o: s3, log: log}
			defer prober.close()
			for _, path := range args {
				if err := ctx.Err(); err != nil {
					return err
				}
				info, err := prober.probe(ctx, path)
				if err != nil {
					fmt.Fprintf(e.stderr, "vidfs probe: %v\n", err)
					failed++
					continue
				}
				var at *atFPS
				if fps.r.Valid() {
					at = newAtFPS(info, fps.r, frames)
				}
				if !frames {
					info.PTS = nil
				}
				if err := enc.Encode(probeReport{info, at}); err != nil {
					return err
				}
			}
			if failed > 0 {
				return errors.New(plural(failed, "file") + " could not be probed")
			}
			return nil
		},
	}
}

// probeReport is what vidfs probe prints of a video: its probe table, and with --fps, how it
// counts at that rate.
type probeReport struct {
	*decode.Info
	AtFPS *atFPS `json:"at_fps,omitempty"`
}

// atFPS is how a video counts at a target frame rate.
type atFPS struct {
	FPS    string `json:"fps"`
	Frames int    `json:"frames"` // instants 1/FPS apart before the video's end
	// TimedBy is "timestamps" or "average frame rate"; Note says why, for the latter.
	TimedBy string `json:"timed_by"`
	Note    string `json:"note,omitempty"`
	// Shown (with --frames) is the video frame shown at each instant.
	Shown []int `json:"shown,omitempty"`
}

func newAtFPS(info *decode.Info, fps decode.Rational, frames bool) *atFPS {
	a := &atFPS{FPS: fps.FPSString(), Frames: info.FramesAt(fps), TimedBy: "timestamps", Note: info.TimingNote()}
	if a.Note != "" {
		a.TimedBy = "average frame rate"
	}
	if frames {
		a.Shown = make([]int, a.Frames)
		for m := range a.Shown {
			a.Shown[m] = info.FrameAt(m, fps)
		}
	}
	return a
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
