package catalog

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vidfs/vidfs/decode"
)

// The probe cache of a root is a directory of segment files, each written whole by one scan (or
// RememberUnusableOf) to a temporary file and renamed into place, and never changed after: mounts
// on several nodes that share the directory each add their own segments, so none loses or damages
// another's work. A video's entry in a newer segment (by name: the time it was written) wins.
// When a scan finds more than maxSegments, it merges them into one and removes those it merged;
// a segment another node adds meanwhile is left alone.
//
// A segment holds each video's probe table as its own record, so that a mount reads a table only
// when it decodes the video (Tables.Info), and keeps per video only a Ref to it:
//
//	segMagic
//	decode.TableVersion (4 bytes, little-endian): the tables' own version
//	preamble length (4 bytes, little-endian) and preamble: a gob stream of the type decode.Info
//	    and a zero Info, which a record's bytes follow to be decoded alone
//	records: each the gob message of one *decode.Info from the same encoder
//	index: a gob segIndex (the root, and per video its file, brief table, error and record)
//	trailer: the index's offset (8 bytes, little-endian) and segEnd
const (
	segMagic    = "vidfs probe tables 5\n"
	segEnd      = "VPT5END\n"
	segSuffix   = ".seg"
	maxSegments = 8
	// checkpointEvery is how many probes a scan writes to a segment before it renames it into
	// place and starts another, so that an interrupted first scan keeps most of its work.
	checkpointEvery = 4096
)

type segIndex struct {
	Root    string
	Entries []indexEntry
}

type indexEntry struct {
	Rel           string
	Size, ModTime int64
	Version       string       // an object's ETag; "" for a local file
	Brief         *decode.Info // decode.Info.Brief of the table; nil with Err
	Err           *cachedError // why the file could not be probed
	Off           int64        // the table's record
	Len           uint32       // 0: no table
	// Unusable lists the frames of the table's keyframes marked unusable. Marks only ever
	// accumulate, and several nodes may add different ones: a scan takes their union over every
	// entry of the same file.
	Unusable []int
}

// segment is one open segment file.
type segment struct {
	f        segFile
	name     string // "" for an anonymous one (no probe cache directory, or in memory)
	preamble []byte
	index    []indexEntry // as read; dropped once a scan has picked what it uses
}

// segFile is what a segment is read from: its file, or a buffer for tables kept in memory.
type segFile interface {
	io.ReaderAt
	io.Closer
}

// memFile is a segment kept in memory.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// Ref says where a video's probe table lies in its Tables: 16 bytes, what a mount keeps per video.
type Ref struct {
	seg int32 // index into Tables.segs, plus one; 0: no table
	n   uint32
	off int64
}

// Valid tells whether the Ref points at a table.
func (r Ref) Valid() bool { return r.seg > 0 }

// storeDir is the directory of root's segments under dir.
func storeDir(dir, root string) string { return CachePath(dir, root) }

// openSegments opens the segments of root under dir, oldest first; those that cannot be read or
// are not of this version are skipped (and their videos probed again).
//
// A segment listed but gone when opened was removed by another node's merge, which put the
// merged segment in place before removing any: openSegments then lists again and opens the names
// it has not seen, keeping those it opened already (their tables and marks stay readable, and are
// in the union), until a listing shows no name newly gone, or maxListings were made. It never
// gives up on the segments it opened: a view without them would make a scan probe its videos
// again, and RememberUnusableOf drop its marks for videos it does not find.
func openSegments(dir, root string) []*segment {
	if dir == "" {
		return nil
	}
	const maxListings = 64
	opened := map[string]*segment{}
	gone := map[string]bool{}
	for range maxListings {
		names, err := filepath.Glob(filepath.Join(storeDir(dir, root), "*"+segSuffix))
		if err != nil {
			break
		}
		vanished := false
		for _, name := range names {
			if opened[name] != nil || gone[name] {
				continue
			}
			s, err := readSegment(name, root)
			switch {
			case errors.Is(err, os.ErrNotExist):
				gone[name], vanished = true, true
			case err == nil:
				opened[name] = s
			default:
				gone[name] = true // unreadable: skipped, not read again
			}
		}
		if !vanished {
			break
		}
	}
	names := slices.Sorted(maps.Keys(opened))
	segs := make([]*segment, len(names))
	for i, name := range names {
		segs[i] = opened[name]
	}
	return segs
}

