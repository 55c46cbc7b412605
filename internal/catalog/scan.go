package catalog

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vidfs/vidfs/decode"
)

// Scan lists the root (a directory: following symbolic links to files), and returns every video
// found, sorted by path, with its brief probe table or error, and the full tables, read one at a
// time (the caller closes them). Only a root that cannot be read is an error: tables that cannot
// be kept in the cache are kept in a temporary file, else in memory (Options.Log says so).
//
// Its steps: list the videos (listVideos); take what the probe cache's segments know of them
// (fromCache), writing again the tables that lack marks another entry of the same file has
// (remark); probe the others (probe), in rounds while writing their tables fails; then merge
// the segments if there are too many (finish).
func Scan(ctx context.Context, opts Options) (*Tables, []Video, error) {
	src := opts.Files
	if src == nil {
		src = Dir(opts.Root)
	}
	files, err := listVideos(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	s := &scan{src: src, root: src.Root(), files: files, segs: openSegments(opts.CacheDir, src.Root()),
		out: make([]Video, len(files)), counted: make(map[int]bool), prober: proberOf(opts, src)}
	todo, remark := s.fromCache()
	store := ""
	if opts.CacheDir != "" {
		store = storeDir(opts.CacheDir, s.root)
	}
	s.k = newKeeper(store, s.root, s.segs, opts.Log)
	again, err := s.remark(remark)
	if err != nil {
		return s.fail(err)
	}
	s.start = time.Now()
	stop := s.reportEvery(opts.Progress, 200*time.Millisecond)
	err = s.probe(ctx, append(todo, again...), opts.Workers)
	stop()
	if err != nil {
		return s.fail(err)
	}
	s.report(opts.Progress, true)
	return s.finish(opts.Log), s.out, nil
}

// scan is one Scan's work between its steps.
type scan struct {
	src    Files
	prober Prober
	root   string
	files  []File     // the videos found, sorted by path
	segs   []*segment // the probe cache's segments, as opened
	// marks: for each version of each file, the union of the unusable keyframes marked in any of
	// its entries (several nodes may have marked different ones). Read-only once fromCache made it.
	marks map[fileKey][]int
	start time.Time // when probing started

	// mu guards the fields below while probes run (before, one goroutine has them). A leaf lock:
	// only the keeper's writes happen under it.
	mu      sync.Mutex
	out     []Video
	prog    Progress
	k       *keeper
	counted map[int]bool // videos counted in prog already: those from the cache, and those probed once
}

// fileKey is one version of a file, as the probe cache's entries name it.
type fileKey struct {
	rel       string
	size, mod int64
	version   string
}

func keyOf(rel string, id FileID) fileKey { return fileKey{rel, id.Size, id.ModTime, id.Version} }

// listVideos lists src and returns its videos (by extension, none of whose names is hidden),
// sorted by path.
func listVideos(ctx context.Context, src Files) ([]File, error) {
	listed, err := src.List(ctx)
	if err != nil {
		return nil, err
	}
	var files []File
	for _, f := range listed {
		if isVideo(f.Rel) && !hidden(f.Rel) {
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
	return files, nil
}

// cacheHit is a file version's newest entry in the probe cache: in segment seg.
type cacheHit struct {
	seg int
	e   *indexEntry
}

// newest returns, for each version of each file in segs, its newest entry (a later segment's
// wins), and the union of the unusable keyframes marked in any of its entries.
func newest(segs []*segment) (map[fileKey]cacheHit, map[fileKey][]int) {
	latest := make(map[fileKey]cacheHit)
	marks := make(map[fileKey][]int)
	for si, s := range segs {
		for j := range s.index {
			e := &s.index[j]
			k := fileKey{e.Rel, e.Size, e.ModTime, e.Version}
			latest[k] = cacheHit{si, e}
			if len(e.Unusable) > 0 {
				marks[k] = union(marks[k], e.Unusable)
			}
		}
	}
	return latest, marks
}

// fromCache fills in the videos the probe cache knows, and returns those to probe (not there, or
// there with an error that is not their own, as an older vidfs kept) and those whose table lacks
// marks another entry of the same file has (to remark). The segments' indexes are dropped.
func (s *scan) fromCache() (todo, remark []int) {
	latest, marks := newest(s.segs)
	s.marks = marks
	s.prog = Progress{Total: len(s.files)}
	for i, f := range s.files {
		s.out[i].Rel, s.out[i].File = f.Rel, f.FileID
		k := keyOf(f.Rel, f.FileID)
		h, ok := latest[k]
		var cerr error
		if ok && h.e.Err != nil {
			cerr = h.e.Err.restore(s.src.Path(f.Rel))
		}
		if !ok || (h.e.Err == nil && (h.e.Len == 0 || h.e.Brief == nil)) || (cerr != nil && !decode.Permanent(cerr)) {
			todo = append(todo, i)
			continue
		}
		if cerr != nil {
			s.out[i].Err = cerr
			s.prog.Failed++
		} else {
			s.out[i].Brief, s.out[i].Table = h.e.Brief, Ref{seg: int32(h.seg + 1), n: h.e.Len, off: h.e.Off}
			s.out[i].marks = h.e.Unusable
			if m := marks[k]; len(union(m, h.e.Unusable)) > len(h.e.Unusable) {
				remark = append(remark, i)
			}
		}
		s.prog.Done++
		s.prog.Cached++
	}
	for _, seg := range s.segs {
		seg.index = nil
	}
	return todo, remark
}

// remark writes the tables of the videos given again, with every mark their file's entries
// hold, and returns those to probe: a table that cannot be read, and those whose tables a
// failure to write lost.
func (s *scan) remark(videos []int) (todo []int, err error) {
	for _, i := range videos {
		v := &s.out[i]
		s.counted[i] = true
		info, err := s.segs[v.Table.seg-1].record(v.Table.off, v.Table.n)
		if err != nil {
			v.Brief, v.Table, v.marks = nil, Ref{}, nil
			todo = append(todo, i)
			continue
		}
		m := s.marks[keyOf(v.Rel, v.File)]
		markUnusable(info, m)
		ref, lost, err := s.k.add(i, v.Rel, v.File, info, nil)
		if err != nil {
			return nil, err
		}
		v.Table, v.marks = ref, m
		todo = append(todo, lost...)
	}
	return todo, nil
}

// markUnusable marks the keyframes of info at the frames given unusable.
func markUnusable(info *decode.Info, frames []int) {
	for j := range info.Keyframes {
		if slices.Contains(frames, info.Keyframes[j].Frame) {
			info.Keyframes[j].Unusable = true
		}
	}
}

// probe probes the videos given, workers at once (0: 4), and keeps their tables. Videos whose
// tables a failure to write lost are probed again, in another round (at most one for each place
// the keeper falls back to), and not counted again.
func (s *scan) probe(ctx context.Context, todo []int, workers int) error {
	if workers <= 0 {
		workers = 4
	}
	var err error
	for err == nil && ctx.Err() == nil {
		var lost []int
		lost, err = s.probeRound(ctx, todo, workers)
		if err == nil && ctx.Err() == nil && len(lost) == 0 {
			lost, err = s.k.finish()
		}
		if len(lost) == 0 {
			break
		}
		todo = lost
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// probeRound probes the videos given, workers at once, and returns those whose tables a failure
// to write lost.
func (s *scan) probeRound(ctx context.Context, todo []int, workers int) (lost []int, err error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, i := range todo {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			f := s.files[i]
			info, err := s.prober.Probe(gctx, s.src.Path(f.Rel))
			// A video probed again because its table could not be read back keeps the marks its
			// other entries hold.
			m := s.marks[keyOf(f.Rel, f.FileID)]
			if err == nil {
				markUnusable(info, m)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			ref, l, kerr := s.k.add(i, f.Rel, f.FileID, info, err)
			lost = append(lost, l...)
			if kerr != nil {
				return kerr
			}
			v := &s.out[i]
			v.Err, v.Brief, v.Table, v.marks = err, nil, Ref{}, nil
			if err == nil {
				v.Brief, v.Table, v.marks = info.Brief(), ref, m
			}
			if !s.counted[i] {
				s.counted[i] = true
				s.prog.Done++
				if err != nil {
					s.prog.Failed++
				}
			}
			return nil
		})
	}
	err = g.Wait()
	return lost, err
}

// report calls progress (if set) with how far the scan has got.
func (s *scan) report(progress func(Progress), final bool) {
	if progress == nil {
		return
	}
	s.mu.Lock()
	p := s.prog
	s.mu.Unlock()
	p.Elapsed, p.Final = time.Since(s.start), final
	progress(p)
}

// reportEvery reports progress every period until stop is called, which returns once the last
// report is done.
func (s *scan) reportEvery(progress func(Progress), period time.Duration) (stop func()) {
	if progress == nil {
		return func() {}
	}
	stopped, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(period)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				s.report(progress, false)
			case <-stopped:
				return
			}
		}
	}()
	return func() {
		close(stopped)
		<-done
	}
}

// fail gives up the scan after err, closing what it opened.
func (s *scan) fail(err error) (*Tables, []Video, error) {
	s.k.abort()
	newTables(s.k.segs, s.prober).Close()
	return nil, nil, err
}

// finish logs the videos left out for errors of the path, merges the probe cache's segments if
// there are more than maxSegments, and returns the tables.
func (s *scan) finish(log *slog.Logger) *Tables {
	if unread, first := passing(s.out); unread > 0 && log != nil {
		log.Warn("videos left out: their bytes could not be read (not remembered: the next scan probes them again)",
			"videos", unread, "first", first)
	}
	segs, store := s.k.segs, s.k.store
	if s.k.level != toStore {
		store = ""
	}
	if store != "" && len(segs) > maxSegments {
		if merged, err := compact(store, s.root, segs, s.out); err != nil {
			if log != nil {
				log.Warn("probe cache segments not merged", "dir", store, "err", err)
			}
		} else {
			segs = merged
		}
	}
	if store != "" {
		cleanTemps(store)
	}
	for i := range s.out {
		if s.out[i].Brief != nil {
			s.out[i].Brief.Path = s.src.Path(s.out[i].Rel)
		}
	}
	return newTables(segs, s.prober)
}

// passing counts the videos whose error is not their own (decode.Permanent), which the probe
// cache does not keep, and returns the first such error.
func passing(videos []Video) (n int, first error) {
	for _, v := range videos {
		if v.Err != nil && !decode.Permanent(v.Err) {
			if n++; first == nil {
				first = v.Err
			}
		}
	}
	return n, first
}

// union returns the sorted union of two sets of frames.
func union(a, b []int) []int {
	u := append(slices.Clone(a), b...)
	slices.Sort(u)
	return slices.Compact(u)
}
