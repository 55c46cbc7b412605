// Package fs is the mounted filesystem: it presents every sample of a layout as bytes of
// clips.npy, clips.raw and per-sample files, serves reads from the sample cache, follows the
// reader through the plan written to .vidfs/order, and reports what it does in .vidfs/stats.
//
// The files of the package, by job: fs.go (configuration and the parts of a mount), read.go
// (the read path), failed.go (what a failed sample's reads get: --on-error), problems.go (the
// log of what could not be served), stats.go (the snapshot behind .vidfs/stats), tree.go
// (directories, and refusing changes), files.go (the tensor and fixed files), gen.go (files made
// as they are read: index.csv, .vidfs/labels.npy, .vidfs/videos.npy), pages.go (memory-mapped
// readers: handing whole samples to the page cache), control.go (the .vidfs control files),
// owners.go (which process wrote which plan), load.go (the load path: what the cache's Fetch and
// Load do for a sample), keep.go (what the disk keeps, samples or frames, and with which codec),
// tier.go (the disk tier's keys, tagging and stats), copy.go (the training copy's keys, reads,
// writes and stats), keeper.go (frames a decode passes through, kept for the copy), fill.go
// (decoding one video whole into the copy), fills.go (which videos are decoded whole and when:
// --copy-fill, vidfs copy's .vidfs/fill), budget.go (what --copy-fill auto may spend on them),
// interfaces.go (what each node answers, checked by the compiler) and mount.go (mounting and
// unmounting).
package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/order"
	"github.com/vidfs/vidfs/tier"
)

// Decoder decodes the clips a mount serves. *decode.Pool is the real one, sized for
// Decoders(Workers) clips at once; tests pass fakes that write known bytes.
type Decoder interface {
	DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) error
	Stats() decode.PoolStats
}

// SharedBuffers is a Decoder with memory of its own for the cache's buffers: the cache takes its
// n buffers of size bytes from it (isolate.Decoders: memory its helpers' clips are written into by
// the kernel, which no helper maps). Asked once.
type SharedBuffers interface {
	Buffers(size int64, n int) (cache.Memory, error)
}

// Isolated is a Decoder whose decoders run in helper processes (isolate.Decoders): what they
// met, for the stats.
type Isolated interface {
	HelperStats() wire.HelperStats
}

// Infos gives the probe tables of a layout's videos.
type Infos interface {
	// Info returns the probe table of video v (an index into Layout.Videos), not to be changed.
	Info(v int) (*decode.Info, error)
}

// InfoList is Infos held in memory, one table per video.
type InfoList []*decode.Info

// Info returns l[v].
func (l InfoList) Info(v int) (*decode.Info, error) { return l[v], nil }

// Config is what a mount serves and with what resources.
type Config struct {
	Source string // the source directory, for reports
	Layout *layout.Layout
	// Infos gives the probe table of each of Layout.Videos, asked for when a sample of it is
	// decoded (the tables need not all be in memory).
	Infos  Infos
	Resize decode.Resize
	// Fast decodes with FFmpeg's shortcuts that are not bit-exact (decode.Output.Fast).
	Fast bool
	// Decoder decodes samples. The caller owns it, and closes it after the FS.
	Decoder Decoder
	// CacheBytes bounds the memory for decoded samples.
	CacheBytes int64
	// Prefetch is how many samples ahead of the reader to keep decoded (0: as many as fit).
	Prefetch int
	// Workers is how many samples are decoded at once ahead of the reader (0: CPU count).
	Workers int
	// PlanIdle is how long a plan may go unread and unwritten before it expires: it stops holding
	// cache and its entries are let go until it is written again (0: 10 minutes).
	PlanIdle time.Duration
	// PlanMaxEntries bounds the entries all plans hold together: a plan written past it is
	// refused whole (0: order.MaxEntries of the samples).
	PlanMaxEntries int
	// OnError says what reads of a sample that cannot be decoded get.
	OnError OnError
	// TierDir and TierBytes put a disk tier of decoded samples behind the cache: samples decoded
	// are kept there, compressed, and read back instead of decoded again, across mounts (package
	// tier). "" or 0: none.
	TierDir   string
	TierBytes int64
	// TierCodec is how the disk tier stores samples (0: none if every sample fits within
	// TierBytes uncompressed, else zstd).
	TierCodec diskstore.Codec
	// CopyKeepFree, when set, bounds the training copy not by TierBytes but by what its
	// filesystem has room for, less CopyKeepFree, which it leaves free (giving room back when
	// other files take it): the default, with no --cache-disk.
	CopyKeepFree int64
	// Keep says whether the disk under TierDir keeps samples (the disk tier) or frames (the
	// training copy); KeepAuto chooses by whether every sample fits (copyKeep).
	Keep Keep
	// Fill says when the training copy takes a video's frames.
	Fill Fill
	// PlanMoved, if set, is called (quickly: it must not block) when what the plans want next
	// may have changed: a plan written or removed, a reader moving on. Upcoming says what.
	PlanMoved func()
	// FetchStats, if set, reports the fetching of the source's bytes (a bucket's) for
	// .vidfs/stats; BytesPerSample is filled in here.
	FetchStats func() wire.FetchStats
	// Current, if set, tells whether a video (by its path in the layout) is still the version
	// probed, for the disk tier; nil: its local file's size and modification time are compared.
	Current func(video string) bool
	// Scan is how the source was scanned, for the stats (nil: not told).
	Scan *wire.ScanStats
	// Skipped lists videos left out of the layout, with the reason, for reports.
	Skipped []wire.Problem
	Log     *slog.Logger
}

