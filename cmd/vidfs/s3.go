package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/smithy-go"
	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/decode"
	vfs "github.com/vidfs/vidfs/fs"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/s3src"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
	"github.com/vidfs/vidfs/load"
)

// s3Options are the flags for a source that is a bucket (s3://BUCKET/PREFIX).
type s3Options struct {
	endpoint, region string
	pathStyle        bool
	timeout          time.Duration
	cacheMem         bytesValue
}

// register defines the flags; those that say where the bucket is come in their own group, the
// two whose defaults suit most buckets under Tuning.
func (s *s3Options) register(fs *pflag.FlagSet) {
	grouped(fs, s3Flags, func(fs *pflag.FlagSet) {
		fs.StringVar(&s.endpoint, "s3-endpoint", "", "for an s3:// source: the S3 server's URL (MinIO, Ceph, GCS: https://storage.googleapis.com); default AWS")
		fs.StringVar(&s.region, "s3-region", "", "for an s3:// source: the bucket's region (default: AWS_REGION or the AWS config's, else us-east-1)")
		fs.BoolVar(&s.pathStyle, "s3-path-style", false, "for an s3:// source: name the bucket in the URL's path, not its host (most MinIO and Ceph set-ups)")
	})
	grouped(fs, tuningFlags, func(fs *pflag.FlagSet) {
		fs.DurationVar(&s.timeout, "s3-timeout", 30*time.Second, "for an s3:// source: how long a read waits for bytes, retries included, before it fails with EIO")
		fs.Var(&s.cacheMem, "s3-cache-mem", "for an s3:// source: memory for fetched video bytes, e.g. 1GiB (default 256MiB)")
	})
}

// source is where the videos come from: a directory, or a bucket (then bucket is set).
type source struct {
	files  catalog.Files
	bucket *s3src.Bucket
}

// openSource opens src: an s3:// URL (checking that credentials, endpoint and bucket work) or a
// local directory, whose absolute path it takes.
func openSource(ctx context.Context, src string, o s3Options, log *slog.Logger) (source, error) {
	if !s3src.IsURL(src) {
		abs, err := filepath.Abs(src)
		if err != nil {
			return source{}, err
		}
		return source{files: catalog.Dir(abs)}, nil
	}
	b, err := s3src.Open(ctx, src, s3src.Options{Endpoint: o.endpoint, Region: o.region, PathStyle: o.pathStyle,
		Timeout: o.timeout, CacheBytes: o.cacheMem.n, Log: log})
	if err != nil {
		return source{}, err
	}
	return source{files: bucketFiles{b}, bucket: b}, nil
}

// close ends a bucket's reads and GETs and closes its connections (none for a directory): after
// the decodes, or to end those waiting on the network at once.
func (s source) close() {
	if s.bucket != nil {
		s.bucket.Close()
	}
}

// opener is how the decoders open the source's videos: nil for local files.
func (s source) opener() decode.Opener { return s.files.Opener() }

// local is the source's directory, or "" for a bucket.
func (s source) local() string {
	if s.bucket != nil {
		return ""
	}
	return s.files.Root()
}

// bucketFiles is a bucket as catalog.Files: an object's version is its ETag.
type bucketFiles struct{ b *s3src.Bucket }

func (f bucketFiles) Root() string           { return f.b.Name() }
func (f bucketFiles) Path(rel string) string { return f.b.Path(rel) }
func (f bucketFiles) Opener() decode.Opener  { return f.b.Open }

func (f bucketFiles) List(ctx context.Context) ([]catalog.File, error) {
	objs, err := f.b.List(ctx)
	if err != nil {
		return nil, err
	}
	files := make([]catalog.File, len(objs))
	for i, o := range objs {
		files[i] = catalog.File{Rel: o.Rel, FileID: catalog.FileID{Size: o.Size, ModTime: o.Modified.UnixNano(), Version: o.ETag}}
	}
	return files, nil
}

