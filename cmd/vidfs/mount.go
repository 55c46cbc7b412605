package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/decode"
	vfs "github.com/vidfs/vidfs/fs"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/labels"
	"github.com/vidfs/vidfs/internal/s3src"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/isolate"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// layoutOptions are the flags that say what the samples are, shared by mount and verify.
type layoutOptions struct {
	frames, stride, step, clipsPerVideo int
	fps                                 rateValue
	size                                sizeValue
	resize                              resizeValue
	decode                              decodeValue
	short                               string
	labels, unlabelled                  string // --labels FILE, and what becomes of a video it does not name
	probeWorkers                        int
	cores                               int // the CPUs this process may use, which the worker counts' defaults come from
	probeCache                          string
	s3                                  s3Options
	// prober probes the videos the scan finds: the mount's sandboxed helpers; nil probes in
	// this process (verify, --decoders in-process).
	prober catalog.Prober
	// largest is the picture measure of the largest video the scan found (isolate.Picture), which
	// the helpers' data limits are sized for.
	largest int64
}

func newLayoutOptions() layoutOptions {
	return layoutOptions{size: sizeValue{224, 224}, resize: resizeValue{decode.Crop}}
}

func (l *layoutOptions) register(fs *pflag.FlagSet) {
	l.cores = usableCores()
	grouped(fs, sampleFlags, func(fs *pflag.FlagSet) {
		fs.IntVarP(&l.frames, "frames", "t", 16, "frames per sample (T)")
		fs.IntVar(&l.stride, "stride", 1, "distance between a sample's frames")
		fs.IntVar(&l.step, "step", 0, "a sample starts every STEP frames (default: T)")
		fs.IntVar(&l.clipsPerVideo, "clips-per-video", 0, "instead of --step, take N evenly spaced samples per video")
		fs.Var(&l.fps, "fps", fpsHelp)
		fs.Var(&l.size, "size", "sample frame size, height x width")
		fs.Var(&l.resize, "resize", "how frames are fitted: crop (short side, centre), stretch or pad")
		fs.Var(&l.decode, "decode", "exact (bit-exact, as the ffmpeg CLI) or fast (skip H.264/HEVC deblocking, area scaling: 1.2x on H.264, about 44 dB from exact)")
		fs.StringVar(&l.short, "short", "pad", "videos shorter than one sample: pad (repeat the last frame) or skip")
		fs.StringVar(&l.labels, "labels", "", "classes from `FILE` instead of SRC's folders: CSV lines path,label (path relative to SRC; a header line path,label may come first) or JSON, {\"path\": \"label\", ...} or [{\"path\": ..., \"label\": ...}, ...]. classes.txt lists every label in it, sorted; index.csv and .vidfs/labels.npy give each sample's")
		fs.StringVar(&l.unlabelled, "unlabelled", "skip", "with --labels, a video the file does not name: skip (leave it out, listed in the log and .vidfs/stats) or keep (label -1, no class)")
	})
	grouped(fs, tuningFlags, func(fs *pflag.FlagSet) {
		fs.IntVar(&l.probeWorkers, "probe-workers", 0, "videos probed at once ("+coresHelp(l.cores, l.cores)+": probing reads more than it computes, and comes before training)")
		fs.StringVar(&l.probeCache, "probe-cache", defaultProbeCache(), "directory for cached probe tables, which mounts on several nodes may share (\"\" for none)")
	})
	l.s3.register(fs)
}

// spec checks the flags and returns the layout's spec.
func (l *layoutOptions) spec() (layout.Spec, error) {
	if l.short != "pad" && l.short != "skip" {
		return layout.Spec{}, usageError{fmt.Sprintf("--short %q: want pad or skip", l.short)}
	}
	if l.unlabelled != "skip" && l.unlabelled != "keep" {
		return layout.Spec{}, usageError{fmt.Sprintf("--unlabelled %q: want skip or keep", l.unlabelled)}
	}
	spec := layout.Spec{Frames: l.frames, Stride: l.stride, Step: l.step, ClipsPerVideo: l.clipsPerVideo,
		Height: l.size.h, Width: l.size.w, PadShort: l.short == "pad", FPS: layout.Rate{Num: l.fps.r.Num, Den: l.fps.r.Den}}
	if err := spec.Validate(); err != nil {
		return spec, usageError{err.Error()}
	}
	return spec, nil
}

