package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/placement"
)

func copyCommand() *command {
	var every time.Duration
	var sh shareFlags
	var estimate bool
	return &command{
		summary: "make a mount's training copy now, every video decoded whole",
		usage:   "MNT [--estimate] [--every DURATION] [--nodes N --node I | --hosts H1,H2,... [--host H]] [--weigh samples|videos] [--seed S]",
		help: `Asks the mount at MNT (mounted with --cache-dir and --cache-keep copy) to decode every
video whole, once, into its training copy, and shows the progress until the copy holds them all:
videos done, frames kept, the rate, the time left. Run it on a node waiting for its job, so that
training starts with every clip served from the copy; Ctrl-C stops watching, not the filling,
which goes on while the mount serves.

The mount fills on low-priority threads (as many as its --workers) beside what its readers ask for:
a mount that serves a trainer meanwhile decodes the trainer's samples first, and the copy fills
in the time left over. A video that cannot be decoded whole is left to its samples, which fail
as they would. The copy lives under --cache-dir and is kept across mounts of the same videos at
the same --size, --resize, --decode and --fps (the clips may differ).

On a job of several nodes, each with its own mount, that trains with
PlanSampler(placement="node" or "host"), each node reads only its share of the videos, and fills
only that: --nodes N --node I for placement="node" (I: this node's number), --hosts H1,H2,...
for placement="host" (every node's host name; this one's is --host, by default this machine's).
Give the sampler's seed (--seed) and what balances the nodes (--weigh: samples for clips="all",
videos for clips="random" or "uniform"). The rule is in docs/usage.md ("Many nodes").

--estimate decodes nothing: it says what the whole copy would take (every frame the samples
use, at what a frame takes with the mount's codec: measured on a few samples when it mounted, or
on the frames it wrote), how much of it the mount's bound holds, and the --cache-disk that would
hold it all. A copy that does not fit keeps a stable set of the videos, those it took first, and
decodes the rest as they are read (docs/usage.md, "How large the copy is").`,
		flags: func(fs *pflag.FlagSet) {
			fs.DurationVar(&every, "every", 2*time.Second, "how often to print the progress")
			fs.BoolVar(&estimate, "estimate", false, "say how large the whole copy is and how much of it fits, and fill nothing")
			fs.IntVar(&sh.nodes, "nodes", 0, "fill only one node's share of the videos, of this many nodes (PlanSampler(placement=\"node\"))")
			fs.IntVar(&sh.node, "node", -1, "with --nodes: this node's number, 0 to N-1 (torchrun's GROUP_RANK, Slurm's SLURM_NODEID)")
			fs.StringSliceVar(&sh.hosts, "hosts", nil, "fill only one node's share of the videos, the nodes known by these host names (PlanSampler(placement=\"host\"))")
			fs.StringVar(&sh.host, "host", "", "with --hosts: this node's host name (default: this machine's)")
			fs.Uint64Var(&sh.seed, "seed", 0, "with --nodes or --hosts: the sampler's seed")
			fs.StringVar(&sh.weigh, "weigh", "", "with --nodes or --hosts: what balances the nodes, as the sampler's clips: samples (clips=\"all\") or videos (\"random\", \"uniform\")")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want the mount point"}
			}
			if every <= 0 {
				return usageError{"--every wants a positive duration, e.g. 2s"}
			}
			req, err := sh.request()
			if err != nil {
				return err
			}
			if estimate {
				return runEstimate(e, args[0])
			}
			return runCopy(ctx, e, args[0], every, req)
		},
	}
}

// shareFlags are vidfs copy's --nodes, --node, --hosts, --host, --seed and --weigh.
type shareFlags struct {
	nodes, node int
	hosts       []string
	host        string
	seed        uint64
	weigh       string
}

// request is what vidfs copy writes to .vidfs/fill: "all", or a node's share: "share SEED
// WEIGH NODE NODE1 NODE2 ...".
func (sh shareFlags) request() (string, error) {
	if sh.nodes == 0 && sh.hosts == nil {
		if sh.node >= 0 || sh.host != "" || sh.weigh != "" {
			return "", usageError{"--node, --host and --weigh go with --nodes N or --hosts H1,H2,... (the job's nodes)"}
		}
		return "all", nil
	}
	var me string
	var names []string
	switch {
	case sh.nodes != 0 && sh.hosts != nil:
		return "", usageError{"--nodes (placement=\"node\") or --hosts (placement=\"host\"), not both"}
	case sh.nodes < 0 || sh.nodes > placement.MaxNodes:
		return "", usageError{fmt.Sprintf("--nodes %d: want the job's number of nodes, 1 to %d", sh.nodes, placement.MaxNodes)}
	case sh.nodes > 0 && (sh.node < 0 || sh.node >= sh.nodes):
		return "", usageError{fmt.Sprintf("--nodes %d wants --node I, this node's number, 0 to %d", sh.nodes, sh.nodes-1)}
	case sh.nodes > 0:
		me, names = strconv.Itoa(sh.node), placement.Numbered(sh.nodes)
	default:
		me = sh.host
		if me == "" {
			h, err := os.Hostname()
			if err != nil {
				return "", fmt.Errorf("this machine's host name, for --hosts: %w (give --host)", err)
			}
			me = h
		}
		names = sh.hosts
		for _, h := range names {
			if h == "" || strings.ContainsAny(h, " \t\n") {
				return "", usageError{fmt.Sprintf("--hosts: %q is not a host name", h)}
			}
		}
		for i, h := range names {
			if slices.Contains(names[:i], h) {
				return "", usageError{fmt.Sprintf("--hosts: %s is listed twice", h)}
			}
		}
		if !slices.Contains(names, me) {
			return "", usageError{fmt.Sprintf("--hosts %s does not hold this node's host name %q (give --host)", strings.Join(names, ","), me)}
		}
	}
	if sh.weigh != "samples" && sh.weigh != "videos" {
		return "", usageError{fmt.Sprintf("--nodes and --hosts want --weigh samples (PlanSampler clips=\"all\") or videos (clips=\"random\" or \"uniform\"), not %q", sh.weigh)}
	}
	return fmt.Sprintf("share %d %s %s %s", sh.seed, sh.weigh, me, strings.Join(names, " ")), nil
}

