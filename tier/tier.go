// Package tier keeps decoded samples on local disk, compressed, across mounts: a second tier
// behind the memory cache, so that a sample decoded once is read back instead of decoded again.
// It knows nothing of video: an entry is the bytes of one sample under a Key the caller derives
// from everything that makes those bytes (the video's identity and every layout parameter).
//
// Entries are files of their own, written to a temporary name and renamed into place, so a crash
// or kill -9 mid-write leaves at worst a temporary file, removed at the next Open, never a short
// file under an entry's name. They are not synced: a power cut may leave an entry's file short or
// empty under its name, which its checksum catches like any damage (a sync cost the writer the
// disk's latency for each entry, so that it fell behind the decodes and skipped samples, which
// later epochs then decoded again). Every entry carries its key, its
// length, the codec it is stored with (Codec: none, LZ4 or zstd, each entry its own, so a tier
// reopened with another codec reads what the last one wrote) and a CRC-32 of its header and its
// stored bytes, checked before anything is decompressed: an entry that is torn, cut short or
// flipped is detected when read, dropped, logged, and reported as a miss, never served. (Map,
// which serves an entry stored as it is from the page cache without copying it, checks each
// version of its file once: see Map.) An entry that cannot be read (the process is out of file descriptors,
// the disk answers with an I/O error) is a miss too, logged as what happened, and kept. The tier is bounded in bytes; eviction drops first entries no reader
// will want soon (Options.Due), least recently used first, then the one due last: the policy of
// package evict, which the memory cache shares, in work that does not grow with the tier. Writes run on a
// goroutine of their own behind a bounded backlog: Put never waits, and skips an entry when the
// backlog is full or the disk refuses it.
package tier

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/evict"
)

// Key names an entry: a digest of everything that makes its bytes.
type Key [32]byte

// String is the key in hex, as its file is named.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Codec is how an entry's bytes are stored. Each entry records its own, and Get reads any of
// them whatever the tier's Options.Codec, which says how new entries are written.
type Codec uint8

// The codecs, by the number an entry's header records. Measured on decoded 16x224x224 clips of
// real footage, one core (docs/benchmarks.md has the table): zstd makes entries 2.2x smaller and
// costs about 3.2 ms to read back; LZ4 1.3x and 1.4 ms; none is a copy and a checksum (0.34 ms)
// and 2.4 MB on disk.
const (
	None Codec = 1 // the bytes as they are: the least CPU, the most disk
	LZ4  Codec = 2 // LZ4's block format (github.com/pierrec/lz4/v4), LZ4_compress_fast's algorithm
	Zstd Codec = 3 // zstd at its fastest level without entropy coding (github.com/klauspost/compress)
)

// Codecs lists every codec, in the order of their numbers.
var Codecs = []Codec{None, LZ4, Zstd}

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec is the codec called name (none, lz4 or zstd).
func ParseCodec(name string) (Codec, error) {
	for _, c := range Codecs {
		if c.String() == name {
			return c, nil
		}
	}
	names := make([]string, len(Codecs))
	for i, c := range Codecs {
		names[i] = c.String()
	}
	return 0, fmt.Errorf("unknown codec %q (want %s)", name, strings.Join(names, ", "))
}

// Options configures a Tier.
type Options struct {
	// Dir is where entries live. Open makes it if need be, and takes it for this process alone
	// (a lock file), so that two mounts never evict each other's entries unawares.
	Dir string
	// MaxBytes bounds the bytes of entries on disk.
	MaxBytes int64
	// Codec is how entries are written (required). An entry that compressing does not shrink is
	// written as it is (None).
	Codec Codec
	// Backlog bounds the bytes of entries waiting to be written (0: 64 MiB). Puts beyond it are
	// skipped.
	Backlog int64
	// Due says how soon the entry tagged tag will be read, in any unit that orders (smaller is
	// sooner), or -1 when no reader wants it soon. A tag is the caller's number for an entry
	// (a sample's index), given with Put, Get or Tag; entries without one are not due. It is
	// asked with the tier's lock held, so it must be quick and take no lock that is held while
	// calling into the tier (order.Plans.Due takes none). Nil: least recently used first.
	Due func(tag int) int
	Log *slog.Logger
}

// Stats is a snapshot of the tier.
type Stats struct {
	Dir          string
	MaxBytes     int64
	Codec        Codec // of the entries written
	Bytes        int64 // on disk, in entries
	Entries      int
	Hits         int64
	Misses       int64
	Corrupt      int64 // entries found damaged when read, and dropped
	Checked      int64 // versions of entries' files whose bytes Map checked, and then trusted
	ReadErrors   int64 // entries that could not be read (EMFILE, EIO, ...), and were kept
	Written      int64 // entries written
	WrittenBytes int64 // their bytes before compression
	StoredBytes  int64 // and after
	Skipped      int64 // Puts not written: backlog full, no room, or the disk refused
	Evicted      int64
	Backlog      int   // entries waiting to be written
	BacklogBytes int64 // their bytes
}