// aheadKick asks a fetchAhead for a pass. It is made before the mount's FS, whose plans call
// moved (fs.Config.PlanMoved) when they move, and given to the fetchAhead made after the FS,
// which asks the FS what is due.
type aheadKick chan struct{}

func newAheadKick() aheadKick { return make(aheadKick, 1) }

// moved asks for a pass; it never blocks.
func (k aheadKick) moved() {
	select {
	case k <- struct{}{}:
	default:
	}
}

// fetchAhead fetches the bytes of the samples the plans want next, soonest due first, into the
// bucket's memory, before their decodes ask (none for those the mount holds decoded): it runs
// each time the plans move, over at most aheadSamples samples and half the bucket's memory.
// Every field is set when it is made; start runs it, close ends it.
type fetchAhead struct {
	b        *s3src.Bucket
	lay      *layout.Layout
	infos    load.Infos
	upcoming func(dst []int, n int) []int // the samples due next, soonest first
	held     func(sample int) bool        // whether a sample needs no decode (nil: all do)
	kick     <-chan struct{}              // a pass is due
	log      *slog.Logger
	// budget bounds the bytes one pass asks for.
	budget int64

	ctx     context.Context // ends the passes: cancelled by close
	cancel  context.CancelFunc
	running sync.WaitGroup // run, which close waits for
}

// aheadSamples is how many of the samples due next a pass fetches for.
const aheadSamples = 64

func newFetchAhead(b *s3src.Bucket, lay *layout.Layout, infos load.Infos, upcoming func(dst []int, n int) []int, held func(int) bool,
	kick aheadKick, budget int64, log *slog.Logger) *fetchAhead {
	ctx, cancel := context.WithCancel(context.Background())
	return &fetchAhead{b: b, lay: lay, infos: infos, upcoming: upcoming, held: held, kick: kick, budget: budget, log: log,
		ctx: ctx, cancel: cancel}
}

// start makes passes in the background, each time the kick asks, until close.
func (a *fetchAhead) start() {
	a.running.Go(a.run)
}

// close ends the passes, a fetch in flight at once, and returns once they have ended.
func (a *fetchAhead) close() {
	a.cancel()
	a.running.Wait()
}

// run makes passes until close.
func (a *fetchAhead) run() {
	var due []int
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.kick:
		}
		due = a.upcoming(due[:0], aheadSamples)
		a.pass(a.ctx, due)
	}
}

// pass starts fetching the bytes of the samples due, in that order, within the budget.
func (a *fetchAhead) pass(ctx context.Context, due []int) {
	left := a.budget
	for _, s := range due {
		if a.held != nil && a.held(s) {
			continue // decoded already: its bytes are not needed
		}
		path, off, end, ok := sampleBytes(a.lay, a.infos, s)
		if !ok {
			continue
		}
		n, err := a.b.Prefetch(ctx, path, off, end)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Debug("fetching ahead", "sample", s, "err", err)
		}
		if left -= n; left < 0 {
			return
		}
	}
}

// readSlack is what the demuxer reads past a sample's last packet: its I/O buffer.
const readSlack = 64 << 10

// sampleBytes is the byte range of sample s's video that decoding it reads: from the packet of
// the keyframe it starts at to the end of the keyframe packet after its last frame (the decoder
// may need packets up to there to put out frames shown before it), and the demuxer's read past
// that. ok is false when the probe table cannot be had or does not know the positions.
func sampleBytes(lay *layout.Layout, infos load.Infos, s int) (path string, off, end int64, ok bool) {
	info, err := infos.Info(lay.Sample(s).Video)
	if err != nil || info == nil {
		return "", 0, 0, false
	}
	idx, err := info.ClipFrames(load.SampleClip(lay, s))
	if err != nil || len(idx) == 0 {
		return "", 0, 0, false
	}
	k := info.KeyframeAtOrBefore(idx[0])
	last := idx[len(idx)-1]
	start := info.Keyframes[k]
	if start.Pos < 0 {
		return "", 0, 0, false
	}
	end = -1
	for _, kf := range info.Keyframes[k+1:] {
		if kf.Frame > last {
			if kf.Pos >= 0 {
				end = kf.Pos + int64(kf.Size)
			}
			break
		}
	}
	if end < 0 {
		end = 1 << 62 // to the end of the object
	}
	return info.Path, start.Pos, end + readSlack, true
}