// readSegment opens a segment and reads its preamble and index.
func readSegment(name, root string) (*segment, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	s, err := loadSegment(f, name, root)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("probe cache segment %s: %w", name, err)
	}
	return s, nil
}

func loadSegment(f *os.File, name, root string) (*segment, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	head := make([]byte, len(segMagic)+8)
	tail := make([]byte, 16)
	if size < int64(len(head)+len(tail)) {
		return nil, errors.New("too short")
	}
	if _, err := f.ReadAt(head, 0); err != nil {
		return nil, err
	}
	if _, err := f.ReadAt(tail, size-16); err != nil {
		return nil, err
	}
	if string(head[:len(segMagic)]) != segMagic || string(tail[8:]) != segEnd {
		return nil, errors.New("not a probe cache segment of this version")
	}
	if v := binary.LittleEndian.Uint32(head[len(segMagic):]); v != decode.TableVersion {
		return nil, fmt.Errorf("holds probe tables of version %d, not %d", v, decode.TableVersion)
	}
	pl := int64(binary.LittleEndian.Uint32(head[len(segMagic)+4:]))
	idx := int64(binary.LittleEndian.Uint64(tail))
	if int64(len(head))+pl > idx || idx > size-16 {
		return nil, errors.New("damaged trailer")
	}
	s := &segment{f: f, name: name, preamble: make([]byte, pl)}
	if _, err := f.ReadAt(s.preamble, int64(len(head))); err != nil {
		return nil, err
	}
	var si segIndex
	if err := gob.NewDecoder(bufio.NewReader(io.NewSectionReader(f, idx, size-16-idx))).Decode(&si); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if si.Root != root {
		return nil, fmt.Errorf("holds the tables of %s, not %s", si.Root, root)
	}
	s.index = si.Entries
	return s, nil
}

// record reads and decodes the table at off, n bytes long.
func (s *segment) record(off int64, n uint32) (*decode.Info, error) {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil {
		return nil, err
	}
	dec := gob.NewDecoder(io.MultiReader(bytes.NewReader(s.preamble), bytes.NewReader(b)))
	var zero, info decode.Info
	if err := dec.Decode(&zero); err != nil {
		return nil, err
	}
	if err := dec.Decode(&info); err != nil {
		return nil, err
	}
	return &info, nil
}

// segWriter writes one segment to a temporary file, which finish renames into place. Not
// renameio: the segment's name is chosen when it is finished, and its file stays open for reading
// after the rename (another node's merge may remove the name at once), where renameio closes it.
type segWriter struct {
	dir, root string // dir "": an anonymous file, removed at once, kept open
	f         *os.File
	mem       *bytes.Buffer // instead of f: a segment kept in memory
	w         *bufio.Writer
	off       int64
	enc       *gob.Encoder // writes to buf
	buf       bytes.Buffer
	preamble  []byte
	index     []indexEntry
}

// newSegWriter starts a segment of root's tables in dir, or, with dir "", an anonymous file in
// the system's temporary directory that lives as long as it is open.
func newSegWriter(dir, root string) (*segWriter, error) {
	w := &segWriter{dir: dir, root: root}
	var err error
	if dir == "" {
		if w.f, err = os.CreateTemp("", "vidfs-probe-*"+segSuffix); err != nil {
			return nil, fmt.Errorf("keeping probe tables: %w", err)
		}
		os.Remove(w.f.Name())
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("writing the probe cache: %w", err)
		}
		if w.f, err = os.CreateTemp(dir, ".tmp-*"); err != nil {
			return nil, fmt.Errorf("writing the probe cache: %w", err)
		}
	}
	w.w = bufio.NewWriterSize(w.f, 256<<10)
	return w.start()
}

// newMemSegWriter starts a segment of root's tables kept in memory.
func newMemSegWriter(root string) (*segWriter, error) {
	w := &segWriter{root: root, mem: new(bytes.Buffer)}
	w.w = bufio.NewWriter(w.mem)
	return w.start()
}

// start writes the segment's head.
func (w *segWriter) start() (*segWriter, error) {
	w.enc = gob.NewEncoder(&w.buf)
	if err := w.enc.Encode(&decode.Info{}); err != nil {
		w.abort()
		return nil, err
	}
	w.preamble = bytes.Clone(w.buf.Bytes())
	head := binary.LittleEndian.AppendUint32([]byte(segMagic), decode.TableVersion)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(w.preamble)))
	if err := w.write(append(head, w.preamble...)); err != nil {
		w.abort()
		return nil, err
	}
	return w, nil
}

