package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// verifyOptions are vidfs verify's flags.
type verifyOptions struct {
	layoutOptions
	allFrames   bool
	asJSON      bool
	workers     int
	hwaccel     hwValue
	gpus        gpusValue
	gpuDecoders int
}

func verifyCommand() *command {
	o := &verifyOptions{layoutOptions: newLayoutOptions(), hwaccel: hwValue{decode.HWAuto}}
	return &command{
		summary: "decode every sample of a directory of videos, as a mount would, and report what fails",
		usage:   "SRC|s3://BUCKET/PREFIX [sample flags] [--all-frames] [--json]",
		help: `Finds the videos under SRC as ` + "`vidfs mount`" + ` does with the same flags, decodes every sample a
mount would serve through the same decoders, and reports per video: ok, left out (and why), or
which samples fail, at which frame and why. Run it before a long training run: what it passes,
the mount serves, and the samples it fails are the ones a mount would answer with EIO.

--all-frames decodes every frame of every video instead (at the sample size), to find all
damage, not only the damage samples reach. Progress goes to stderr; --json prints the report as
JSON on stdout. The exit status is 1 when a video is left out or a sample fails, 0 otherwise:
videos that --labels does not name, left out by --unlabelled skip, are listed (unlabelled) but
do not fail.
Keyframes found unusable are noted in the probe cache for the mounts that follow.`,
		flags: func(fs *pflag.FlagSet) {
			o.layoutOptions.register(fs)
			grouped(fs, checkFlags, func(fs *pflag.FlagSet) {
				fs.BoolVar(&o.allFrames, "all-frames", false, "decode every frame of every video, not only the samples")
				fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON on stdout")
			})
			grouped(fs, decodeFlags, func(fs *pflag.FlagSet) {
				fs.IntVar(&o.workers, "workers", 0, "videos decoded at once ("+coresHelp(o.cores, o.cores)+")")
				fs.Var(&o.hwaccel, "hwaccel", "decode on an NVIDIA GPU (NVDEC) where the codec allows: auto (if there is one), cuda (require one) or none")
				fs.Var(&o.gpus, "gpus", gpusHelp)
			})
			grouped(fs, tuningFlags, func(fs *pflag.FlagSet) {
				fs.IntVar(&o.gpuDecoders, "gpu-decoders", 8, "decoders open on each GPU at once")
			})
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want a source directory"}
			}
			return runVerify(ctx, e, o, args[0])
		},
	}
}

// verifyReport is what vidfs verify found (its --json output).
type verifyReport struct {
	Source    string        `json:"source"`
	AllFrames bool          `json:"all_frames"`
	Videos    []videoReport `json:"videos"`
	Summary   verifySummary `json:"summary"`
}

// videoReport is one video's verdict.
type videoReport struct {
	File   string `json:"file"`
	Status string `json:"status"` // ok, no samples, left out, unlabelled (--labels), failing
	Reason string `json:"reason,omitempty"`
	// Checked counts what was decoded: samples, or with --all-frames, frames.
	Checked  int            `json:"checked"`
	Failures []checkFailure `json:"failures,omitempty"`
	// Note says, under --fps, that the video is timed by its average frame rate, and why.
	Note string `json:"note,omitempty"`
}

