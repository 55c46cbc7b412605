// Package fs is the mounted filesystem: it presents every sample of a layout as bytes of
// clips.npy, clips.raw and per-sample files, serves reads from the sample cache, follows the
// reader through the plan written to .vidfs/order, and reports what it does in .vidfs/stats.
package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/order"
)

// Config is what a mount serves and with what resources.
type Config struct {
	Source string // the source directory, for reports
	Layout *layout.Layout
	// Infos holds the probe table of each of Layout.Videos (nil for videos without samples).
	Infos  []*decode.Info
	Resize decode.Resize
	// CacheBytes bounds the memory for decoded samples.
	CacheBytes int64
	// Prefetch is how many samples ahead of the reader to keep decoded (0: as many as fit).
	Prefetch int
	// Workers is how many samples are decoded at once ahead of the reader (0: CPU count).
	Workers int
	// HWAccel and GPUDecoders choose NVDEC decoding (see decode.PoolOptions).
	HWAccel     decode.HWAccel
	GPUDecoders int
	// Skipped lists videos left out of the layout, with the reason, for reports.
	Skipped []Problem
	Log     *slog.Logger
}

// Problem is a video or sample that could not be served, and why.
type Problem struct {
	Time   time.Time `json:"time"`
	File   string    `json:"file"`
	Sample int       `json:"sample"` // -1 for a whole video
	Reason string    `json:"reason"`
}

// maxProblems bounds the errors kept for reports.
const maxProblems = 100

// FS is the state of a mount: the layout, the decoders, the cache, the plan and the counters.
type FS struct {
	cfg     Config
	lay     *layout.Layout
	out     decode.Output
	pool    *decode.Pool
	cache   *cache.Cache
	tracker *order.Tracker
	depth   int // prefetch depth in samples
	log     *slog.Logger
	// directIO: serve the tensor files with FOPEN_DIRECT_IO, which the kernel can memory-map
	// from Linux 6.6 on (FUSE_DIRECT_IO_ALLOW_MMAP). Set when mounting.
	directIO  atomic.Bool
	dirNumber map[string]int // folders under samples/, numbered for inode numbers
	start     time.Time

	readLatency metrics.Histogram
	decodeRate  metrics.Rate

	mu       sync.Mutex
	requests int64 // read requests
	bytes    int64
	accesses int64
	hits     int64
	misses   int64
	waited   time.Duration
	served   int64 // frames in samples delivered
	problems []Problem
}

// FromCatalog arranges scanned videos under spec: the layout of the readable ones, their probe
// tables in the layout's video order (for Config.Infos), and the unreadable ones, left out, as
// problems (for Config.Skipped).
func FromCatalog(spec layout.Spec, videos []catalog.Video) (*layout.Layout, []*decode.Info, []Problem, error) {
	var lv []layout.Video
	infos := map[string]*decode.Info{}
	var skipped []Problem
	for _, v := range videos {
		if v.Err != nil {
			skipped = append(skipped, Problem{Time: time.Now(), File: v.Rel, Sample: -1, Reason: v.Err.Error()})
			continue
		}
		lv = append(lv, layout.Video{Path: v.Rel, Frames: v.Info.Frames})
		infos[v.Rel] = v.Info
	}
	lay, err := layout.New(spec, lv)
	if err != nil {
		return nil, nil, nil, err
	}
	ordered := make([]*decode.Info, len(lay.Videos))
	for i, v := range lay.Videos {
		ordered[i] = infos[v.Path]
	}
	return lay, ordered, skipped, nil
}

