// Package catalog finds the videos under a source directory (or a bucket's prefix, through
// Files) and probes them, in parallel, keeping their probe tables in a cache outside the source
// (keyed by path, size and modification time, or an object's ETag) so that a second scan of the
// same source needs no probing.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sync/errgroup"

	"github.com/vidfs/vidfs/decode"
)

// Video is a file found under the root: its probe table, or why it could not be probed.
type Video struct {
	Rel  string // path relative to the root, / separated
	File FileID // the file as it was when found
	Info *decode.Info
	Err  error
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

// Options configures Scan.
type Options struct {
	Root string // a local directory, unless Files is set
	// Files lists and opens the videos instead of Root: a bucket's.
	Files    Files
	Workers  int    // probes at once (default 4)
	CacheDir string // where probe tables are kept; "" keeps none
	// Log gets a warning when the probe tables cannot be kept (the scan succeeds all the same,
	// and the next one probes again); nil: nowhere.
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

// Scan lists the root (a directory: following symbolic links to files), and returns every video
// found, sorted by path, with its probe table or error. Only a root that cannot be read is an
// error.
func Scan(ctx context.Context, opts Options) ([]Video, error) {
	src := opts.Files
	if src == nil {
		src = Dir(opts.Root)
	}
	root := src.Root()
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

	cache := loadCache(opts.CacheDir, root)
	out := make([]Video, len(files))
	var todo []int
	prog := Progress{Total: len(files)}
	for i, f := range files {
		out[i].Rel, out[i].File = f.Rel, f.FileID
		if c, ok := cache.Entries[f.Rel]; ok && c.Size == f.Size && c.ModTime == f.ModTime && c.Version == f.Version {
			out[i].Info = c.Info
			if c.Err != nil {
				out[i].Err = c.Err.restore(src.Path(f.Rel))
				prog.Failed++
			}
			prog.Done++
			prog.Cached++
			continue
		}
		todo = append(todo, i)
	}

	start := time.Now()
	workers := opts.Workers
	if workers <= 0 {
		workers = 4
	}
	var mu sync.Mutex // guards out and prog
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
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, i := range todo {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			info, err := decode.ProbeFrom(src.Path(files[i].Rel), src.Opener())
			mu.Lock()
			defer mu.Unlock()
			out[i].Info, out[i].Err = info, err
			prog.Done++
			if err != nil {
				prog.Failed++
			}
			return nil
		})
	}
	g.Wait()
	close(stopReports)
	<-reported
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	report(true)

	if len(todo) > 0 || len(cache.Entries) != len(files) {
		cache.Entries = make(map[string]cacheEntry, len(files))
		for i, f := range files {
			e := cacheEntry{Size: f.Size, ModTime: f.ModTime, Version: f.Version, Info: out[i].Info, Err: storedError(out[i].Err)}
			cache.Entries[f.Rel] = e
		}
		if err := saveCache(opts.CacheDir, root, cache); err != nil && opts.Log != nil {
			opts.Log.Warn("probe tables not kept; the next scan probes these videos again", "err", err)
		}
	}
	for i := range out {
		if out[i].Info != nil {
			out[i].Info.Path = src.Path(out[i].Rel)
		}
	}
	return out, nil
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

// cacheVersion changes whenever what Probe records changes, so old tables are not trusted.
const cacheVersion = 3

type cacheFile struct {
	Version int
	Root    string
	Entries map[string]cacheEntry
}

type cacheEntry struct {
	Size    int64
	ModTime int64
	Version string // an object's ETag
	Info    *decode.Info
	Err     *cachedError // why the file could not be probed
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
// tables start clips earlier at once. A missing cache is left missing; one that cannot be written
// is the error.
func RememberUnusable(dir, root string, marks map[string][]int) error {
	return RememberUnusableOf(dir, Dir(root), marks)
}

// RememberUnusableOf is RememberUnusable of the probe tables of src.
func RememberUnusableOf(dir string, src Files, marks map[string][]int) error {
	if dir == "" || len(marks) == 0 {
		return nil
	}
	root := src.Root()
	c := loadCache(dir, root)
	changed := false
	for rel, e := range c.Entries {
		frames := marks[src.Path(rel)]
		if e.Info == nil || len(frames) == 0 {
			continue
		}
		for i := range e.Info.Keyframes {
			for _, f := range frames {
				if e.Info.Keyframes[i].Frame == f && !e.Info.Keyframes[i].Unusable {
					e.Info.Keyframes[i].Unusable, changed = true, true
				}
			}
		}
	}
	if !changed {
		return nil
	}
	return saveCache(dir, root, c)
}

// CachePath is where the probe tables of root are kept under dir.
func CachePath(dir, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(dir, "probe-"+hex.EncodeToString(sum[:8])+".gob")
}

func loadCache(dir, root string) *cacheFile {
	empty := &cacheFile{Version: cacheVersion, Root: root, Entries: map[string]cacheEntry{}}
	if dir == "" {
		return empty
	}
	f, err := os.Open(CachePath(dir, root))
	if err != nil {
		return empty
	}
	defer f.Close()
	var c cacheFile
	if err := gob.NewDecoder(f).Decode(&c); err != nil || c.Version != cacheVersion || c.Root != root || c.Entries == nil {
		return empty
	}
	return &c
}

// saveCache writes the probe tables to a temporary file, syncs it and renames it into place
// (renameio), so that a crash or power cut leaves the old tables or the new, never a short file.
// A failure costs only a probe next time; the caller reports it.
func saveCache(dir, root string, c *cacheFile) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the probe cache: %w", err)
	}
	path := CachePath(dir, root)
	f, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir))
	if err != nil {
		return fmt.Errorf("writing the probe cache: %w", err)
	}
	defer f.Cleanup() // removes the temporary file unless it took the cache's place
	if err := gob.NewEncoder(f).Encode(c); err != nil {
		return fmt.Errorf("writing the probe cache %s: %w", path, err)
	}
	if err := f.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing the probe cache %s: %w", path, err)
	}
	return nil
}
