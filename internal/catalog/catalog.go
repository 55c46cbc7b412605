// Package catalog finds the videos under a source directory (or a bucket's prefix, through
// Files) and probes them, in parallel, keeping their probe tables in a cache outside the source
// (keyed by path, size and modification time, and an object's ETag) so that a second scan of the
// same source needs no probing. The tables stay on disk, each
// read when its video is decoded (Tables), so that a mount's memory does not hold every video's
// per-frame tables.
package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vidfs/vidfs/decode"
)

// Video is a file found under the root: its brief probe table, or why it could not be probed.
type Video struct {
	Rel  string // path relative to the root, / separated
	File FileID // the file as it was when found
	// Brief is the video's probe table without its per-frame tables (decode.Info.Brief), enough
	// to lay it out; Table is where Tables keeps the full one. Brief is nil and Table not valid
	// with Err.
	Brief *decode.Info
	Table Ref
	Err   error
	marks []int // frames of the keyframes marked unusable in the table Table points at
}

// FileID tells one version of a file from another: its size and modification time, and an
// object's ETag. A file that was rewritten, replaced or touched since has another.
type FileID struct {
	Size    int64
	ModTime int64  // nanoseconds since 1970
	Version string // an object's ETag; "" for a local file
}

// Files is where a scan's videos come from: a local directory (Dir) or a bucket.
type Files interface {
	// Root names the source in messages and keys its probe cache: an absolute directory, or an
	// s3:// URL.
	Root() string
	// List returns every file under the root, its path relative to it / separated; Scan keeps
	// those with a video's extension and none of whose names starts with a dot.
	List(ctx context.Context) ([]File, error)
	// Path is what the probe table of the file at rel calls it (decode.Info.Path).
	Path(rel string) string
	// Opener opens files by Path for probing and decoding; nil for local files.
	Opener() decode.Opener
}

// File is a file Files lists.
type File struct {
	Rel string
	FileID
}

// Dir is the local directory root as Files: its files, following symbolic links to files.
func Dir(root string) Files { return dirFiles(root) }

type dirFiles string

func (d dirFiles) Root() string {
	if abs, err := filepath.Abs(string(d)); err == nil {
		return abs
	}
	return string(d)
}

func (d dirFiles) Path(rel string) string { return filepath.Join(d.Root(), filepath.FromSlash(rel)) }

func (d dirFiles) Opener() decode.Opener { return nil }

func (d dirFiles) List(ctx context.Context) ([]File, error) {
	root := d.Root()
	if st, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("source directory: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("source %s: not a directory", root)
	}
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walking %s: %w", p, err)
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") && p != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isVideo(name) {
			return nil
		}
		st, err := os.Stat(p) // follows links
		if err != nil || !st.Mode().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, File{filepath.ToSlash(rel), FileID{Size: st.Size(), ModTime: st.ModTime().UnixNano()}})
		return nil
	})
	return files, err
}

// hidden tells whether a name of the path is hidden (starts with a dot).
func hidden(rel string) bool {
	for _, name := range strings.Split(rel, "/") {
		if strings.HasPrefix(name, ".") {
			return true
		}
	}
	return false
}

// Options configures Scan.
type Options struct {
	Root string // a local directory, unless Files is set
	// Files lists and opens the videos instead of Root: a bucket's.
	Files    Files
	Workers  int    // probes at once (default 4)
	CacheDir string // where probe tables are kept; "" keeps none
	// Log gets a warning when the probe tables cannot be kept in the cache, even partway (the
	// scan succeeds all the same, and the next one probes again); nil: nowhere.
	Log *slog.Logger
	// Progress is called now and then during probing, and once at the end.
	Progress func(p Progress)
}

// Progress reports how far a scan has got.
type Progress struct {
	Done, Total int // videos probed (or found in the cache) of those found
	Cached      int // of Done, taken from the cache
	Failed      int
	Elapsed     time.Duration
	Final       bool
}

// Rate is how many videos a second have been probed (those from the cache left out).
func (p Progress) Rate() float64 {
	if s := p.Elapsed.Seconds(); s > 0 {
		return float64(p.Done-p.Cached) / s
	}
	return 0
}

// Left estimates the time the videos not yet probed will take at Rate (0 when not known).
func (p Progress) Left() time.Duration {
	if r := p.Rate(); r > 0 {
		return time.Duration(float64(p.Total-p.Done) / r * float64(time.Second))
	}
	return 0
}