// scan finds and probes the videos of src and lays them out under spec, reporting progress on w
// and naming (on log) the first videos left out; figures gets the scan's. It returns the videos
// left out as unreadable (skipped) apart from those left out for want of a label (unlabelled,
// with --labels and --unlabelled skip). The caller closes the tables.
// report, if set, is told the progress too. l.prober probes the videos (nil: this process).
func (l *layoutOptions) scan(ctx context.Context, w io.Writer, log *slog.Logger, spec layout.Spec, src catalog.Files, figures *wire.ScanStats,
	report func(catalog.Progress)) (lay *layout.Layout, infos *videoTables, skipped, unlabelled []wire.Problem, err error) {
	var rule *labelRule
	if l.labels != "" { // before the probe, which may take minutes
		file, err := labels.Read(l.labels)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		rule = &labelRule{file: file, keep: l.unlabelled == "keep"}
	}
	show := newProgress(w)
	var workers int // set before the scan reports
	progress := func(p catalog.Progress) {
		show(p)
		if report != nil {
			report(p)
		}
		if p.Final && figures != nil {
			*figures = wire.ScanStats{Videos: p.Total, Probed: p.Done - p.Cached, FromCache: p.Cached, Unreadable: p.Failed,
				Seconds: p.Elapsed.Seconds(), ProbesPerSecond: p.Rate(), Workers: workers, Cores: l.cores}
		}
	}
	workers = l.probeWorkersOr()
	tables, videos, err := catalog.Scan(ctx, catalog.Options{Files: src, Workers: workers, CacheDir: l.probeCache, Progress: progress, Log: log,
		Prober: l.prober})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for _, v := range videos {
		if v.Brief != nil {
			l.largest = max(l.largest, isolate.Picture(v.Brief.Width, v.Brief.Height))
		}
	}
	lay, refs, skipped, unlabelled, err := arrange(spec, videos, rule)
	if err != nil {
		tables.Close()
		return nil, nil, nil, nil, err
	}
	for _, p := range skipped[:min(len(skipped), 20)] {
		log.Warn("video left out", "file", p.File, "reason", p.Reason)
	}
	if len(skipped) > 20 {
		log.Warn("more videos left out", "count", len(skipped))
	}
	if rule != nil {
		rule.report(log, videos, lay)
	}
	if spec.FPS.Set() {
		logTiming(log, videos)
	}
	if lay.Len() == 0 {
		tables.Close()
		unnamed := ""
		if len(unlabelled) > 0 {
			unnamed = fmt.Sprintf(", %d of them not named in %s", len(unlabelled), rule.file.Name)
		}
		return nil, nil, nil, nil, fmt.Errorf("%s: no samples (%d videos found, %d readable%s, none with %d frames%s)",
			src.Root(), len(videos), len(videos)-len(skipped), unnamed, spec.Span(), atRate(spec))
	}
	return lay, &videoTables{tables: tables, refs: refs, src: src, lay: lay}, skipped, unlabelled, nil
}

// probeWorkersOr is --probe-workers, or the cores when not given.
func (l *layoutOptions) probeWorkersOr() int {
	if l.probeWorkers > 0 {
		return l.probeWorkers
	}
	return l.cores
}

// logTiming says once, under --fps, which videos are timed by their average frame rate because
// their timestamps cannot be used: the first few by name, then how many in all.
func logTiming(log *slog.Logger, videos []catalog.Video) {
	n := 0
	for _, v := range videos {
		if v.Brief == nil {
			continue
		}
		if note := v.Brief.TimingNote(); note != "" {
			if n < 20 {
				log.Warn("video timed by its average frame rate", "file", v.Rel, "why", note)
			}
			n++
		}
	}
	if n > 20 {
		log.Warn("more videos timed by their average frame rate", "count", n)
	}
}

