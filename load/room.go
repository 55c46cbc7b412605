package load

// The training copy's size: what the whole copy would take (estimated at mount, and said in the
// log and the stats), the room it has, and which videos it takes (admitted before they are
// decoded for it).

import (
	"context"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/copystore"
)

// copyRoom is the room the training copy has, for choosing its codec: Disk.Bytes, or by
// default what its filesystem has free less Disk.KeepFree.
func copyRoom(cfg Config) int64 {
	if cfg.KeepFree <= 0 {
		return cfg.Bytes
	}
	var st unix.Statfs_t
	if err := unix.Statfs(cfg.Dir, &st); err != nil {
		return cfg.Bytes
	}
	return max(0, int64(st.Bavail)*st.Bsize-cfg.KeepFree)
}

// copyFootprint counts the frames the samples use over every video, and what the videos' files
// take besides them (header and index): counted once a video length, as framesUsed does.
func (l *Loader) copyFootprint() (frames, overhead int64) {
	var need []uint64
	type counts struct {
		frames   int
		overhead int64
	}
	byLength := map[int]counts{}
	for v, vid := range l.lay.Videos {
		if first, end := l.lay.VideoSamples(v); first == end {
			continue
		}
		c, ok := byLength[vid.Frames]
		if !ok {
			need, c.frames = l.needBits(v, need)
			c.overhead = copystore.FileOverhead(l.copyExtent(v))
			byLength[vid.Frames] = c
		}
		frames += int64(c.frames)
		overhead += c.overhead
	}
	return frames, overhead
}

// estimate is what the whole copy takes, estimated: every frame the samples use at what a frame
// takes on disk, and the videos' indexes; assumed says a frame's size was not measured yet.
func (t *trainingCopy) estimate() (bytes int64, assumed bool) {
	per, measured := t.c.FrameEstimate()
	return int64(per*float64(t.frames)) + t.overhead, !measured
}

// admit says whether video v's frames are to be kept (copystore.Store.Admit): asked before they
// are decoded for the copy, so that a copy that cannot hold every video decodes none whole only
// to drop it.
func (t *trainingCopy) admit(v int) bool {
	l := t.l
	return t.c.Admit(v, l.heldKey(v), t.neededOf(l, v), l.copyExtent(v))
}

// measureSamples is how many samples a mount measures what a frame takes with the copy's codec
// by, where nothing tells it yet: the first the readers' loads decode, or, when none come within
// measureWait, samples of videos spread over the layout decoded for it.
const measureSamples = 3

// measureWait is how long a mount waits for its readers' loads to measure a frame's size before
// it decodes samples for that itself, in the time no one else wants (decode.Clip.Background): a
// mount being read decodes nothing beyond what its readers ask for to measure it.
const measureWait = 2 * time.Second

// measureLoaded measures a frame's size on disk by the frames of a sample a load decoded, into
// buf, while the copy still wants samples measured (copystore.Store.Measure).
func (t *trainingCopy) measureLoaded(buf []byte) {
	if t.toMeasure.Load() <= 0 {
		return
	}
	if n := t.toMeasure.Add(-1); n >= 0 {
		t.c.Measure(buf)
		if n == 0 {
			close(t.measured)
		}
	}
}

// giveBackEvery is how often a copy bound by its filesystem's free space looks whether other
// files took room it held.
const giveBackEvery = 10 * time.Second

// size measures, in the background, what a frame takes with the copy's codec where nothing told
// the copy yet (a few samples packed: the first its loads decode, or samples it decodes itself
// when no load came within measureWait), then says in the log how much of the whole
// copy the bound holds; a copy bound by its filesystem's free space then gives room back to other
// files as they take it, every giveBackEvery. The function it returns stops it and waits.
func (t *trainingCopy) size(cfg Config) (stop func()) {
	return inBackground(func(ctx context.Context) {
		if _, measured := t.c.FrameEstimate(); !measured {
			select {
			case <-t.measured:
			case <-ctx.Done():
			case <-time.After(measureWait):
				// On a thread of its own at nice 19, which ends with it (decoding in-process,
				// the decode runs on it).
				done := make(chan struct{})
				go func() {
					defer close(done)
					runtime.LockOSThread()                                 // never unlocked
					unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19) // best effort
					t.measure(ctx)
				}()
				<-done
			}
		}
		if ctx.Err() != nil {
			return
		}
		t.sayFit(cfg)
		if t.keepFree <= 0 {
			return
		}
		tick := time.NewTicker(giveBackEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.c.GiveBack()
			}
		}
	})
}

// measure decodes the first sample of videos spread over the layout, as many as the loads left
// to measure, in the time no one else wants, and packs their frames with the copy's codec
// (measureLoaded), keeping nothing.
func (t *trainingCopy) measure(ctx context.Context) {
	l := t.l
	var buf []byte
	n := len(l.lay.Videos)
	for k := range measureSamples {
		if t.toMeasure.Load() <= 0 {
			return
		}
		v := k * n / measureSamples
		for ; v < n; v++ { // the next video with a sample
			if first, end := l.lay.VideoSamples(v); first < end {
				break
			}
		}
		if v >= n || ctx.Err() != nil {
			return
		}
		first, _ := l.lay.VideoSamples(v)
		info, err := l.cfg.Infos.Info(v)
		if err != nil {
			continue
		}
		buf = grow(buf, int(l.lay.Spec.SampleBytes()))
		c := SampleClip(l.lay, first)
		c.Background = true // in a helper, at SCHED_IDLE
		if _, err := l.cfg.Decoder.DecodeClip(ctx, info, c, l.out, buf); err != nil {
			continue // a damaged video: another tells
		}
		t.measureLoaded(buf)
	}
}

// sayFit logs what the whole copy takes, estimated, and, where the bound holds less than all of
// it, a warning with the --cache-disk that would hold it and the room the filesystem has.
func (t *trainingCopy) sayFit(cfg Config) {
	est, assumed := t.estimate()
	s := t.c.Stats()
	basis := "measured"
	if assumed {
		basis = "assumed"
	}
	var st unix.Statfs_t
	free := int64(-1)
	if unix.Statfs(cfg.Dir, &st) == nil {
		free = int64(st.Bavail) * st.Bsize
	}
	fits := 1.0
	if est > 0 {
		fits = min(1, float64(s.Bound)/float64(est))
	}
	args := []any{"estimated_bytes", est, "frames", t.frames, "codec", cfg.Codec, "bytes_per_frame", basis,
		"bound_bytes", s.Bound, "fits", fits, "free_bytes", free}
	if fits >= 1 {
		t.l.log.Info("training copy: the bound holds all of it", args...)
		return
	}
	want := est + est/20 // with a little room to spare
	if t.keepFree > 0 {
		t.l.log.Warn("training copy: the filesystem has room for part of it only; it keeps a stable set of the videos (those it takes first) and decodes the rest as they are read: a --cache-dir on a filesystem with more room would hold it all",
			append(args, "keep_free_bytes", t.keepFree, "room_wanted_bytes", want+t.keepFree)...)
		return
	}
	t.l.log.Warn("training copy: --cache-disk holds part of it only; it keeps a stable set of the videos (those it takes first) and decodes the rest as they are read",
		append(args, "cache_disk_for_all", flagBytes(want))...)
}

// flagBytes writes n bytes, rounded up, as --cache-disk takes them: in GiB, or MiB below 10 GiB.
func flagBytes(n int64) string {
	if n >= 10<<30 {
		return strconv.FormatInt((n+1<<30-1)>>30, 10) + "GiB"
	}
	return strconv.FormatInt((n+1<<20-1)>>20, 10) + "MiB"
}