// Tier is a bounded store of compressed samples in a directory. It is safe for concurrent use.
type Tier struct {
	opts    Options
	dir     string // Dir/v1: entries in 256 subfolders, and tmp/
	dirFD   int    // dir, opened, which entries are opened relative to
	lock    *os.File
	enc     *zstd.Encoder // the writer's, for Zstd
	lz4     lz4.CompressorCCompat
	zbuf    []byte // the writer's, for compressed entries
	dec     *zstd.Decoder
	log     *slog.Logger
	scratch chan *scratch // for reading entries, reused

	// mu guards everything below. LOCK ORDERING: mu is taken after any lock of a caller (the
	// cache's loads call in holding none) and before none: Options.Due, asked with mu held,
	// takes no lock. Files are read, written and unlinked without it, so that a slow disk holds
	// up no lookup.
	mu      sync.Mutex
	entries map[Key]*entry
	// unlinking counts, by key, the damaged entries' files being unlinked (see recordRead).
	unlinking map[Key]int
	evict     *evict.Policy[Key] // the order the entries are evicted in
	bytes     int64
	queue     []job
	queued    int64 // bytes in queue
	wake      chan struct{}
	idle      *sync.Cond // on mu: the backlog emptied
	closed    bool
	stats     Stats
	done      chan struct{}
	// trustAge is the package's trustAge, which tests change between calls.
	trustAge time.Duration
	// closeWarn is the package's closeWarn, which tests shorten.
	closeWarn time.Duration
	// writerEnded says the writer goroutine has ended; abandoned, that Close gave up on it first,
	// leaving it the encoder and the lock to close.
	writerEnded, abandoned bool
	// beforeWrite, when set (by tests, before any Put), runs on the writer before each entry.
	beforeWrite func()
	// unlink removes an entry's file: os.Remove, which tests replace (before any Put).
	unlink func(name string) error
	pool   sync.Pool // *[]byte buffers for queueing
}

type entry struct {
	key  Key
	tag  int   // the caller's number for it, -1 for none
	size int64 // bytes on disk
	// checked is the version of the entry's file whose bytes Map checked: while the file is
	// still that one, Map serves it without checking its bytes again.
	checked fileID
}

// fileID tells one version of a file from another: a file replaced, rewritten, cut short or
// touched has another (its inode, size or change time differ). Change times are taken from a
// clock that may tick only every few milliseconds, so a file changed within one tick of the
// last change would keep its change time: a version is only told apart for sure once its change
// time is older than trustAge.
type fileID struct {
	ino, size, ctime int64
}

// trustAge is how old a file's change time must be for Map to take its version as checked, well
// above the coarse clock's tick (1-10 ms, by the kernel's HZ). (Tier.trustAge: tests change it.)
const trustAge = time.Second

func idOf(st *unix.Stat_t) fileID {
	return fileID{int64(st.Ino), st.Size, st.Ctim.Nano()}
}

type job struct {
	key Key
	tag int
	buf *[]byte
}

// HeaderSize is the bytes an entry takes on disk beside its stored bytes.
const HeaderSize = 64

// An entry file is a header, then the stored bytes. The header (little-endian):
//
//	0   magic "VIDFSTR2"
//	8   key (32 bytes)
//	40  the sample's length (uint64)
//	48  the stored bytes' length (uint32)
//	52  codec (one byte), then 7 zero bytes
//	60  CRC-32 (IEEE, which Go computes with carry-less multiplication: 1.8x CRC-32C's speed
//	    here, 0.2 ms for 2.4 MB) of bytes 0-59 and of the stored bytes
//
// Entries written before codecs ("VIDFSTR1", a 56-byte header: magic, key, length, CRC-32C of
// the sample's bytes, stored length; then a zstd frame) are read too.
const (
	magic            = "VIDFSTR2"
	headerSize       = HeaderSize
	legacyMagic      = "VIDFSTR1"
	legacyHeaderSize = 56
	version          = "v1"
)