// planMoved is the mount's fs.Config.PlanMoved: for a bucket, kick's; nil for a directory.
func (s source) planMoved(kick aheadKick) func() {
	if s.bucket == nil {
		return nil
	}
	return kick.moved
}

// current is the mount's fs.Config.Current: for a bucket, whether an object still has the ETag
// it was listed with; nil for a directory (its files' size and time are compared).
func (s source) current() func(video string) bool {
	if s.bucket == nil {
		return nil
	}
	return func(video string) bool { return s.bucket.Unchanged(s.bucket.Path(video)) }
}

// fetchAheadFor starts fetching ahead what f's plans want next, from a bucket (nil for a
// directory): made after the FS, with its hooks, and kicked by it through kick.
func (s source) fetchAheadFor(f *vfs.FS, lay *layout.Layout, infos load.Infos, kick aheadKick, log *slog.Logger) *fetchAhead {
	if s.bucket == nil {
		return nil
	}
	a := newFetchAhead(s.bucket, lay, infos, f.Upcoming, f.Held, kick, s.bucket.Stats().CacheCapacity/2, log)
	a.start()
	kick.moved() // a first pass, for a plan written before it started
	return a
}

// fetchStats is the mount's fs.Config.FetchStats: a bucket's counters; nil for a directory.
func (s source) fetchStats() func() wire.FetchStats {
	if s.bucket == nil {
		return nil
	}
	return func() wire.FetchStats {
		st := s.bucket.Stats()
		w := wire.FetchStats{Lists: st.Lists, GETs: st.GETs, BytesFetched: st.BytesFetched, FetchSeconds: st.FetchSeconds,
			Retries: st.Retries, Throttled: st.Throttled, FailedGETs: st.FailedGETs,
			BlockHits: st.Hits, BlockWaits: st.Waits, BlockMisses: st.Misses, BlocksAhead: st.Ahead, CacheBytes: st.CacheBytes, CacheCapacityBytes: st.CacheCapacity}
		if st.GETs > 0 {
			w.MeanLatencyMs = st.FetchSeconds * 1000 / float64(st.GETs)
		}
		return w
	}
}

// probeFrom probes a video named by a path or an s3:// URL (opening its bucket, once per bucket).
type probeFrom struct {
	o       s3Options
	log     *slog.Logger
	buckets map[string]*s3src.Bucket
}

// close closes the buckets opened.
func (p *probeFrom) close() {
	for _, b := range p.buckets {
		b.Close()
	}
}

func (p *probeFrom) probe(ctx context.Context, path string) (*decode.Info, error) {
	if !s3src.IsURL(path) {
		return decode.Probe(path)
	}
	bucket, key, err := s3src.ParseObjectURL(path)
	if err != nil {
		return nil, err
	}
	b := p.buckets[bucket]
	if b == nil {
		src := "s3://" + bucket + "/"
		if b, err = s3src.Open(ctx, src, s3src.Options{Endpoint: p.o.endpoint, Region: p.o.region, PathStyle: p.o.pathStyle,
			Timeout: p.o.timeout, CacheBytes: p.o.cacheMem.n, Log: p.log}); err != nil {
			return nil, err
		}
		if p.buckets == nil {
			p.buckets = map[string]*s3src.Bucket{}
		}
		p.buckets[bucket] = b
	}
	if _, err := b.Head(ctx, key); err != nil {
		if apiErr := smithy.APIError(nil); errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NotFound" || apiErr.ErrorCode() == "NoSuchKey") {
			return nil, fmt.Errorf("%s: object not found (the key is taken as written: no %%XX unescaping, ? and # are part of it): %w", path, err)
		}
		return nil, err
	}
	return decode.ProbeFrom(b.Path(key), b.Open)
}
