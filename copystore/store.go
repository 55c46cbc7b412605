package copystore

// The Store: its options and stats, opening and closing it, and where its files live.

import (
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// Options configures a Store.
type Options struct {
	// Dir is the directory the copy lives in (under Dir/frames), taken for this process alone
	// (the same lock file as the sample tier's: a mount uses one or the other).
	Dir string
	// MaxBytes bounds the bytes of the copy's files. 0: what the filesystem has room for, less
	// KeepFree: the copy grows into the room there is, and gives room back (GiveBack) when other
	// files take it.
	MaxBytes int64
	// KeepFree is, with no MaxBytes, the bytes the copy leaves free on its filesystem.
	KeepFree int64
	// Codec is how new frames are stored (required: any of diskstore.Codecs); a frame that
	// compressing does not shrink is stored as it is. Frames stored with any codec are read
	// whatever this says.
	Codec diskstore.Codec
	// FrameBytes is the size of one frame as served, Width its pixels a row (for Huff).
	FrameBytes int
	Width      int
	// Videos is how many videos the caller numbers (0 to Videos-1).
	Videos int
	// Due says how soon video v is next wanted, in any unit that orders (smaller is sooner), or
	// -1 when no reader wants it soon; asked with the store's lock held, so it must be quick and
	// take no lock held while calling into the store. Nil: least recently used first.
	Due func(video int) int
	// Backlog bounds the bytes of frames waiting to be written, as stored (0: 64 MiB); Puts
	// beyond it wait or are skipped.
	Backlog int64
	Log     *slog.Logger
	// Spent, if set, is told the CPU time the writer took for each batch it wrote (appending,
	// the index, the checks): a copy paid for in CPU counts it.
	Spent func(time.Duration)
}

// Stats is a snapshot of the copy.
type Stats struct {
	Dir           string
	MaxBytes      int64
	Codec         diskstore.Codec // of frames written
	Bytes         int64           // of the copy's files
	Videos        int             // with a file (those found at Open and not yet claimed by Claim included)
	Complete      int             // whose frames the caller needs are all stored
	Frames        int64           // stored, in the videos claimed or written
	Hits          int64           // samples read whole from the copy
	Misses        int64           // samples with a frame missing (or the video not there)
	Corrupt       int64           // frames or files found damaged, to be written again
	ReadErrors    int64           // reads that failed for the system's reasons (EIO, EMFILE): kept
	WrittenFrames int64
	WrittenBytes  int64 // the frames' bytes before compression
	StoredBytes   int64 // and after
	Skipped       int64 // frames not written: no room within MaxBytes, or the disk refused
	Full          int64 // frames not queued: the backlog was full for longer than Put waited
	OldFiles      int   // files of earlier formats, kept
	OldBytes      int64 // their bytes, not counted in Bytes
	OldRemoved    int64 // files of earlier formats removed, the disk being full
	Evicted       int64 // videos
	GivenBack     int64 // bytes evicted for other files (GiveBack)
	Bound         int64 // the bound now: MaxBytes, or what the filesystem has room for
	Admitted      int64 // videos Admit took this mount (not counting those the copy held)
	Refused       int64 // times Admit refused a video: no room promised for it
	Promised      int64 // bytes promised to videos admitted, not yet written
	Backlog       int   // batches of frames (a sample's, a chunk of a whole video's) waiting to be written
	BacklogBytes  int64
}

// Store is the training copy: decoded frames of videos, on disk, each readable on its own, so
// that any clip of a video whose frames are there is read with no decode. It is safe for
// concurrent use. Reads go straight to the files; one goroutine writes (w).
type Store struct {
	opts  Options
	dir   string // Dir/frames/v1
	dirFD int    // dir, opened, which files are opened relative to (by readers and the writer)
	lock  *os.File
	log   *slog.Logger
	start time.Time
	dec   *zstd.Decoder
	w     *diskstore.Writer[job]
	enc   *zstd.Encoder // for Put, safe for concurrent use
	// bufs holds buffers for reuse: small ones for a sample's span of slots, large ones for
	// frames queued and frames read compressed.
	bufs    diskstore.Buffers
	huffs   sync.Pool // *huffCodec, for reading
	packers sync.Pool // *packer, for Put
	// closeWarn is diskstore.CloseWarn, which tests shorten.
	closeWarn time.Duration
	// beforeWrite, when set (by tests, before any Put), runs on the writer before each batch;
	// beforeCounted, after a batch's frames are written and before they are counted; afterCount
	// (before any Claim), in Claim between reading a file's index and counting it.
	beforeWrite, beforeCounted, afterCount func()

	// mu guards everything below. LOCK ORDERING: taken after any lock of a caller, before the
	// writer's (w): Options.Due, asked with mu held, takes no lock. Files are read and written
	// without it.
	mu       sync.Mutex
	videos   []videoEntry
	present  []int32                     // videos with a file, in no order (for choosing victims)
	untagged map[diskstore.Key]foundCopy // files found at Open that no Claim or Get has named yet
	// untaggedBytes are untagged's bytes; promised, the room Admit promised to videos that their
	// frames have not taken yet (videoEntry.owed, over every video).
	untaggedBytes, promised int64
	// room is what the copy's files took and the filesystem had free when it was last asked,
	// at freeAt (bound).
	room   int64
	freeAt time.Time
	// measured is what a frame took on disk in the samples Measure packed (sampled frames, in
	// sampledBytes); 0: none.
	measured     float64
	sampled      int
	sampledBytes int64
	oldest       []diskstore.Key // untagged's keys, least recently written first (some gone), made when first evicting
	// damaged holds the videos whose file or frames were found damaged: the writer checks the
	// frames of theirs it finds, rather than take them as sound, until the file is dropped (slots
	// left pointing past a file cut short point at other frames once it grows again).
	damaged map[int32]bool
	// counting holds the videos whose files Claim is counting: the writer waits (counted, on mu)
	// before adding frames to them, which the count might or might not see; writing, the video
	// the writer is writing, which Claim waits for before it counts (else the frames written
	// would be counted twice, read from the index and added as written).
	counting, writing map[int32]bool
	counted           *sync.Cond
	// oldFiles and oldBytes count the files of earlier formats (key-named files in other
	// versions' directories than this one's): not counted against MaxBytes, and removed, oldest
	// first, only when the disk has no room for what the copy writes (makeDiskRoom).
	oldFiles int
	oldBytes int64
	// free says how many bytes the copy's filesystem has free (statfs; tests replace it).
	free     func() (int64, error)
	bytes    int64
	frames   int64
	complete int
	stats    Stats
	// readWarned and writeWarned are when a read or write failure was last logged.
	readWarned, writeWarned time.Time
}

// videoEntry is what the store keeps of one video in memory: 64 bytes.
type videoEntry struct {
	key    diskstore.Key
	bytes  int64  // its file's, 0: none
	owed   int64  // room Admit promised it that its frames have not taken yet
	frames uint32 // stored, or uncounted
	needed uint32 // frames the caller needs of it (0: not known)
	used   uint32 // when last read or written, in seconds from start
	at     int32  // index in present, -1: no file
}

// uncounted is videoEntry.frames for a file found at Open whose index Claim has not counted yet.
const uncounted = math.MaxUint32

type foundCopy struct {
	size, mod int64 // bytes, and modification time in nanoseconds
}

// oldFile is a file of an earlier format of the copy.
type oldFile struct {
	path      string
	size, mod int64
}

// oldVersions calls found for each file of an earlier format under frames (the copy's root
// directory): a file named by a key under a folder "v<N>" other than this format's. Nothing
// else there is the copy's.
func oldVersions(frames string, found func(oldFile)) {
	names, err := os.ReadDir(frames)
	if err != nil {
		return
	}
	for _, n := range names {
		if !n.IsDir() || n.Name() == version || !isVersion(n.Name()) {
			continue
		}
		filepath.WalkDir(filepath.Join(frames, n.Name()), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if _, ok := diskstore.ParseKey(d.Name()); !ok {
				return nil // not the copy's
			}
			if info, err := d.Info(); err == nil {
				found(oldFile{path: p, size: info.Size(), mod: info.ModTime().UnixNano()})
			}
			return nil
		})
	}
}