// Open opens (or makes) a tier in opts.Dir, taking stock of the entries there and removing what
// a crash left half-written.
func Open(opts Options) (_ *Tier, err error) {
	if opts.Dir == "" || opts.MaxBytes <= 0 {
		return nil, fmt.Errorf("tier: want a directory and a size (got %q, %d bytes)", opts.Dir, opts.MaxBytes)
	}
	if !slices.Contains(Codecs, opts.Codec) {
		return nil, fmt.Errorf("tier: no codec %v", opts.Codec)
	}
	if opts.Backlog <= 0 {
		opts.Backlog = 64 << 20
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(opts.Dir, version)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("disk tier: %w", err)
	}
	// Whatever is opened below is closed again if a later step fails.
	var closers []func() error
	defer func() {
		if err != nil {
			for _, c := range slices.Backward(closers) {
				c()
			}
		}
	}()
	lock, err := os.OpenFile(filepath.Join(opts.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk tier: %w", err)
	}
	closers = append(closers, lock.Close)
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("disk tier %s is in use by another vidfs mount (give each mount a directory of its own): %w", opts.Dir, err)
	}
	// zstd's fastest level without entropy coding: on decoded 16x224x224 clips of real footage
	// it made entries 2.3x smaller in 10 ms a sample; the default level, 2.6x in 21 ms (one core
	// of a 2.5 GHz Xeon). Compressing shares the cores with decoding in the first epoch, and an
	// entry not written in time costs a decode in the next, so the faster one. The entry's own
	// CRC-32 stands in for zstd's frame checksum.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithNoEntropyCompression(true),
		zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("disk tier: zstd encoder: %w", err)
	}
	closers = append(closers, enc.Close)
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(true))
	if err != nil {
		return nil, fmt.Errorf("disk tier: zstd decoder: %w", err)
	}
	closers = append(closers, func() error { dec.Close(); return nil })
	dirFD, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("disk tier: %w", err)
	}
	closers = append(closers, func() error { return unix.Close(dirFD) })
	t := &Tier{opts: opts, dir: dir, dirFD: dirFD, lock: lock, enc: enc, dec: dec, log: opts.Log, scratch: make(chan *scratch, 4),
		entries: map[Key]*entry{}, unlinking: map[Key]int{}, evict: evict.New[Key](opts.Due), wake: make(chan struct{}, 1), done: make(chan struct{}),
		trustAge: trustAge, closeWarn: closeWarn, unlink: os.Remove}
	t.idle = sync.NewCond(&t.mu)
	t.stats.Dir, t.stats.MaxBytes, t.stats.Codec = opts.Dir, opts.MaxBytes, opts.Codec
	if err := t.scan(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	evicted, _ := t.makeRoom(0, -1) // the bound may have shrunk since the last mount: oldest first
	t.mu.Unlock()
	t.unlinkEntries(evicted)
	go t.writer()
	return t, nil
}

// scan removes temporary files and indexes the entries, oldest first.
func (t *Tier) scan() error {
	tmp := filepath.Join(t.dir, "tmp")
	names, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("disk tier: %w", err)
	}
	for _, n := range names {
		os.Remove(filepath.Join(tmp, n.Name()))
	}
	type found struct {
		key  Key
		size int64
		mod  time.Time
	}
	var all []found
	err = filepath.WalkDir(t.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == tmp {
				return filepath.SkipDir
			}
			return nil
		}
		k, ok := parseName(d.Name())
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		all = append(all, found{k, info.Size(), info.ModTime()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("disk tier: %w", err)
	}
	// Least recently written first: the order eviction takes them in when nothing is due.
	slices.SortFunc(all, func(a, b found) int { return a.mod.Compare(b.mod) })
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range all {
		e := &entry{key: f.key, tag: -1, size: f.size}
		t.evict.Add(f.key, -1)
		t.entries[f.key] = e
		t.bytes += f.size
	}
	return nil
}

func parseName(name string) (Key, bool) {
	var k Key
	if len(name) != 2*len(k) {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(name)); err != nil {
		return k, false
	}
	return k, true
}

// path is where an entry's file lives.
func (t *Tier) path(k Key) string {
	s := k.String()
	return filepath.Join(t.dir, s[:2], s)
}

// Get fills dst with the entry's bytes and says whether there was a sound entry of exactly
// len(dst) bytes under key, which it tags with tag. A damaged entry is dropped and logged, and is
// a miss; one that cannot be read is logged and kept, and is a miss.
func (t *Tier) Get(key Key, tag int, dst []byte) bool {
	e, _, ok := t.lookup(key, tag)
	if !ok {
		return false
	}
	return t.recordRead(e, fileID{}, t.read(key, dst))
}

// Mapping is an entry's bytes where they lie in the page cache, mapped read-only (Map): served
// without being copied. They stay valid until Unmap, even if the entry is evicted meanwhile.
type Mapping struct {
	Bytes []byte
	mem   []byte // the whole file mapped
}