// New builds a mount's state: decoders, cache and plan tracker. Close it when done.
func New(cfg Config) (*FS, error) {
	lay := cfg.Layout
	if lay == nil || len(cfg.Infos) != len(lay.Videos) {
		return nil, errors.New("fs: layout and probe tables do not match")
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
	// Room for what readers hold and what is being decoded, beyond what is prefetched.
	reserve := 2*workers + 2
	if capacity < reserve+1 {
		return nil, fmt.Errorf("cache of %d bytes holds %d samples of %d bytes; need at least %d (%d bytes) for %d workers",
			cfg.CacheBytes, capacity, S, reserve+1, int64(reserve+1)*S, workers)
	}
	depth := capacity - reserve
	if cfg.Prefetch > 0 && cfg.Prefetch < depth {
		depth = cfg.Prefetch
	} else if cfg.Prefetch > depth {
		cfg.Log.Warn("prefetch depth exceeds what the cache holds beside what readers use; lowered", "asked", cfg.Prefetch, "depth", depth)
	}
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: 2 * workers, Idle: workers, Threads: 1,
		HWAccel: cfg.HWAccel, GPUDecoders: cfg.GPUDecoders, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	f := &FS{
		cfg: cfg, lay: lay, log: cfg.Log, start: time.Now(), depth: depth, pool: pool,
		out:     decode.Output{Width: lay.Spec.Width, Height: lay.Spec.Height, Resize: cfg.Resize},
		tracker: order.NewTracker(256, depth+256),
	}
	f.problems = append(f.problems, cfg.Skipped[:min(len(cfg.Skipped), maxProblems)]...)
	if n := len(cfg.Skipped) - maxProblems; n > 0 {
		f.problems = append(f.problems, Problem{Time: time.Now(), File: cfg.Source, Sample: -1,
			Reason: fmt.Sprintf("%d more videos left out (the mount's log names the first 20)", n)})
	}
	f.dirNumber = map[string]int{}
	for i, d := range lay.Dirs() {
		f.dirNumber[d] = i
	}
	c, err := cache.New(cache.Options{
		SampleBytes: S, Capacity: capacity, Workers: workers, Fill: f.fill,
		NextUse: f.tracker.NextUse,
		Want:    func(dst []int) []int { return f.tracker.Upcoming(dst, f.depth) },
	})
	if err != nil {
		f.pool.Close()
		return nil, err
	}
	f.cache = c
	return f, nil
}

// Close stops decoding and frees the cache and decoders.
func (f *FS) Close() {
	f.cache.Close()
	f.pool.Close()
}

// fill decodes sample i into buf, for the cache.
func (f *FS) fill(ctx context.Context, i int, buf []byte) error {
	s := f.lay.Samples[i]
	spec := f.lay.Spec
	clip := decode.Clip{Start: s.Start, Frames: spec.Frames, Stride: spec.Stride, PadEnd: s.Pad}
	err := f.pool.DecodeClip(ctx, f.cfg.Infos[s.Video], clip, f.out, buf)
	if err == nil {
		f.decodeRate.Add(1, time.Now())
		return nil
	}
	if ctx.Err() == nil {
		file := f.lay.Videos[s.Video].Path
		f.log.Error("sample failed; its reads get EIO", "sample", i, "file", file, "start", s.Start, "err", err)
		f.addProblem(Problem{Time: time.Now(), File: file, Sample: i, Reason: err.Error()})
	}
	return err
}

func (f *FS) addProblem(p Problem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, p)
	if len(f.problems) > maxProblems {
		f.problems = f.problems[len(f.problems)-maxProblems:]
	}
}

// SetPlan replaces the plan (or, with appendPlan, queues it behind the current one).
func (f *FS) SetPlan(plan []int32, appendPlan bool) {
	if appendPlan {
		f.tracker.Append(plan)
	} else {
		f.tracker.Replace(plan)
	}
	f.cache.Kick()
}

