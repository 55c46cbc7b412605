package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/internal/wire"
)

// readStats reads MNT/.vidfs/stats.
func readStats(mnt string) (wire.Stats, error) {
	var st wire.Stats
	err := readJSON(mnt, "stats", &st)
	return st, err
}

// readDataset reads MNT/.vidfs/layout.json.
func readDataset(mnt string) (wire.Dataset, error) {
	var l wire.Dataset
	err := readJSON(mnt, "layout.json", &l)
	return l, err
}

// readJSON decodes MNT/.vidfs/NAME into v.
func readJSON(mnt, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(mnt, ".vidfs", name))
	if err != nil {
		return fmt.Errorf("%s is not a vidfs mount (or it stopped): %w", mnt, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s/.vidfs/%s: %w", mnt, name, err)
	}
	return nil
}

func statsCommand() *command {
	var asJSON bool
	return &command{
		summary: "print what a mount is doing",
		usage:   "MNT [--json]",
		help: `Prints a snapshot of MNT/.vidfs/stats readably: cache use and hit rate, the reader's position
in the plan and how many samples are ready ahead of it, decodes in flight and done, decode
amplification, how long readers waited, read latency, and errors. --json prints the snapshot
as vidfs wrote it. ` + "`vidfs top`" + ` shows the same, live. While a mount still finds and probes its
videos (a first mount of many), MNT is not mounted yet: this prints how far it has got
(--json: pid, mountpoint and scan).`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print the raw JSON snapshot")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want the mount point"}
			}
			if asJSON {
				b, err := os.ReadFile(filepath.Join(args[0], ".vidfs", "stats"))
				if err != nil {
					if sc, ok := scanningOf(args[0]); ok {
						return json.NewEncoder(e.stdout).Encode(sc)
					}
					return fmt.Errorf("%s is not a vidfs mount (or it stopped): %w", args[0], err)
				}
				_, err = e.stdout.Write(b)
				return err
			}
			st, err := readStats(args[0])
			if err != nil {
				if sc, ok := scanningOf(args[0]); ok {
					_, err := fmt.Fprintln(e.stdout, scanningLine(sc))
					return err
				}
				return err
			}
			lay, err := readDataset(args[0])
			if err != nil {
				return err
			}
			printStats(e.stdout, args[0], lay, st)
			return nil
		},
	}
}

func pct(part, whole int64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(part)/float64(whole))
}