// Unmap lets the mapping go; its Bytes must not be used after. The zero Mapping's does nothing.
func (m Mapping) Unmap() {
	if m.mem != nil {
		unix.Munmap(m.mem)
	}
}

// Map is Get, except that an entry stored as it is (None) is mapped rather than read into dst:
// m.Bytes are its len(dst) bytes, in the page cache, until m.Unmap. That saves a hit the copy
// into dst (0.1 ms of CPU for 2.4 MB on one core of the benchmarks' hosts, more when the page
// cache's pages are cold; docs/benchmarks.md). For an entry stored compressed m.Bytes is nil, and
// dst holds the bytes, as from Get.
//
// Its bytes are checked against the entry's CRC when Map first maps it, and then again only if
// its file changed (rewritten, cut short, replaced: another inode, size or change time; see
// fileID). What that does not catch is a disk that hands back other bytes, without an I/O error,
// after the page cache let the checked ones go; Get, and the compressed codecs, check at every
// read.
func (t *Tier) Map(key Key, tag int, dst []byte) (m Mapping, ok bool) {
	e, checked, ok := t.lookup(key, tag)
	if !ok {
		return Mapping{}, false
	}
	m, id, err := t.mapEntry(key, dst, checked)
	if !t.recordRead(e, id, err) {
		m.Unmap()
		return Mapping{}, false
	}
	return m, true
}

// lookup finds the entry under key and tags it, counting a miss when there is none; it also
// returns the version of its file whose bytes were checked.
func (t *Tier) lookup(key Key, tag int) (*entry, fileID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e == nil {
		t.stats.Misses++
		return nil, fileID{}, false
	}
	e.tag = tag
	t.evict.Add(key, tag) // used now, under its tag
	return e, e.checked, true
}

// recordRead counts a read of entry e that returned err, and drops or keeps the entry as err says;
// it reports whether the read was a hit. checked, when not zero, is the version of its file
// whose bytes the read checked. A damaged entry's file is unlinked after mu is let go, and Put
// refuses its key until then, so that the unlink cannot take a new entry's file in its place.
func (t *Tier) recordRead(e *entry, checked fileID, err error) bool {
	key := e.key
	t.mu.Lock()
	if err == nil {
		t.stats.Hits++
		if checked != (fileID{}) && t.entries[key] == e {
			e.checked = checked
			t.stats.Checked++
		}
		t.mu.Unlock()
		return true
	}
	t.stats.Misses++
	drop := false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.forget(key) // evicted meanwhile
	case errors.Is(err, errDamaged):
		t.stats.Corrupt++
		if drop = t.entries[key] == e; drop {
			t.remove(e)
			t.unlinking[key]++
		}
	default:
		t.stats.ReadErrors++
	}
	t.mu.Unlock()
	switch {
	case errors.Is(err, errDamaged):
		t.log.Warn("disk tier: damaged entry dropped; the sample is decoded again", "file", t.path(key), "reason", err)
		if drop {
			t.unlink(t.path(key))
			t.mu.Lock()
			if t.unlinking[key]--; t.unlinking[key] == 0 {
				delete(t.unlinking, key)
			}
			t.mu.Unlock()
		}
	case !errors.Is(err, fs.ErrNotExist):
		t.log.Warn("disk tier: entry could not be read, and is kept; the sample is decoded", "file", t.path(key), "err", err)
	}
	return false
}

// mapEntry maps the file of the entry under key, a sample of len(dst) bytes, if it is stored as
// it is, and checks its header, and its bytes unless its file is the version checked; it returns
// the mapping and the version of the file it checked (zero when it checked none). An entry of
// another kind (compressed, of the format before codecs, or of another length: damaged) is read
// into dst instead, and the mapping is the zero one.
func (t *Tier) mapEntry(key Key, dst []byte, checked fileID) (Mapping, fileID, error) {
	n := len(dst)
	s := t.getScratch()
	defer t.putScratch(s)
	var st unix.Stat_t
	fd, err := t.openEntry(key, s, &st)
	if err != nil {
		return Mapping{}, fileID{}, err
	}
	defer unix.Close(fd)
	if st.Size != int64(headerSize+n) {
		return Mapping{}, fileID{}, t.readFD(fd, &st, s, key, dst)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return Mapping{}, fileID{}, fmt.Errorf("mapping: %w", err)
	}
	m := Mapping{Bytes: mem[headerSize:], mem: mem}
	id := idOf(&st)
	asIs := true
	err = touchMapped(func() error {
		h, err := parseHeader(mem[:headerSize], st.Size, key, n)
		switch {
		case err != nil:
			return err
		case h.codec != None || h.legacy: // as long as the sample, but compressed
			asIs = false
			return nil
		case id == checked:
			id = fileID{} // nothing checked now
			return nil
		case crc32.Update(crc32.ChecksumIEEE(mem[:60]), crc32.IEEETable, m.Bytes) != h.sum:
			return damaged("checksum mismatch")
		case time.Since(time.Unix(0, id.ctime)) < t.trustAge:
			id = fileID{} // checked, but the version might not be told from the next: check again
		}
		return nil
	})
	if errors.Is(err, errFault) {
		// The file was cut short under the mapping (damaged), or the disk failed to give a page
		// (an I/O error: the entry is kept, as read keeps it).
		var now unix.Stat_t
		if unix.Fstat(fd, &now) == nil && now.Size < st.Size {
			err = damaged("cut short while read (%v)", err)
		} else {
			err = fmt.Errorf("reading: %w (%w)", unix.EIO, err)
		}
	}
	if err != nil || !asIs {
		m.Unmap()
		if err == nil {
			err = t.readFD(fd, &st, s, key, dst)
		}
		return Mapping{}, fileID{}, err
	}
	return m, id, nil
}