// atRate is " at F fps" under a target rate, for messages that count frames.
func atRate(spec layout.Spec) string {
	if !spec.FPS.Set() {
		return ""
	}
	return " at " + decode.Rational{Num: spec.FPS.Num, Den: spec.FPS.Den}.FPSString() + " fps"
}

// mountOptions are vidfs mount's flags.
type mountOptions struct {
	layoutOptions
	cacheMem              bytesValue
	cacheDir              string
	cacheDisk             bytesValue
	cacheDiskCodec        codecValue
	cacheKeep             keepValue
	copyFill              fillValue
	prefetch, workers     int
	allowOther, debugFUSE bool
	logLevel              string
	metricsAddr           string
	hwaccel               hwValue
	gpus                  gpusValue
	gpuDecoders           int
	onError               string
	decoders              string
	decodeDeadline        time.Duration
	planIdle              time.Duration
	planMaxEntries        int
	daemon                bool
	logFile, pidFile      string
}

func mountCommand() *command {
	o := &mountOptions{layoutOptions: newLayoutOptions(), cacheMem: bytesValue{defaultCacheMem()}, hwaccel: hwValue{decode.HWAuto}}
	return &command{
		summary: "mount a directory of videos as fixed-shape sample files",
		usage:   "SRC|s3://BUCKET/PREFIX MNT [flags]",
		help: `Mounts every training sample of the videos under SRC on MNT (an existing, empty directory)
and serves it until interrupted (Ctrl-C, SIGTERM) or unmounted. A sample is a clip of T frames
at a fixed stride, turned upright and fitted to H x W, as uint8 RGB of shape (T, H, W, 3).
With --fps F, frames are counted at F instead of each video's own rate: a sample is T frames
STRIDE/F seconds apart, whatever each video's frame rate, variable ones included.

  MNT/clips.npy             every sample: np.load(path, mmap_mode="r") gives (N, T, H, W, 3)
  MNT/clips.raw             the same bytes without the header: sample i at offset i*T*H*W*3
  MNT/samples/DIR/VIDEO/K.npy, K.raw
                            sample K of SRC/DIR/VIDEO; folders of SRC stay folders (classes)
  MNT/index.csv             every sample: index, path, video, start frame, stride, label, class
                            (with --fps, also start_time and end_time in seconds)
  MNT/classes.txt           the class names: SRC's first-level folders, or with --labels FILE
                            every label FILE gives (CSV path,label or JSON), sorted
  MNT/.vidfs/order          write the sample indices the trainer will read, in order (text, or
                            a 1-D integer .npy): vidfs decodes them ahead of the reader.
                            Writing replaces the plan at close; appending queues the next epoch.
  MNT/.vidfs/plans/NAME     the same, one plan per reader (a DDP rank, a job): writing creates
                            it, unlinking removes it; .vidfs/order is the plan named default
  MNT/.vidfs/stats          JSON: hit rate, position in each plan, decode rate, wait time, errors
  MNT/.vidfs/failed         CSV: every sample that could not be decoded, why, what is served
  MNT/.vidfs/layout.json    the shape of it all
  MNT/.vidfs/labels.npy     each sample's label, int32 (N,); made as it is read, as index.csv is
  MNT/.vidfs/videos.npy     per video: first sample, number of samples, label; int64 (videos, 3)

SRC may be a bucket, s3://BUCKET/PREFIX (AWS, or --s3-endpoint for MinIO, Ceph, GCS), with
credentials from the standard AWS chain: a sample's bytes are fetched by ranged GETs ahead of
its decode in the plan's order, or on demand without a plan, into --s3-cache-mem. A read whose
bytes do not come within --s3-timeout gets EIO, and the next read tries again.

Videos that cannot be read are left out and listed in the stats; a damaged part of a video fails
the samples that need it with EIO and a logged reason, or with --on-error, serves another sample
or zeros in their place. SRC is only read. The first mount probes every video, showing its
progress, rate and time left on stderr; the probe tables are cached (--probe-cache, which
mounts on several nodes may share), so mounting the same videos again starts at once.

Exit status:
  0  unmounted: on Ctrl-C or SIGTERM (reads of files still open then fail), or from outside
     (vidfs umount, fusermount3 -u; after a lazy fusermount3 -u -z, once the last open file is
     closed)
  1  it did not mount, or failed while serving; it says why
  2  a mistake on the command line
  3  on Ctrl-C or SIGTERM the unmount did not complete; it says why. Files still open lost the
     mount as the process exited; if MNT is still mounted, vidfs umount MNT detaches it`,
		flags: func(fs *pflag.FlagSet) {
			o.layoutOptions.register(fs)
			grouped(fs, memoryFlags, func(fs *pflag.FlagSet) {
				fs.Var(&o.cacheMem, "cache-mem", "memory for decoded samples, e.g. 4GiB (default: a quarter of RAM, at most 8GiB)")
				fs.IntVar(&o.workers, "workers", 0, "samples decoded at once ahead of the reader ("+coresHelp(decodeWorkers(o.cores), o.cores)+", less an eighth left to the trainer's own processes)")
				fs.Var(&o.hwaccel, "hwaccel", "decode on an NVIDIA GPU (NVDEC) where the codec allows: auto (if there is one), cuda (require one) or none")
				fs.Var(&o.gpus, "gpus", gpusHelp)
				fs.StringVar(&o.decoders, "decoders", decodersIsolated, "where FFmpeg decodes: isolated (in sandboxed helper processes, without privileges, files or network: a decoder that crashes or hangs costs the samples it was decoding, tried once more, never the mount) or in-process (in the mount itself, for comparison). NVDEC decodes in-process for now")
				fs.DurationVar(&o.decodeDeadline, "decode-deadline", 0, "with --decoders isolated, a decode taking longer has its helper killed as hung, and is tried once more (default: 30s plus 100ms a frame from the clip's keyframe to its last frame, more above 1080p)")
			})
			grouped(fs, diskFlags, func(fs *pflag.FlagSet) {
				fs.StringVar(&o.cacheDir, "cache-dir", "", "keep decoded samples here too, compressed, and read them back instead of decoding again, across mounts (a disk tier; one mount per directory)")
				fs.Var(&o.cacheDisk, "cache-disk", "bound on what --cache-dir keeps, e.g. 100GiB (default: for the training copy, what the filesystem has room for, less a tenth of it, at least 1GiB, kept free: room is given back when other files take it; for samples, half the free space, at most 100GiB)")
				fs.Var(&o.cacheKeep, "cache-keep", "what --cache-dir keeps: samples (each sample's bytes, served mapped: for the same clips every epoch), copy (the training copy: each frame any sample uses, once, so that fresh random clips every epoch are served with no decode; frames, its name before, is taken too) or auto (what the directory holds from earlier mounts; in a new one, the copy where the samples share frames or do not fit as they are, else samples). Nothing kept is removed for a changed flag: asking for the kind a directory does not hold fails")
				fs.Var(&o.copyFill, "copy-fill", "with --cache-keep copy, when a video's frames are kept: clips (those of each sample decoded for a reader, and those its decode passes on the way), videos (the first time a sample of a video is read, the whole video is decoded, from that sample on, whatever it costs: the copy holds every video read after one epoch) or auto (clips' own frames, and a video read again is decoded whole within a budget: reading costs about 1.25x the CPU of decoding its clips at most, what the copy saves paying for more, so that over the epochs the copy comes to hold the videos read)")
				fs.Var(&o.cacheDiskCodec, "cache-disk-codec", "how the disk stores samples or frames: none (the least CPU), lz4 or zstd (smaller, more CPU); auto: for samples, none if every sample fits within --cache-disk so, else zstd; for frames, none if every frame the samples use fits so, else huff (a lossless image codec, 0.44x; frames alone). docs/usage.md has the sizes and costs")
			})
			grouped(fs, damageFlags, func(fs *pflag.FlagSet) {
				fs.StringVar(&o.onError, "on-error", "eio", "what a read of a sample that cannot be decoded gets: eio, substitute (a good sample of the same video, else of the same class, else zeros) or zeros; .vidfs/failed lists them")
				fs.DurationVar(&o.planIdle, "plan-idle", 10*time.Minute, "a plan nobody reads or writes for this long expires: it stops holding cache and its entries are let go (its file then reads empty) until it is written again")
				fs.IntVar(&o.planMaxEntries, "plan-max-entries", 0, "bound on the entries of all plans in use together (8 bytes each); a plan written past it is refused whole, its close failing with ENOSPC (default: twice the longest plan accepted, 128 epochs of the samples, at least 2 million)")
			})
			grouped(fs, runFlags, func(fs *pflag.FlagSet) {
				fs.BoolVar(&o.daemon, "daemon", false, "serve in the background: return once the mount serves, log to --log-file, write --pid-file")
				fs.StringVar(&o.logFile, "log-file", "", "with --daemon, where the mount logs (default: ~/.cache/vidfs/mounts/MNT-HASH.log)")
				fs.StringVar(&o.pidFile, "pid-file", "", "write the mount's pid here while it serves (default with --daemon: beside the log)")
				fs.StringVar(&o.logLevel, "log-level", "info", "log detail on stderr: debug, info, warn or error")
				fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address, e.g. 127.0.0.1:9100 (path /metrics; Go's profiles under /debug/pprof/, for anyone who can reach it: keep it on loopback)")
				fs.BoolVar(&o.allowOther, "allow-other", false, "let other users read the mount (non-root needs user_allow_other in /etc/fuse.conf)")
			})
			grouped(fs, tuningFlags, func(fs *pflag.FlagSet) {
				fs.IntVar(&o.prefetch, "prefetch", 0, "samples to keep decoded ahead of the reader (default: as many as fit in the cache)")
				fs.IntVar(&o.gpuDecoders, "gpu-decoders", 8, "decoders open on each GPU at once, busy or idle, which bounds its memory (about 60 MiB each at 1080p); new ones open on the GPU with the fewest, and more videos decode on the CPU. Idle ones are reused by videos encoded alike: give it more than 2x --workers over the GPUs")
				fs.BoolVar(&o.debugFUSE, "debug-fuse", false, "log every FUSE request")
			})
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 2 {
				return usageError{"want a source directory and a mount point"}
			}
			return runMount(ctx, e, o, args[0], args[1])
		},
	}
}

// defaultCacheMem is a quarter of the machine's memory, at most 8 GiB.
func defaultCacheMem() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 2 << 30
	}
	return min(int64(si.Totalram)*int64(si.Unit)/4, 8<<30)
}

func defaultProbeCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "vidfs", "probe")
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func runMount(ctx context.Context, e *env, o *mountOptions, src, mnt string) (err error) {
	log, err := newLogger(e.stderr, o.logLevel)
	if err != nil {
		return usageError{err.Error()}
	}
	spec, err := o.spec()
	if err != nil {
		return err
	}
	onError, err := vfs.ParseOnError(o.onError)
	if err != nil {
		return usageError{"--" + err.Error()}
	}
	mnt, _ = filepath.Abs(mnt)
	if st, err := os.Stat(mnt); err != nil || !st.IsDir() {
		return fmt.Errorf("mount point %s: not an existing directory (create it first: mkdir -p %s)", mnt, mnt)
	}
	if dir, _ := filepath.Abs(src); !s3src.IsURL(src) {
		if rel, err := filepath.Rel(dir, mnt); err == nil && !strings.HasPrefix(rel, "..") {
			return fmt.Errorf("mount point %s lies inside the source %s: pick one outside it", mnt, dir)
		}
	}

	if o.hwaccel.h == decode.HWCUDA {
		if err := decode.CheckGPUs(o.gpus.gpus); err != nil { // before minutes of probing
			return fmt.Errorf("--hwaccel cuda: %w", err)
		}
	}
	if o.daemon && !daemonChild() {
		logFile, pidFile := daemonPaths(mnt)
		if o.logFile != "" {
			logFile = o.logFile
		}
		if o.pidFile != "" {
			pidFile = o.pidFile
		}
		return startDaemon(e, e.args, mnt, logFile, pidFile)
	}
	began := time.Now()
	source, err := openSource(ctx, src, o.s3, log)
	if err != nil {
		return err
	}
	var figures wire.ScanStats
	scanning := newScanReport(mnt, log) // for vidfs stats MNT meanwhile
	defer scanning.remove()             // however the mount ends before it serves
	notify := newNotifier(log)          // for systemd, under Type=notify
	report := func(p catalog.Progress) {
		scanning.update(p)
		notify.progress(p)
	}
	workers := o.workers
	if workers <= 0 {
		workers = decodeWorkers(o.cores)
	}
	// The decoders come first: with --decoders isolated, their helpers probe the videos, so that
	// the mount reads none of a video's bytes itself.
	window := spec.SampleBytes() // a clip's sample, and with a training copy the frames it keeps
	if o.cacheDir != "" {
		window *= 2
	}
	pool, prober, err := o.newDecoder(workers, window, log, source.opener())
	if err != nil {
		return err
	}
	defer pool.Close()
	o.prober = prober
	lay, infos, skipped, unlabelled, err := o.scan(ctx, e.stderr, log, spec, source.files, &figures, report)
	if err != nil {
		return err
	}
	skipped = append(skipped, unlabelled...) // both listed in .vidfs/stats
	if fit, ok := pool.(interface{ Fit(int64) }); ok {
		fit.Fit(o.largest) // the helpers' data limits, sized for 4K while they probed, from the videos'
	}

	decode.FixMmapThreshold() // after the probe, which it would slow 4x (decode.FixMmapThreshold)
	defer infos.tables.Close()
	// The scan's garbage (every video's brief table, the walk) can be as large as what the mount
	// keeps: give it back now rather than hold it resident until the runtime gets round to it.
	debug.FreeOSMemory()
	if S := spec.SampleBytes(); S%4096 != 0 {
		log.Warn("sample size is not a multiple of 4 KiB: memory-mapped readers of clips.npy will also touch (and make vidfs decode) neighbouring samples; pread readers are unaffected",
			"sample_bytes", S)
	}
	defer rememberUnusable(o.probeCache, source.files, pool, log)
	tierBytes, copyKeepFree, err := o.tierBytes(log)
	if err != nil {
		return err
	}
	kick := newAheadKick() // the FS's plans kick the bucket's fetching ahead, made after it
	f, err := vfs.New(vfs.Config{Source: source.files.Root(), Layout: lay, Infos: infos, Resize: o.resize.r, Fast: o.decode.fast, Decoder: pool,
		CacheBytes: o.cacheMem.n, Prefetch: o.prefetch, Workers: workers, Cores: o.cores, Skipped: skipped, Scan: &figures, Log: log,
		OnError: onError, PlanIdle: o.planIdle, PlanMaxEntries: o.planMaxEntries,
		Disk:      load.Disk{Dir: o.cacheDir, Bytes: tierBytes, KeepFree: copyKeepFree, Codec: o.cacheDiskCodec.c, Keep: o.cacheKeep.k, Fill: o.copyFill.f},
		PlanMoved: source.planMoved(kick), Current: source.current(), FetchStats: source.fetchStats()})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }() // the disk tier's writer given up on
	// Once unmounted, before the cache waits for its loads: a decode waiting on the network
	// ends at once, not after --s3-timeout, and no GET goes on.
	defer source.close()
	if ahead := source.fetchAheadFor(f, lay, infos, kick, log); ahead != nil {
		defer ahead.close() // first: it asks f what is due
	}
	m, err := f.Mount(mnt, vfs.MountOptions{AllowOther: o.allowOther, Debug: o.debugFUSE})
	if err != nil {
		return err
	}
	// The progress file goes once the mount serves, not when the probe ends: between the two,
	// vidfs stats and top would find neither and say MNT is no vidfs mount.
	scanning.remove()
	if o.metricsAddr != "" {
		stop, err := serveMetrics(o.metricsAddr, f, log)
		if err != nil {
			return errors.Join(err, m.Unmount())
		}
		defer stop()
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		stop := followLiveHeap(log)
		defer stop()
	}
	st := f.Stats()
	log.Info("mounted", "at", mnt, "samples", lay.Len(), "shape", fmt.Sprintf("(%d, %d, %d, 3)", spec.Frames, spec.Height, spec.Width),
		"videos", len(lay.Videos), "left_out", len(skipped), "classes", len(lay.Classes),
		"cache", formatBytes(st.Cache.CapacityBytes), "cache_samples", st.Cache.CapacitySamples,
		"prefetch", st.Plan.PrefetchDepth, "workers", st.Decode.Workers, "cores", o.cores, "ready_in", time.Since(began).Round(time.Millisecond))
	done, err := serving(o.pidFile)
	defer done()
	if err != nil {
		return errors.Join(err, m.Unmount())
	}
	notify.ready(fmt.Sprintf("serving %d samples of %d videos at %s", lay.Len(), len(lay.Videos), mnt))

	served := make(chan struct{})
	go func() { m.Wait(); close(served) }()
	select {
	case <-ctx.Done():
		log.Info("unmounting", "at", mnt)
		notify.stopping("unmounting " + mnt)
		if err := m.Unmount(); err != nil {
			return unmountError{err}
		}
		log.Info("unmounted", "at", mnt)
	case <-served:
		log.Info("unmounted from outside", "at", mnt)
		notify.stopping("unmounted from outside: " + mnt)
	}
	return nil
}