// checkFailure is a sample (or with --all-frames, a run of frames) that does not decode.
type checkFailure struct {
	Sample int    `json:"sample"` // index in clips.npy; -1 with --all-frames
	Start  int    `json:"start"`  // first frame of the sample or run
	Frame  *int   `json:"frame,omitempty"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

type verifySummary struct {
	Videos         int     `json:"videos"`
	OK             int     `json:"ok"`
	NoSamples      int     `json:"no_samples"`
	LeftOut        int     `json:"left_out"`
	Unlabelled     int     `json:"unlabelled,omitempty"` // with --labels and --unlabelled skip: not named, left out
	Failing        int     `json:"failing"`
	Checked        int     `json:"checked"`
	Failed         int     `json:"failed"`
	KeyframesFixed int     `json:"keyframes_found_unusable"`
	TimedByRate    int     `json:"timed_by_average_rate,omitempty"` // under --fps: videos without usable timestamps
	Seconds        float64 `json:"seconds"`
}

// verifyUnit is a clip of a video verify decodes: a sample, or a run of frames.
type verifyUnit struct {
	sample int
	clip   decode.Clip
}

func runVerify(ctx context.Context, e *env, o *verifyOptions, src string) error {
	log, _ := newLogger(io.Discard, "error")
	spec, err := o.spec()
	if err != nil {
		return err
	}
	if o.workers < 0 {
		return usageError{"--workers must be at least 1 (0: the default)"}
	}
	if o.workers == 0 {
		o.workers = o.cores
	}
	began := time.Now()
	source, err := openSource(ctx, src, o.s3, log)
	if err != nil {
		return err
	}
	defer source.close() // after the pool's decoders
	lay, infos, skipped, unlabelled, err := o.scan(ctx, e.stderr, log, spec, source.files, nil, nil)
	if err != nil {
		return err
	}
	defer infos.tables.Close()
	pool, err := decode.NewPool(decode.PoolOptions{Concurrency: o.workers, Idle: o.workers, Threads: 1,
		HWAccel: o.hwaccel.h, GPUs: o.gpus.gpus, GPUDecoders: o.gpuDecoders, Log: log, Open: source.opener()})
	if err != nil {
		return err
	}
	defer pool.Close()

	out := load.SampleOutput(lay, o.resize.r, o.decode.fast)
	units := make([][]verifyUnit, len(lay.Videos))
	total := 0
	for v := range lay.Videos {
		var info *decode.Info // only --all-frames needs the table to plan its units
		if o.allFrames {
			if info, err = infos.Info(v); err != nil {
				return err
			}
		}
		units[v] = verifyUnits(lay, info, v, o.allFrames)
		total += len(units[v])
	}
	reports := make([]videoReport, len(lay.Videos))
	prog := newVerifyProgress(e.stderr, len(lay.Videos), total, o.allFrames)
	stopProgress := prog.run()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.workers)
	for v := range lay.Videos {
		g.Go(func() error {
			info, err := infos.Info(v)
			if err != nil {
				return err
			}
			reports[v] = verifyVideo(gctx, pool, lay, info, v, units[v], out, prog)
			prog.videos.Add(1)
			return gctx.Err()
		})
	}
	err = g.Wait()
	stopProgress()
	if err != nil {
		return err
	}
	rememberUnusable(o.probeCache, source.files, pool, log)

	rep := verifyReport{Source: source.files.Root(), AllFrames: o.allFrames}
	for _, p := range skipped {
		rep.Videos = append(rep.Videos, videoReport{File: p.File, Status: "left out", Reason: p.Reason})
	}
	// Videos a labels file does not name are left out as a mount leaves them: reported, no failure.
	for _, p := range unlabelled {
		rep.Videos = append(rep.Videos, videoReport{File: p.File, Status: "unlabelled", Reason: p.Reason})
	}
	rep.Videos = append(rep.Videos, reports...)
	s := &rep.Summary
	for _, r := range rep.Videos {
		s.Videos++
		s.Checked += r.Checked
		s.Failed += len(r.Failures)
		if r.Note != "" {
			s.TimedByRate++
		}
		switch r.Status {
		case "ok":
			s.OK++
		case "no samples":
			s.NoSamples++
		case "left out":
			s.LeftOut++
		case "unlabelled":
			s.Unlabelled++
		default:
			s.Failing++
		}
	}
	for _, frames := range pool.UnusableKeyframes() {
		s.KeyframesFixed += len(frames)
	}
	s.Seconds = time.Since(began).Seconds()
	if o.asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printVerify(e.stdout, rep)
	}
	if s.LeftOut+s.Failing > 0 {
		return errors.New(verdict(rep))
	}
	return nil
}

// verifyUnits lists what verify decodes of video v: its samples as the mount serves them, or
// with allFrames, every frame in runs of up to 32.
func verifyUnits(lay *layout.Layout, info *decode.Info, v int, allFrames bool) []verifyUnit {
	var us []verifyUnit
	if !allFrames {
		first, end := lay.VideoSamples(v)
		for i := first; i < end; i++ {
			us = append(us, verifyUnit{sample: i, clip: load.SampleClip(lay, i)})
		}
		return us
	}
	for s := 0; s < info.Frames; s += 32 {
		us = append(us, verifyUnit{sample: -1, clip: decode.Clip{Start: s, Frames: min(32, info.Frames-s), Stride: 1}})
	}
	return us
}

// verifyVideo decodes a video's units in order (so that the decoder carries on from one to the
// next) and reports what failed.
func verifyVideo(ctx context.Context, pool *decode.Pool, lay *layout.Layout, info *decode.Info, v int, units []verifyUnit,
	out decode.Output, prog *verifyProgress) videoReport {
	r := videoReport{File: lay.Videos[v].Path, Status: "ok"}
	if lay.Spec.FPS.Set() {
		r.Note = info.TimingNote()
	}
	if len(units) == 0 {
		r.Status = "no samples"
		r.Reason = fmt.Sprintf("%d frames%s; a sample spans %d", lay.Videos[v].Frames, atRate(lay.Spec), lay.Spec.Span())
		return r
	}
	var buf []byte
	for _, u := range units {
		if ctx.Err() != nil {
			break
		}
		if n := u.clip.Frames * out.FrameBytes(); len(buf) < n {
			buf = make([]byte, n)
		}
		_, err := pool.DecodeClip(ctx, info, u.clip, out, buf)
		if ctx.Err() != nil {
			break
		}
		if u.sample < 0 {
			r.Checked += u.clip.Frames
			prog.checked.Add(int64(u.clip.Frames))
		} else {
			r.Checked++
			prog.checked.Add(1)
		}
		if err == nil {
			continue
		}
		prog.failed.Add(1)
		f := checkFailure{Sample: u.sample, Start: u.clip.Start, Kind: "error", Reason: err.Error()}
		var de *decode.Error
		if errors.As(err, &de) {
			f.Frame, f.Kind = de.Frame, de.Kind.Error()
			f.Reason = de.Reason()
		}
		r.Failures = append(r.Failures, f)
		r.Status = "failing"
	}
	return r
}

// verdict is the one-line summary of a report.
func verdict(rep verifyReport) string {
	s := rep.Summary
	what := "samples"
	if rep.AllFrames {
		what = "frames"
	}
	unlabelled := ""
	if s.Unlabelled > 0 {
		unlabelled = fmt.Sprintf(", %d not named in the labels file", s.Unlabelled)
	}
	return fmt.Sprintf("%d videos: %d ok, %d without samples, %d left out%s, %d with failures (%d of %d %s checked fail)",
		s.Videos, s.OK, s.NoSamples, s.LeftOut, unlabelled, s.Failing, s.Failed, s.Checked, what)
}

func printVerify(w io.Writer, rep verifyReport) {
	for _, r := range rep.Videos {
		switch r.Status {
		case "left out":
			fmt.Fprintf(w, "LEFT OUT  %s: %s\n", r.File, r.Reason)
		case "failing":
			what := "samples"
			if rep.AllFrames {
				what = "runs of frames"
			}
			fmt.Fprintf(w, "FAILING   %s: %d %s fail\n", r.File, len(r.Failures), what)
			for i, f := range r.Failures {
				if i == 10 {
					fmt.Fprintf(w, "          ... %d more (--json lists them all)\n", len(r.Failures)-10)
					break
				}
				where := fmt.Sprintf("sample %d (from frame %d)", f.Sample, f.Start)
				if f.Sample < 0 {
					where = fmt.Sprintf("frames from %d", f.Start)
				}
				at := ""
				if f.Frame != nil {
					at = fmt.Sprintf(" at frame %d", *f.Frame)
				}
				fmt.Fprintf(w, "          %s%s: %s\n", where, at, f.Reason)
			}
		case "no samples":
			fmt.Fprintf(w, "NO SAMPLE %s: %s\n", r.File, r.Reason)
		}
	}
	if n := rep.Summary.Unlabelled; n > 0 {
		shown := 0
		for _, r := range rep.Videos {
			if r.Status == "unlabelled" && shown < 10 {
				fmt.Fprintf(w, "UNLABELLED %s: %s\n", r.File, r.Reason)
				shown++
			}
		}
		if n > shown {
			fmt.Fprintf(w, "          ... %d more the labels file does not name (--json lists them all)\n", n-shown)
		}
	}
	if n := rep.Summary.TimedByRate; n > 0 {
		shown := 0
		for _, r := range rep.Videos {
			if r.Note != "" && shown < 10 {
				fmt.Fprintf(w, "AVG RATE  %s: %s\n", r.File, r.Note)
				shown++
			}
		}
		if n > shown {
			fmt.Fprintf(w, "          ... %d more timed by their average frame rate (--json notes each)\n", n-shown)
		}
	}
	if n := rep.Summary.KeyframesFixed; n > 0 {
		fmt.Fprintf(w, "%d keyframes were found to be no clean starting points; clips start earlier there (noted in the probe cache)\n", n)
	}
	fmt.Fprintf(w, "%s in %.1f s\n", verdict(rep), rep.Summary.Seconds)
}

// verifyProgress counts what verify has done, and shows it on w: a line rewritten in place on a
// terminal, else a line every 5 s.
type verifyProgress struct {
	w                       io.Writer
	videos, checked, failed atomic.Int64
	totalVideos, total      int
	what                    string
}

func newVerifyProgress(w io.Writer, videos, total int, allFrames bool) *verifyProgress {
	what := "samples"
	if allFrames {
		what = "runs of frames"
	}
	return &verifyProgress{w: w, totalVideos: videos, total: total, what: what}
}

// run shows progress until the returned function is called, which shows it a last time.
func (p *verifyProgress) run() (stop func()) {
	tty := isTerminal(p.w)
	began := time.Now()
	line := func() string {
		secs := max(time.Since(began).Seconds(), 1e-3)
		return fmt.Sprintf("verifying: %d/%d videos, %d/%d %s checked, %d failed, %.0f/s",
			p.videos.Load(), p.totalVideos, p.checked.Load(), p.total, p.what, p.failed.Load(), float64(p.checked.Load())/secs)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		every := 5 * time.Second
		if tty {
			every = 200 * time.Millisecond
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintf(p.w, "\r%s\x1b[K\n", line())
				} else {
					fmt.Fprintln(p.w, line())
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprintf(p.w, "\r%s\x1b[K", line())
				} else {
					fmt.Fprintln(p.w, line())
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
