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
	var frames bool
	return &command{
		summary: "print each video's probe table as JSON",
		usage:   "PATH... [--frames]",
		help: `Reads each video's container once (no decoding) and prints what vidfs knows of it, one
JSON object per file: codec, size, rotation, time base, frame rate, exact frame count, how
frames are timed, and where the keyframes are. A file that cannot be read is reported on
stderr with the reason, and makes the exit status 1.`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&frames, "frames", false, "also print every frame's presentation timestamp (\"pts\")")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) == 0 {
				return usageError{"no video given"}
			}
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			failed := 0
			for _, path := range args {
				if err := ctx.Err(); err != nil {
					return err
				}
				info, err := decode.Probe(path)
				if err != nil {
					fmt.Fprintf(e.stderr, "vidfs probe: %v\n", err)
					failed++
					continue
				}
				if !frames {
					info.PTS = nil
				}
				if err := enc.Encode(info); err != nil {
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

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