// FS is the state of a mount: the layout, the decoder, the cache, the plan and the counters.
type FS struct {
	cfg    Config
	lay    *layout.Layout
	out    decode.Output
	cache  *cache.Cache
	plans  *order.Plans // the plans, their owners and their counters: a plan's one keeper
	owners *owners      // which process a reading thread is, and the plans it owns
	proc   procfs.FS    // /proc: the owners' threads, and this process's resident memory
	log    *slog.Logger
	start  time.Time
	// directIO: serve the tensor files with FOPEN_DIRECT_IO, which the kernel can memory-map
	// from Linux 6.6 on (FUSE_DIRECT_IO_ALLOW_MMAP). Set when mounting.
	directIO  atomic.Bool
	dirNumber map[string]int // folders under samples/, numbered for inode numbers

	pages *pageFiller
	// videosWithSamples counts the videos of the layout with a sample.
	videosWithSamples int
	tier              *diskTier     // nil without one
	copy              *trainingCopy // nil without one (a mount has a disk tier or a copy, not both)
	stopTag           func()        // ends tagTier and waits for it
	reads             readCounters
	decodeRate        metrics.Rate // of the same
	decoded           atomic.Int64 // samples decoded (the pool's clips but the training copy's whole videos' chunks)
	problems          problemLog
	emptied           pendingEmpties // plans opened to be replaced and closed with nothing written
	failed            failures       // what failed samples' reads get; which failed is the cache's
}

