package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/internal/wire"
)

func copyCommand() *command {
	var every time.Duration
	return &command{
		summary: "make a mount's training copy now, every video decoded whole",
		usage:   "MNT [--every DURATION]",
		help: `Asks the mount at MNT (mounted with --cache-dir and --cache-keep frames) to decode every
video whole, once, into its training copy, and shows the progress until the copy holds them all:
videos done, frames kept, the rate, the time left. Run it on a node waiting for its job, so that
training starts with every clip served from the copy; Ctrl-C stops watching, not the filling,
which goes on while the mount serves.

The mount fills on low-priority threads (as many as its --workers) beside what its readers ask for:
a mount that serves a trainer meanwhile decodes the trainer's samples first, and the copy fills
in the time left over. A video that cannot be decoded whole is left to its samples, which fail
as they would. The copy lives under --cache-dir and is kept across mounts of the same videos at
the same --size, --resize, --decode and --fps (the clips may differ).`,
		flags: func(fs *pflag.FlagSet) {
			fs.DurationVar(&every, "every", 2*time.Second, "how often to print the progress")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want the mount point"}
			}
			if every <= 0 {
				return usageError{"--every wants a positive duration, e.g. 2s"}
			}
			return runCopy(ctx, e, args[0], every)
		},
	}
}

func runCopy(ctx context.Context, e *env, mnt string, every time.Duration) error {
	st, err := readStats(mnt)
	if err != nil {
		return err
	}
	if st.Copy == nil {
		return fmt.Errorf("%s keeps no training copy: mount it with --cache-dir DIR --cache-keep frames", mnt)
	}
	if err := os.WriteFile(filepath.Join(mnt, ".vidfs", "fill"), []byte("all\n"), 0o200); err != nil {
		return fmt.Errorf("asking %s to fill its copy: %w", mnt, err)
	}
	start, first := time.Now(), st.Copy.Complete
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		st, err := readStats(mnt)
		if err != nil {
			return err
		}
		c := st.Copy
		line := copyProgress(c, first, time.Since(start))
		fmt.Fprintln(e.stderr, line)
		if c.FillQueued == 0 && c.Filling == 0 && c.Backlog == 0 {
			fmt.Fprintf(e.stdout, "training copy: %d of %d videos whole, %d frames, %s in %s%s\n", c.Complete, c.VideosWithSamples,
				c.Frames, formatBytes(c.UsedBytes), time.Since(start).Round(time.Second), noSamples(c))
			if c.Complete < c.VideosWithSamples {
				return fmt.Errorf("%d videos are not whole in the copy: evicted or skipped for lack of room (--cache-disk; stats: copy evicted, skipped), or not decoded whole, damaged (the mount's log says why)", c.VideosWithSamples-c.Complete)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// noSamples says how many videos of the layout yield no sample (too short for one), which the
// copy does not hold.
func noSamples(c *wire.CopyStats) string {
	if n := c.LayoutVideos - c.VideosWithSamples; n > 0 {
		return fmt.Sprintf(" (%d more too short for a sample)", n)
	}
	return ""
}

// copyProgress is one line of vidfs copy's progress.
func copyProgress(c *wire.CopyStats, first int, took time.Duration) string {
	done := c.Complete - first
	left := "-"
	if done > 0 {
		rest := c.VideosWithSamples - c.Complete
		left = (time.Duration(float64(took) / float64(done) * float64(rest))).Round(time.Second).String()
	}
	return fmt.Sprintf("copy: %d/%d videos whole, %d being decoded, %d queued, %d frames, %.0f frames/s, %s on disk, %s left",
		c.Complete, c.VideosWithSamples, c.Filling, c.FillQueued, c.Frames, c.FramesPerSecond, formatBytes(c.UsedBytes), left)
}
