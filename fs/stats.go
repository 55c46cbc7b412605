package fs

import (
	rtmetrics "runtime/metrics"
	"time"

	"github.com/vidfs/vidfs/cache"

	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/internal/wire"
)

// Stats returns a snapshot of the mount's state and counters, as .vidfs/stats shows it.
func (f *FS) Stats() wire.Stats {
	now := time.Now()
	cs := f.cache.Stats()
	ts := f.plans.Stats()
	ds := f.cfg.Decoder.Stats()
	var gpus []wire.GPUStats
	for _, g := range ds.GPUs {
		gpus = append(gpus, wire.GPUStats{Index: g.Index, Decoders: g.Decoders, MaxDecoders: g.MaxDecoders, Clips: g.Clips, DecoderMemoryBytes: g.MemoryBytes})
	}
	depth := f.cache.Depth()
	upcoming := f.plans.Upcoming(nil, depth)
	ahead, inWindow := f.cache.ReadyAhead(upcoming)
	S := f.lay.Spec.SampleBytes()
	tier := f.tierStats()
	var backlog int64
	if tier != nil {
		backlog = tier.BacklogBytes
	}

	r := &f.reads
	r.mu.Lock()
	hits, misses, requests, bytes, waited := r.all.hits, r.all.misses, r.requests, r.bytes, r.all.waited
	r.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	substituted, zeroed := f.failed.counts()

	plan := wire.PlanStats{PrefetchDepth: depth, ReadyAhead: ahead, ReadyInWindow: inWindow, Upcoming: len(upcoming), OnPlanReads: ts.OnPlan, OffPlanReads: ts.OffPlan}
	plans := []wire.PlanEntry{}
	for _, p := range ts.Plans {
		e := wire.PlanEntry{Name: p.Name, Length: p.Length, Position: p.Position, Active: p.Active, Pace: p.Pace,
			IdleSeconds: now.Sub(p.LastUse).Seconds(), Hits: p.Hits, Misses: p.Misses, WaitSeconds: p.Waited.Seconds(),
			OnPlanReads: p.OnPlan, Skipped: p.Skipped, Writes: p.Writes}
		e.ReadyAhead, _ = f.cache.ReadyAhead(f.plans.UpcomingOf(p.Name, nil, depth))
		if n := p.Hits + p.Misses; n > 0 {
			e.HitRate = float64(p.Hits) / float64(n)
		}
		plans = append(plans, e)
		plan.Length += p.Length
		plan.Position += p.Position
		plan.Skipped += p.Skipped
		plan.Writes += p.Writes
		if p.Active {
			plan.Active++
		}
	}

	st := wire.Stats{
		Time: now, UptimeSeconds: now.Sub(f.start).Seconds(), Source: f.cfg.Source,
		Samples: f.lay.Len(), SampleBytes: S,
		Cache: wire.CacheStats{
			CapacitySamples: cs.Capacity, CapacityBytes: int64(cs.Capacity) * S,
			UsedSamples: cs.Used, UsedBytes: int64(cs.Used) * S, ReadySamples: cs.Ready, PinnedSamples: cs.Pinned,
			Hits: hits, Misses: misses, Evicted: cs.Evicted, EvictedUnread: cs.EvictedUnread,
		},
		Plan:  plan,
		Plans: plans,
		Decode: wire.DecodeStats{
			Workers: f.cache.Workers(), InFlight: cs.Loading, Queued: cs.Queued,
			Clips: ds.ClipsCPU + ds.ClipsGPU, Failed: cs.Failed, FailedTransient: cs.Transient, Prefetched: cs.Prefetched, OnDemand: cs.Demand, Cancelled: cs.Cancelled,
			ClipsPerSecond: f.decodeRate.PerSecond(now),
			ByDecoder:      wire.DecoderClips{NVDEC: ds.ClipsGPU, CPU: ds.ClipsCPU}, GPUFallbacks: ds.GPUFallbacks,
			FramesDecoded: ds.Frames, FramesServed: (hits + misses) * int64(f.lay.Spec.Frames),
			Seeks: ds.Seeks, DecodersOpened: ds.Opens, DecodersAdopted: ds.Adoptions, GPUs: gpus,
		},
		Reads: wire.ReadStats{
			Requests: requests, Bytes: bytes, Accesses: ts.Accesses, WaitSeconds: waited.Seconds(),
			Substituted: substituted, Zeroed: zeroed, PageFills: f.pages.filled.Load(),
			LatencyMs: wire.Latency{
				P50: ms(r.latency.Quantile(0.5)), P90: ms(r.latency.Quantile(0.9)),
				P99: ms(r.latency.Quantile(0.99)), Max: ms(r.latency.Max()),
			},
		},
		Tier:   tier,
		Memory: f.memory(cs, backlog),
		Scan:   f.cfg.Scan,
		Errors: f.problems.snapshot(),
	}
	if n := hits + misses; n > 0 {
		st.Cache.HitRate = float64(hits) / float64(n)
	}
	if f.cfg.FetchStats != nil {
		fetch := f.cfg.FetchStats()
		if st.Decode.Clips > 0 {
			fetch.BytesPerSample = float64(fetch.BytesFetched) / float64(st.Decode.Clips)
		}
		st.Fetch = &fetch
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
	d := wire.Dataset{
		Samples: f.lay.Len(), Frames: sp.Frames, Height: sp.Height, Width: sp.Width, Channels: 3, DType: "uint8",
		SampleBytes: sp.SampleBytes(), NpyHeaderBytes: len(f.lay.NpyHeader()), Stride: sp.Stride, Step: sp.Step,
		ClipsPerVideo: sp.ClipsPerVideo, Resize: f.cfg.Resize.String(), Decode: decodeMode(f.cfg.Fast), PadShort: sp.PadShort,
		Videos: len(f.lay.Videos), Classes: len(f.lay.Classes), Source: f.cfg.Source,
	}
	if sp.FPS.Set() {
		d.FPS = float64(sp.FPS.Num) / float64(sp.FPS.Den)
	}
	return d
}

// decodeMode names how samples are decoded, as --decode does.
func decodeMode(fast bool) string {
	if fast {
		return "fast"
	}
	return "exact"
}

// memory is the process's resident memory by part (wire.MemoryStats).
func (f *FS) memory(cs cache.Stats, backlog int64) wire.MemoryStats {
	S := f.lay.Spec.SampleBytes()
	// The buffers of lent samples wait with their pages given back: the mappings stand for them.
	m := wire.MemoryStats{CacheBytes: int64(cs.Allocated-cs.Lent) * S, TierBacklogBytes: backlog, TierMappedBytes: int64(cs.Lent) * S}
	if p, err := f.proc.Self(); err == nil {
		if st, err := p.NewStatus(); err == nil {
			m.ResidentBytes = int64(st.VmRSS)
		}
	}
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	m.GoHeapBytes = int64(s[0].Value.Uint64())
	// Released heap memory is returned to the kernel: not resident.
	m.GoRuntimeBytes = int64(s[1].Value.Uint64()) - int64(s[2].Value.Uint64()) - m.GoHeapBytes
	m.NativeBytes = max(0, m.ResidentBytes-m.CacheBytes-m.TierMappedBytes-m.GoHeapBytes-m.GoRuntimeBytes)
	return m
}
