package catalog

import (
	"bufio"
	"bytes"
	"container/list"
	"crypto/rand"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vidfs/vidfs/decode"
)

// The probe cache of a root is a directory of segment files, each written whole by one scan (or
// RememberUnusable) to a temporary file and renamed into place, and never changed after: mounts
// on several nodes that share the directory each add their own segments, so none loses or damages
// another's work. A video's entry in a newer segment (by name: the time it was written) wins.
// When a scan finds more than maxSegments, it merges them into one and removes those it merged;
// a segment another node adds meanwhile is left alone.
//
// A segment holds each video's probe table as its own record, so that a mount reads a table only
// when it decodes the video (Tables.Info), and keeps per video only a Ref to it:
//
//	segMagic
//	preamble length (4 bytes, little-endian) and preamble: a gob stream of the type decode.Info
//	    and a zero Info, which a record's bytes follow to be decoded alone
//	records: each the gob message of one *decode.Info from the same encoder
//	index: a gob segIndex (the root, and per video its file, brief table, error and record)
//	trailer: the index's offset (8 bytes, little-endian) and segEnd
const (
	segMagic    = "vidfs probe tables 4\n"
	segEnd      = "VPT4END\n"
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
	f        *os.File
	name     string // "" for an anonymous one (no probe cache directory)
	preamble []byte
	index    []indexEntry // as read; dropped once a scan has picked what it uses
}

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
// are not of this version are skipped (and their videos probed again). A segment removed between
// the listing and its opening (another node merged it) makes it list again, a few times.
func openSegments(dir, root string) []*segment {
	if dir == "" {
		return nil
	}
	for range 3 {
		names, err := filepath.Glob(filepath.Join(storeDir(dir, root), "*"+segSuffix))
		if err != nil || len(names) == 0 {
			return nil
		}
		sort.Strings(names)
		var segs []*segment
		vanished := false
		for _, name := range names {
			s, err := readSegment(name, root)
			if errors.Is(err, os.ErrNotExist) {
				vanished = true
				break
			}
			if err == nil {
				segs = append(segs, s)
			}
		}
		if !vanished {
			return segs
		}
		for _, s := range segs {
			s.f.Close()
		}
	}
	return nil
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
	head := make([]byte, len(segMagic)+4)
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
	pl := int64(binary.LittleEndian.Uint32(head[len(segMagic):]))
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

// segWriter writes one segment to a temporary file, which finish renames into place.
type segWriter struct {
	dir, root string // dir "": an anonymous file, removed at once, kept open
	f         *os.File
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
	w.enc = gob.NewEncoder(&w.buf)
	if err := w.enc.Encode(&decode.Info{}); err != nil {
		w.abort()
		return nil, err
	}
	w.preamble = bytes.Clone(w.buf.Bytes())
	head := binary.LittleEndian.AppendUint32([]byte(segMagic), uint32(len(w.preamble)))
	if err := w.write(append(head, w.preamble...)); err != nil {
		w.abort()
		return nil, err
	}
	return w, nil
}

func (w *segWriter) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("writing probe tables to %s: %w", w.f.Name(), err)
	}
	w.off += int64(len(b))
	return nil
}

// add writes a video's table (or its error) and returns the table's offset and length.
func (w *segWriter) add(rel string, id FileID, info *decode.Info, perr error) (int64, uint32, error) {
	e := indexEntry{Rel: rel, Size: id.Size, ModTime: id.ModTime, Err: storedError(perr)}
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
		return nil, fmt.Errorf("writing probe tables to %s: %w", w.f.Name(), err)
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
	w.f.Close()
	if w.dir != "" {
		os.Remove(w.f.Name())
	}
}

// Tables reads the probe tables a scan found or made, one video at a time, keeping the most
// recently used in memory up to a bound.
type Tables struct {
	segs []*segment // read-only after Scan

	// mu guards the fields below. A leaf lock: nothing is called while it is held.
	mu       sync.Mutex
	lru      *list.List // of *tableEntry, most recent first
	byRef    map[Ref]*list.Element
	bytes    int64
	maxBytes int64
}

type tableEntry struct {
	ref   Ref
	info  *decode.Info
	bytes int64
}

// DefaultTablesBytes bounds the memory of the tables Tables keeps decoded.
const DefaultTablesBytes = 32 << 20

func newTables(segs []*segment) *Tables {
	return &Tables{segs: segs, lru: list.New(), byRef: map[Ref]*list.Element{}, maxBytes: DefaultTablesBytes}
}

// Info returns the probe table r points at, with Path set to path. The table is shared with
// other callers: it must not be changed.
func (t *Tables) Info(r Ref, path string) (*decode.Info, error) {
	if !r.Valid() || int(r.seg) > len(t.segs) {
		return nil, fmt.Errorf("%s: no probe table", path)
	}
	t.mu.Lock()
	if e, ok := t.byRef[r]; ok {
		t.lru.MoveToFront(e)
		info := e.Value.(*tableEntry).info
		t.mu.Unlock()
		return info, nil
	}
	t.mu.Unlock()
	info, err := t.segs[r.seg-1].record(r.off, r.n)
	if err != nil {
		return nil, fmt.Errorf("reading the probe table of %s: %w", path, err)
	}
	info.Path = path
	size := tableBytes(info)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byRef[r]; ok { // loaded meanwhile by another caller
		return e.Value.(*tableEntry).info, nil
	}
	t.byRef[r] = t.lru.PushFront(&tableEntry{ref: r, info: info, bytes: size})
	t.bytes += size
	for t.bytes > t.maxBytes && t.lru.Len() > 1 {
		old := t.lru.Remove(t.lru.Back()).(*tableEntry)
		delete(t.byRef, old.ref)
		t.bytes -= old.bytes
	}
	return info, nil
}

// tableBytes estimates the memory a decoded table takes.
func tableBytes(in *decode.Info) int64 {
	n := 512 + 8*len(in.PTS) + 4*(len(in.FramePackets)+len(in.PacketFrames)) + 64*len(in.Keyframes)
	for _, w := range in.Warnings {
		n += 16 + len(w)
	}
	return int64(n)
}

// Close closes the segment files.
func (t *Tables) Close() error {
	var errs []error
	for _, s := range t.segs {
		errs = append(errs, s.f.Close())
	}
	return errors.Join(errs...)
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
