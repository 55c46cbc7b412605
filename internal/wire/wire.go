// Package wire is the JSON a mount publishes about itself: .vidfs/stats (Stats) and
// .vidfs/layout.json (Dataset). The filesystem writes these types; vidfs stats, top and bench,
// and the Prometheus exporter, read them without importing the filesystem. Field names and JSON
// keys are a contract with clients (python/vidfs.py reads them too): add, do not rename.
package wire

import "time"

// Dataset is .vidfs/layout.json: what a client needs to read the mount's files without parsing
// their headers.
type Dataset struct {
	Samples        int    `json:"samples"`
	Frames         int    `json:"frames"`
	Height         int    `json:"height"`
	Width          int    `json:"width"`
	Channels       int    `json:"channels"`
	DType          string `json:"dtype"`
	SampleBytes    int64  `json:"sample_bytes"`
	NpyHeaderBytes int    `json:"npy_header_bytes"` // sample i of clips.npy starts here + i*SampleBytes
	Stride         int    `json:"stride"`
	Step           int    `json:"step,omitempty"`
	ClipsPerVideo  int    `json:"clips_per_video,omitempty"`
	Resize         string `json:"resize"`
	Decode         string `json:"decode"` // exact or fast
	PadShort       bool   `json:"pad_short"`
	Videos         int    `json:"videos"`
	Classes        int    `json:"classes"`
	Source         string `json:"source"`

	// FPS is the target frame rate that Frames, Stride and Step count frames of (--fps); 0: the
	// videos' own frames.
	FPS float64 `json:"fps,omitempty"`
}

// Stats is a snapshot of what a mount is doing, as .vidfs/stats shows it.
type Stats struct {
	Time          time.Time   `json:"time"`
	UptimeSeconds float64     `json:"uptime_s"`
	Source        string      `json:"source"`
	Samples       int         `json:"samples"`
	SampleBytes   int64       `json:"sample_bytes"`
	Cache         CacheStats  `json:"cache"`
	Plan          PlanStats   `json:"plan"` // over all the plans
	Plans         []PlanEntry `json:"plans"`
	Decode        DecodeStats `json:"decode"`
	Tier          *TierStats  `json:"tier,omitempty"`  // the disk tier, when the mount has one
	Copy          *CopyStats  `json:"copy,omitempty"`  // the training copy, when the mount keeps one
	Fetch         *FetchStats `json:"fetch,omitempty"` // the source's bytes, when it is a bucket
	Reads         ReadStats   `json:"reads"`
	Memory        MemoryStats `json:"memory"`
	Scan          *ScanStats  `json:"scan,omitempty"` // how the mount found its videos
	// Errors are the last problems on record: videos left out, samples that failed, plans refused.
	Errors []Problem `json:"errors"`
}

// ScanStats is how the mount's scan of its source went, before it mounted: a first mount probes
// every video, a remount finds them in the probe cache.
type ScanStats struct {
	Videos          int     `json:"videos"`
	Probed          int     `json:"probed"`
	FromCache       int     `json:"from_cache"`
	Unreadable      int     `json:"unreadable"`
	Seconds         float64 `json:"seconds"`
	ProbesPerSecond float64 `json:"probes_per_s"`
	// Workers is how many videos were probed at once; Cores, how many CPUs the process may use
	// (its affinity and cgroup quota), which the default worker counts come from.
	Workers int `json:"workers,omitempty"`
	Cores   int `json:"cores,omitempty"`
	// SecondsLeft estimates the time the scan still takes, while it runs (see Scanning).
	SecondsLeft float64 `json:"seconds_left,omitempty"`
}

// Scanning is what a mount writes while it finds and probes its videos, before MNT is mounted
// (vidfs stats and vidfs top show it): the process, the mount point, and how far it has got.
type Scanning struct {
	PID        int       `json:"pid"`
	Mountpoint string    `json:"mountpoint"`
	Scan       ScanStats `json:"scan"`
}