// errFault is touchMapped's error for a fault on a mapped file (SIGBUS): the file was cut short
// under the mapping, or the disk failed to give a page.
var errFault = errors.New("fault reading a mapped file")

// touchMapped runs f, which reads a mapped file, and turns a fault (SIGBUS) into errFault rather
// than the end of the process.
func touchMapped(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errFault, r)
		}
	}()
	return f()
}

// errDamaged marks what read finds wrong with the bytes of an entry's file: the entry is damaged,
// and is dropped. Read's other errors are the system's (EMFILE, EIO): they say nothing of the
// entry, which is kept.
var errDamaged = errors.New("damaged entry")

// damaged is an error of kind errDamaged.
func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errDamaged, fmt.Sprintf(format, args...))
}

// scratch is what reading an entry needs besides its destination: reused, so that a read
// allocates nothing.
type scratch struct {
	name [2 + 1 + 2*len(Key{}) + 1]byte // "ab/abcd...\x00": the entry's file under Tier.dir
	hdr  [headerSize]byte
	buf  []byte // the stored bytes of a compressed entry
}

func (t *Tier) getScratch() *scratch {
	select {
	case s := <-t.scratch:
		return s
	default:
		return new(scratch)
	}
}

func (t *Tier) putScratch(s *scratch) {
	select {
	case t.scratch <- s:
	default: // enough kept
	}
}

// header is what an entry's header says.
type header struct {
	codec  Codec
	size   int    // of the header
	stored int64  // bytes after it
	sum    uint32 // CRC-32, or with legacy CRC-32C
	legacy bool   // an entry from before codecs: sum is of the sample's bytes
}

// parseHeader reads the header at the start of b (a file of size bytes) of the entry under key,
// for a sample of n bytes, and checks that the file is as long as it says.
func parseHeader(b []byte, size int64, key Key, n int) (header, error) {
	var h header
	switch {
	case len(b) >= headerSize && string(b[:8]) == magic:
		h = header{codec: Codec(b[52]), size: headerSize, stored: int64(binary.LittleEndian.Uint32(b[48:52])),
			sum: binary.LittleEndian.Uint32(b[60:64])}
		if !slices.Contains(Codecs, h.codec) {
			return h, damaged("unknown codec %d", b[52])
		}
		// A compressed entry that did not shrink is stored as it is: only None may be as long as
		// the sample.
		if h.codec == None && h.stored != int64(n) || h.codec != None && h.stored >= int64(n) {
			return h, damaged("%d bytes stored with %v for a %d-byte sample", h.stored, h.codec, n)
		}
	case len(b) >= legacyHeaderSize && string(b[:8]) == legacyMagic:
		h = header{codec: Zstd, size: legacyHeaderSize, stored: int64(binary.LittleEndian.Uint32(b[52:56])),
			sum: binary.LittleEndian.Uint32(b[48:52]), legacy: true}
		if h.stored > int64(n)+int64(n)/8+(1<<16) {
			return h, damaged("%d bytes stored for a %d-byte sample", h.stored, n)
		}
	default:
		return h, damaged("no entry header")
	}
	if !bytes.Equal(b[8:40], key[:]) {
		return h, damaged("the entry holds another key")
	}
	if raw := binary.LittleEndian.Uint64(b[40:48]); raw != uint64(n) {
		return h, damaged("it holds %d bytes, the sample has %d", raw, n)
	}
	if size != int64(h.size)+h.stored {
		return h, damaged("cut short or padded: %d bytes of data, the header says %d", size-int64(h.size), h.stored)
	}
	return h, nil
}

