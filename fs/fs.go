// Package fs is the mounted filesystem: it presents every sample of a layout as bytes of
// clips.npy, clips.raw and per-sample files, serves reads from the sample cache, follows the
// reader through the plan written to .vidfs/order, and reports what it does in .vidfs/stats.
// What the cache loads a sample from, and what the disk keeps, is package load's.
//
// The files of the package, by job: fs.go (configuration and the parts of a mount), read.go
// (the read path), failed.go (what a failed sample's reads get: --on-error), problems.go (the
// log of what could not be served), stats.go (the snapshot behind .vidfs/stats), tree.go
// (directories, and refusing changes), files.go (the tensor and fixed files), gen.go (files made
// as they are read: index.csv, .vidfs/labels.npy, .vidfs/videos.npy), pages.go (memory-mapped
// readers: handing whole samples to the page cache), control.go (the plans' control files),
// requests.go (.vidfs/fill and .vidfs/epochs), owners.go (which process wrote which plan),
// interfaces.go (what each node answers, checked by the compiler) and mount.go (mounting and
// unmounting).
package fs

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
	"github.com/vidfs/vidfs/order"
)

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

// Config is what a mount serves and with what resources.
type Config struct {
	Source string // the source directory, for reports
	Layout *layout.Layout
	// Infos gives the probe table of each of Layout.Videos, asked for when a sample of it is
	// decoded (the tables need not all be in memory).
	Infos  load.Infos
	Resize decode.Resize
	// Fast decodes with FFmpeg's shortcuts that are not bit-exact (decode.Output.Fast).
	Fast bool
	// Decoder decodes samples. The caller owns it, and closes it after the FS.
	Decoder load.Decoder
	// CacheBytes bounds the memory for decoded samples.
	CacheBytes int64
	// Prefetch is how many samples ahead of the reader to keep decoded (0: as many as fit).
	Prefetch int
	// Workers is how many samples are decoded at once ahead of the reader (0: CPU count), and
	// Cores the CPUs the process may use (0: runtime.NumCPU): decodes at once follow Workers up
	// to what the cores decode (load.Decoders).
	Workers, Cores int
	// PlanIdle is how long a plan may go unread and unwritten before it expires: it stops holding
	// cache and its entries are let go until it is written again (0: 10 minutes).
	PlanIdle time.Duration
	// PlanMaxEntries bounds the entries all plans hold together: a plan written past it is
	// refused whole (0: order.MaxEntries of the samples).
	PlanMaxEntries int
	// OnError says what reads of a sample that cannot be decoded get.
	OnError OnError
	// Disk is what the disk under --cache-dir keeps of what is decoded (package load).
	Disk load.Disk
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

	pages    *pageFiller
	load     *load.Loader // what the cache loads from, and what the disk keeps
	reads    readCounters
	problems problemLog
	emptied  pendingEmpties // plans opened to be replaced and closed with nothing written
	failed   failures       // what failed samples' reads get; which failed is the cache's
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
		out: load.SampleOutput(lay, cfg.Resize, cfg.Fast),
	}
	f.problems.init(cfg.Source, cfg.Skipped)
	f.dirNumber = map[string]int{}
	for i, d := range lay.Dirs() {
		f.dirNumber[d] = i
	}
	// Each part is made after what it uses: the plans, then the loader and its disk tier or
	// training copy (which ask the plans when a sample is due, and start their background work:
	// the tier's tagging, the copy's adopting, sizing and fills), then the cache, whose loads
	// are the loader's and which asks the plans what to keep from the moment it starts; then
	// what reads from the cache.
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
	l, err := load.New(load.Config{Source: cfg.Source, Layout: lay, Infos: cfg.Infos, Output: f.out, Decoder: cfg.Decoder,
		Plans: f.plans, Workers: workers, Cores: cfg.Cores, Current: cfg.Current, Disk: cfg.Disk, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	f.load = l
	l.Wire(&opts)
	opts.OnFail, opts.NextUse, opts.Want = f.loadFailed, f.plans.Due, f.plans.Upcoming
	c, err := f.newCache(cfg, opts)
	if err != nil {
		l.Close()
		return nil, err
	}
	f.cache = c
	f.plans.OnRepublish(f.replanned) // the dues went stale and were worked out anew
	f.pages = newPageFiller(f)
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
	return f.load.Close()
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
	return f.load.Held(i)
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
	f.load.Replanned()
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
