package fs

import (
	"time"

	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
)

// Stats returns a snapshot of the mount's state and counters, as .vidfs/stats shows it.
func (f *FS) Stats() wire.Stats {
	now := time.Now()
	cs := f.cache.Stats()
	ts := f.tracker.Stats()
	ds := f.cfg.Decoder.Stats()
	pos, length := f.tracker.Position()
	depth := f.cache.Depth()
	ahead, inWindow := f.cache.ReadyAhead(f.tracker.Upcoming(nil, depth))
	S := f.lay.Spec.SampleBytes()

	r := &f.reads
	r.mu.Lock()
	hits, misses, requests, bytes, waited := r.hits, r.misses, r.requests, r.bytes, r.waited
	r.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

	st := wire.Stats{
		Time: now, UptimeSeconds: now.Sub(f.start).Seconds(), Source: f.cfg.Source,
		Samples: f.lay.Len(), SampleBytes: S,
		Cache: wire.CacheStats{
			CapacitySamples: cs.Capacity, CapacityBytes: int64(cs.Capacity) * S,
			UsedSamples: cs.Used, UsedBytes: int64(cs.Used) * S, ReadySamples: cs.Ready, PinnedSamples: cs.Pinned,
			Hits: hits, Misses: misses, Evicted: cs.Evicted, EvictedUnread: cs.EvictedUnread,
		},
		Plan: wire.PlanStats{
			Length: length, Position: pos, PrefetchDepth: depth, ReadyAhead: ahead, ReadyInWindow: inWindow,
			OnPlanReads: ts.OnPlan, OffPlanReads: ts.OffPlan, Skipped: ts.Skipped, Plans: ts.Plans,
		},
		Decode: wire.DecodeStats{
			Workers: f.cache.Workers(), InFlight: cs.Loading, Queued: cs.Queued,
			Clips: cs.Loaded, Failed: cs.Failed, Prefetched: cs.Prefetched, OnDemand: cs.Demand, Cancelled: cs.Cancelled,
			ClipsPerSecond: f.decodeRate.PerSecond(now),
			ByDecoder:      wire.DecoderClips{NVDEC: ds.ClipsGPU, CPU: ds.ClipsCPU}, GPUFallbacks: ds.GPUFallbacks,
			FramesDecoded: ds.Frames, FramesServed: (hits + misses) * int64(f.lay.Spec.Frames),
			Seeks: ds.Seeks, DecodersOpened: ds.Opens,
		},
		Reads: wire.ReadStats{
			Requests: requests, Bytes: bytes, Accesses: ts.Accesses, WaitSeconds: waited.Seconds(),
			LatencyMs: wire.Latency{
				P50: ms(r.latency.Quantile(0.5)), P90: ms(r.latency.Quantile(0.9)),
				P99: ms(r.latency.Quantile(0.99)), Max: ms(r.latency.Max()),
			},
		},
		Errors: f.problems.snapshot(),
	}
	if n := hits + misses; n > 0 {
		st.Cache.HitRate = float64(hits) / float64(n)
	}
	if st.Decode.FramesServed > 0 {
		st.Decode.Amplification = float64(st.Decode.FramesDecoded) / float64(st.Decode.FramesServed)
	}
	return st
}

// ReadLatency returns the distribution of read request latencies since the mount started.
func (f *FS) ReadLatency() metrics.Cumulative { return f.reads.latency.Cumulative() }

// dataset is .vidfs/layout.json.
func (f *FS) dataset() wire.Dataset {
	sp := f.lay.Spec
	return wire.Dataset{
		Samples: f.lay.Len(), Frames: sp.Frames, Height: sp.Height, Width: sp.Width, Channels: 3, DType: "uint8",
		SampleBytes: sp.SampleBytes(), NpyHeaderBytes: len(f.lay.NpyHeader()), Stride: sp.Stride, Step: sp.Step,
		ClipsPerVideo: sp.ClipsPerVideo, Resize: f.cfg.Resize.String(), PadShort: sp.PadShort,
		Videos: len(f.lay.Videos), Classes: len(f.lay.Classes), Source: f.cfg.Source,
	}
}