// CacheStats is the memory cache of decoded samples. Hits and misses count accesses to samples
// that were served (a sample read in pieces is one access).
type CacheStats struct {
	CapacitySamples int     `json:"capacity_samples"`
	CapacityBytes   int64   `json:"capacity_bytes"`
	UsedSamples     int     `json:"used_samples"` // holding a buffer: ready, being decoded or queued
	UsedBytes       int64   `json:"used_bytes"`
	ReadySamples    int     `json:"ready_samples"`
	PinnedSamples   int     `json:"pinned_samples"` // ready samples readers are copying from
	Hits            int64   `json:"hits"`
	Misses          int64   `json:"misses"`
	HitRate         float64 `json:"hit_rate"`
	Evicted         int64   `json:"evicted"`        // ready samples dropped to make room
	EvictedUnread   int64   `json:"evicted_unread"` // of those, prefetched and never read
}

// FetchStats is the fetching of the videos' bytes from object storage (a mount of s3://):
// ranged GETs into a bounded memory cache of blocks, ahead of decodes or on demand.
type FetchStats struct {
	Lists        int64 `json:"lists"`         // ListObjectsV2 pages
	GETs         int64 `json:"gets"`          // ranged GETs that fetched their bytes
	BytesFetched int64 `json:"bytes_fetched"` // by those GETs
	// BytesPerSample is BytesFetched over the samples decoded.
	BytesPerSample float64 `json:"bytes_per_sample"`
	FetchSeconds   float64 `json:"fetch_seconds"`   // the GETs' time, retries included
	MeanLatencyMs  float64 `json:"mean_latency_ms"` // FetchSeconds per GET
	Retries        int64   `json:"retries"`         // requests tried again: timeouts, 5xx, resets, throttling
	Throttled      int64   `json:"throttled"`       // of those, SlowDown and 503
	FailedGETs     int64   `json:"failed_gets"`     // given up after --s3-timeout
	// Blocks (1 MiB) the decoders asked for: in memory already, on their way, or fetched for
	// the asking (on demand); and the blocks fetched ahead, in the plans' order.
	BlockHits          int64 `json:"block_hits"`
	BlockWaits         int64 `json:"block_waits"`
	BlockMisses        int64 `json:"block_misses"`
	BlocksAhead        int64 `json:"blocks_ahead"`
	CacheBytes         int64 `json:"cache_bytes"`
	CacheCapacityBytes int64 `json:"cache_capacity_bytes"`
}

// TierStats is the disk tier of decoded samples (vidfs mount --cache-dir). Hits and misses count
// loads: samples the memory cache needed, served from disk or decoded.
type TierStats struct {
	Dir            string  `json:"dir"`
	Codec          string  `json:"codec"` // how this mount writes entries: none, lz4 or zstd
	CapacityBytes  int64   `json:"capacity_bytes"`
	UsedBytes      int64   `json:"used_bytes"`
	Entries        int     `json:"entries"`
	BytesPerSample float64 `json:"bytes_per_sample"` // on disk, of what this mount wrote
	Ratio          float64 `json:"compression_ratio"`
	Hits           int64   `json:"hits"`
	Misses         int64   `json:"misses"`
	HitRate        float64 `json:"hit_rate"`
	Written        int64   `json:"written"`
	Skipped        int64   `json:"skipped"`     // not written: write backlog full, no room, or the disk refused
	Corrupt        int64   `json:"corrupt"`     // damaged entries found, dropped and decoded again
	ReadErrors     int64   `json:"read_errors"` // entries the disk would not give (EMFILE, EIO ...): kept, the sample decoded
	Checked        int64   `json:"checked"`     // entries of none checked once and then trusted while their files stay as they were
	Evicted        int64   `json:"evicted"`
	Backlog        int     `json:"backlog"` // samples waiting to be written
	BacklogBytes   int64   `json:"backlog_bytes"`
}