// name is the file the segment is written to, for errors.
func (w *segWriter) name() string {
	if w.f == nil {
		return "memory"
	}
	return w.f.Name()
}

func (w *segWriter) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("writing probe tables to %s: %w", w.name(), err)
	}
	w.off += int64(len(b))
	return nil
}

// add writes a video's table (or its error) and returns the table's offset and length. An error
// the video does not prove about itself (decode.Permanent: an I/O error, no descriptor left, an
// object storage outage) is not written: the next scan probes the video again.
func (w *segWriter) add(rel string, id FileID, info *decode.Info, perr error) (int64, uint32, error) {
	if perr != nil && !decode.Permanent(perr) {
		return 0, 0, nil
	}
	e := indexEntry{Rel: rel, Size: id.Size, ModTime: id.ModTime, Version: id.Version, Err: storedError(perr)}
	if info != nil && perr == nil {
		w.buf.Reset()
		if err := w.enc.Encode(info); err != nil {
			return 0, 0, fmt.Errorf("encoding the probe table of %s: %w", rel, err)
		}
		e.Brief, e.Off, e.Len = info.Brief(), w.off, uint32(w.buf.Len())
		for _, k := range info.Keyframes {
			if k.Unusable {
				e.Unusable = append(e.Unusable, k.Frame)
			}
		}
		e.Brief.Path = ""
		if err := w.write(w.buf.Bytes()); err != nil {
			return 0, 0, err
		}
	}
	w.index = append(w.index, e)
	return e.Off, e.Len, nil
}

// addRaw copies a record written by an encoder with the same preamble.
func (w *segWriter) addRaw(e indexEntry, rec []byte) (int64, error) {
	e.Off = w.off
	if e.Brief != nil && e.Brief.Path != "" {
		b := *e.Brief
		b.Path = ""
		e.Brief = &b
	}
	if err := w.write(rec); err != nil {
		return 0, err
	}
	w.index = append(w.index, e)
	return e.Off, nil
}

// finish writes the index and trailer, syncs the file and renames it into place, and returns it
// open for reading.
func (w *segWriter) finish() (*segment, error) {
	idx := w.off
	var ib bytes.Buffer
	if err := gob.NewEncoder(&ib).Encode(segIndex{Root: w.root, Entries: w.index}); err != nil {
		w.abort()
		return nil, err
	}
	err := w.write(ib.Bytes())
	if err == nil {
		err = w.write(append(binary.LittleEndian.AppendUint64(nil, uint64(idx)), segEnd...))
	}
	if err == nil {
		err = w.w.Flush()
	}
	if err == nil && w.dir != "" {
		err = w.f.Sync()
	}
	if err != nil {
		w.abort()
		return nil, fmt.Errorf("writing probe tables to %s: %w", w.name(), err)
	}
	if w.mem != nil {
		return &segment{f: memFile{bytes.NewReader(w.mem.Bytes())}, preamble: w.preamble}, nil
	}
	s := &segment{f: w.f, preamble: w.preamble}
	if w.dir == "" {
		return s, nil
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	s.name = filepath.Join(w.dir, fmt.Sprintf("%020d-%s%s", time.Now().UnixNano(), hex.EncodeToString(rnd[:]), segSuffix))
	if err := os.Rename(w.f.Name(), s.name); err != nil {
		w.abort()
		return nil, fmt.Errorf("writing the probe cache: %w", err)
	}
	if d, err := os.Open(w.dir); err == nil { // the rename itself, durable
		d.Sync()
		d.Close()
	}
	return s, nil
}

// abort closes and removes the temporary file.
func (w *segWriter) abort() {
	if w.f == nil {
		return
	}
	w.f.Close()
	if w.dir != "" {
		os.Remove(w.f.Name())
	}
}

// cleanTemps removes temporary files a writer left in dir (it crashed) more than a day ago; a
// newer one may be another node's segment being written.
func cleanTemps(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	for _, n := range names {
		if st, err := os.Stat(n); err == nil && time.Since(st.ModTime()) > 24*time.Hour && strings.HasPrefix(filepath.Base(n), ".tmp-") {
			os.Remove(n)
		}
	}
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
