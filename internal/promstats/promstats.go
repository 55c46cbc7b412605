// Package promstats exports a mount's stats (the same counters as .vidfs/stats) as Prometheus
// metrics, taking one snapshot per scrape. The read latency histogram is the mount's own
// (metrics.Histogram.Collector), registered beside it.
package promstats

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidfs/vidfs/internal/wire"
)

type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(s *wire.Stats) float64
}

// Collector is a prometheus.Collector over a stats snapshot function.
type Collector struct {
	snapshot  func() wire.Stats
	metrics   []metric
	byDecoder *prometheus.Desc
	perPlan   []planMetric
}

// planMetric is a metric of each plan, labelled by its name.
type planMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(p *wire.PlanEntry) float64
}

// New returns a collector that calls snapshot at each scrape.
func New(snapshot func() wire.Stats) *Collector {
	c := &Collector{snapshot: snapshot}
	add := func(name, help string, kind prometheus.ValueType, v func(s *wire.Stats) float64) {
		c.metrics = append(c.metrics, metric{prometheus.NewDesc("vidfs_"+name, help, nil, nil), kind, v})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	add("samples", "Samples the mount serves.", gauge, func(s *wire.Stats) float64 { return float64(s.Samples) })
	add("cache_capacity_bytes", "Memory for decoded samples.", gauge, func(s *wire.Stats) float64 { return float64(s.Cache.CapacityBytes) })
	add("cache_used_bytes", "Memory holding samples decoded or being decoded.", gauge, func(s *wire.Stats) float64 { return float64(s.Cache.UsedBytes) })
	add("cache_ready_samples", "Samples decoded and ready.", gauge, func(s *wire.Stats) float64 { return float64(s.Cache.ReadySamples) })
	add("cache_pinned_samples", "Ready samples readers are copying from.", gauge, func(s *wire.Stats) float64 { return float64(s.Cache.PinnedSamples) })
	add("cache_hits_total", "Sample accesses that found the sample ready.", counter, func(s *wire.Stats) float64 { return float64(s.Cache.Hits) })
	add("cache_misses_total", "Sample accesses that waited for a decode.", counter, func(s *wire.Stats) float64 { return float64(s.Cache.Misses) })
	add("cache_evicted_total", "Samples dropped to make room.", counter, func(s *wire.Stats) float64 { return float64(s.Cache.Evicted) })
	add("cache_evicted_unread_total", "Samples dropped before anyone read them.", counter, func(s *wire.Stats) float64 { return float64(s.Cache.EvictedUnread) })
	add("plan_length", "Entries in all the plans.", gauge, func(s *wire.Stats) float64 { return float64(s.Plan.Length) })
	add("plan_position", "The readers' positions in their plans, summed.", gauge, func(s *wire.Stats) float64 { return float64(s.Plan.Position) })
	add("plans_active", "Plans read or written within the idle time.", gauge, func(s *wire.Stats) float64 { return float64(s.Plan.Active) })
	add("plan_ready_ahead", "Upcoming samples ready, without a gap.", gauge, func(s *wire.Stats) float64 { return float64(s.Plan.ReadyAhead) })
	add("plan_prefetch_depth", "Samples kept decoded ahead of the reader.", gauge, func(s *wire.Stats) float64 { return float64(s.Plan.PrefetchDepth) })
	add("plan_on_plan_reads_total", "Sample accesses the plan expected.", counter, func(s *wire.Stats) float64 { return float64(s.Plan.OnPlanReads) })
	add("plan_off_plan_reads_total", "Sample accesses the plan did not expect.", counter, func(s *wire.Stats) float64 { return float64(s.Plan.OffPlanReads) })
	add("plan_skipped_total", "Plan entries given up as never read.", counter, func(s *wire.Stats) float64 { return float64(s.Plan.Skipped) })
	add("plan_writes_total", "Plans written (replaced or appended).", counter, func(s *wire.Stats) float64 { return float64(s.Plan.Writes) })
	add("decode_in_flight", "Samples being decoded.", gauge, func(s *wire.Stats) float64 { return float64(s.Decode.InFlight) })
	add("decode_queued", "Samples waiting for a decoder.", gauge, func(s *wire.Stats) float64 { return float64(s.Decode.Queued) })
	add("decode_clips_total", "Samples decoded.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.Clips) })
	add("decode_failed_total", "Samples whose decode failed.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.Failed) })
	add("decode_failed_transient_total", "Decodes that failed for a reason that may pass (I/O, descriptors, network); the sample is tried again.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.FailedTransient) })
	add("decode_prefetched_total", "Decodes started ahead of a read.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.Prefetched) })
	add("decode_on_demand_total", "Decodes started by a read's miss.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.OnDemand) })
	add("decode_cancelled_total", "Queued prefetches dropped before they ran.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.Cancelled) })
	add("decode_gpu_fallbacks_total", "Videos moved to the CPU after NVDEC failed on them.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.GPUFallbacks) })
	add("decode_frames_total", "Frames out of the decoders, needed or not.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.FramesDecoded) })
	add("decode_seeks_total", "Seeks the decoders made.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.Seeks) })
	add("decode_decoders_opened_total", "Decoders opened.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.DecodersOpened) })
	add("decode_decoders_adopted_total", "Idle GPU decoders that went on to another video encoded alike instead of a decoder being opened.", counter,
		func(s *wire.Stats) float64 { return float64(s.Decode.DecodersAdopted) })
	helpers := func(get func(h *wire.HelperStats) float64) func(s *wire.Stats) float64 {
		return func(s *wire.Stats) float64 {
			if s.Decode.Helpers == nil {
				return 0
			}
			return get(s.Decode.Helpers)
		}
	}
	add("decode_helpers", "Sandboxed decoder processes serving.", gauge, helpers(func(h *wire.HelperStats) float64 { return float64(h.Serving) }))
	add("decode_helper_crashes_total", "Decoder helpers that died (a signal, an exit) while decoding.", counter, helpers(func(h *wire.HelperStats) float64 { return float64(h.Crashes) }))
	add("decode_helper_hangs_total", "Decoder helpers killed because a decode passed its deadline.", counter, helpers(func(h *wire.HelperStats) float64 { return float64(h.Hangs) }))
	add("decode_helper_retries_total", "Clips decoded again, alone in a fresh helper, after their helper died.", counter, helpers(func(h *wire.HelperStats) float64 { return float64(h.Retries) }))
	add("decode_videos_held_crashed", "Videos held damaged for the mount: they crashed a decoder helper twice.", gauge, helpers(func(h *wire.HelperStats) float64 { return float64(h.VideosHeld) }))
	add("decode_helpers_resident_bytes", "Resident memory of the decoder helpers, summed.", gauge, helpers(func(h *wire.HelperStats) float64 { return float64(h.ResidentBytes) }))
	add("served_frames_total", "Frames in the samples served to readers.", counter, func(s *wire.Stats) float64 { return float64(s.Decode.FramesServed) })
	add("read_requests_total", "Read requests.", counter, func(s *wire.Stats) float64 { return float64(s.Reads.Requests) })
	add("read_bytes_total", "Bytes read.", counter, func(s *wire.Stats) float64 { return float64(s.Reads.Bytes) })
	add("read_accesses_total", "Reads that started an access to a sample.", counter, func(s *wire.Stats) float64 { return float64(s.Reads.Accesses) })
	add("read_wait_seconds_total", "Time readers waited for samples to be decoded.", counter, func(s *wire.Stats) float64 { return s.Reads.WaitSeconds })
	add("read_substituted_total", "Accesses to failed samples served with another sample.", counter, func(s *wire.Stats) float64 { return float64(s.Reads.Substituted) })
	add("read_zeroed_total", "Accesses to failed samples served with zeros.", counter, func(s *wire.Stats) float64 { return float64(s.Reads.Zeroed) })
	add("read_page_fills_total", "Samples put whole in the page cache for memory-mapped readers.", counter, func(s *wire.Stats) float64 { return float64(s.Reads.PageFills) })
	add("memory_resident_bytes", "Resident memory of the mount process.", gauge, func(s *wire.Stats) float64 { return float64(s.Memory.ResidentBytes) })
	add("memory_cache_bytes", "Sample buffers resident.", gauge, func(s *wire.Stats) float64 { return float64(s.Memory.CacheBytes) })
	add("memory_tier_mapped_bytes", "Samples served from disk tier files mapped from the page cache, resident in the process.", gauge, func(s *wire.Stats) float64 { return float64(s.Memory.TierMappedBytes) })
	add("memory_go_heap_bytes", "The Go heap resident: objects, free spans not yet given back, goroutine stacks.", gauge, func(s *wire.Stats) float64 { return float64(s.Memory.GoHeapBytes) })
	add("memory_go_heap_objects_bytes", "Go heap objects, live and not yet collected, resident or not (not a part of the resident memory).", gauge,
		func(s *wire.Stats) float64 { return float64(s.Memory.GoHeapObjectsBytes) })
	add("memory_go_runtime_bytes", "Memory the Go runtime holds outside its heap: metadata, OS thread stacks.", gauge, func(s *wire.Stats) float64 { return float64(s.Memory.GoRuntimeBytes) })
	add("memory_native_bytes", "Resident memory outside the cache and Go: FFmpeg, the binary.", gauge, func(s *wire.Stats) float64 { return float64(s.Memory.NativeBytes) })
	tier := func(v func(t *wire.TierStats) float64) func(s *wire.Stats) float64 {
		return func(s *wire.Stats) float64 {
			if s.Tier == nil {
				return 0
			}
			return v(s.Tier)
		}
	}
	cp := func(v func(c *wire.CopyStats) float64) func(s *wire.Stats) float64 {
		return func(s *wire.Stats) float64 {
			if s.Copy == nil {
				return 0
			}
			return v(s.Copy)
		}
	}
	add("copy_capacity_bytes", "Bound on the training copy (0: none).", gauge, cp(func(c *wire.CopyStats) float64 { return float64(c.CapacityBytes) }))
	add("copy_used_bytes", "Bytes of the training copy's files.", gauge, cp(func(c *wire.CopyStats) float64 { return float64(c.UsedBytes) }))
	add("copy_videos", "Videos with frames in the training copy.", gauge, cp(func(c *wire.CopyStats) float64 { return float64(c.Videos) }))
	add("copy_videos_complete", "Videos whose frames the samples use are all in the training copy.", gauge, cp(func(c *wire.CopyStats) float64 { return float64(c.Complete) }))
	add("copy_frames", "Frames in the training copy.", gauge, cp(func(c *wire.CopyStats) float64 { return float64(c.Frames) }))
	add("copy_hits_total", "Loads the training copy served whole.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.Hits) }))
	add("copy_misses_total", "Loads the training copy did not hold whole, decoded instead.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.Misses) }))
	add("copy_written_frames_total", "Frames written to the training copy.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.WrittenFrames) }))
	add("copy_fill_frames_per_second", "Frames put in the training copy a second, lately.", gauge, cp(func(c *wire.CopyStats) float64 { return c.FramesPerSecond }))
	add("copy_skipped_frames_total", "Frames not written to the training copy: no room within its bound, or the disk refused.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.Skipped) }))
	add("copy_backlog_full_frames_total", "Frames not queued for the training copy: its writer's backlog full (kept by a later decode).", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.BacklogFull) }))
	add("copy_whole_fills_total", "Videos whose whole decode into the training copy started.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.WholeFills) }))
	add("copy_whole_fills_failed_total", "Whole decodes into the training copy that ended early (damage, no room).", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.WholeFillsFailed) }))
	add("copy_old_bytes", "Bytes of files of an earlier format of the training copy, kept.", gauge, cp(func(c *wire.CopyStats) float64 { return float64(c.OldBytes) }))
	add("copy_corrupt_total", "Damaged frames or files found in the training copy, decoded and written again.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.Corrupt) }))
	add("copy_read_errors_total", "Training copy reads the disk refused (EMFILE, EIO ...): kept, and the sample decoded.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.ReadErrors) }))
	add("copy_evicted_total", "Videos evicted from the training copy.", counter, cp(func(c *wire.CopyStats) float64 { return float64(c.Evicted) }))
	fetch := func(v func(f *wire.FetchStats) float64) func(s *wire.Stats) float64 {
		return func(s *wire.Stats) float64 {
			if s.Fetch == nil {
				return 0
			}
			return v(s.Fetch)
		}
	}
	add("fetch_gets_total", "Ranged GETs of the source's objects that fetched their bytes (0: not a bucket).", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.GETs) }))
	add("fetch_bytes_total", "Bytes fetched from the source's objects.", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.BytesFetched) }))
	add("fetch_bytes_per_sample", "Bytes fetched per sample decoded.", gauge, fetch(func(f *wire.FetchStats) float64 { return f.BytesPerSample }))
	add("fetch_seconds_total", "Time of the GETs, retries included: over fetch_gets_total, the mean latency.", counter, fetch(func(f *wire.FetchStats) float64 { return f.FetchSeconds }))
	add("fetch_retries_total", "Requests to object storage tried again (timeouts, 5xx, resets, throttling).", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.Retries) }))
	add("fetch_throttled_total", "Requests object storage throttled (SlowDown, 503).", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.Throttled) }))
	add("fetch_failed_total", "GETs given up after --s3-timeout.", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.FailedGETs) }))
	add("fetch_block_hits_total", "Blocks of source bytes decoders asked for and found in memory.", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.BlockHits) }))
	add("fetch_block_misses_total", "Blocks of source bytes decoders asked for and waited for (fetched for them, or on their way).", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.BlockMisses + f.BlockWaits) }))
	add("fetch_blocks_ahead_total", "Blocks of source bytes fetched ahead of decodes, in the plans' order.", counter, fetch(func(f *wire.FetchStats) float64 { return float64(f.BlocksAhead) }))
	add("fetch_cache_bytes", "Source bytes held in memory.", gauge, fetch(func(f *wire.FetchStats) float64 { return float64(f.CacheBytes) }))
	add("tier_capacity_bytes", "Bound on the disk tier (0: no tier).", gauge, tier(func(t *wire.TierStats) float64 { return float64(t.CapacityBytes) }))
	add("tier_used_bytes", "Bytes of samples in the disk tier.", gauge, tier(func(t *wire.TierStats) float64 { return float64(t.UsedBytes) }))
	add("tier_hits_total", "Loads the disk tier served.", counter, tier(func(t *wire.TierStats) float64 { return float64(t.Hits) }))
	add("tier_misses_total", "Loads the disk tier did not hold, decoded instead.", counter, tier(func(t *wire.TierStats) float64 { return float64(t.Misses) }))
	add("tier_written_total", "Samples written to the disk tier.", counter, tier(func(t *wire.TierStats) float64 { return float64(t.Written) }))
	add("tier_skipped_total", "Samples not written to the disk tier: backlog full, no room, or the disk refused.", counter, tier(func(t *wire.TierStats) float64 { return float64(t.Skipped) }))
	add("tier_corrupt_total", "Damaged disk tier entries found, dropped and decoded again.", counter, tier(func(t *wire.TierStats) float64 { return float64(t.Corrupt) }))
	add("tier_read_errors_total", "Disk tier entries the disk would not give (EMFILE, EIO ...): kept, and the sample decoded.", counter, tier(func(t *wire.TierStats) float64 { return float64(t.ReadErrors) }))
	add("tier_backlog_bytes", "Bytes of samples waiting to be written to the disk tier.", gauge, tier(func(t *wire.TierStats) float64 { return float64(t.BacklogBytes) }))
	add("errors", "Errors on record (left-out videos, failed samples, refused plans; the last 100).", gauge, func(s *wire.Stats) float64 { return float64(len(s.Errors)) })
	plan := func(name, help string, kind prometheus.ValueType, v func(p *wire.PlanEntry) float64) {
		c.perPlan = append(c.perPlan, planMetric{prometheus.NewDesc("vidfs_plan_"+name, help, []string{"plan"}, nil), kind, v})
	}
	plan("entries", "Entries in the plan.", gauge, func(p *wire.PlanEntry) float64 { return float64(p.Length) })
	plan("reader_position", "The reader's position in the plan.", gauge, func(p *wire.PlanEntry) float64 { return float64(p.Position) })
	plan("reader_pace", "The reader's samples per second lately.", gauge, func(p *wire.PlanEntry) float64 { return p.Pace })
	plan("ready", "Of the plan's next samples, how many are ready without a gap.", gauge, func(p *wire.PlanEntry) float64 { return float64(p.ReadyAhead) })
	plan("hits_total", "Accesses counted toward the plan that found their sample ready.", counter, func(p *wire.PlanEntry) float64 { return float64(p.Hits) })
	plan("misses_total", "Accesses counted toward the plan that waited for a decode.", counter, func(p *wire.PlanEntry) float64 { return float64(p.Misses) })
	plan("wait_seconds_total", "Time the plan's readers waited for decoding.", counter, func(p *wire.PlanEntry) float64 { return p.WaitSeconds })
	plan("active", "1 if the plan was read or written within the idle time.", gauge, func(p *wire.PlanEntry) float64 {
		if p.Active {
			return 1
		}
		return 0
	})
	c.byDecoder = prometheus.NewDesc("vidfs_decode_clips_by_decoder_total", "Samples decoded, by decoder: nvdec (the GPU) or cpu.", []string{"decoder"}, nil)
	return c
}

// Describe sends the metrics' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
	ch <- c.byDecoder
	for _, m := range c.perPlan {
		ch <- m.desc
	}
}

// Collect takes a snapshot and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	for _, m := range c.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&s))
	}
	ch <- prometheus.MustNewConstMetric(c.byDecoder, prometheus.CounterValue, float64(s.Decode.ByDecoder.NVDEC), "nvdec")
	ch <- prometheus.MustNewConstMetric(c.byDecoder, prometheus.CounterValue, float64(s.Decode.ByDecoder.CPU), "cpu")
	for i := range s.Plans {
		for _, m := range c.perPlan {
			ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&s.Plans[i]), s.Plans[i].Name)
		}
	}
}