// Scan lists the root (a directory: following symbolic links to files), and returns every video
// found, sorted by path, with its brief probe table or error, and the full tables, read one at a
// time (the caller closes them). Only a root that cannot be read is an error: tables that cannot
// be kept in the cache are kept in a temporary file, else in memory (Options.Log says so).
func Scan(ctx context.Context, opts Options) (*Tables, []Video, error) {
	src := opts.Files
	if src == nil {
		src = Dir(opts.Root)
	}
	root := src.Root()
	listed, err := src.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	type file struct {
		rel string
		id  FileID
	}
	var files []file
	for _, f := range listed {
		if isVideo(f.Rel) && !hidden(f.Rel) {
			files = append(files, file{f.Rel, f.FileID})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })

	segs := openSegments(opts.CacheDir, root)
	// For each version of each file, the newest entry, and the union of the unusable keyframes
	// marked in any of its entries (several nodes may have marked different ones).
	type hit struct {
		seg int
		e   *indexEntry
	}
	type fileKey struct {
		rel       string
		size, mod int64
		version   string
	}
	latest := make(map[fileKey]hit)
	marks := make(map[fileKey][]int)
	for si, s := range segs {
		for j := range s.index {
			e := &s.index[j]
			k := fileKey{e.Rel, e.Size, e.ModTime, e.Version}
			latest[k] = hit{si, e}
			if len(e.Unusable) > 0 {
				marks[k] = union(marks[k], e.Unusable)
			}
		}
	}
	out := make([]Video, len(files))
	var todo, remark []int
	prog := Progress{Total: len(files)}
	for i, f := range files {
		out[i].Rel, out[i].File = f.rel, f.id
		k := fileKey{f.rel, f.id.Size, f.id.ModTime, f.id.Version}
		h, ok := latest[k]
		var cerr error
		if ok && h.e.Err != nil {
			cerr = h.e.Err.restore(src.Path(f.rel))
		}
		// An error that is not the video's own (kept by an older vidfs) is probed again.
		if !ok || (h.e.Err == nil && (h.e.Len == 0 || h.e.Brief == nil)) || (cerr != nil && !decode.Permanent(cerr)) {
			todo = append(todo, i)
			continue
		}
		if cerr != nil {
			out[i].Err = cerr
			prog.Failed++
		} else {
			out[i].Brief, out[i].Table = h.e.Brief, Ref{seg: int32(h.seg + 1), n: h.e.Len, off: h.e.Off}
			out[i].marks = h.e.Unusable
			if m := marks[k]; len(union(m, h.e.Unusable)) > len(h.e.Unusable) {
				remark = append(remark, i)
			}
		}
		prog.Done++
		prog.Cached++
	}
	clear(latest)
	for _, s := range segs {
		s.index = nil
	}
	store := ""
	if opts.CacheDir != "" {
		store = storeDir(opts.CacheDir, root)
	}
	k := newKeeper(store, root, segs, opts.Log)
	fail := func(err error) (*Tables, []Video, error) {
		k.abort()
		newTables(k.segs, nil).Close()
		return nil, nil, err
	}

	// Videos counted in prog already: those taken from the cache, and those probed once.
	counted := make(map[int]bool, len(remark))
	// Tables that lack marks another entry of the same file has are written again with all; one
	// that cannot be read is probed again.
	for _, i := range remark {
		counted[i] = true
		r := out[i].Table
		info, err := segs[r.seg-1].record(r.off, r.n)
		if err != nil {
			out[i].Brief, out[i].Table, out[i].marks = nil, Ref{}, nil
			todo = append(todo, i)
			continue
		}
		m := marks[fileKey{out[i].Rel, out[i].File.Size, out[i].File.ModTime, out[i].File.Version}]
		for j := range info.Keyframes {
			if slices.Contains(m, info.Keyframes[j].Frame) {
				info.Keyframes[j].Unusable = true
			}
		}
		ref, lost, err := k.add(i, out[i].Rel, out[i].File, info, nil)
		if err != nil {
			return fail(err)
		}
		out[i].Table, out[i].marks = ref, m
		todo = append(todo, lost...)
	}
	start := time.Now()
	workers := opts.Workers
	if workers <= 0 {
		workers = 4
	}
	var mu sync.Mutex // guards out, prog and k
	report := func(final bool) {
		if opts.Progress != nil {
			mu.Lock()
			p := prog
			mu.Unlock()
			p.Elapsed, p.Final = time.Since(start), final
			opts.Progress(p)
		}
	}
	stopReports := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				report(false)
			case <-stopReports:
				return
			}
		}
	}()
	// Videos whose tables a failure to write lost are probed again, in another round (at most
	// one for each place the keeper falls back to), and not counted again.
	var werr error
	for werr == nil && ctx.Err() == nil {
		var lost []int
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(workers)
		for _, i := range todo {
			if gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				info, err := decode.ProbeFrom(src.Path(files[i].rel), src.Opener())
				// A video probed again because its table could not be read back keeps the marks
				// its other entries hold (marks is only read from here on).
				m := marks[fileKey{files[i].rel, files[i].id.Size, files[i].id.ModTime, files[i].id.Version}]
				if err == nil {
					for j := range info.Keyframes {
						if slices.Contains(m, info.Keyframes[j].Frame) {
							info.Keyframes[j].Unusable = true
						}
					}
				}
				mu.Lock()
				defer mu.Unlock()
				ref, l, kerr := k.add(i, files[i].rel, out[i].File, info, err)
				lost = append(lost, l...)
				if kerr != nil {
					return kerr
				}
				out[i].Err, out[i].Brief, out[i].Table, out[i].marks = err, nil, Ref{}, nil
				if err == nil {
					out[i].Brief, out[i].Table, out[i].marks = info.Brief(), ref, m
				}
				if !counted[i] {
					counted[i] = true
					prog.Done++
					if err != nil {
						prog.Failed++
					}
				}
				return nil
			})
		}
		werr = g.Wait()
		if werr == nil && ctx.Err() == nil && len(lost) == 0 {
			lost, werr = k.finish()
		}
		if len(lost) == 0 {
			break
		}
		todo = lost
	}
	close(stopReports)
	<-reported
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if werr != nil {
		return fail(werr)
	}
	report(true)
	if unread, first := passing(out); unread > 0 && opts.Log != nil {
		opts.Log.Warn("videos left out: their bytes could not be read (not remembered: the next scan probes them again)",
			"videos", unread, "first", first)
	}
	segs = k.segs
	store = k.store
	if k.level != toStore {
		store = ""
	}
	if store != "" && len(segs) > maxSegments {
		if merged, err := compact(store, root, segs, out); err != nil {
			if opts.Log != nil {
				opts.Log.Warn("probe cache segments not merged", "dir", store, "err", err)
			}
		} else {
			segs = merged
		}
	}
	if store != "" {
		cleanTemps(store)
	}
	for i := range out {
		if out[i].Brief != nil {
			out[i].Brief.Path = src.Path(out[i].Rel)
		}
	}
	return newTables(segs, src.Opener()), out, nil
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

