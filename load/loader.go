// Package load is what a mount's cache loads a sample from, and what the disk under --cache-dir
// keeps of what is decoded: the policy of loading, keeping and filling, apart from the
// filesystem that serves the bytes (package fs) and from the stores that hold them (packages
// tier and copystore).
//
// A sample is loaded from the disk tier (each sample's bytes, package tier) or the training copy
// (each frame the samples use, once, package copystore) when they hold it, else decoded (a
// Decoder: package decode, or isolate's helpers), after which the tier keeps the sample, or the
// copy its frames and those the decode passed through. The copy also decodes whole videos
// (fills): at a load (--copy-fill videos), within a budget of CPU that reading grants (auto), on
// the cores the readers leave idle, or all of them when asked (vidfs copy).
//
// The files of the package, by job: loader.go (the Loader, and what it answers the mount),
// load.go (the load path: the cache's Fetch and Load), keep.go (what the disk keeps, and with
// which codec), tier.go (the disk tier's keys, tagging and stats), copy.go (the training copy's
// keys, reads, writes and stats), keeper.go (frames a decode passes through, kept for the copy),
// fill.go (decoding one video whole into the copy), fills.go (which videos are decoded whole,
// and when), budget.go (what --copy-fill auto may spend on them) and room.go (the copy's size:
// the estimate, the room, which videos it takes).
package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/vidfs/vidfs/cache"
	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/metrics"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/tier"
)

