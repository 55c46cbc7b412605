package tier

// Copies: the training copy, a store of decoded frames, one file per video (copyformat.go says
// what a file holds), bounded in bytes, evicted a video at a time by the plans.

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"
)

// CopyOptions configures Copies.
type CopyOptions struct {
	// Dir is the directory the copy lives in (under Dir/frames), taken for this process alone
	// (the same lock file as a Tier's: a mount uses one or the other).
	Dir string
	// MaxBytes bounds the bytes of the copy's files.
	MaxBytes int64
	// Codec is how new frames are stored (required); a frame that compressing does not shrink
	// is stored as it is. Frames stored with any codec are read whatever this says.
	Codec Codec
	// FrameBytes is the size of one frame as served, Width its pixels a row (for Huff).
	FrameBytes int
	Width      int
	// Videos is how many videos the caller numbers (0 to Videos-1).
	Videos int
	// Due says how soon video v is next wanted, in any unit that orders (smaller is sooner), or
	// -1 when no reader wants it soon; asked with the store's lock held, so it must be quick and
	// take no lock held while calling into the store. Nil: least recently used first.
	Due func(video int) int
	// Backlog bounds the bytes of frames waiting to be written (0: 64 MiB); Puts beyond it are
	// skipped.
	Backlog int64
	Log     *slog.Logger
}

// CopyStats is a snapshot of the copy.
type CopyStats struct {
	Dir           string
	MaxBytes      int64
	Codec         Codec // of frames written
	Bytes         int64 // of the copy's files
	Videos        int   // with a file (those found at Open and not yet claimed by Claim included)
	Complete      int   // whose frames the caller needs are all stored
	Frames        int64 // stored, in the videos claimed or written
	Hits          int64 // samples read whole from the copy
	Misses        int64 // samples with a frame missing (or the video not there)
	Corrupt       int64 // frames or files found damaged, to be written again
	ReadErrors    int64 // reads that failed for the system's reasons (EIO, EMFILE): kept
	WrittenFrames int64
	WrittenBytes  int64 // the frames' bytes before compression
	StoredBytes   int64 // and after
	Skipped       int64 // frames not written: backlog full, no room, or the disk refused
	Evicted       int64 // videos
	Backlog       int   // samples' frames waiting to be written
	BacklogBytes  int64
}

// Copies is the training copy: decoded frames of videos, on disk, each readable on its own, so
// that any clip of a video whose frames are there is read with no decode. It is safe for
// concurrent use. Reads go straight to the files; one goroutine writes.
type Copies struct {
	opts  CopyOptions
	dir   string // Dir/frames/v1
	dirFD int
	lock  *os.File
	log   *slog.Logger
	start time.Time
	dec   *zstd.Decoder
	// The writer's alone.
	enc   *zstd.Encoder
	lz4c  lz4.CompressorCCompat
	huff  *huffCodec
	zbuf  []byte
	small sync.Pool // *[]byte of up to smallBuf bytes: a sample's span of slots
	large sync.Pool // *[]byte of more: frames queued, frames read compressed
	huffs sync.Pool // *huffCodec, for reading

	// mu guards everything below. LOCK ORDERING: taken after any lock of a caller, before none:
	// Options.Due, asked with mu held, takes no lock. Files are read and written without it.
	mu       sync.Mutex
	videos   []copyVideo
	present  []int32           // videos with a file, in no order (for choosing victims)
	untagged map[Key]foundCopy // files found at Open that no Claim or Get has named yet
	oldest   []Key             // untagged's keys, least recently written first (some gone), made when first evicting
	// damaged holds the videos whose file or frames were found damaged: the writer checks the
	// frames of theirs it finds, rather than take them as sound, until the file is dropped (slots
	// left pointing past a file cut short point at other frames once it grows again).
	damaged  map[int32]bool
	bytes    int64
	frames   int64
	complete int
	queue    []copyJob
	queued   int64
	wake     chan struct{}
	idle     *sync.Cond // on mu: a job was written
	closed   bool
	done     chan struct{}
	stats    CopyStats
	// readWarned and writeWarned are when a read or write failure was last logged.
	readWarned, writeWarned time.Time
}

// warnNow tells whether a failure of the kind last logged at *last is to be logged now (once a
// minute at most), and notes it. Called with mu held.
func (c *Copies) warnNow(last *time.Time) bool {
	if time.Since(*last) < time.Minute {
		return false
	}
	*last = time.Now()
	return true
}