func printStats(w io.Writer, mnt string, lay wire.Dataset, st wire.Stats) {
	c, p, d, r := st.Cache, st.Plan, st.Decode, st.Reads
	fmt.Fprintf(w, "vidfs at %s (source %s), up %s\n", mnt, st.Source, time.Duration(st.UptimeSeconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(w, "  samples  %d of %s: (%d, %d, %d, 3) uint8, stride %d, %s\n", st.Samples, formatBytes(st.SampleBytes),
		lay.Frames, lay.Height, lay.Width, lay.Stride, lay.Resize)
	fmt.Fprintf(w, "  cache    %s: %d of %d samples held, %d ready, %d being read\n", formatBytes(c.CapacityBytes),
		c.UsedSamples, c.CapacitySamples, c.ReadySamples, c.PinnedSamples)
	fmt.Fprintf(w, "           hits %d, misses %d: hit rate %s; evicted %d (%d never read)\n", c.Hits, c.Misses,
		pct(c.Hits, c.Hits+c.Misses), c.Evicted, c.EvictedUnread)
	plan := "no plan (write the order to .vidfs/order, or one per reader to .vidfs/plans/NAME)"
	if len(st.Plans) > 0 {
		plan = fmt.Sprintf("%d plans (%d active), position %d of %d in all", len(st.Plans), p.Active, p.Position, p.Length)
	}
	fmt.Fprintf(w, "  plan     %s; %d ready ahead, %d of the next %d ready\n", plan, p.ReadyAhead, p.ReadyInWindow, p.Upcoming)
	fmt.Fprintf(w, "           reads on plan %d, off plan %d, entries skipped %d\n", p.OnPlanReads, p.OffPlanReads, p.Skipped)
	for _, e := range st.Plans {
		state := fmt.Sprintf("%.1f samples/s", e.Pace)
		if !e.Active {
			state = fmt.Sprintf("idle %s, holds no cache", time.Duration(e.IdleSeconds*float64(time.Second)).Round(time.Second))
		}
		fmt.Fprintf(w, "    %-12s position %d of %d, %s; hit rate %s, waited %.2f s; %d ready ahead\n",
			e.Name, e.Position, e.Length, state, pct(e.Hits, e.Hits+e.Misses), e.WaitSeconds, e.ReadyAhead)
	}
	cores := ""
	if st.Scan != nil && st.Scan.Cores > 0 {
		cores = fmt.Sprintf(" (of %s this process may use)", plural(st.Scan.Cores, "core"))
	}
	fmt.Fprintf(w, "  decode   %d workers%s: %d in flight, %d queued; %d clips done (%d ahead of reads, %d on a miss), %d failed (and %d that may pass: tried again); %.1f clips/s now\n",
		d.Workers, cores, d.InFlight, d.Queued, d.Clips, d.Prefetched, d.OnDemand, d.Failed, d.FailedTransient, d.ClipsPerSecond)
	fmt.Fprintf(w, "           %d queued prefetches dropped when the plan moved on\n", d.Cancelled)
	fmt.Fprintf(w, "           %.2f frames decoded per frame served (%d / %d); %d seeks, %d decoders opened\n",
		d.Amplification, d.FramesDecoded, d.FramesServed, d.Seeks, d.DecodersOpened)
	fmt.Fprintf(w, "           by decoder: NVDEC %d clips, CPU %d clips; %d videos moved to the CPU after NVDEC failed; %d GPU decoders adopted by another video\n",
		d.ByDecoder.NVDEC, d.ByDecoder.CPU, d.GPUFallbacks, d.DecodersAdopted)
	for _, g := range d.GPUs {
		fmt.Fprintf(w, "           GPU %d: %d of %d decoders open, about %s of their surfaces (estimated); %d clips on NVDEC\n",
			g.Index, g.Decoders, g.MaxDecoders, formatBytes(g.DecoderMemoryBytes), g.Clips)
	}
	if t := st.Tier; t != nil {
		fmt.Fprintf(w, "  tier     %s of %s on disk in %s: %d samples, %s each (%s: %.1fx smaller)\n", formatBytes(t.UsedBytes),
			formatBytes(t.CapacityBytes), t.Dir, t.Entries, formatBytes(int64(t.BytesPerSample)), t.Codec, t.Ratio)
		fmt.Fprintf(w, "           hits %d, misses %d: hit rate %s; %d written, %d waiting (%s), %d skipped, %d evicted, %d damaged and dropped, %d unreadable (kept)\n",
			t.Hits, t.Misses, pct(t.Hits, t.Hits+t.Misses), t.Written, t.Backlog, formatBytes(t.BacklogBytes), t.Skipped, t.Evicted, t.Corrupt, t.ReadErrors)
	}
	if c := st.Copy; c != nil {
		fmt.Fprintf(w, "  copy     %s of %s on disk in %s: %d of %d videos whole, %d partial, %d frames, %s a frame (%s: %.1fx smaller); fill %s\n",
			formatBytes(c.UsedBytes), formatBytes(c.CapacityBytes), c.Dir, c.Complete, c.VideosWithSamples, c.Partial, c.Frames,
			formatBytes(int64(c.BytesPerFrame)), c.Codec, c.Ratio, c.Fill)
		fmt.Fprintf(w, "           hits %d, misses %d: hit rate %s; %d frames written (%.0f/s), %d videos decoding whole, %d to decode whole (vidfs copy), %d decoded whole or tried (%d ended early), %d waiting (%s), %d frames skipped, %d not queued (backlog full), %d videos evicted, %d damaged and written again, %d unreadable (kept)\n",
			c.Hits, c.Misses, pct(c.Hits, c.Hits+c.Misses), c.WrittenFrames, c.FramesPerSecond, c.Filling, c.FillQueued, c.WholeFills, c.WholeFillsFailed,
			c.Backlog, formatBytes(c.BacklogBytes), c.Skipped, c.BacklogFull, c.Evicted, c.Corrupt, c.ReadErrors)
		if b := c.FillBudget; b != nil {
			fmt.Fprintf(w, "           budget for whole decodes %.2f s (granted %.1f s, spent %.1f s; a clip %.0f ms, a chunk %.0f ms)\n",
				b.Seconds, b.GrantedSeconds, b.SpentSeconds, 1000*b.ClipSeconds, 1000*b.ChunkSeconds)
		}
		if c.OldFiles > 0 {
			fmt.Fprintf(w, "           %d files of an earlier format kept (%s, not counted above)\n", c.OldFiles, formatBytes(c.OldBytes))
		}
	}
	fmt.Fprintf(w, "  reads    %d requests, %s, %d sample accesses; waited %.2f s for decoding\n", r.Requests, formatBytes(r.Bytes), r.Accesses, r.WaitSeconds)
	if r.Substituted+r.Zeroed > 0 {
		fmt.Fprintf(w, "           failed samples served with another sample %d times, with zeros %d times (.vidfs/failed)\n", r.Substituted, r.Zeroed)
	}
	fmt.Fprintf(w, "           latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n", r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.Max)
	if r.PageFills > 0 {
		fmt.Fprintf(w, "           %d samples put in the page cache whole for memory-mapped readers\n", r.PageFills)
	}
	mem := st.Memory
	mapped := ""
	if mem.TierMappedBytes > 0 {
		mapped = ", disk tier files mapped " + formatBytes(mem.TierMappedBytes)
	}
	fmt.Fprintf(w, "  memory   %s resident: cache buffers %s%s, Go heap %s, Go runtime %s, native (FFmpeg, binary) %s\n",
		formatBytes(mem.ResidentBytes), formatBytes(mem.CacheBytes), mapped, formatBytes(mem.GoHeapBytes), formatBytes(mem.GoRuntimeBytes), formatBytes(mem.NativeBytes))
	fmt.Fprintf(w, "  errors   %d\n", len(st.Errors))
	for i, e := range st.Errors {
		if i == 10 {
			fmt.Fprintf(w, "           ... %d more (vidfs stats --json)\n", len(st.Errors)-10)
			break
		}
		where := "whole video"
		if e.Sample >= 0 {
			where = fmt.Sprintf("sample %d", e.Sample)
		}
		if e.Frame != nil {
			where += fmt.Sprintf(", frame %d", *e.Frame)
		}
		fmt.Fprintf(w, "           %s (%s): %s\n", e.File, where, e.Reason)
	}
}