// CopyStats is the training copy (vidfs mount --cache-dir with --cache-keep copy): each frame
// the samples use, kept once a video. Hits and misses count loads served whole from it or not.
type CopyStats struct {
	Dir   string `json:"dir"`
	Codec string `json:"codec"` // how this mount writes frames: none, lz4 or zstd
	Fill  string `json:"fill"`  // auto, clips (the frames of samples decoded) or videos (whole videos too)
	// CapacityBytes is the bound now: --cache-disk, or by default what the filesystem has room
	// for less KeepFreeBytes, which the copy leaves free (giving room back when others take it).
	CapacityBytes int64 `json:"capacity_bytes"`
	KeepFreeBytes int64 `json:"keep_free_bytes,omitempty"`
	UsedBytes     int64 `json:"used_bytes"`
	// EstimatedBytes is what the whole copy takes, estimated: every frame the samples use, at
	// what a frame takes with the codec (measured on frames written or a few samples, or
	// EstimateAssumed: the codec's typical ratio), with each video's index. Fits is the share of
	// it the bound holds (1: all of it): about the share of the videos the copy keeps.
	EstimatedBytes  int64   `json:"estimated_bytes"`
	EstimateAssumed bool    `json:"estimate_assumed,omitempty"`
	Fits            float64 `json:"fits"`
	// Admitted counts videos taken in this mount before their frames were decoded, Refused the
	// times one was not (no room promised for it: its frames are not decoded for the copy), and
	// PromisedBytes the room promised to videos admitted that their frames have not taken yet.
	Admitted      int64 `json:"admitted"`
	Refused       int64 `json:"refused"`
	PromisedBytes int64 `json:"promised_bytes"`
	GivenBack     int64 `json:"given_back_bytes,omitempty"` // evicted for other files of the filesystem
	LayoutVideos  int   `json:"layout_videos"`              // videos of the layout
	// VideosWithSamples is how many of them yield a sample: those the copy can hold whole.
	VideosWithSamples int   `json:"videos_with_samples"`
	Videos            int   `json:"videos"`   // with a copy
	Complete          int   `json:"complete"` // whose frames the samples use are all there
	Partial           int   `json:"partial"`
	Frames            int64 `json:"frames"`
	// BytesPerFrame and Ratio are of the frames this mount wrote.
	BytesPerFrame   float64 `json:"bytes_per_frame"`
	Ratio           float64 `json:"compression_ratio"`
	Hits            int64   `json:"hits"`
	Misses          int64   `json:"misses"`
	HitRate         float64 `json:"hit_rate"`
	WrittenFrames   int64   `json:"written_frames"`
	FramesPerSecond float64 `json:"frames_per_second"` // put in the copy, lately
	FillQueued      int     `json:"fill_queued"`       // videos waiting to be decoded whole (vidfs copy)
	Filling         int     `json:"filling"`           // videos being decoded whole now
	WholeFills      int64   `json:"whole_fills"`       // videos whose whole decode started this mount
	// IdleFills counts those of them decoded at SCHED_IDLE, in the CPU the readers left (auto).
	IdleFills int64 `json:"idle_fills"`
	// WholeFillsFailed counts those that ended before the video's end: damage (the rest is left
	// to the samples' own decodes), no room, or another decode path's frames held.
	WholeFillsFailed int64 `json:"whole_fills_failed"`
	// FillBudget is --copy-fill auto's budget for whole decodes; absent in the other modes.
	FillBudget *FillBudget `json:"fill_budget,omitempty"`
	// Share is the node's share vidfs copy --nodes asked to fill; absent when none was.
	Share        *CopyShare `json:"share,omitempty"`
	Skipped      int64      `json:"skipped"`      // frames not written: no room within the bound, or the disk refused
	BacklogFull  int64      `json:"backlog_full"` // frames not queued: the writer's backlog full (kept by a later decode)
	OldFiles     int        `json:"old_files"`    // files of an earlier format, kept (removed oldest first when the disk is full)
	OldBytes     int64      `json:"old_bytes"`    // their bytes, not counted in used_bytes
	Corrupt      int64      `json:"corrupt"`      // damaged frames or files found, decoded and written again
	ReadErrors   int64      `json:"read_errors"`  // reads the disk refused (EMFILE, EIO ...): kept, the sample decoded
	Evicted      int64      `json:"evicted"`      // videos
	Backlog      int        `json:"backlog"`      // samples' frames waiting to be written
	BacklogBytes int64      `json:"backlog_bytes"`
}