// read reads and checks the entry's file into dst, decompressing straight into it (an entry
// stored as it is is read straight into it), checking the stored bytes before decompressing
// them. What it finds wrong with the file's bytes is errDamaged; failing to open or read the
// file is not. It allocates nothing.
func (t *Tier) read(key Key, dst []byte) error {
	s := t.getScratch()
	defer t.putScratch(s)
	var st unix.Stat_t
	fd, err := t.openEntry(key, s, &st)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return t.readFD(fd, &st, s, key, dst)
}

// readFD is read of the entry's file open as fd, of status st.
func (t *Tier) readFD(fd int, st *unix.Stat_t, s *scratch, key Key, dst []byte) error {
	n, err := preadFull(fd, s.hdr[:min(int64(len(s.hdr)), st.Size)], 0)
	if err != nil {
		return fmt.Errorf("reading: %w", err)
	}
	h, err := parseHeader(s.hdr[:n], st.Size, key, len(dst))
	if err != nil {
		return err
	}
	stored := dst // None: straight into dst
	if h.codec != None {
		if cap(s.buf) < len(dst) { // once: a compressed entry is shorter than its sample
			s.buf = make([]byte, len(dst))
		}
		stored = s.buf[:h.stored]
	}
	if n, err := preadFull(fd, stored, int64(h.size)); err != nil {
		return fmt.Errorf("reading: %w", err)
	} else if n < len(stored) {
		return damaged("cut short while read")
	}
	if !h.legacy && crc32.Update(crc32.ChecksumIEEE(s.hdr[:60]), crc32.IEEETable, stored) != h.sum {
		return damaged("checksum mismatch")
	}
	switch h.codec {
	case LZ4:
		if n, err := lz4.UncompressBlock(stored, dst); err != nil {
			return fmt.Errorf("%w: lz4: %w", errDamaged, err)
		} else if n != len(dst) {
			return damaged("decompressed to %d bytes, want %d", n, len(dst))
		}
	case Zstd:
		out, err := t.dec.DecodeAll(stored, dst[:0])
		if err != nil {
			return fmt.Errorf("%w: zstd: %w", errDamaged, err)
		}
		if len(out) != len(dst) || len(out) > 0 && &out[0] != &dst[0] {
			return damaged("decompressed to %d bytes, want %d", len(out), len(dst))
		}
	}
	if h.legacy && crc32.Checksum(dst, castagnoli) != h.sum {
		return damaged("checksum mismatch")
	}
	return nil
}

// openEntry opens the file of the entry under key for reading, and fills st with its status. Its
// name, relative to t.dir, is made in s.name, so that opening allocates nothing (unix.Openat
// would, for the name).
func (t *Tier) openEntry(key Key, s *scratch, st *unix.Stat_t) (int, error) {
	hex.Encode(s.name[3:len(s.name)-1], key[:])
	s.name[0], s.name[1], s.name[2] = s.name[3], s.name[4], '/'
	s.name[len(s.name)-1] = 0
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(t.dirFD), uintptr(unsafe.Pointer(&s.name[0])),
			unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
		switch errno {
		case 0:
			if err := unix.Fstat(int(fd), st); err != nil {
				unix.Close(int(fd))
				return -1, err
			}
			return int(fd), nil
		case unix.EINTR:
			continue
		}
		return -1, errno
	}
}

// preadFull reads from fd at off until b is full or the file ends, and says how much it read.
func preadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}

// castagnoli is the CRC of entries written before codecs.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (t *Tier) buffer() *[]byte {
	if bp, ok := t.pool.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 1<<20)
	return &b
}

// Has tells whether there is an entry under key (not whether it is sound).
func (t *Tier) Has(key Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[key] != nil
}

// Tag gives the entry under key, if there is one, the caller's number tag, for Due; it says
// whether there was one. (Entries found on disk at Open have none.)
func (t *Tier) Tag(key Key, tag int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[key]; e != nil {
		e.tag = tag
		t.evict.Retag(key, tag)
		return true
	}
	return false
}

// Replanned tells the tier that a plan was written or removed: every entry's due may have
// moved. They are asked again a few dozen at each eviction from then on, until all have been.
func (t *Tier) Replanned() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evict.Resweep()
}

// Refresh asks again how soon the entry tagged tag is due (Options.Due), if there is one: a
// reader read it, and the plans moved.
func (t *Tier) Refresh(tag int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.evict.RefreshTag(tag)
}

