// Package tier keeps decoded samples on local disk, compressed, across mounts: a second tier
// behind the memory cache, so that a sample decoded once is read back instead of decoded again.
// It knows nothing of video: an entry is the bytes of one sample under a key (diskstore.Key) the
// caller derives from everything that makes those bytes (the video's identity and every layout
// parameter). (The training copy, which keeps frames instead, is package copystore; what the
// two share is package internal/diskstore.)
//
// Entries are files of their own, written to a temporary name and renamed into place, so a crash
// or kill -9 mid-write leaves at worst a temporary file, removed at the next Open, never a short
// file under an entry's name. They are not synced, so that the writer keeps up with the decodes
// (a sync costs it the disk's latency for each entry): a power cut may leave an entry's file short
// or empty under its name, which its checksum catches like any damage. Every entry carries its
// key, its length, the codec it is stored with (none, LZ4 or zstd, each entry its own, so a tier
// reopened with another codec reads what the last one wrote) and a CRC-32 of its header and its
// stored bytes, checked before anything is decompressed: an entry that is torn, cut short or
// flipped is detected when read, dropped, logged, and reported as a miss, never served. (Map,
// which serves an entry stored as it is from the page cache without copying it, checks each
// version of its file once: see Map.) An entry that cannot be read (the process is out of file
// descriptors, the disk answers with an I/O error) is a miss too, logged as what happened, and
// kept. The tier is bounded in bytes; eviction drops first entries no reader will want soon
// (Options.Due), least recently used first, then the one due last: the policy of package evict,
// which the memory cache shares, in work that does not grow with the tier. Writes run on a
// goroutine of their own behind a bounded backlog (diskstore.Writer): Put never waits, and skips
// an entry when the backlog is full or the disk refuses it.
//
// Files by job: tier.go (the Tier, Open, Stats, Close), format.go (an entry's header), read.go
// (Get and Map), write.go (Put and writing an entry), evict.go (the index and eviction), scan.go
// (the entries found at Open).
package tier

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/evict"
)

// Options configures a Tier.
type Options struct {
	// Dir is where entries live. Open makes it if need be, and takes it for this process alone
	// (a lock file), so that two mounts never evict each other's entries unawares.
	Dir string
	// MaxBytes bounds the bytes of entries on disk.
	MaxBytes int64
	// Codec is how entries are written (required: one of Codecs). An entry that compressing does
	// not shrink is written as it is (diskstore.None).
	Codec diskstore.Codec
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
	Codec        diskstore.Codec // of the entries written
	Bytes        int64           // on disk, in entries
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
	enc     *zstd.Encoder // the writer's, for zstd
	lz4     lz4.CompressorCCompat
	zbuf    []byte // the writer's, for compressed entries
	dec     *zstd.Decoder
	log     *slog.Logger
	scratch chan *scratch // for reading entries, reused
	w       *diskstore.Writer[job]
	// closeWarn is diskstore.CloseWarn, which tests shorten.
	closeWarn time.Duration
	// beforeWrite, when set (by tests, before any Put), runs on the writer before each entry.
	beforeWrite func()
	// unlink removes an entry's file: os.Remove, which tests replace (before any Put).
	unlink func(name string) error

	// mu guards everything below. LOCK ORDERING: mu is taken after any lock of a caller (the
	// cache's loads call in holding none) and before the writer's (w): Options.Due, asked with
	// mu held, takes no lock. Files are read, written and unlinked without it, so that a slow
	// disk holds up no lookup.
	mu      sync.Mutex
	entries map[diskstore.Key]*entry
	// unlinking counts, by key, the damaged entries' files being unlinked (see recordRead).
	unlinking map[diskstore.Key]int
	evict     *evict.Policy[diskstore.Key] // the order the entries are evicted in
	bytes     int64
	stats     Stats
	// trustAge is the package's trustAge, which tests change between calls.
	trustAge time.Duration
}

type entry struct {
	key  diskstore.Key
	tag  int   // the caller's number for it, -1 for none
	size int64 // bytes on disk
	// checked is the version of the entry's file whose bytes Map checked: while the file is
	// still that one, Map serves it without checking its bytes again.
	checked fileID
}

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
	dir := filepath.Join(opts.Dir, diskstore.SamplesDir)
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
	lock, err := diskstore.LockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	closers = append(closers, lock.Close)
	// zstd's fastest level without entropy coding: compressing shares the cores with decoding in
	// the first epoch, and an entry not written in time costs a decode in the next, so the level
	// that keeps up over the one that shrinks most (docs/benchmarks.md, "The codecs, one core").
	// The entry's own CRC-32 stands in for zstd's frame checksum.
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
		entries: map[diskstore.Key]*entry{}, unlinking: map[diskstore.Key]int{}, evict: evict.New[diskstore.Key](opts.Due),
		trustAge: trustAge, closeWarn: diskstore.CloseWarn, unlink: os.Remove}
	t.stats.Dir, t.stats.MaxBytes, t.stats.Codec = opts.Dir, opts.MaxBytes, opts.Codec
	if err := t.scan(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	evicted, _ := t.makeRoom(0, -1) // the bound may have shrunk since the last mount: oldest first
	t.mu.Unlock()
	t.unlinkEntries(evicted)
	t.w = diskstore.NewWriter(diskstore.WriterOptions[job]{Name: "disk tier", Dir: opts.Dir, Jobs: "entries", Backlog: opts.Backlog,
		Write: t.writeJob, What: func(j job) string { return "entry " + j.key.String() },
		Release:        func() { t.enc.Close(); t.lock.Close() }, // the writer's
		ReleaseReaders: func() { t.dec.Close(); unix.Close(t.dirFD) },
		Log:            opts.Log})
	return t, nil
}

// Flush waits until every queued entry is written (or skipped).
func (t *Tier) Flush() { t.w.Flush() }

// Stats returns a snapshot of the tier.
func (t *Tier) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Bytes, s.Entries = t.bytes, len(t.entries)
	w := t.w.Stats()
	s.Backlog, s.BacklogBytes, s.Skipped = w.Jobs, w.Bytes, w.Skipped+w.Full
	return s
}

// Close writes what is queued, if it can within a few seconds, and releases the directory. A
// writer that the disk holds longer than that (a hung disk: diskstore.CloseWarn, then
// diskstore.CloseGiveUp times as long) is given up on: Close returns an error naming the entry it
// is stuck on, and the writer, if the disk ever answers, finishes that entry and then releases
// the directory itself (diskstore.Writer.Close).
func (t *Tier) Close() error { return t.w.Close(t.closeWarn) }