// CopyShare is a node's share of the videos (the placement rule, vidfs copy --nodes): the videos
// placed on it, and how many of them the copy holds whole.
type CopyShare struct {
	Node   string `json:"node"` // its number, or its host name
	Nodes  int    `json:"nodes"`
	Seed   uint64 `json:"seed"`
	Weigh  string `json:"weigh"` // what balances the nodes: samples or videos
	Videos int    `json:"videos"`
	// Whole counts the share's videos found whole, or decoded whole, since it was asked for.
	Whole int `json:"whole"`
}

// FillBudget is the CPU time --copy-fill auto lets whole-video decodes take: each sample served
// grants a share of a clip's decode, and each served from the copy the decode it saved.
type FillBudget struct {
	Seconds        float64 `json:"seconds"` // what fills may spend now (below 0: owed)
	GrantedSeconds float64 `json:"granted_seconds"`
	SpentSeconds   float64 `json:"spent_seconds"`
	ClipSeconds    float64 `json:"clip_seconds"` // a clip's decode, as measured lately
	// EpochsLeft is what the readers last said of their run (.vidfs/epochs, PlanSampler(epochs=)):
	// the epochs left, the current one included; 0: not said. With 4 or more left, each read
	// grants 2 clips' decode, not a quarter (whole decodes repay themselves in such a run).
	EpochsLeft   int     `json:"epochs_left,omitempty"`
	ChunkSeconds float64 `json:"chunk_seconds"` // a chunk of a whole decode, expected
}

// PlanStats is where the readers are in their plans, and how much is ready ahead of them, over
// all the plans: lengths, positions and counts are sums; ready_ahead and ready_in_window are
// over what is due next in all of them, soonest first.
type PlanStats struct {
	Length        int   `json:"length"`
	Position      int   `json:"position"`
	PrefetchDepth int   `json:"prefetch_depth"`
	ReadyAhead    int   `json:"ready_ahead"`     // upcoming samples ready, without a gap
	ReadyInWindow int   `json:"ready_in_window"` // of the next upcoming samples, how many are ready
	Upcoming      int   `json:"upcoming"`        // samples due next over every plan, at most prefetch_depth
	OnPlanReads   int64 `json:"on_plan_reads"`
	OffPlanReads  int64 `json:"off_plan_reads"`
	Skipped       int64 `json:"skipped"` // plan entries given up as never read
	Writes        int64 `json:"writes"`  // plans written (replaced or appended)
	Active        int   `json:"active"`  // plans read or written within the idle time
}

// PlanEntry is one reader's plan (.vidfs/plans/NAME; .vidfs/order is the one named "default"):
// where its reader is, at what pace, and how it was served.
type PlanEntry struct {
	Name        string  `json:"name"`
	Length      int     `json:"length"`
	Position    int     `json:"position"`
	Active      bool    `json:"active"`      // read or written within the idle time; if not, it holds no cache
	Pace        float64 `json:"pace"`        // its reader's samples per second lately
	IdleSeconds float64 `json:"idle_s"`      // since it was last read or written
	ReadyAhead  int     `json:"ready_ahead"` // of its next samples, how many are ready without a gap
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	HitRate     float64 `json:"hit_rate"`
	WaitSeconds float64 `json:"wait_s"`
	OnPlanReads int64   `json:"on_plan_reads"`
	Skipped     int64   `json:"skipped"`
	Writes      int64   `json:"writes"`
}