// New builds a mount's state: cache and plans over cfg.Decoder. Close it when done.
func New(cfg Config) (*FS, error) {
	lay := cfg.Layout
	if lay == nil || cfg.Infos == nil {
		return nil, errors.New("fs: no layout or probe tables")
	}
	if cfg.Decoder == nil {
		return nil, errors.New("fs: no decoder")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	S := lay.Spec.SampleBytes()
	capacity := int(cfg.CacheBytes / S)
	if need := cache.MinCapacity(workers); capacity < need {
		return nil, fmt.Errorf("a cache of %d bytes holds %d samples of %d bytes; %d workers need at least %d (%d bytes)",
			cfg.CacheBytes, capacity, S, workers, need, int64(need)*S)
	}
	proc, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		return nil, fmt.Errorf("reading which process reads (procfs): %w", err)
	}
	f := &FS{
		cfg: cfg, lay: lay, log: cfg.Log, start: time.Now(), proc: proc,
		out: SampleOutput(lay, cfg.Resize, cfg.Fast),
	}
	f.problems.init(cfg.Source, cfg.Skipped)
	f.dirNumber = map[string]int{}
	for i, d := range lay.Dirs() {
		f.dirNumber[d] = i
	}
	// Each part is made after what it uses: the plans, then the disk tier (which asks the plans
	// when a sample is due), then the cache, whose loads use the tier and which asks the plans
	// what to keep from the moment it starts; then what reads from the cache.
	opts := cache.Options{SampleBytes: S, Capacity: capacity, Workers: workers, Prefetch: cfg.Prefetch}
	depth := opts.Depth()
	if cfg.Prefetch > depth {
		cfg.Log.Warn("prefetch depth exceeds what the cache holds beside what readers use; lowered", "asked", cfg.Prefetch, "depth", depth)
	}
	idle := cfg.PlanIdle
	if idle <= 0 {
		idle = 10 * time.Minute
	}
	f.plans = order.NewPlans(256, depth+256, idle)
	f.plans.Reserve(lay.Len())
	maxEntries := cfg.PlanMaxEntries
	if maxEntries <= 0 {
		maxEntries = order.MaxEntries(lay.Len())
	}
	f.plans.SetMaxEntries(maxEntries)
	f.owners = newOwners(proc, f.plans)
	for v := range lay.Videos {
		if first, end := lay.VideoSamples(v); end > first {
			f.videosWithSamples++
		}
	}
	keep := KeepAuto
	if cfg.TierDir != "" && cfg.TierBytes > 0 {
		frames := f.framesUsed() * int64(f.out.FrameBytes())
		k, why, err := copyKeep(cfg.Keep, cfg.TierDir, diskHolds(cfg.TierDir), lay.Len(), S, frames, cfg.TierBytes)
		if err != nil {
			return nil, err
		}
		keep = k
		cfg.Log.Info("disk keeps", "what", keep, "why", why)
	}
	if keep == KeepFrames {
		codec, why := f.frameCodec(cfg.TierCodec, copyRoom(cfg))
		cfg.Log.Info("training copy codec", "codec", codec, "why", why)
		cfg.TierCodec, f.cfg.TierCodec = codec, codec
		if err := f.openCopy(cfg, workers); err != nil {
			return nil, err
		}
		opts.Fetch = f.fetchSample
	}
	if keep == KeepSamples && cfg.TierCodec == diskstore.Huff {
		return nil, fmt.Errorf("codec %v stores frames, not samples: keep frames (--cache-keep frames), or store samples with none, lz4 or zstd", diskstore.Huff)
	}
	if keep == KeepSamples {
		codec, why := tierCodec(cfg.TierCodec, lay.Len(), S, cfg.TierBytes)
		cfg.Log.Info("disk tier codec", "codec", codec, "why", why)
		// The write backlog is memory beside the cache: a few samples' worth.
		t, err := tier.Open(tier.Options{Dir: cfg.TierDir, MaxBytes: cfg.TierBytes, Codec: codec, Log: cfg.Log, Backlog: max(16<<20, 4*S),
			Due: f.plans.Due})
		if err != nil {
			return nil, err
		}
		f.tier = &diskTier{t: t, prefix: keyPrefix(f.out)}
		opts.Fetch = f.fetchSample
		opts.MaxLent = maxLent(capacity)
	}
	opts.Load, opts.OnFail, opts.NextUse, opts.Want = f.loadSample, f.loadFailed, f.plans.Due, f.plans.Upcoming
	opts.Permanent = heldFailed
	c, err := f.newCache(cfg, opts)
	if err != nil {
		if f.tier != nil {
			f.tier.t.Close()
		}
		if f.copy != nil {
			f.copy.stop()
			f.copy.c.Close()
		}
		return nil, err
	}
	f.cache = c
	f.plans.OnRepublish(f.replanned) // the dues went stale and were worked out anew
	f.pages = newPageFiller(f)
	if f.tier != nil {
		f.stopTag = f.startTagging()
	}
	return f, nil
}

// newCache makes the cache; its buffers are the decoder's shared memory where it has some
// (SharedBuffers: its helpers decode into them).
func (f *FS) newCache(cfg Config, opts cache.Options) (*cache.Cache, error) {
	if sb, ok := cfg.Decoder.(SharedBuffers); ok {
		var err error
		if opts.Memory, err = sb.Buffers(opts.SampleBytes, opts.Capacity); err != nil {
			return nil, err
		}
	}
	return cache.New(opts)
}

// Close stops decoding, frees the cache, and closes the disk tier once what it has queued is
// written: its error is the tier's, if its writer could not finish (a disk that hangs). The
// decoder is the caller's to close.
func (f *FS) Close() error {
	f.plans.Close() // no republish calls back into the cache or the tier from here on
	f.pages.close()
	f.cache.Close()
	if f.copy != nil {
		f.copy.stop()
		return f.copy.c.Close()
	}
	if f.tier != nil {
		f.stopTag()
		return f.tier.t.Close()
	}
	return nil
}

// heldFailed says whether a sample whose decode failed with err is held failed for the life
// of the mount (the cache's Options.Permanent). Only a video's own damage is; what may pass
// (descriptors short, a disk or the source's network down) fails the reads in progress with
// EIO, and the sample is decoded again. A file changed since it was probed is held failed too
// (listed in .vidfs/failed, stood in for under --on-error substitute): the layout describes the
// file that was probed, and only a new scan mends that. The probe cache keeps no such error (its
// entries are by size and mtime, so a changed file is probed again anyway).
func heldFailed(err error) bool {
	return decode.Permanent(err) || errors.Is(err, decode.ErrChanged) || errors.Is(err, decode.ErrCrashed)
}

// SampleClip is the clip sample i of lay holds: what a mount decodes for it (and vidfs verify).
func SampleClip(lay *layout.Layout, i int) decode.Clip {
	s, spec := lay.Sample(i), lay.Spec
	return decode.Clip{Start: s.Start, Frames: spec.Frames, Stride: spec.Stride, PadEnd: s.Pad,
		FPS: decode.Rational{Num: spec.FPS.Num, Den: spec.FPS.Den}}
}