// isVersion tells whether name names a format's directory: "v" and digits.
func isVersion(name string) bool {
	if len(name) < 2 || name[0] != 'v' {
		return false
	}
	for _, r := range name[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Open opens (or makes) the copy in opts.Dir, taking stock of the files there.
func Open(opts Options) (_ *Store, err error) {
	if opts.Dir == "" || opts.MaxBytes < 0 || opts.KeepFree < 0 || opts.FrameBytes <= 0 {
		return nil, fmt.Errorf("training copy: want a directory, a size or room to keep free, and a frame size (got %q, %d, %d, %d bytes)", opts.Dir, opts.MaxBytes, opts.KeepFree, opts.FrameBytes)
	}
	if !validCodec(opts.Codec) {
		return nil, fmt.Errorf("training copy: no codec %v", opts.Codec)
	}
	if opts.Backlog <= 0 {
		opts.Backlog = 64 << 20
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Join(opts.Dir, diskstore.FramesDir, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("training copy: %w", err)
	}
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
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, fmt.Errorf("training copy: zstd encoder: %w", err)
	}
	closers = append(closers, enc.Close)
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true), zstd.IgnoreChecksum(true))
	if err != nil {
		return nil, fmt.Errorf("training copy: zstd decoder: %w", err)
	}
	closers = append(closers, func() error { dec.Close(); return nil })
	dirFD, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("training copy: %w", err)
	}
	closers = append(closers, func() error { return unix.Close(dirFD) })
	c := &Store{opts: opts, dir: dir, dirFD: dirFD, lock: lock, log: opts.Log, start: time.Now(), dec: dec, enc: enc,
		videos: make([]videoEntry, opts.Videos), untagged: map[diskstore.Key]foundCopy{}, damaged: map[int32]bool{},
		counting: map[int32]bool{}, writing: map[int32]bool{}, closeWarn: diskstore.CloseWarn}
	c.counted = sync.NewCond(&c.mu)
	c.free = func() (int64, error) {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return 0, err
		}
		return int64(st.Bavail) * st.Bsize, nil
	}
	for i := range c.videos {
		c.videos[i].at = -1
	}
	c.stats.Dir, c.stats.MaxBytes, c.stats.Codec = opts.Dir, opts.MaxBytes, opts.Codec
	if err := c.scan(); err != nil {
		return nil, err
	}
	c.scanOld(filepath.Join(opts.Dir, diskstore.FramesDir))
	c.mu.Lock()
	gone, _ := c.makeRoom(0, -1) // the bound may have shrunk since the last mount
	c.mu.Unlock()
	c.unlinkAll(gone)
	c.w = diskstore.NewWriter(diskstore.WriterOptions[job]{Name: "training copy", Dir: opts.Dir, Jobs: "batches", Backlog: opts.Backlog,
		Buffers: &c.bufs, Write: c.writeJob,
		What:           func(j job) string { return fmt.Sprintf("the frames of video %d (%s)", j.video, c.path(j.key)) },
		Release:        func() { c.enc.Close(); unix.Close(c.dirFD); c.lock.Close() }, // the writer's
		ReleaseReaders: func() { c.dec.Close() },
		Log:            opts.Log})
	return c, nil
}