// DecodeStats is the decoders' work. frames_decoded / frames_served is the decode amplification.
type DecodeStats struct {
	Workers  int   `json:"workers"`
	InFlight int   `json:"in_flight"`
	Queued   int   `json:"queued"`
	Clips    int64 `json:"clips"` // samples decoded (not those the disk tier or the copy served)
	// FillClips counts the chunks of frames whole-video decodes for the training copy took.
	FillClips      int64        `json:"fill_clips"`
	Failed         int64        `json:"failed"`
	Prefetched     int64        `json:"prefetched"` // decodes started ahead of a read
	OnDemand       int64        `json:"on_demand"`  // decodes started by a read's miss
	Cancelled      int64        `json:"cancelled"`  // queued prefetches dropped before they ran
	ClipsPerSecond float64      `json:"clips_per_s"`
	ByDecoder      DecoderClips `json:"by_decoder"`
	GPUFallbacks   int64        `json:"gpu_fallbacks"` // videos moved to the CPU after NVDEC failed
	FramesDecoded  int64        `json:"frames_decoded"`
	FramesServed   int64        `json:"frames_served"`
	Amplification  float64      `json:"amplification"`
	Seeks          int64        `json:"seeks"`
	DecodersOpened int64        `json:"decoders_opened"`
	// DecodersAdopted counts clips of a video that went to an idle GPU decoder of another video
	// encoded alike, where a new NVDEC decoder would have been opened.
	DecodersAdopted int64 `json:"decoders_adopted"`
	// FailedTransient counts decodes that failed for a reason that may pass (descriptors short, a
	// disk or the source's network down), unlike Failed (the video's own damage): the reads
	// waiting got EIO, and the sample is decoded again when next read or prefetched.
	FailedTransient int64 `json:"failed_transient"`
	// GPUs are the GPUs decoded on (none: the CPU alone).
	GPUs []GPUStats `json:"gpus,omitempty"`
	// Helpers is the sandboxed decoder processes (--decoders isolated); nil: decoding in-process.
	Helpers *HelperStats `json:"helpers,omitempty"`
}

// HelperStats is what the sandboxed decoder processes met.
type HelperStats struct {
	Serving int   `json:"serving"` // helpers serving now
	Started int64 `json:"started"` // helpers started, replacements and lone retries included
	Crashes int64 `json:"crashes"` // helpers that died (a signal, an exit) while decoding
	Hangs   int64 `json:"hangs"`   // helpers killed because a decode passed its deadline
	Retries int64 `json:"retries"` // clips decoded again, alone in a fresh helper, after their helper died or failed inside FFmpeg
	// VideosHeld counts videos held damaged for the mount: they crashed a helper twice, the
	// second time alone (listed in .vidfs/failed).
	VideosHeld     int64   `json:"videos_held"`
	LandlockABI    int     `json:"landlock_abi"`    // the Landlock ABI they are confined under (0: none)
	ReplaceSeconds float64 `json:"replace_seconds"` // how long the last replacement of a dead helper took
	ResidentBytes  int64   `json:"resident_bytes"`  // their resident memory, summed
	// Background counts the clips decoded in the time the readers leave (the training copy's
	// idle fills), IdleDecodes those of them that ran at SCHED_IDLE in their helper.
	Background  int64 `json:"background"`
	IdleDecodes int64 `json:"idle_decodes"`
}

// GPUStats is one GPU's decoders.
type GPUStats struct {
	Index       int   `json:"index"`        // the CUDA device number, among those the mount sees
	Decoders    int   `json:"decoders"`     // NVDEC decoders open on it, busy or idle
	MaxDecoders int   `json:"max_decoders"` // --gpu-decoders: the bound on decoders
	Clips       int64 `json:"clips"`        // samples NVDEC decoded on it
	// DecoderMemoryBytes estimates the GPU memory of its open decoders: NV12 surfaces of each
	// video's coded size (rounded up to 16) times the surfaces FFmpeg has NVDEC allocate for the
	// codec at most (19 for H.264 and HEVC). The device's CUDA context takes its own beside.
	DecoderMemoryBytes int64 `json:"decoder_memory_bytes"`
}