// SampleOutput is the shape every frame of lay's samples is brought to, decoded fast or exactly.
func SampleOutput(lay *layout.Layout, resize decode.Resize, fast bool) decode.Output {
	return decode.Output{Width: lay.Spec.Width, Height: lay.Spec.Height, Resize: resize, Fast: fast}
}

// decodeSample decodes sample i into buf, for the cache (the decoder counts what it decodes),
// giving keep, if not nil, the frames it passes through (decode.Clip.Keep), and telling path, if
// not nil, where it was decoded.
func (f *FS) decodeSample(ctx context.Context, i int, buf []byte, keep decode.Keeper, path *decode.Path, elsewhere *time.Duration) error {
	info, err := f.cfg.Infos.Info(f.lay.Sample(i).Video)
	if err != nil {
		return err
	}
	c := SampleClip(f.lay, i)
	c.Keep, c.Path, c.CPU = keep, path, elsewhere
	if err := f.cfg.Decoder.DecodeClip(ctx, info, c, f.out, buf); err != nil {
		return err
	}
	f.decodeRate.Add(1, time.Now())
	f.decoded.Add(1)
	return nil
}

// videoPath is the source file of video v.
func (f *FS) videoPath(v int) string {
	return filepath.Join(f.cfg.Source, filepath.FromSlash(f.lay.Videos[v].Path))
}

// loadFailed logs a sample the cache now holds failed, and adds it to the problems: the cache
// tells it once for each such sample.
func (f *FS) loadFailed(i int, err error) {
	file, start := f.sampleFile(i), f.lay.Sample(i).Start
	f.log.Error("sample failed", "sample", i, "file", file, "start", start, "err", err, "reads_get", f.cfg.OnError.String())
	f.problems.add(ProblemOf(file, i, err))
}

// setPlan makes entries the plan called name, creating it if need be (or, with appendPlan,
// queues them behind it). writer is the thread that wrote it (0: not known): its process's
// reads, and its children's, count toward the plan. The plans keep all there is of a plan. A
// plan past the plans' bound on entries is refused whole (order.ErrTooManyEntries): the plan in
// force stays.
func (f *FS) setPlan(name string, entries []int32, appendPlan bool, writer int) error {
	if err := f.plans.SetOwned(name, entries, appendPlan, f.owners.process(writer)); err != nil {
		return err
	}
	f.replanned()
	return nil
}

// Upcoming appends to dst up to n samples the plans want next, soonest due first (for a fetcher
// of the source's bytes ahead of decodes).
func (f *FS) Upcoming(dst []int, n int) []int { return f.plans.Upcoming(dst, n) }

// Held tells whether sample i needs no decode: it is ready in the memory cache, the disk
// tier has it, or the training copy has its whole video (for a fetcher of the source's bytes, which then fetches none for it).
func (f *FS) Held(i int) bool {
	if c, _ := f.cache.ReadyAhead([]int{i}); c > 0 {
		return true
	}
	if f.copy != nil {
		return f.current(i) && f.copy.c.Whole(f.lay.Sample(i).Video)
	}
	return f.tier != nil && f.current(i) && f.tier.t.Has(f.sampleKey(i))
}

// removePlan drops the plan called name, its owner and its counters with it.
func (f *FS) removePlan(name string) bool {
	ok := f.plans.Remove(name)
	f.replanned()
	return ok
}

// replanned tells the cache, the disk tier and the source's fetcher, if there is one, that a
// plan changed, or that the plans worked their dues out anew: every sample's due may have moved.
func (f *FS) replanned() {
	f.cache.Replanned()
	if f.tier != nil {
		f.tier.t.Replanned()
	}
	f.fetchAhead()
}

// moved tells the cache, and the source's fetcher if there is one, that a reader may have moved
// on in its plan: what the plans want next may have changed.
func (f *FS) moved() {
	f.cache.Kick()
	f.fetchAhead()
}

// fetchAhead tells the source's fetcher, if there is one, that what the plans want next may have
// changed.
func (f *FS) fetchAhead() {
	if f.cfg.PlanMoved != nil {
		f.cfg.PlanMoved()
	}
}

// maxLent is how many samples the cache may hold as disk tier files mapped (cache.Options.MaxLent),
// in a cache of capacity samples: half the memory maps the kernel allows a process
// (vm.max_map_count, 65,530 unless raised), less one for each of the cache's own buffers, so
// that the Go runtime, FFmpeg and the buffers keep the other half. Tier hits beyond it are
// copied into the cache's buffers, as all are in a cache of over 32,000 samples (9 GiB of
// 8x112x112 samples, say) unless the limit is raised.
func maxLent(capacity int) int {
	limit := 65530
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			limit = n
		}
	}
	return max(0, min(limit/2-capacity, capacity))
}