// Decoder decodes the clips a mount serves. *decode.Pool is the real one, sized for
// Decoders(Workers, Cores) clips at once; tests pass fakes that write known bytes.
type Decoder interface {
	DecodeClip(ctx context.Context, info *decode.Info, c decode.Clip, o decode.Output, dst []byte) (decode.Result, error)
	Stats() decode.PoolStats
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

// Plans is what the loader asks the readers' plans (order.Plans): when a sample is next due
// (-1: not planned), and what is due next.
type Plans interface {
	Due(i int) int
	Upcoming(dst []int, n int) []int
}

// Disk is what the disk under --cache-dir keeps of what is decoded, and how.
type Disk struct {
	// Dir and Bytes put a disk tier of samples or a training copy of frames behind the cache
	// (Keep says which): "" or 0, neither.
	Dir   string
	Bytes int64
	// Codec is how the disk stores what it keeps (0: chosen by whether it all fits: tierCodec,
	// frameCodec).
	Codec diskstore.Codec
	// KeepFree, when set, bounds the training copy not by Bytes but by what its filesystem has
	// room for, less KeepFree, which it leaves free (giving room back when other files take it):
	// the default, with no --cache-disk.
	KeepFree int64
	// Keep says whether the disk keeps samples (the disk tier) or frames (the training copy);
	// KeepAuto chooses by whether every sample fits (copyKeep).
	Keep Keep
	// Fill says when the training copy takes a video's frames.
	Fill Fill
	// FillChunk, if set, is how many frames a whole video's decode converts at a time at most
	// (tests make it small, so that chunks end everywhere; 0: fillChunk).
	FillChunk int
}

// Config is what a Loader loads and keeps.
type Config struct {
	Source  string // the source directory: the videos' paths are under it
	Layout  *layout.Layout
	Infos   Infos
	Output  decode.Output // the shape every frame is brought to (SampleOutput)
	Decoder Decoder
	Plans   Plans
	// Workers is how many samples the cache decodes at once (the copy's fills take as many
	// again: Decoders), and Cores the CPUs the process may use (0: runtime.NumCPU), which bound
	// both (loadDecodes, fillSlots).
	Workers, Cores int
	// Current, if set, tells whether a video (by its path in the layout) is still the version
	// probed; nil: its local file's size and modification time are compared.
	Current func(video string) bool
	Disk
	Log *slog.Logger
}

// Loader loads a mount's samples for its cache, and keeps what it decodes on the disk.
type Loader struct {
	cfg   Config
	lay   *layout.Layout
	out   decode.Output
	log   *slog.Logger
	plans Plans
	// videosWithSamples counts the videos of the layout with a sample.
	videosWithSamples int
	tier              *diskTier     // nil without one
	copy              *trainingCopy // nil without one (a loader has a disk tier or a copy, not both)
	stopTag           func()        // ends tagTier and waits for it
	decoding          chan struct{} // a token per load decoding (loadDecodes of them)
	decodeRate        metrics.Rate  // samples decoded
	decoded           atomic.Int64  // samples decoded (the pool's clips but the training copy's whole videos' chunks)
}

// New makes a Loader: with cfg.Dir and cfg.Bytes, it chooses what the disk keeps (logged, with
// why) and opens the disk tier or the training copy there. Close it when done.
func New(cfg Config) (*Loader, error) {
	if cfg.Layout == nil || cfg.Infos == nil || cfg.Decoder == nil || cfg.Plans == nil {
		return nil, errors.New("load: no layout, probe tables, decoder or plans")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	lay := cfg.Layout
	l := &Loader{cfg: cfg, lay: lay, out: cfg.Output, log: cfg.Log, plans: cfg.Plans, decoding: make(chan struct{}, loadDecodes(cfg.Workers, cfg.Cores))}
	for v := range lay.Videos {
		if first, end := lay.VideoSamples(v); end > first {
			l.videosWithSamples++
		}
	}
	if cfg.Dir == "" || cfg.Bytes <= 0 {
		return l, nil
	}
	S := lay.Spec.SampleBytes()
	frames := l.framesUsed() * int64(l.out.FrameBytes())
	keep, why, err := copyKeep(cfg.Keep, cfg.Dir, diskHolds(cfg.Dir), lay.Len(), S, frames, cfg.Bytes)
	if err != nil {
		return nil, err
	}
	cfg.Log.Info("disk keeps", "what", keep, "why", why)
	switch {
	case keep == KeepCopy:
		codec, why := l.frameCodec(cfg.Codec, copyRoom(cfg))
		cfg.Log.Info("training copy codec", "codec", codec, "why", why)
		cfg.Codec, l.cfg.Codec = codec, codec
		if err := l.openCopy(cfg, max(1, cfg.Workers)); err != nil {
			return nil, err
		}
	case cfg.Codec == diskstore.Huff:
		return nil, fmt.Errorf("codec %v stores frames, not samples: keep a training copy (--cache-keep copy), or store samples with none, lz4 or zstd", diskstore.Huff)
	default:
		codec, why := tierCodec(cfg.Codec, lay.Len(), S, cfg.Bytes)
		cfg.Log.Info("disk tier codec", "codec", codec, "why", why)
		// The write backlog is memory beside the cache: a few samples' worth.
		t, err := tier.Open(tier.Options{Dir: cfg.Dir, MaxBytes: cfg.Bytes, Codec: codec, Log: cfg.Log, Backlog: max(16<<20, 4*S),
			Due: cfg.Plans.Due})
		if err != nil {
			return nil, err
		}
		l.tier = &diskTier{t: t, prefix: keyPrefix(l.out)}
		l.stopTag = inBackground(l.tagTier)
	}
	return l, nil
}

// Wire sets what the cache asks the loader in opts: Load, Permanent, and with a disk tier or a
// training copy, its quick lane (Fetch), and with a tier, how many of its files the cache (of
// opts.Capacity samples) may hold mapped (MaxLent).
func (l *Loader) Wire(opts *cache.Options) {
	opts.Load, opts.Permanent = l.loadSample, heldFailed
	if l.tier != nil || l.copy != nil {
		opts.Fetch = l.fetchSample
	}
	if l.tier != nil {
		opts.MaxLent = maxLent(opts.Capacity)
	}
}

// Close stops the fills and the tagging, and closes the disk tier or the training copy once
// what it has queued is written: its error is the store's, if its writer could not finish (a
// disk that hangs). Called after the cache is closed (no load runs).
func (l *Loader) Close() error {
	if l.copy != nil {
		l.copy.stop()
		return l.copy.c.Close()
	}
	if l.tier != nil {
		l.stopTag()
		return l.tier.t.Close()
	}
	return nil
}

// inBackground runs work on a goroutine of its own, with a context; the function it returns
// cancels that context and returns once work has ended (Close, before the stores close).
func inBackground(work func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		work(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
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

// Accessed tells the loader that a reader read sample i (ok: and got its bytes): the disk tier
// moves its due on, and under --copy-fill auto the read grants the fills' budget.
func (l *Loader) Accessed(i int, ok bool) {
	if l.tier != nil {
		l.tier.t.Refresh(i) // read: due later now, most likely
	}
	if ok && l.copy != nil && l.copy.budget != nil {
		l.copy.budget.read(l.copy.served.take(i))
	}
}

// Held tells whether the disk holds sample i: the disk tier has it, or the training copy its
// whole video (a fetcher of the source's bytes then fetches none for it).
func (l *Loader) Held(i int) bool {
	if l.copy != nil {
		return l.current(i) && l.copy.c.Whole(l.lay.Sample(i).Video)
	}
	return l.tier != nil && l.current(i) && l.tier.t.Has(l.sampleKey(i))
}

// Replanned tells the disk tier that every sample's due may have moved.
func (l *Loader) Replanned() {
	if l.tier != nil {
		l.tier.t.Replanned()
	}
}

// HasCopy says whether the disk keeps a training copy.
func (l *Loader) HasCopy() bool { return l.copy != nil }

// TierDir is the disk tier's directory; "" without one.
func (l *Loader) TierDir() string {
	if l.tier == nil {
		return ""
	}
	return l.cfg.Dir
}

// Decoded is how many samples were decoded for the cache, and at what rate lately, a second.
func (l *Loader) Decoded(now time.Time) (samples int64, perSecond float64) {
	return l.decoded.Load(), l.decodeRate.PerSecond(now)
}

// EpochsLeft tells the loader how many epochs the readers' run has left, this one included
// (.vidfs/epochs): under --copy-fill auto, a run with enough of them lets whole decodes take more
// of each epoch's CPU (budget.run).
func (l *Loader) EpochsLeft(n int) {
	if t := l.copy; t != nil && t.budget != nil {
		t.budget.run(n)
	}
}

// Flush waits until what the disk tier or the training copy has queued is written.
func (l *Loader) Flush() {
	if l.copy != nil {
		l.copy.c.Flush()
	}
	if l.tier != nil {
		l.tier.t.Flush()
	}
}

// TierKey is the key of sample i's entry in the disk tier (its file's name); only with a tier.
func (l *Loader) TierKey(i int) diskstore.Key { return l.sampleKey(i) }

// Filling tells whether video v is being decoded whole into the training copy.
func (l *Loader) Filling(v int) bool { return l.copy != nil && l.copy.fills.of(v) != nil }

// Whole tells whether the training copy holds every frame video v's samples use.
func (l *Loader) Whole(v int) bool { return l.copy != nil && l.copy.whole(v) }

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

// videoPath is the source file of video v.
func (l *Loader) videoPath(v int) string {
	return filepath.Join(l.cfg.Source, filepath.FromSlash(l.lay.Videos[v].Path))
}

// decodeSample decodes sample i into buf, for the cache (the decoder counts what it decodes),
// giving keep, if not nil, the frames it passes through (decode.Clip.Keep).
func (l *Loader) decodeSample(ctx context.Context, i int, buf []byte, keep decode.Keeper) (decode.Result, error) {
	info, err := l.cfg.Infos.Info(l.lay.Sample(i).Video)
	if err != nil {
		return decode.Result{}, err
	}
	c := SampleClip(l.lay, i)
	c.Keep = keep
	res, err := l.cfg.Decoder.DecodeClip(ctx, info, c, l.out, buf)
	if err != nil {
		return decode.Result{}, err
	}
	l.decodeRate.Add(1, time.Now())
	l.decoded.Add(1)
	return res, nil
}