// scan takes stock of the files a last mount left: their bytes count against the bound, and
// they are evicted first, oldest first, until a Claim or a Get names them.
func (c *Store) scan() error {
	err := diskstore.WalkKeys(c.dir, "", func(k diskstore.Key, size int64, mod time.Time) {
		c.untagged[k] = foundCopy{size, mod.UnixNano()}
		c.bytes += size
		c.untaggedBytes += size
	})
	if err != nil {
		return fmt.Errorf("training copy: %w", err)
	}
	return nil
}

// scanOld counts the files of earlier formats (oldVersions). They are kept, and counted
// (Stats.OldFiles, Stats.OldBytes), not against MaxBytes; nothing of them is held in memory.
func (c *Store) scanOld(frames string) {
	oldVersions(frames, func(f oldFile) {
		c.oldFiles++
		c.oldBytes += f.size
	})
	if c.oldFiles > 0 {
		c.log.Info("training copy: files of an earlier format kept (not counted against --cache-disk; removed, oldest first, only when the disk is full)",
			"dir", frames, "files", c.oldFiles, "bytes", c.oldBytes)
	}
}

// key returns the key of video v's file, if it has one.
func (c *Store) key(v int) (diskstore.Key, bool) {
	cv := &c.videos[v]
	return cv.key, cv.at >= 0
}

// Key returns the key of the file video v has, if it has one (found at Open and not yet adopted
// by Adopt, Claim or Get: none).
func (c *Store) Key(v int) (diskstore.Key, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key(v)
}

// path is where the copy of the video under key lives.
func (c *Store) path(k diskstore.Key) string { return filepath.Join(c.dir, k.Rel()) }

func (c *Store) now() uint32 { return uint32(time.Since(c.start) / time.Second) }

// warnNow tells whether a failure of the kind last logged at *last is to be logged now (once a
// minute at most), and notes it. Called with mu held.
func (c *Store) warnNow(last *time.Time) bool {
	if time.Since(*last) < time.Minute {
		return false
	}
	*last = time.Now()
	return true
}

// Flush waits until every queued frame is written (or skipped).
func (c *Store) Flush() { c.w.Flush() }

// Stats returns a snapshot of the copy.
func (c *Store) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Videos, s.Complete, s.Frames = c.bytes, len(c.present)+len(c.untagged), c.complete, c.frames
	s.OldFiles, s.OldBytes = c.oldFiles, c.oldBytes
	s.Bound, s.Promised = c.bound(), c.promised
	w := c.w.Stats()
	s.Backlog, s.BacklogBytes, s.Skipped, s.Full = w.Jobs, w.Bytes, w.Skipped, w.Full
	return s
}

// Close writes what is queued, if it can within a few seconds, and releases the directory. A
// writer that the disk holds longer than that (a hung disk: diskstore.CloseWarn, then
// diskstore.CloseGiveUp times as long) is given up on: Close returns an error naming the frames
// it is stuck on, and the writer, if the disk ever answers, finishes them and then releases the
// directory itself (diskstore.Writer.Close).
func (c *Store) Close() error { return c.w.Close(c.closeWarn) }