// read serves [off, off+len(dest)) of a file made of hdr and then samples first..first+count-1.
// It returns fewer bytes than asked (a short read, which readers handle) in two cases: a read
// that starts in the header stops at its end, so that reading the header (np.load does, with
// a large buffer) decodes nothing; and a read that reaches a sample whose decode fails returns
// the bytes before it; reading on then fails with EIO.
func (f *FS) read(ctx context.Context, hdr []byte, first, count int, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	start := time.Now()
	S := f.lay.Spec.SampleBytes()
	n := 0
	var waited time.Duration
	var accesses, hits int64
	var errno syscall.Errno
	for _, p := range f.lay.Pieces(int64(len(hdr)), first, count, off, int64(len(dest))) {
		if p.Sample < 0 {
			n += copy(dest[n:], hdr[p.Offset:p.Offset+p.Len])
			break
		}
		access := f.tracker.Observe(p.Sample, p.Offset, p.Len, S, start)
		if access {
			f.cache.Kick() // the reader may have moved on in the plan
		}
		t0 := time.Now()
		h, hit, err := f.cache.Get(ctx, p.Sample)
		if err != nil {
			errno = syscall.EIO // logged once, when the decode failed
			if ctx.Err() != nil {
				errno = syscall.EINTR
			}
			break
		}
		if !hit {
			waited += time.Since(t0)
		}
		if access {
			accesses++
			if hit {
				hits++
			}
		}
		n += copy(dest[n:], h.Bytes()[p.Offset:p.Offset+p.Len])
		h.Release()
	}
	if n == 0 && errno != 0 {
		return nil, errno
	}
	f.readLatency.Observe(time.Since(start))
	f.mu.Lock()
	f.requests++
	f.bytes += int64(n)
	f.accesses += accesses
	f.hits += hits
	f.misses += accesses - hits
	f.served += accesses * int64(f.lay.Spec.Frames)
	f.waited += waited
	f.mu.Unlock()
	return fuse.ReadResultData(dest[:n]), 0
}

// Stats is a snapshot of what a mount is doing, as .vidfs/stats shows it.
type Stats struct {
	Time          time.Time   `json:"time"`
	UptimeSeconds float64     `json:"uptime_s"`
	Source        string      `json:"source"`
	Samples       int         `json:"samples"`
	SampleBytes   int64       `json:"sample_bytes"`
	Cache         CacheStats  `json:"cache"`
	Plan          PlanStats   `json:"plan"`
	Decode        DecodeStats `json:"decode"`
	Reads         ReadStats   `json:"reads"`
	Errors        []Problem   `json:"errors"`
}

// CacheStats: hits and misses count accesses to samples (a sample read in pieces is one).
type CacheStats struct {
	CapacitySamples int     `json:"capacity_samples"`
	CapacityBytes   int64   `json:"capacity_bytes"`
	UsedSamples     int     `json:"used_samples"`
	UsedBytes       int64   `json:"used_bytes"`
	ReadySamples    int     `json:"ready_samples"`
	PinnedSamples   int     `json:"pinned_samples"`
	Hits            int64   `json:"hits"`
	Misses          int64   `json:"misses"`
	HitRate         float64 `json:"hit_rate"`
	Evicted         int64   `json:"evicted"`
	EvictedUnread   int64   `json:"evicted_unread"`
}

// PlanStats: the reader's position in the plan, and how much is ready ahead of it.
type PlanStats struct {
	Length        int   `json:"length"`
	Position      int   `json:"position"`
	PrefetchDepth int   `json:"prefetch_depth"`
	ReadyAhead    int   `json:"ready_ahead"`     // upcoming samples ready, without a gap
	ReadyInWindow int   `json:"ready_in_window"` // of the next prefetch_depth, how many are ready
	OnPlanReads   int64 `json:"on_plan_reads"`
	OffPlanReads  int64 `json:"off_plan_reads"`
	Skipped       int64 `json:"skipped"`
	Plans         int64 `json:"plans"`
}

