package fs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	rtmetrics "runtime/metrics"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/internal/promstats"
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
	decoded, decodeRate := f.load.Decoded(now)
	tier := f.load.TierStats()
	var backlog int64
	if tier != nil {
		backlog = tier.BacklogBytes
	}
	cp := f.load.CopyStats()
	if cp != nil {
		backlog = cp.BacklogBytes
	}

	r := &f.reads
	r.mu.Lock()
	hits, misses, requests, bytes, waited := r.all.hits, r.all.misses, r.requests, r.bytes, r.all.waited
	r.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	lat := r.latency.Quantiles(0.5, 0.9, 0.99)
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
			Clips: decoded, FillClips: max(0, ds.ClipsCPU+ds.ClipsGPU-decoded), Failed: cs.Failed, FailedTransient: cs.Transient, Prefetched: cs.Prefetched, OnDemand: cs.Demand, Cancelled: cs.Cancelled,
			ClipsPerSecond: decodeRate,
			ByDecoder:      wire.DecoderClips{NVDEC: ds.ClipsGPU, CPU: ds.ClipsCPU}, GPUFallbacks: ds.GPUFallbacks,
			FramesDecoded: ds.Frames, FramesServed: (hits + misses) * int64(f.lay.Spec.Frames),
			Seeks: ds.Seeks, DecodersOpened: ds.Opens, DecodersAdopted: ds.Adoptions, GPUs: gpus,
		},
		Reads: wire.ReadStats{
			Requests: requests, Bytes: bytes, Accesses: ts.Accesses, WaitSeconds: waited.Seconds(),
			Substituted: substituted, Zeroed: zeroed, PageFills: f.pages.filled.Load(),
			LatencyMs: wire.Latency{P50: ms(lat[0]), P90: ms(lat[1]), P99: ms(lat[2]), Max: ms(r.latency.Max())},
		},
		Tier:   tier,
		Copy:   cp,
		Memory: f.memory(cs, backlog),
		Scan:   f.cfg.Scan,
		Errors: f.problems.snapshot(),
	}
	if iso, ok := f.cfg.Decoder.(Isolated); ok {
		h := iso.HelperStats()
		st.Decode.Helpers = &h
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

// Register adds the mount's metrics to reg, for Prometheus: its stats, a snapshot of which each
// scrape takes as .vidfs/stats does (promstats), and the read latency histogram that the read
// path observes into and .vidfs/stats takes its quantiles from.
func (f *FS) Register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(promstats.New(f.Stats)),
		reg.Register(f.reads.latency.Collector("vidfs_read_latency_seconds", "Read request latency since the mount started.")))
}

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