// copyVideo is what the store keeps of one video in memory: 56 bytes.
type copyVideo struct {
	key    Key
	bytes  int64  // its file's, 0: none
	frames uint32 // stored, or uncounted
	needed uint32 // frames the caller needs of it (0: not known)
	used   uint32 // when last read or written, in seconds from start
	at     int32  // index in present, -1: no file
}

// uncounted is copyVideo.frames for a file found at Open whose index Claim has not counted yet.
const uncounted = math.MaxUint32

type foundCopy struct {
	size, mod int64 // bytes, and modification time in nanoseconds
}

type copyJob struct {
	video          int
	key            Key
	units          []int
	needed, extent int
	buf            *[]byte // the frames, one after another
}

// OpenCopies opens (or makes) the copy in opts.Dir, taking stock of the files there.
func OpenCopies(opts CopyOptions) (_ *Copies, err error) {
	if opts.Dir == "" || opts.MaxBytes <= 0 || opts.FrameBytes <= 0 {
		return nil, fmt.Errorf("training copy: want a directory, a size and a frame size (got %q, %d, %d bytes)", opts.Dir, opts.MaxBytes, opts.FrameBytes)
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
	dir := filepath.Join(opts.Dir, "frames", copyVersion)
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
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	closers = append(closers, lock.Close)
	dropOther(filepath.Join(opts.Dir, version), "a disk tier of samples", opts.Log)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
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
	c := &Copies{opts: opts, dir: dir, dirFD: dirFD, lock: lock, log: opts.Log, start: time.Now(), dec: dec, enc: enc,
		huff: &huffCodec{width: opts.Width}, videos: make([]copyVideo, opts.Videos), untagged: map[Key]foundCopy{}, damaged: map[int32]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	for i := range c.videos {
		c.videos[i].at = -1
	}
	c.idle = sync.NewCond(&c.mu)
	c.stats.Dir, c.stats.MaxBytes, c.stats.Codec = opts.Dir, opts.MaxBytes, opts.Codec
	if err := c.scan(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	gone, _ := c.makeRoom(0, -1) // the bound may have shrunk since the last mount
	c.mu.Unlock()
	c.unlinkAll(gone)
	go c.writer()
	return c, nil
}

// scan takes stock of the files a last mount left: their bytes count against the bound, and
// they are evicted first, oldest first, until a Claim or a Get names them.
func (c *Copies) scan() error {
	err := walkKeys(c.dir, "", func(k Key, size int64, mod time.Time) {
		c.untagged[k] = foundCopy{size, mod.UnixNano()}
		c.bytes += size
	})
	if err != nil {
		return fmt.Errorf("training copy: %w", err)
	}
	return nil
}

// path is where the copy of the video under key lives.
func (c *Copies) path(k Key) string {
	s := k.String()
	return filepath.Join(c.dir, s[:2], s)
}

func (c *Copies) rel(k Key) string {
	s := k.String()
	return s[:2] + "/" + s
}

func (c *Copies) now() uint32 { return uint32(time.Since(c.start) / time.Second) }

// known tells whether video v (under key) has a file, adopting one found at Open. Called with
// mu held.
func (c *Copies) known(v int, key Key) bool {
	cv := &c.videos[v]
	if cv.at >= 0 {
		if cv.key == key {
			return true
		}
		return false // the caller's video is another version than the one stored
	}
	f, ok := c.untagged[key]
	if !ok {
		return false
	}
	delete(c.untagged, key)
	cv.key, cv.bytes, cv.frames = key, f.size, uncounted
	c.addPresent(v)
	return true
}

// whole tells whether video v's copy holds every frame it needs, as counted. Called with mu
// held.
func (c *Copies) whole(v int) bool {
	cv := &c.videos[v]
	return cv.frames != uncounted && cv.needed > 0 && cv.frames >= cv.needed
}

func (c *Copies) addPresent(v int) {
	c.videos[v].at = int32(len(c.present))
	c.present = append(c.present, int32(v))
}

// dropPresent forgets video v's file, its bytes and frames. Called with mu held.
func (c *Copies) dropPresent(v int) {
	cv := &c.videos[v]
	if cv.at < 0 {
		return
	}
	last := c.present[len(c.present)-1]
	c.present[cv.at] = last
	c.videos[last].at = cv.at
	c.present = c.present[:len(c.present)-1]
	c.bytes -= cv.bytes
	if c.whole(v) {
		c.complete--
	}
	if cv.frames != uncounted {
		c.frames -= int64(cv.frames)
	}
	*cv = copyVideo{at: -1, needed: cv.needed}
	delete(c.damaged, int32(v))
}

// Adopt tells the store that the file under key, if one was found at Open, is video v's: it is
// evicted by the plans from then on, not as a stray file. It is quick (no I/O); the caller
// adopts every video at once after Open, then Claims them in the background.
func (c *Copies) Adopt(v int, key Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known(v, key)
}

// Claim adopts the file under key as video v's, whose samples use the frames whose bits are
// set in need, and counts the frames of them it holds, reading its index (so it is called in
// the background, video after video), unless they are counted already.
func (c *Copies) Claim(v int, key Key, need []uint64) {
	needed := 0
	for _, w := range need {
		needed += bits.OnesCount64(w)
	}
	c.mu.Lock()
	ok := c.known(v, key)
	c.setNeeded(v, needed)
	counted := c.videos[v].frames != uncounted
	c.mu.Unlock()
	if !ok || counted {
		return
	}
	n, err := c.count(key, need)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cv := &c.videos[v]; cv.at >= 0 && cv.key == key && cv.frames == uncounted {
		cv.frames = 0
		if err == nil { // a damaged file is found and written again when read
			c.addFrames(v, n)
		}
	}
}

// Whole tells whether video v's copy holds every frame it needs (as counted: by Claim, or as
// written).
func (c *Copies) Whole(v int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.videos[v].at >= 0 && c.whole(v)
}

// setNeeded records how many frames video v needs. Called with mu held.
func (c *Copies) setNeeded(v, needed int) {
	if c.whole(v) {
		c.complete--
	}
	c.videos[v].needed = uint32(needed)
	if c.whole(v) {
		c.complete++
	}
}

// addFrames counts n more frames stored for video v (none while its file's are uncounted: Claim
// counts them all). Called with mu held.
func (c *Copies) addFrames(v, n int) {
	cv := &c.videos[v]
	if cv.frames == uncounted {
		return
	}
	was := c.whole(v)
	cv.frames += uint32(n)
	c.frames += int64(n)
	if !was && c.whole(v) {
		c.complete++
	}
}

// resetFrames forgets the frames counted for video v, whose file is written anew. Called with
// mu held.
func (c *Copies) resetFrames(v int) {
	cv := &c.videos[v]
	if c.whole(v) {
		c.complete--
	}
	if cv.frames != uncounted {
		c.frames -= int64(cv.frames)
	}
	cv.frames = 0
}

// count reads the index of the copy under key and counts the frames it points at of those
// whose bits are set in need.
func (c *Copies) count(key Key, need []uint64) (int, error) {
	fd, size, err := c.open(key, unix.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var hb [copyHeaderSize]byte
	if _, err := preadFull(fd, hb[:], 0); err != nil {
		return 0, err
	}
	h, err := parseCopyHeader(hb[:], key, c.opts.FrameBytes)
	if err != nil {
		return 0, err
	}
	idx := make([]byte, h.units*copySlotSize)
	n, err := preadFull(fd, idx, slotAt(0))
	if err != nil {
		return 0, err
	}
	frames := 0
	for u := 0; u+1 <= n/copySlotSize && u < len(need)*64; u++ {
		s := parseSlot(idx[u*copySlotSize:])
		if need[u/64]&(1<<(u%64)) != 0 && s.present() && s.check(u, size, h.units, c.opts.FrameBytes) == nil {
			frames++
		}
	}
	return frames, nil
}

// open opens the copy under key, relative to the store's directory, and says its size.
func (c *Copies) open(key Key, flags int) (int, int64, error) {
	for {
		fd, err := unix.Openat(c.dirFD, c.rel(key), flags|unix.O_CLOEXEC, 0o644)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, 0, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, 0, err
		}
		return fd, st.Size, nil
	}
}

// errMissing is a read's error for a frame the copy does not hold (yet): a miss, not damage.
var errMissing = errors.New("frame not in the copy")

// Get fills dst with video v's frames units (ascending), FrameBytes each, one after another,
// from the copy of the video under key, and says whether it held them all, sound. A frame found
// damaged is a miss, logged, and written again by the next Put of it; a file that cannot be read
// (EMFILE, EIO) is a miss, logged, and kept.
func (c *Copies) Get(v int, key Key, units []int, dst []byte) bool {
	return c.get(v, key, units, dst, true)
}

// GetAgain is Get for a clip whose miss was counted already (asked again, its frames having
// perhaps come since): a miss is not counted again.
func (c *Copies) GetAgain(v int, key Key, units []int, dst []byte) bool {
	return c.get(v, key, units, dst, false)
}

func (c *Copies) get(v int, key Key, units []int, dst []byte, countMiss bool) bool {
	c.mu.Lock()
	if v < 0 || v >= len(c.videos) {
		c.mu.Unlock()
		return false
	}
	if c.queued > 0 && c.fromQueue(v, key, units, dst) {
		c.stats.Hits++
		if !countMiss && c.stats.Misses > 0 {
			c.stats.Misses--
		}
		c.mu.Unlock()
		return true
	}
	if !c.known(v, key) {
		if countMiss {
			c.stats.Misses++
		}
		c.mu.Unlock()
		return false
	}
	c.videos[v].used = c.now()
	c.mu.Unlock()
	err := c.read(key, units, dst)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.stats.Hits++
		if !countMiss && c.stats.Misses > 0 {
			c.stats.Misses-- // its miss when first asked turned out a hit
		}
		return true
	case errors.Is(err, errMissing), errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, errDamaged):
		c.stats.Corrupt++
		if !c.damaged[int32(v)] {
			c.damaged[int32(v)] = true
			c.log.Warn("training copy: damaged frames; they are decoded and written again", "file", c.path(key), "reason", err)
		}
	default:
		c.stats.ReadErrors++
		if c.warnNow(&c.readWarned) {
			c.log.Warn("training copy: could not be read, and is kept; the sample is decoded (logged once a minute at most; stats count them)", "file", c.path(key), "err", err)
		}
	}
	if countMiss {
		c.stats.Misses++
	}
	return false
}

// fromQueue fills dst with video v's frames units from the frames queued to be written, if
// they are all there: frames just kept are served before the writer has written them (a
// sample's decode keeps frames of the next sample a reader asks for). It looks at a few
// hundred queued samples' frames at most (the backlog's bound). Called with mu held.
func (c *Copies) fromQueue(v int, key Key, units []int, dst []byte) bool {
	fb := c.opts.FrameBytes
	for k, u := range units {
		found := false
		for _, j := range c.queue {
			if j.video != v || j.key != key {
				continue
			}
			if x, ok := slices.BinarySearch(j.units, u); ok {
				copy(dst[k*fb:(k+1)*fb], (*j.buf)[x*fb:(x+1)*fb])
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// smallBuf divides the buffers kept for reuse in two pools, so that a small one asked for
// never takes (and drops) a large one.
const smallBuf = 64 << 10

func (c *Copies) pool(n int) *sync.Pool {
	if n <= smallBuf {
		return &c.small
	}
	return &c.large
}

// buffer returns a buffer of n bytes, reused if one is kept; putBuffer keeps it for reuse.
func (c *Copies) buffer(n int) *[]byte {
	p := c.pool(n)
	if bp, ok := p.Get().(*[]byte); ok {
		if cap(*bp) >= n {
			*bp = (*bp)[:n]
			return bp
		}
		p.Put(bp)
	}
	size := n
	if n <= smallBuf {
		size = smallBuf // one size for all small ones: any serves the next
	}
	b := make([]byte, n, size)
	return &b
}

func (c *Copies) putBuffer(bp *[]byte) { c.pool(cap(*bp)).Put(bp) }

// read reads frames units of the copy under key into dst, checking each.
func (c *Copies) read(key Key, units []int, dst []byte) error {
	fb := c.opts.FrameBytes
	if len(units) == 0 || len(dst) < len(units)*fb {
		return fmt.Errorf("training copy: %d frames asked into %d bytes", len(units), len(dst))
	}
	fd, size, err := c.open(key, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	first, last := units[0], units[len(units)-1]
	span := (last - first + 1) * copySlotSize
	bp := c.buffer(copyHeaderSize + span)
	defer c.putBuffer(bp)
	b := *bp
	if n, err := preadFull(fd, b[:copyHeaderSize], 0); err != nil {
		return err
	} else if n < copyHeaderSize {
		return errMissing // made, and nothing written yet (or cut short: written anew either way)
	}
	h, err := parseCopyHeader(b[:copyHeaderSize], key, fb)
	if err != nil {
		return err
	}
	if last >= h.units {
		return errMissing
	}
	idx := b[copyHeaderSize : copyHeaderSize+span]
	if n, err := preadFull(fd, idx, slotAt(first)); err != nil {
		return err
	} else if n < span {
		return errMissing // the index's end was never written (a sparse file's is)
	}
	slot := func(j int) frameSlot { return parseSlot(idx[(units[j]-first)*copySlotSize:]) }
	for j := 0; j < len(units); {
		s := slot(j)
		if !s.present() {
			return errMissing
		}
		if err := s.check(units[j], size, h.units, fb); err != nil {
			return err
		}
		if s.codec != None {
			if err := c.readPacked(fd, units[j], s, idx[(units[j]-first)*copySlotSize:], dst[j*fb:(j+1)*fb]); err != nil {
				return err
			}
			j++
			continue
		}
		// Frames stored as they are and one after another on disk are read in one go.
		k := j + 1
		for ; k < len(units); k++ {
			n := slot(k)
			if !n.present() || n.codec != None || n.off != s.off+int64((k-j)*fb) || n.check(units[k], size, h.units, fb) != nil {
				break
			}
		}
		out := dst[j*fb : k*fb]
		if n, err := preadFull(fd, out, s.off); err != nil {
			return err
		} else if n < len(out) {
			return damaged("frame %d: cut short while read", units[j])
		}
		for ; j < k; j++ {
			raw := idx[(units[j]-first)*copySlotSize:]
			if slotSum(raw, units[j], dst[j*fb:(j+1)*fb]) != parseSlot(raw).sum {
				return damaged("frame %d: checksum mismatch", units[j])
			}
		}
	}
	return nil
}

// readPacked reads the compressed frame u (slot s, raw its 16 bytes) into out.
func (c *Copies) readPacked(fd, u int, s frameSlot, raw, out []byte) error {
	bp := c.buffer(s.stored)
	defer c.putBuffer(bp)
	stored := *bp
	if n, err := preadFull(fd, stored, s.off); err != nil {
		return err
	} else if n < len(stored) {
		return damaged("frame %d: cut short while read", u)
	}
	if slotSum(raw, u, stored) != s.sum {
		return damaged("frame %d: checksum mismatch", u)
	}
	switch s.codec {
	case LZ4:
		n, err := lz4.UncompressBlock(stored, out)
		if err != nil {
			return fmt.Errorf("%w: frame %d: lz4: %w", errDamaged, u, err)
		}
		if n != len(out) {
			return damaged("frame %d: decompressed to %d bytes, want %d", u, n, len(out))
		}
	case Zstd:
		got, err := c.dec.DecodeAll(stored, out[:0:len(out)])
		if err != nil {
			return fmt.Errorf("%w: frame %d: zstd: %w", errDamaged, u, err)
		}
		if len(got) != len(out) || &got[0] != &out[0] {
			return damaged("frame %d: decompressed to %d bytes, want %d", u, len(got), len(out))
		}
	case Huff:
		h, ok := c.huffs.Get().(*huffCodec)
		if !ok {
			h = &huffCodec{width: c.opts.Width}
		}
		defer c.huffs.Put(h)
		if err := h.unpack(out, stored); err != nil {
			return fmt.Errorf("frame %d: %w", u, err)
		}
	}
	return nil
}

// Put queues video v's frames units (ascending; frames holds them one after another) to be
// written to its copy under key, copying them, and says whether they were queued. needed is how
// many frames the caller needs of the video, extent how many slots its file's index takes (the
// last frame any sample uses, plus one). It never waits: with the backlog full, it skips.
func (c *Copies) Put(v int, key Key, needed, extent int, units []int, frames []byte) bool {
	n := len(units) * c.opts.FrameBytes
	if v < 0 || v >= len(c.videos) || len(frames) < n || len(units) == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.queued+int64(n) > c.opts.Backlog {
		c.stats.Skipped += int64(len(units))
		return false
	}
	bp := c.buffer(n)
	copy(*bp, frames[:n])
	c.queue = append(c.queue, copyJob{video: v, key: key, units: slices.Clone(units), needed: needed, extent: extent, buf: bp})
	c.queued += int64(n)
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// writer writes queued frames until Close, on a thread of its own at a low priority (nice 10),
// so that compressing and writing yield the CPU to decoding and reading.
func (c *Copies) writer() {
	defer close(c.done)
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 10)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 {
			if c.closed {
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			<-c.wake
			c.mu.Lock()
		}
		j := c.queue[0]
		c.mu.Unlock()
		written, err := c.write(j)
		c.mu.Lock()
		c.queue[0] = copyJob{} // so that the array behind the queue does not keep its buffer
		c.queue = c.queue[1:]
		c.queued -= int64(len(*j.buf))
		if written < len(j.units) {
			c.stats.Skipped += int64(len(j.units) - written)
		}
		c.idle.Broadcast() // for Flush and FlushVideo
		c.mu.Unlock()
		c.putBuffer(j.buf)
		if err != nil {
			c.mu.Lock()
			warn := c.warnNow(&c.writeWarned)
			c.mu.Unlock()
			if warn {
				c.log.Warn("training copy: frames not written (logged once a minute at most; stats count them as skipped)", "file", c.path(j.key), "reason", err)
			}
		}
	}
}

// write writes job j's frames that the video's file lacks (or holds damaged), making room for
// them, and says how many of them are now held.
func (c *Copies) write(j copyJob) (held int, err error) {
	fb := c.opts.FrameBytes
	c.mu.Lock()
	cv := &c.videos[j.video]
	fresh := cv.at >= 0 && cv.key != j.key // another version of the video was stored: replaced
	c.setNeeded(j.video, j.needed)
	wasKnown := c.known(j.video, j.key)
	check := c.damaged[int32(j.video)]
	c.mu.Unlock()
	if fresh {
		c.evictVideo(j.video)
		wasKnown = false
	}
	if !wasKnown {
		os.Remove(c.path(j.key)) // a file of this key no one counted (or of another run): start anew
	}
	if err := os.MkdirAll(filepath.Dir(c.path(j.key)), 0o755); err != nil {
		return 0, err
	}
	fd, size, err := c.open(j.key, unix.O_RDWR|unix.O_CREAT)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	grown := int64(0) // bytes added to the file (reserved), counted with the video once written
	defer func() {
		c.mu.Lock()
		cv := &c.videos[j.video]
		drop := cv.at < 0 && grown == 0 // made now, and nothing written (no room): not left behind
		if !drop {
			if cv.at < 0 {
				cv.key = j.key
				c.addPresent(j.video)
			}
			cv.bytes += grown // c.bytes counted them when reserved
			cv.used = c.now()
		}
		c.mu.Unlock()
		if drop {
			os.Remove(c.path(j.key))
		}
	}()
	var hb [copyHeaderSize]byte
	n, err := preadFull(fd, hb[:], 0)
	if err != nil {
		return 0, err
	}
	h, herr := parseCopyHeader(hb[:n], j.key, fb)
	if size == 0 || herr != nil {
		if size > 0 {
			c.log.Warn("training copy: damaged file written anew", "file", c.path(j.key), "reason", herr)
			if err := unix.Ftruncate(fd, 0); err != nil {
				return 0, err
			}
			c.mu.Lock()
			c.resetFrames(j.video)
			if cv := &c.videos[j.video]; cv.at >= 0 {
				c.bytes -= cv.bytes
				cv.bytes = 0
			}
			c.mu.Unlock()
		}
		h = copyHeader{key: j.key, frameBytes: fb, units: max(j.extent, j.units[len(j.units)-1]+1)}
		start := framesStart(h.units)
		if !c.reserve(j.video, start) {
			return 0, errors.New("no room for a new video: everything held is wanted sooner")
		}
		if _, err := unix.Pwrite(fd, h.marshal(), 0); err != nil {
			c.unreserve(start)
			return 0, err
		}
		if err := unix.Ftruncate(fd, start); err != nil {
			c.unreserve(start)
			return 0, err
		}
		grown += start
		size = start
		check = false
	}
	size = max(size, framesStart(h.units)) // a crash may have left the file short of its index
	first, last := j.units[0], min(j.units[len(j.units)-1], h.units-1)
	if last < first {
		return 0, nil
	}
	idx := make([]byte, (last-first+1)*copySlotSize)
	if _, err := preadFull(fd, idx, slotAt(first)); err != nil {
		return 0, err
	}
	added := 0
	defer func() {
		c.mu.Lock()
		c.addFrames(j.video, added)
		c.mu.Unlock()
	}()
	for k, u := range j.units {
		if u >= h.units {
			break
		}
		raw := idx[(u-first)*copySlotSize : (u-first+1)*copySlotSize]
		frame := (*j.buf)[k*fb : (k+1)*fb]
		old := parseSlot(raw)
		if old.present() && (!check || c.sound(fd, u, old, raw, size, h.units)) {
			held++
			continue
		}
		codec, stored := c.pack(frame)
		if !c.reserve(j.video, int64(len(stored))) {
			return held, errors.New("no room: everything held is wanted sooner")
		}
		s := frameSlot{off: size, codec: codec, stored: len(stored)}
		if err := pwriteFull(fd, stored, size); err != nil {
			c.unreserve(int64(len(stored)))
			return held, err
		}
		size += int64(len(stored))
		grown += int64(len(stored))
		marshalSlot(raw, u, s, stored)
		if err := pwriteFull(fd, raw, slotAt(u)); err != nil {
			return held, err
		}
		if !old.present() {
			added++
		}
		held++
		c.mu.Lock()
		c.stats.WrittenFrames++
		c.stats.WrittenBytes += int64(fb)
		c.stats.StoredBytes += int64(len(stored))
		c.mu.Unlock()
	}
	return held, nil
}

// sound reads frame u (slot s, raw its 16 bytes) back and says whether it checks.
func (c *Copies) sound(fd, u int, s frameSlot, raw []byte, size int64, units int) bool {
	if s.check(u, size, units, c.opts.FrameBytes) != nil {
		return false
	}
	bp := c.buffer(s.stored)
	defer c.putBuffer(bp)
	n, err := preadFull(fd, *bp, s.off)
	return err == nil && n == s.stored && slotSum(raw, u, *bp) == s.sum
}

// pack compresses frame with the store's codec, or leaves it as it is when that does not shrink
// it. The bytes it returns are valid until the next call.
func (c *Copies) pack(frame []byte) (Codec, []byte) {
	switch c.opts.Codec {
	case LZ4:
		bound := lz4.CompressBlockBound(len(frame))
		c.zbuf = slices.Grow(c.zbuf[:0], bound)[:bound]
		if n, err := c.lz4c.CompressBlock(frame, c.zbuf); err == nil && n > 0 && n < len(frame) {
			return LZ4, c.zbuf[:n]
		}
	case Zstd:
		c.zbuf = c.enc.EncodeAll(frame, c.zbuf[:0])
		if len(c.zbuf) < len(frame) {
			return Zstd, c.zbuf
		}
	case Huff:
		var err error
		if c.zbuf, err = c.huff.pack(c.zbuf[:0], frame); err == nil && len(c.zbuf) < len(frame) {
			return Huff, c.zbuf
		}
	}
	return None, frame
}

func pwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// reserve makes room for n more bytes of video v, evicting others, and counts them as taken
// (the caller adds them to v once written, or gives them back with unreserve).
func (c *Copies) reserve(v int, n int64) bool {
	c.mu.Lock()
	gone, ok := c.makeRoom(n, v)
	c.mu.Unlock()
	c.unlinkAll(gone)
	return ok
}

func (c *Copies) unreserve(n int64) {
	c.mu.Lock()
	c.bytes -= n
	c.mu.Unlock()
}

// due is how soon video v is wanted, -1: not.
func (c *Copies) due(v int) int {
	if c.opts.Due == nil || v < 0 {
		return -1
	}
	return c.opts.Due(v)
}

// candidates is how many videos makeRoom looks at for each eviction: a sample of the videos
// held, so that the work does not grow with them. The farthest due of 8 chosen at random is in
// the farthest 20 % of all with a chance of 83 %.
const candidates = 8

// makeRoom evicts until n more bytes fit, and takes them. Files found at Open that no video
// claimed go first, oldest first; then, of a few videos chosen at random (not v), one no plan
// wants, least recently used, or else the one due last, if it is due later than v (if v is not
// due, or -1, it takes only the place of videos not due). It returns the keys of the files to
// unlink, which the caller does once it has let mu go. Called with mu held.
func (c *Copies) makeRoom(n int64, v int) (gone []Key, ok bool) {
	due, asked := -1, false
	for c.bytes+n > c.opts.MaxBytes {
		if !asked { // asked only when there is something to evict
			due, asked = c.due(v), true
		}
		if k, size, ok := c.oldestUntagged(); ok {
			c.bytes -= size
			gone = append(gone, k)
			c.stats.Evicted++
			continue
		}
		w := c.victim(v, due)
		if w < 0 {
			return gone, false
		}
		gone = append(gone, c.videos[w].key)
		c.dropPresent(w)
		c.stats.Evicted++
	}
	c.bytes += n
	return gone, true
}

func (c *Copies) oldestUntagged() (Key, int64, bool) {
	if len(c.untagged) == 0 {
		c.oldest = nil
		return Key{}, 0, false
	}
	if len(c.oldest) == 0 { // made once, when eviction first needs it
		c.oldest = slices.Collect(maps.Keys(c.untagged))
		slices.SortFunc(c.oldest, func(a, b Key) int { return cmp.Compare(c.untagged[a].mod, c.untagged[b].mod) })
	}
	for len(c.oldest) > 0 {
		k := c.oldest[0]
		c.oldest = c.oldest[1:]
		if f, ok := c.untagged[k]; ok {
			delete(c.untagged, k)
			return k, f.size, true
		}
	}
	return Key{}, 0, false
}

// victim chooses a video to evict for v (see makeRoom), or -1. Called with mu held.
func (c *Copies) victim(v, due int) int {
	best, bestDue := -1, 0
	var bestUsed uint32
	for k := range min(candidates, len(c.present)) {
		w := int(c.present[k]) // few enough to look at them all
		if len(c.present) > candidates {
			w = int(c.present[rand.IntN(len(c.present))])
		}
		if w == v {
			continue
		}
		d, used := c.due(w), c.videos[w].used
		switch {
		case best < 0,
			d < 0 && (bestDue >= 0 || used < bestUsed),
			d >= 0 && bestDue >= 0 && d > bestDue:
			best, bestDue, bestUsed = w, d, used
		}
	}
	if best < 0 || bestDue >= 0 && (due < 0 || bestDue <= due) {
		return -1
	}
	return best
}

// evictVideo drops video v's file now.
func (c *Copies) evictVideo(v int) {
	c.mu.Lock()
	k, had := c.videos[v].key, c.videos[v].at >= 0
	c.dropPresent(v)
	c.mu.Unlock()
	if had {
		os.Remove(c.path(k))
	}
}

func (c *Copies) unlinkAll(keys []Key) {
	for _, k := range keys {
		os.Remove(c.path(k))
	}
}

// Flush waits until every queued frame is written (or skipped).
func (c *Copies) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) > 0 {
		c.idle.Wait()
	}
}

// FlushVideo waits until every frame of video v queued is written (or skipped).
func (c *Copies) FlushVideo(v int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for slices.ContainsFunc(c.queue, func(j copyJob) bool { return j.video == v }) {
		c.idle.Wait()
	}
}

// Stats returns a snapshot of the copy.
func (c *Copies) Stats() CopyStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Videos, s.Complete, s.Frames = c.bytes, len(c.present)+len(c.untagged), c.complete, c.frames
	s.Backlog, s.BacklogBytes = len(c.queue), c.queued
	return s
}

// Close writes what is queued, if it can within closeWarn, dropping the rest but the frames
// being written, and releases the directory. A writer the disk holds past closeGiveUp times
// that is given up on, with an error; it releases the directory itself if the disk answers.
func (c *Copies) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.done:
	case <-time.After(closeWarn):
		c.mu.Lock()
		if len(c.queue) > 0 {
			c.queue, c.queued = c.queue[:1], int64(len(*c.queue[0].buf))
		}
		c.mu.Unlock()
		select {
		case <-c.done:
		case <-time.After(closeGiveUp * closeWarn):
			return fmt.Errorf("training copy %s: the writer is stuck after Close asked it to end; closed without it", c.opts.Dir)
		}
	}
	c.enc.Close()
	c.dec.Close()
	unix.Close(c.dirFD)
	return c.lock.Close()
}