// DecodeStats: frames_decoded / frames_served is the decode amplification.
type DecodeStats struct {
	Workers        int              `json:"workers"`
	InFlight       int              `json:"in_flight"`
	Queued         int              `json:"queued"`
	Clips          int64            `json:"clips"`
	Failed         int64            `json:"failed"`
	Prefetched     int64            `json:"prefetched"`
	OnDemand       int64            `json:"on_demand"`
	ClipsPerSecond float64          `json:"clips_per_s"`
	ByDecoder      map[string]int64 `json:"by_decoder"` // clips decoded by "nvdec" and by "cpu"
	GPUFallbacks   int64            `json:"gpu_fallbacks"`
	FramesDecoded  int64            `json:"frames_decoded"`
	FramesServed   int64            `json:"frames_served"`
	Amplification  float64          `json:"amplification"`
	Seeks          int64            `json:"seeks"`
	DecodersOpened int64            `json:"decoders_opened"`
}

// ReadStats: wait_s is the total time readers waited for samples to be decoded.
type ReadStats struct {
	Requests    int64              `json:"requests"`
	Bytes       int64              `json:"bytes"`
	Accesses    int64              `json:"accesses"`
	WaitSeconds float64            `json:"wait_s"`
	LatencyMs   map[string]float64 `json:"latency_ms"`
}

// Stats returns a snapshot of the mount's state and counters.
func (f *FS) Stats() Stats {
	now := time.Now()
	cs := f.cache.Stats()
	ts := f.tracker.Stats()
	ps := f.pool.Stats()
	pos, length := f.tracker.Position()
	upcoming := f.tracker.Upcoming(nil, f.depth)
	ahead, inWindow := f.cache.ReadyAhead(upcoming)
	S := f.lay.Spec.SampleBytes()

	f.mu.Lock()
	defer f.mu.Unlock()
	st := Stats{
		Time: now, UptimeSeconds: now.Sub(f.start).Seconds(), Source: f.cfg.Source,
		Samples: f.lay.Len(), SampleBytes: S,
		Cache: CacheStats{
			CapacitySamples: cs.Capacity, CapacityBytes: int64(cs.Capacity) * S,
			UsedSamples: cs.Used, UsedBytes: int64(cs.Used) * S, ReadySamples: cs.Ready, PinnedSamples: cs.Pinned,
			Hits: f.hits, Misses: f.misses, Evicted: cs.Evicted, EvictedUnread: cs.EvictedCold,
		},
		Plan: PlanStats{
			Length: length, Position: pos, PrefetchDepth: f.depth, ReadyAhead: ahead, ReadyInWindow: inWindow,
			OnPlanReads: ts.OnPlan, OffPlanReads: ts.OffPlan, Skipped: ts.Skipped, Plans: ts.Plans,
		},
		Decode: DecodeStats{
			Workers: f.cache.Workers(), InFlight: cs.Decoding, Queued: cs.Queued,
			Clips: cs.Decoded, Failed: cs.Failed, Prefetched: cs.Prefetched, OnDemand: cs.Demand,
			ClipsPerSecond: f.decodeRate.PerSecond(now),
			FramesDecoded:  ps.Frames, FramesServed: f.served, Seeks: ps.Seeks, DecodersOpened: ps.Opens,
			ByDecoder: map[string]int64{"nvdec": ps.ClipsGPU, "cpu": ps.Clips - ps.ClipsGPU}, GPUFallbacks: ps.GPUFallbacks,
		},
		Reads: ReadStats{
			Requests: f.requests, Bytes: f.bytes, Accesses: f.accesses, WaitSeconds: f.waited.Seconds(),
			LatencyMs: map[string]float64{
				"p50": ms(f.readLatency.Quantile(0.5)), "p90": ms(f.readLatency.Quantile(0.9)),
				"p99": ms(f.readLatency.Quantile(0.99)), "max": ms(f.readLatency.Max()),
			},
		},
		Errors: append([]Problem{}, f.problems...),
	}
	if n := st.Cache.Hits + st.Cache.Misses; n > 0 {
		st.Cache.HitRate = float64(st.Cache.Hits) / float64(n)
	}
	if st.Decode.FramesServed > 0 {
		st.Decode.Amplification = float64(st.Decode.FramesDecoded) / float64(st.Decode.FramesServed)
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