// Put queues src to be written under key, tagged tag, copying it, and says whether it was
// queued. It never waits: with the backlog full, it skips.
func (t *Tier) Put(key Key, tag int, src []byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.entries[key] != nil || t.unlinking[key] > 0 {
		return false
	}
	for _, j := range t.queue {
		if j.key == key {
			return false
		}
	}
	if t.queued+int64(len(src)) > t.opts.Backlog {
		t.stats.Skipped++
		return false
	}
	bp := t.buffer()
	*bp = append((*bp)[:0], src...)
	t.queue = append(t.queue, job{key, tag, bp})
	t.queued += int64(len(src))
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return true
}

// writer writes queued entries until Close. It runs on a thread of its own at a low priority
// (nice 10), so that compressing yields the CPU to decoding and reading; when it cannot keep up,
// the backlog fills and Put skips.
func (t *Tier) writer() {
	defer close(t.done)
	defer func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.writerEnded = true
		if t.abandoned { // Close gave up on this writer: what it used is its to close
			t.enc.Close()
			t.lock.Close()
		}
	}()
	// Locked and never unlocked: the thread, with its priority, ends with this goroutine
	// instead of going back to run others.
	runtime.LockOSThread()
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10) // best effort
	for {
		t.mu.Lock()
		for len(t.queue) == 0 {
			if t.closed {
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
			<-t.wake
			t.mu.Lock()
		}
		j := t.queue[0]
		t.mu.Unlock()
		if t.beforeWrite != nil {
			t.beforeWrite()
		}
		err := t.write(j.key, j.tag, *j.buf)
		t.mu.Lock()
		t.queue = t.queue[1:]
		t.queued -= int64(len(*j.buf))
		if err != nil {
			t.stats.Skipped++
		}
		if len(t.queue) == 0 {
			t.idle.Broadcast()
		}
		t.mu.Unlock()
		t.pool.Put(j.buf)
		if err != nil {
			t.log.Warn("disk tier: entry not written", "reason", err)
		}
	}
}

