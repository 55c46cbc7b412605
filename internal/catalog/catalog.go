// Package catalog finds the videos under a source directory (or a bucket's prefix, through
// Files) and probes them, in parallel, keeping their probe tables in a cache outside the source
// (keyed by path, size and modification time, and an object's ETag) so that a second scan of the
// same source needs no probing. The tables stay on disk, each
// read when its video is decoded (Tables), so that a mount's memory does not hold every video's
// per-frame tables.
package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	// Prober makes the probe tables: nil probes in this process (decode.ProbeFrom through the
	// Files' Opener). The mount gives its sandboxed decoder helpers (isolate.Decoders), so that
	// no process with privileges reads a video's bytes.
	Prober Prober
}

// Prober makes a video's probe table by its path (decode.Info.Path), as decode.ProbeFrom does:
// in this process, or in a sandboxed helper (isolate.Decoders). Its errors are decode's: those
// decode.Permanent calls the video's own are kept in the probe cache; others (an error of the path
// to the video, a helper that crashed on it twice) leave the video out of this scan only.
type Prober interface {
	Probe(ctx context.Context, path string) (*decode.Info, error)
}

// localProber probes in this process.
type localProber struct{ open decode.Opener }

// Probe is decode.ProbeFrom through the Opener.
func (l localProber) Probe(_ context.Context, path string) (*decode.Info, error) {
	return decode.ProbeFrom(path, l.open)
}

// proberOf is o's Prober, or one in this process through src's Opener.
func proberOf(o Options, src Files) Prober {
	if o.Prober != nil {
		return o.Prober
	}
	return localProber{src.Opener()}
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

// RememberUnusableOf marks, in the probe tables of src cached under dir, the keyframes decoding
// found unusable (decode.Pool.UnusableKeyframes: frames by video path), so that the next scan's
// tables start clips earlier at once. The marked tables are written as a new segment; a missing
// cache is left missing; one that cannot be written is the error.
func RememberUnusableOf(dir string, src Files, marks map[string][]int) error {
	if dir == "" || len(marks) == 0 {
		return nil
	}
	root := src.Root()
	segs := openSegments(dir, root)
	defer newTables(segs, localProber{}).Close()
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
