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
	"encoding/hex"
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

	"github.com/vidfs/vidfs/internal/evict"
)

// Key names an entry: a digest of everything that makes its bytes.
type Key [32]byte

// String is the key in hex, as its file is named.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

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
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	closers = append(closers, lock.Close)
	dropOther(filepath.Join(opts.Dir, "frames"), "a training copy", opts.Log)
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

// dropOther removes what another kind of store left in a directory that this one now takes:
// a directory keeps samples or frames, and --cache-disk bounds the one it keeps (a mount that
// kept frames and now keeps samples, or the other way round, starts anew).
func dropOther(path, what string, log *slog.Logger) {
	if _, err := os.Stat(path); err != nil {
		return
	}
	log.Info("disk tier: removing "+what+" left by an earlier mount: this directory now keeps the other", "dir", path)
	if err := os.RemoveAll(path); err != nil {
		log.Warn("disk tier: could not remove "+what+"; its bytes are not counted against --cache-disk", "dir", path, "err", err)
	}
}

// lockDir takes dir for this process alone, so that two mounts never evict each other's entries
// unawares: it opens dir/lock (making it if need be) and locks it (flock, exclusive, without
// waiting), failing if another process holds it. The lock lasts until the file returned is closed.
func lockDir(dir string) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("disk tier: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("disk tier %s is in use by another vidfs mount (give each mount a directory of its own): %w", dir, err)
	}
	return lock, nil
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