// write compresses raw and puts it in place under key, making room for it first. Only the
// writer goroutine calls it.
func (t *Tier) write(key Key, tag int, raw []byte) error {
	codec, stored := t.opts.Codec, raw
	switch codec {
	case LZ4:
		t.zbuf = slices.Grow(t.zbuf[:0], lz4.CompressBlockBound(len(raw)))[:lz4.CompressBlockBound(len(raw))]
		if n, err := t.lz4.CompressBlock(raw, t.zbuf); err == nil && n > 0 {
			stored = t.zbuf[:n]
		}
	case Zstd:
		t.zbuf = t.enc.EncodeAll(raw, t.zbuf[:0])
		stored = t.zbuf
	}
	if len(stored) >= len(raw) { // compressing did not shrink it: as it is
		codec, stored = None, raw
	}
	var hdr [headerSize]byte
	copy(hdr[:], magic)
	copy(hdr[8:40], key[:])
	binary.LittleEndian.PutUint64(hdr[40:48], uint64(len(raw)))
	binary.LittleEndian.PutUint32(hdr[48:52], uint32(len(stored)))
	hdr[52] = byte(codec)
	binary.LittleEndian.PutUint32(hdr[60:64], crc32.Update(crc32.ChecksumIEEE(hdr[:60]), crc32.IEEETable, stored))
	size := int64(headerSize + len(stored))

	t.mu.Lock()
	evicted, ok := t.makeRoom(size, t.due(tag))
	t.mu.Unlock()
	t.unlinkEntries(evicted) // before anything else is written: none of them is written again first
	if !ok {
		return errors.New("no room: everything held is wanted sooner")
	}
	final := t.path(key)
	err := os.MkdirAll(filepath.Dir(final), 0o755)
	if err == nil {
		// Written under a temporary name in tmp/ (which Open empties), then renamed.
		err = writeFile(final, filepath.Join(t.dir, "tmp"), hdr[:], stored)
	}
	if err != nil {
		return t.unreserve(size, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bytes -= size // reserved by makeRoom; now counted with the entry
	if old := t.entries[key]; old != nil {
		t.remove(old)
	}
	e := &entry{key: key, tag: tag, size: size}
	t.evict.Add(key, tag)
	t.entries[key] = e
	t.bytes += size
	t.stats.Written++
	t.stats.WrittenBytes += int64(len(raw))
	t.stats.StoredBytes += size
	return nil
}

// writeFile writes the parts, one after the other, to a temporary file in tmp and renames it to
// path, without syncing: path is whole or absent, unless the power fails before the kernel has
// written it out (see the package's doc).
func writeFile(path, tmp string, parts ...[]byte) (err error) {
	f, err := os.CreateTemp(tmp, "entry-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// unreserve gives back room reserved for an entry that was not written.
func (t *Tier) unreserve(size int64, err error) error {
	t.mu.Lock()
	t.bytes -= size
	t.mu.Unlock()
	return err
}

// makeRoom evicts until size more bytes fit, and reserves them. Eviction drops an entry that is
// not due, least recently used first, or else the one due last, and only if it is due later than
// the entry being made room for (due; -1: not due, which takes only the place of entries not
// due): the shared policy's choice (package evict). It reports whether the room was made, and
// the keys of the entries it dropped from the index, whose files the caller unlinks
// (unlinkEntries) once it has let mu go, before it writes any entry. Called with t.mu held.
func (t *Tier) makeRoom(size int64, due int) (evicted []Key, ok bool) {
	after := due
	if due < 0 {
		after = evict.NotDue
	}
	for t.bytes+size > t.opts.MaxBytes {
		k, ok := t.evict.Victim(after, nil)
		if !ok {
			return evicted, false
		}
		t.remove(t.entries[k])
		evicted = append(evicted, k)
		t.stats.Evicted++
	}
	t.bytes += size
	return evicted, true
}

// unlinkEntries unlinks the files of the entries makeRoom evicted. Called without t.mu, by the
// writer (or by Open before the writer starts), which writes no entry meanwhile.
func (t *Tier) unlinkEntries(keys []Key) {
	for _, k := range keys {
		t.unlink(t.path(k))
	}
}

// due is how soon the entry tagged tag is due; -1 when it is not, or has no tag.
func (t *Tier) due(tag int) int {
	if t.opts.Due == nil || tag < 0 {
		return -1
	}
	return t.opts.Due(tag)
}

// remove drops an entry from the index. Called with t.mu held.
func (t *Tier) remove(e *entry) {
	t.evict.Remove(e.key)
	delete(t.entries, e.key)
	t.bytes -= e.size
}

// forget drops key from the index if it is there. Called with t.mu held.
func (t *Tier) forget(key Key) {
	if e := t.entries[key]; e != nil {
		t.remove(e)
	}
}

// Flush waits until every queued entry is written (or skipped).
func (t *Tier) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.queue) > 0 {
		t.idle.Wait()
	}
}

// Stats returns a snapshot of the tier.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Bytes, s.Entries = t.bytes, len(t.entries)
	s.Backlog, s.BacklogBytes = len(t.queue), t.queued
	return s
}

// closeWarn is how long Close waits for the writer before it warns and drops what is queued
// but the entry being written; closeGiveUp (times closeWarn) how much longer it waits for that
// entry before it gives up on the writer.
const (
	closeWarn   = 5 * time.Second
	closeGiveUp = 5
)

// Close writes what is queued, if it can within a few seconds, and releases the directory. A
// writer that the disk holds longer than that (a hung disk: closeWarn, then closeGiveUp times
// as long) is given up on: Close returns an error naming the entry it is stuck on, and the
// writer, if the disk ever answers, finishes that entry and then releases the directory itself.
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	select {
	case <-t.done:
	case <-time.After(t.closeWarn):
		t.mu.Lock()
		n := len(t.queue)
		if len(t.queue) > 0 { // the one being written finishes; the rest are dropped
			t.queue, t.queued = t.queue[:1], int64(len(*t.queue[0].buf))
		}
		t.mu.Unlock()
		t.log.Warn("disk tier: closing with entries unwritten", "entries", n)
		select {
		case <-t.done:
		case <-time.After(closeGiveUp * t.closeWarn):
			if err := t.abandon(); err != nil {
				return err
			}
		}
	}
	t.closeFiles()
	return nil
}

// abandon gives up on a writer that the disk holds, and returns an error saying what it is
// stuck on; the writer closes what it uses (the encoder, and the lock on the directory) if it
// ever ends. It returns nil if the writer has ended meanwhile, and the tier is closed as usual.
func (t *Tier) abandon() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.writerEnded {
		return nil
	}
	t.abandoned = true
	what := "the writer is stuck"
	if len(t.queue) > 0 {
		what += " writing entry " + t.queue[0].key.String()
	}
	err := fmt.Errorf("disk tier %s: %s for %v after Close asked it to end; closed without it (the directory stays locked until the disk answers)",
		t.opts.Dir, what, (1+closeGiveUp)*t.closeWarn)
	t.log.Error("disk tier: given up on the writer", "err", err)
	t.dec.Close()
	unix.Close(t.dirFD)
	return err
}

func (t *Tier) closeFiles() {
	t.enc.Close()
	t.dec.Close()
	unix.Close(t.dirFD)
	t.lock.Close()
}