// compact writes the tables of the videos found into one segment, removes the segments they
// came from, and returns the new one, with the videos' Refs pointing into it. Records whose
// segment was written with the same gob preamble are copied as they are; others are decoded and
// written again.
func compact(store, root string, segs []*segment, videos []Video) ([]*segment, error) {
	w, err := newSegWriter(store, root)
	if err != nil {
		return nil, err
	}
	refs := make([]Ref, len(videos))
	for i, v := range videos {
		var off int64
		var n uint32
		switch r := v.Table; {
		case v.Err != nil:
			_, _, err = w.add(v.Rel, v.File, nil, v.Err)
		case r.Valid() && bytes.Equal(segs[r.seg-1].preamble, w.preamble):
			rec := make([]byte, r.n)
			if _, err = segs[r.seg-1].f.ReadAt(rec, r.off); err == nil {
				n = r.n
				off, err = w.addRaw(indexEntry{Rel: v.Rel, Size: v.File.Size, ModTime: v.File.ModTime, Version: v.File.Version, Brief: v.Brief, Len: r.n, Unusable: v.marks}, rec)
			}
		case r.Valid():
			var info *decode.Info
			if info, err = segs[r.seg-1].record(r.off, r.n); err == nil {
				off, n, err = w.add(v.Rel, v.File, info, nil)
			}
		}
		if err != nil {
			w.abort()
			return nil, err
		}
		if n > 0 {
			refs[i] = Ref{seg: 1, n: n, off: off}
		}
	}
	merged, err := w.finish()
	if err != nil {
		return nil, err
	}
	for i := range videos {
		videos[i].Table = refs[i]
	}
	for _, s := range segs {
		if s.name != "" {
			os.Remove(s.name) // another node's merge may have removed it first
		}
		s.f.Close()
	}
	return []*segment{merged}, nil
}