func runCopy(ctx context.Context, e *env, mnt string, every time.Duration, req string) error {
	st, err := readStats(mnt)
	if err != nil {
		return err
	}
	if st.Copy == nil {
		return fmt.Errorf("%s keeps no training copy: mount it with --cache-dir DIR --cache-keep copy", mnt)
	}
	if err := os.WriteFile(filepath.Join(mnt, ".vidfs", "fill"), []byte(req+"\n"), 0o200); err != nil {
		return fmt.Errorf("asking %s to fill its copy: %w", mnt, err)
	}
	start, first := time.Now(), st.Copy.Complete
	if st, err = readStats(mnt); err == nil && st.Copy.Share != nil {
		first = st.Copy.Share.Whole
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		st, err := readStats(mnt)
		if err != nil {
			return err
		}
		c := st.Copy
		whole, want, of := c.Complete, c.VideosWithSamples, ""
		if sh := c.Share; sh != nil {
			whole, want, of = sh.Whole, sh.Videos, fmt.Sprintf(" of node %s's share (%d nodes)", sh.Node, sh.Nodes)
		}
		line := copyProgress(c, whole, want, first, time.Since(start))
		fmt.Fprintln(e.stderr, line)
		if c.FillQueued == 0 && c.Filling == 0 && c.Backlog == 0 {
			fmt.Fprintf(e.stdout, "training copy: %d of %d videos%s whole, %d frames, %s in %s%s\n", whole, want, of,
				c.Frames, formatBytes(c.UsedBytes), time.Since(start).Round(time.Second), noSamples(c))
			if whole < want {
				return fmt.Errorf("%d videos%s are not whole in the copy: evicted or skipped for lack of room (--cache-disk; stats: copy evicted, skipped), or not decoded whole, damaged (the mount's log says why)", want-whole, of)
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

// runEstimate prints what the mount at mnt says of its whole copy's size, and fills nothing.
func runEstimate(e *env, mnt string) error {
	st, err := readStats(mnt)
	if err != nil {
		return err
	}
	c := st.Copy
	if c == nil {
		return fmt.Errorf("%s keeps no training copy: mount it with --cache-dir DIR --cache-keep copy", mnt)
	}
	fmt.Fprintln(e.stdout, copySize(c))
	return nil
}

// copySize says how large the whole copy is, estimated, and how much of it the bound holds.
func copySize(c *wire.CopyStats) string {
	how := "a frame's size measured"
	if c.EstimateAssumed {
		how = "a frame's size assumed, the codec's typical ratio: nothing measured yet"
	}
	line := fmt.Sprintf("the whole copy: about %s (%s, %s); the bound, %s, holds %.0f %% of it",
		formatBytes(c.EstimatedBytes), c.Codec, how, formatBytes(c.CapacityBytes), 100*c.Fits)
	if c.Fits < 1 {
		line += fmt.Sprintf(": a stable set of the videos, the rest decoded as read (--cache-disk %s would hold it all; %d videos refused room so far)",
			formatBytes(c.EstimatedBytes+c.EstimatedBytes/20), c.Refused)
	}
	if c.KeepFreeBytes > 0 {
		line += fmt.Sprintf("; the filesystem's free space less %s kept free", formatBytes(c.KeepFreeBytes))
	}
	return line
}

// noSamples says how many videos of the layout yield no sample (too short for one), which the
// copy does not hold.
func noSamples(c *wire.CopyStats) string {
	if n := c.LayoutVideos - c.VideosWithSamples; n > 0 {
		return fmt.Sprintf(" (%d more too short for a sample)", n)
	}
	return ""
}

// copyProgress is one line of vidfs copy's progress: whole of want videos, first of them whole
// when it began.
func copyProgress(c *wire.CopyStats, whole, want, first int, took time.Duration) string {
	done := whole - first
	left := "-"
	if done > 0 {
		rest := want - whole
		left = (time.Duration(float64(took) / float64(done) * float64(rest))).Round(time.Second).String()
	}
	return fmt.Sprintf("copy: %d/%d videos whole, %d being decoded, %d queued, %d frames, %.0f frames/s, %s on disk, %s left",
		whole, want, c.Filling, c.FillQueued, c.Frames, c.FramesPerSecond, formatBytes(c.UsedBytes), left)
}