// memory is the process's resident memory by part (wire.MemoryStats), each part measured as
// resident: the cache's buffers by mincore, the Go heap and the tier files mapped by the resident
// pages of their mappings (/proc/self/smaps); native is what is left of VmRSS.
func (f *FS) memory(cs cache.Stats, backlog int64) wire.MemoryStats {
	m := wire.MemoryStats{TierBacklogBytes: backlog, CacheBytes: f.cache.ResidentBytes()}
	if p, err := f.proc.Self(); err == nil {
		if st, err := p.NewStatus(); err == nil {
			m.ResidentBytes = int64(st.VmRSS)
		}
	}
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/gomemlimit:bytes"},
		{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	v := func(i int) int64 { return int64(s[i].Value.Uint64()) }
	m.GoHeapObjectsBytes = v(0)
	m.GCCycles, m.GCSeconds, m.GoMemoryLimitBytes, m.GoHeapLiveBytes = v(6), s[7].Value.Float64(), v(8), v(9)
	heap := v(0) + v(2) + v(3) + v(4) + v(5) // every byte of the heap's arenas, resident or not
	// The rest of what the runtime holds lies outside the arenas: its metadata, OS thread stacks.
	m.GoRuntimeBytes = v(1) - heap
	parts, err := mappedResident(f.load.TierDir(), uintptr(unsafe.Pointer(f)))
	if err == nil {
		m.GoHeapBytes, m.TierMappedBytes = parts.goHeap, parts.tier
	} else {
		// Without smaps, the heap's spans in use, which may count pages never touched.
		m.GoHeapBytes = heap - v(2) - v(3)
		m.TierMappedBytes = int64(cs.Lent) * f.lay.Spec.SampleBytes()
	}
	m.NativeBytes = max(0, m.ResidentBytes-m.CacheBytes-m.TierMappedBytes-m.GoHeapBytes-m.GoRuntimeBytes)
	return m
}

// residentParts is what smaps says is resident of the mappings vidfs can name.
type residentParts struct {
	goHeap int64 // the Go heap's arenas: objects, free spans not yet given back, goroutine stacks
	tier   int64 // files under the disk tier's directory: samples the cache serves from them
}

// mapping is one line of /proc/self/maps, with its resident bytes from smaps.
type mapping struct {
	start, end uint64
	anon, tier bool
	rss        int64
}

// mappedResident reads /proc/self/smaps for the resident pages of the Go heap's arenas and of the
// files under tierDir ("": none). The runtime maps its arenas one after another from a base it
// picks at random (Go 1.26), far from where the kernel puts other mappings: the arenas are the
// run of adjacent anonymous mappings around heapPtr, the address of an object on the Go heap.
func mappedResident(tierDir string, heapPtr uintptr) (residentParts, error) {
	var r residentParts
	fh, err := os.Open("/proc/self/smaps")
	if err != nil {
		return r, err
	}
	defer fh.Close()
	if tierDir != "" {
		// smaps names files by their absolute paths, symbolic links resolved.
		if abs, err := filepath.Abs(tierDir); err == nil {
			tierDir = abs
		}
		if real, err := filepath.EvalSymlinks(tierDir); err == nil {
			tierDir = real
		}
		tierDir = filepath.Clean(tierDir) + "/"
	}
	tierPrefix := []byte(tierDir)
	// One pass, allocating nothing per line (a stats open reads some 20 lines a mapping): the
	// mapping being read (cur), and the run of adjacent anonymous mappings it ends (run).
	var (
		cur  mapping
		have bool
		run  struct {
			end  uint64
			rss  int64
			heap bool
		}
		inRun, gotHeap bool
	)
	closeRun := func() {
		if inRun && run.heap {
			r.goHeap, gotHeap = run.rss, true
		}
		inRun = false
	}
	finish := func() { // cur is read whole: count it
		if !have {
			return
		}
		if cur.tier {
			r.tier += cur.rss
		}
		if !cur.anon {
			closeRun()
			return
		}
		if !inRun || cur.start != run.end {
			closeRun()
			inRun, run.rss, run.heap = true, 0, false
		}
		run.end = cur.end
		run.rss += cur.rss
		if uint64(heapPtr) >= cur.start && uint64(heapPtr) < cur.end {
			run.heap = true
		}
	}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		sp := bytes.IndexByte(line, ' ')
		if sp <= 0 {
			continue
		}
		if line[sp-1] == ':' { // "Name: value"
			if have && bytes.Equal(line[:sp], []byte("Rss:")) {
				kb, ok := decimal(bytes.TrimSuffix(bytes.TrimSpace(line[sp:]), []byte(" kB")))
				if !ok {
					return r, fmt.Errorf("smaps: %q: not a size in kB", line)
				}
				cur.rss = kb << 10
			}
			continue
		}
		// A mapping's first line: "start-end perms offset dev inode [path]".
		lo, hi, ok := bytes.Cut(line[:sp], []byte("-"))
		start, ok1 := hexNumber(lo)
		end, ok2 := hexNumber(hi)
		if !ok || !ok1 || !ok2 {
			continue
		}
		finish()
		rest := line[sp:]
		for range 4 { // perms, offset, dev, inode
			rest = bytes.TrimLeft(rest, " ")
			if k := bytes.IndexByte(rest, ' '); k >= 0 {
				rest = rest[k:]
			} else {
				rest = nil
			}
		}
		path := bytes.TrimSpace(rest)
		// Anonymous: no path, or a name the runtime gave it ([anon: Go: heap], where the kernel
		// keeps such names).
		cur = mapping{start: start, end: end, anon: len(path) == 0 || bytes.HasPrefix(path, []byte("[anon:")),
			tier: len(tierPrefix) > 0 && bytes.HasPrefix(path, tierPrefix)}
		have = true
	}
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("smaps: %w", err)
	}
	finish()
	closeRun()
	if !gotHeap {
		return r, fmt.Errorf("smaps: no anonymous mapping holds the Go heap object at %#x", heapPtr)
	}
	return r, nil
}

// hexNumber reads a hexadecimal number, as smaps writes addresses.
func hexNumber(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, len(b) > 0
}

// decimal reads a decimal number.
func decimal(b []byte) (int64, bool) {
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, len(b) > 0
}