// isVideo reports whether a file name has a video container's extension.
func isVideo(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".flv", ".ts", ".mts", ".m2ts", ".mpg",
		".mpeg", ".m2v", ".ogv", ".ogg", ".wmv", ".asf", ".3gp", ".3g2", ".mxf", ".vob", ".divx",
		".y4m", ".ivf", ".h264", ".264", ".h265", ".265", ".hevc", ".rm", ".rmvb", ".dv", ".nut":
		return true
	}
	return false
}

// cachedError is a probe's error as the cache keeps it: its kind by name, so that it comes back
// as the same kind of *decode.Error, and the rest as text.
type cachedError struct {
	Kind   string // a decode kind's text; "" for an error of no known kind
	Detail string
}

func storedError(err error) *cachedError {
	if err == nil {
		return nil
	}
	var de *decode.Error
	if !errors.As(err, &de) {
		return &cachedError{Detail: err.Error()}
	}
	c := &cachedError{Kind: de.Kind.Error(), Detail: de.Detail}
	if de.Err != nil {
		c.Detail = strings.TrimPrefix(c.Detail+": "+de.Err.Error(), ": ")
	}
	return c
}

func (c *cachedError) restore(path string) error {
	if kind := decode.KindNamed(c.Kind); kind != nil {
		return &decode.Error{Path: path, Kind: kind, Detail: c.Detail}
	}
	return fmt.Errorf("%s: %s", path, c.Detail)
}

// RememberUnusable marks, in the probe tables of root cached under dir, the keyframes decoding
// found unusable (decode.Pool.UnusableKeyframes: frames by video path), so that the next scan's
// tables start clips earlier at once. The marked tables are written as a new segment; a missing
// cache is left missing; one that cannot be written is the error.
func RememberUnusable(dir, root string, marks map[string][]int) error {
	return RememberUnusableOf(dir, Dir(root), marks)
}

// RememberUnusableOf is RememberUnusable of the probe tables of src.
func RememberUnusableOf(dir string, src Files, marks map[string][]int) error {
	if dir == "" || len(marks) == 0 {
		return nil
	}
	root := src.Root()
	segs := openSegments(dir, root)
	defer newTables(segs, nil).Close()
	type hit struct {
		seg *segment
		e   *indexEntry
	}
	latest := make(map[string]hit)
	for _, s := range segs {
		for j := range s.index {
			latest[s.index[j].Rel] = hit{s, &s.index[j]}
		}
	}
	var w *segWriter
	for path, frames := range marks {
		rel, ok := strings.CutPrefix(path, src.Path(""))
		if !ok {
			continue
		}
		h, ok := latest[strings.TrimPrefix(filepath.ToSlash(rel), "/")]
		if !ok || h.e.Len == 0 || len(frames) == 0 {
			continue
		}
		info, err := h.seg.record(h.e.Off, h.e.Len)
		if err != nil {
			continue // probed again next time
		}
		changed := false
		for i := range info.Keyframes {
			for _, f := range frames {
				if info.Keyframes[i].Frame == f && !info.Keyframes[i].Unusable {
					info.Keyframes[i].Unusable, changed = true, true
				}
			}
		}
		if !changed {
			continue
		}
		if w == nil {
			var err error
			if w, err = newSegWriter(storeDir(dir, root), root); err != nil {
				return err
			}
		}
		if _, _, err := w.add(h.e.Rel, FileID{h.e.Size, h.e.ModTime, h.e.Version}, info, nil); err != nil {
			w.abort()
			return err
		}
	}
	if w == nil {
		return nil
	}
	s, err := w.finish()
	if err != nil {
		return err
	}
	return s.f.Close()
}

// CachePath is the directory where the probe tables of root are kept under dir.
func CachePath(dir, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(dir, "probe-"+hex.EncodeToString(sum[:8]))
}