// DecoderClips counts the samples each kind of decoder decoded.
type DecoderClips struct {
	NVDEC int64 `json:"nvdec"`
	CPU   int64 `json:"cpu"`
}

// MemoryStats is the mount process's resident memory by part, each measured as resident, so
// that the parts add up to ResidentBytes: the cache's sample buffers (mapped outside the Go heap,
// resident as samples are written into them), the disk tier's files the cache serves from
// (mapped), the Go heap (the FUSE request buffers, the tier's write backlog, zstd's state), the
// Go runtime's own, and the rest, native: FFmpeg's decoders and filter graphs (glibc malloc),
// the binary and thread stacks.
type MemoryStats struct {
	ResidentBytes    int64 `json:"resident_bytes"`     // VmRSS
	CacheBytes       int64 `json:"cache_bytes"`        // sample buffers resident (mincore); those lent samples leave unused have their pages given back
	GoHeapBytes      int64 `json:"go_heap_bytes"`      // the Go heap's arenas resident: objects, free spans not yet given back, goroutine stacks
	GoRuntimeBytes   int64 `json:"go_runtime_bytes"`   // what the Go runtime holds outside its heap: metadata, OS thread stacks
	TierBacklogBytes int64 `json:"tier_backlog_bytes"` // samples waiting to be written to the disk tier (in the Go heap)
	// Samples the memory cache serves from disk tier files mapped from the page cache (in place
	// of their buffers, which wait unused with their memory given back): their pages resident
	// in the process, those that were read.
	TierMappedBytes int64 `json:"tier_mapped_bytes"`
	NativeBytes     int64 `json:"native_bytes"` // resident less all the above: FFmpeg, the binary, C stacks
	// GoHeapObjectsBytes is what the Go heap's objects take, live and not yet collected, as the
	// runtime counts them (not a part: buffers it handed out whose pages were never touched
	// count here, not in ResidentBytes).
	GoHeapObjectsBytes int64 `json:"go_heap_objects_bytes"`
	// GoHeapLiveBytes is the heap's live objects as the last collection found them, and
	// GoMemoryLimitBytes the soft limit the collector keeps the heap under (following the live
	// heap, or GOMEMLIMIT's).
	GoHeapLiveBytes    int64 `json:"go_heap_live_bytes"`
	GoMemoryLimitBytes int64 `json:"go_memory_limit_bytes"`
	// GCCycles counts the Go collector's cycles, and GCSeconds the CPU they took (an estimate
	// of the runtime's), since the mount started: collections back to back show as many cycles a
	// second, and a large share of the CPU.
	GCCycles  int64   `json:"gc_cycles"`
	GCSeconds float64 `json:"gc_cpu_seconds"`
}

// ReadStats is what readers asked for and how long they waited.
type ReadStats struct {
	Requests    int64   `json:"requests"`
	Bytes       int64   `json:"bytes"`
	Accesses    int64   `json:"accesses"` // reads that started an access to a sample
	WaitSeconds float64 `json:"wait_s"`   // total time readers waited for samples to be decoded
	// Under --on-error substitute or zeros: accesses to failed samples served with another
	// sample, and with zeros (.vidfs/failed lists the samples).
	Substituted int64 `json:"substituted"`
	Zeroed      int64 `json:"zeroed"`
	// Samples handed whole to the kernel's page cache after a memory-mapped reader faulted on two
	// adjacent pages of them, so that its other faults do not each reach vidfs.
	PageFills int64   `json:"page_fills"`
	LatencyMs Latency `json:"latency_ms"`
}

// Latency is a distribution of read request latencies, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Problem is a video or sample that could not be served, or a plan that was refused, and why.
type Problem struct {
	Time   time.Time `json:"time"`
	File   string    `json:"file"`
	Sample int       `json:"sample"`          // -1 for a whole video, or a plan
	Frame  *int      `json:"frame,omitempty"` // the frame concerned, when known
	Reason string    `json:"reason"`          // what went wrong, without the file and frame
}