// unmountError is an unmount on Ctrl-C or SIGTERM that did not complete: exit status 3. The
// deferred closing that follows it still waits for the reads in flight.
type unmountError struct{ err error }

// Error is the unmount's error, as it is.
func (e unmountError) Error() string { return e.err.Error() }

// Unwrap gives the unmount's error, for errors.Is and errors.As.
func (e unmountError) Unwrap() error { return e.err }

// ExitStatus is the status main exits with: 3.
func (e unmountError) ExitStatus() int { return 3 }

// rememberUnusable writes the keyframes the pool found unusable into the probe cache, so that the
// next mount starts clips earlier at once.
func rememberUnusable(cacheDir string, src catalog.Files, pool mountDecoder, log *slog.Logger) {
	marks := pool.UnusableKeyframes()
	if err := catalog.RememberUnusableOf(cacheDir, src, marks); err != nil {
		log.Warn("could not note unusable keyframes in the probe cache", "dir", cacheDir, "err", err)
	}
}

// newProgress returns a catalog progress reporter: a line rewritten in place on a terminal,
// else a line every 5 s, with the rate of probing and the time left at it.
func newProgress(w io.Writer) func(catalog.Progress) {
	tty := isTerminal(w)
	var last time.Time
	return func(p catalog.Progress) {
		if !p.Final && (p.Total == 0 || (!tty && time.Since(last) < 5*time.Second)) {
			return
		}
		last = time.Now()
		line := progressLine(p)
		switch {
		case tty && !p.Final:
			fmt.Fprintf(w, "\r%s\x1b[K", line)
		case tty:
			fmt.Fprintf(w, "\r%s\x1b[K\n", line)
		default:
			fmt.Fprintln(w, line)
		}
	}
}

// progressLine says how far a scan has got, or how it went.
func progressLine(p catalog.Progress) string {
	if p.Final {
		rate := ""
		if p.Done > p.Cached {
			rate = fmt.Sprintf(" (%.0f/s)", p.Rate())
		}
		return fmt.Sprintf("scanned %d videos in %s: %d probed%s, %d from the probe cache, %d unreadable",
			p.Total, roundElapsed(p.Elapsed), p.Done-p.Cached, rate, p.Cached, p.Failed)
	}
	left := "time left unknown"
	if d := p.Left(); d > 0 {
		left = d.Round(time.Second).String() + " left"
	}
	return fmt.Sprintf("probing videos: %d/%d (%d from cache), %.0f/s, %s, %d unreadable", p.Done, p.Total, p.Cached, p.Rate(), left, p.Failed)
}

// roundElapsed rounds a scan's time for a person: to three figures or so, never to 0.
func roundElapsed(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

func umountCommand() *command {
	return &command{
		summary: "unmount a vidfs mount, also one whose process died",
		usage:   "MNT",
		help: `Unmounts MNT. A vidfs mount unmounts itself on Ctrl-C or SIGTERM; this is for one whose
process died ("Transport endpoint is not connected") or was killed. When files are still open
the mount point is detached at once and disappears when they are closed.`,
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want the mount point"}
			}
			if err := vfs.Umount(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "unmounted %s\n", args[0])
			return nil
		},
	}
}

// heapRoom is the least room a soft memory limit leaves above the live heap: garbage the
// collector lets build up before it runs (GOGC's own goal, twice the live heap, where that is
// less). heapEvery is how often the limit follows the live heap.
const (
	heapRoom  = 64 << 20
	heapEvery = time.Second
)

// followLiveHeap sets the Go runtime's soft memory limit (runtime/debug.SetMemoryLimit) from the
// live heap, now and every heapEvery: the live heap plus half of it, at least heapRoom more. The
// heap holds little that lives (decoded samples are outside it) but what grows with the dataset
// (plans, the videos' tables), and little garbage passes through it, so the collector seldom
// meets the limit. But the limit must follow the live heap closely: re-set every 10 s, a plan
// written between two looks raised the live heap to the limit, and the collector ran back to
// back until the next (at 240,000 videos, 170-250 collections during 640 clips, 17 % of vidfs's
// CPU; every second, 5-16, and none with no limit at all: bench/memlimit.sh, docs/benchmarks.md
// "Many nodes"). A limit of twice the live heap (GOGC's own goal, above which it never starts a
// collection) costs nothing there, and 90 MiB more resident memory at 240,000 videos.
// GOMEMLIMIT, when set, is left to the runtime. The function it returns stops it.
func followLiveHeap(log *slog.Logger) (stop func()) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() int64 {
		metrics.Read(sample)
		live := int64(sample[0].Value.Uint64())
		limit := live + max(heapRoom, live/2)
		debug.SetMemoryLimit(limit)
		return limit
	}
	runtime.GC() // a live heap measured after the scan's garbage is gone
	log.Debug("Go memory limit", "bytes", set())
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(heapEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				set()
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// tierBytes is the disk's bound: --cache-disk, or by default, for samples, half the free space
// of --cache-dir's filesystem, at most 100 GiB, and for the training copy what the filesystem has
// room for less keepFree (copyKeepFree); 0 without --cache-dir.
func (o *mountOptions) tierBytes(log *slog.Logger) (bytes, keepFree int64, err error) {
	if o.cacheDir == "" {
		if o.cacheDisk.n > 0 || o.cacheDiskCodec.c != 0 || o.cacheKeep.k != load.KeepAuto || o.copyFill.f != load.FillAuto {
			return 0, 0, usageError{"--cache-disk, --cache-disk-codec, --cache-keep and --copy-fill need --cache-dir"}
		}
		return 0, 0, nil
	}
	if o.cacheDisk.n > 0 {
		return o.cacheDisk.n, 0, nil
	}
	if err := os.MkdirAll(o.cacheDir, 0o755); err != nil {
		return 0, 0, fmt.Errorf("--cache-dir: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(o.cacheDir, &st); err != nil {
		return 0, 0, fmt.Errorf("--cache-dir: %w", err)
	}
	n := min(int64(st.Bavail)*st.Bsize/2, 100<<30)
	keepFree = copyKeepFree(int64(st.Blocks) * st.Bsize)
	log.Info("disk bound", "dir", o.cacheDir, "samples", formatBytes(n), "training_copy", "the free space less "+formatBytes(keepFree),
		"why", "samples: half the free space, at most 100GiB; the training copy: what the filesystem has room for, less a tenth of it kept free (--cache-disk sets both)")
	return n, keepFree, nil
}

// gpusValue is a --gpus flag: all (nil) or a list of CUDA device numbers.
type gpusValue struct{ gpus []int }

func (g *gpusValue) String() string { return decode.FormatGPUs(g.gpus) }
func (g *gpusValue) Type() string   { return "all|N,N,..." }
func (g *gpusValue) Set(v string) (err error) {
	g.gpus, err = decode.ParseGPUs(v)
	return err
}

const gpusHelp = "the NVIDIA GPUs to decode on, each with its own --gpu-decoders: all (every GPU the process sees; CUDA_VISIBLE_DEVICES respected) or CUDA device numbers, e.g. 0,1 (numbered as CUDA_VISIBLE_DEVICES leaves them). With --hwaccel cuda a GPU named that cannot be used is an error; with auto it is logged and left out"
