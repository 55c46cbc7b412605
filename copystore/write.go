package copystore

// Writing frames: Put compresses them on the caller's goroutine (so that as many threads compress
// as decode) and queues them, and the writer goroutine (diskstore.Writer) appends those a video's
// file lacks, making room for them.

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
	"github.com/vidfs/vidfs/internal/threadcpu"
)

// job is a batch of frames of one video queued to be written (a Put's). Its data is the frames
// as they are to be stored, each a record: recordSize bytes (the frame's unit, the codec, the
// stored length) and then the stored bytes.
type job struct {
	video          int
	key            diskstore.Key
	frames         int // records in the data
	first, last    int // the first and last unit
	needed, extent int
}

const recordSize = 12

// record is one frame of a job's data.
type record struct {
	unit   int
	codec  diskstore.Codec
	stored []byte
}

// nextRecord reads the record at the start of data, and returns what follows it.
func nextRecord(data []byte) (record, []byte) {
	n := int(binary.LittleEndian.Uint32(data[4:]))
	r := record{unit: int(binary.LittleEndian.Uint32(data)), codec: diskstore.Codec(data[8]), stored: data[recordSize : recordSize+n]}
	return r, data[recordSize+n:]
}

// packer compresses frames for Put, one caller at a time (Store.packers holds them for reuse).
type packer struct {
	lz4c lz4.CompressorCCompat
	huff *huffCodec
	zbuf []byte
}

// Put queues video v's frames units (ascending; frames holds them one after another) to be
// written to its copy under key, compressed with the store's codec on the caller's goroutine,
// and says whether they were queued. needed is how many frames the caller needs of the video,
// extent how many slots its file's index takes (the last frame any sample uses, plus one). With
// the backlog full it waits up to wait for room while ctx lasts, and then skips them, counting
// them (Stats.Full).
func (c *Store) Put(ctx context.Context, v int, key diskstore.Key, needed, extent int, units []int, frames []byte, wait time.Duration) bool {
	fb := c.opts.FrameBytes
	if v < 0 || v >= len(c.videos) || len(frames) < len(units)*fb || len(units) == 0 {
		return false
	}
	p, ok := c.packers.Get().(*packer)
	if !ok {
		p = &packer{huff: &huffCodec{width: c.opts.Width}}
	}
	defer c.packers.Put(p)
	bp := c.bufs.Get(len(units) * (recordSize + fb))
	data := (*bp)[:0]
	for k, u := range units {
		codec, stored := c.pack(p, frames[k*fb:(k+1)*fb])
		var h [recordSize]byte
		binary.LittleEndian.PutUint32(h[:], uint32(u))
		binary.LittleEndian.PutUint32(h[4:], uint32(len(stored)))
		h[8] = byte(codec)
		data = append(append(data, h[:]...), stored...)
	}
	*bp = data
	j := job{video: v, key: key, frames: len(units), first: units[0], last: units[len(units)-1], needed: needed, extent: extent}
	if !c.w.PutBuffer(ctx, j, bp, int64(len(units)), wait) {
		c.bufs.Put(bp)
		return false
	}
	return true
}

// writeJob writes the frames of job j, for the writer (diskstore.WriterOptions.Write), and says
// how many of them were skipped.
func (c *Store) writeJob(j job, frames []byte) (skipped int64) {
	if c.beforeWrite != nil {
		c.beforeWrite()
	}
	if spent := c.opts.Spent; spent != nil {
		began := threadcpu.Now() // the writer's goroutine keeps to its thread
		defer func() { spent(threadcpu.Now() - began) }()
	}
	written, err := c.write(j, frames)
	if err != nil {
		c.mu.Lock()
		warn := c.warnNow(&c.writeWarned)
		c.mu.Unlock()
		if warn {
			c.log.Warn("training copy: frames not written (logged once a minute at most; stats count them as skipped)", "file", c.path(j.key), "reason", err)
		}
	}
	return int64(j.frames - written)
}

// write writes job j's frames that the video's file lacks (or holds damaged), making room for
// them, and says how many of them are now held.
func (c *Store) write(j job, frames []byte) (held int, err error) {
	fb := c.opts.FrameBytes
	c.mu.Lock()
	for c.counting[int32(j.video)] { // Claim is counting its file's frames: added after
		c.counted.Wait()
	}
	c.writing[int32(j.video)] = true // and Claim waits for this write: its frames counted once
	defer func() {                   // last, once the frames written are counted
		c.mu.Lock()
		delete(c.writing, int32(j.video))
		c.counted.Broadcast()
		c.mu.Unlock()
	}()
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
	c.makeDiskRoom(int64(len(frames)) + framesStart(j.extent))
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
			c.paid(j.video, grown)
		}
		c.mu.Unlock()
		if drop {
			os.Remove(c.path(j.key))
		}
	}()
	var hb [headerSize]byte
	n, err := diskstore.PreadFull(fd, hb[:], 0)
	if err != nil {
		return 0, err
	}
	h, herr := parseHeader(hb[:n], j.key, fb)
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
		h = header{key: j.key, frameBytes: fb, units: max(j.extent, j.last+1)}
		start := framesStart(h.units)
		if !c.reserve(j.video, start) {
			return 0, errors.New("no room for a new video within the bound: every video held is wanted")
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
	first, last := j.first, min(j.last, h.units-1)
	if last < first {
		return 0, nil
	}
	ibp := c.bufs.Get((last - first + 1) * slotSize)
	defer c.bufs.Put(ibp)
	idx := *ibp
	if _, err := diskstore.PreadFull(fd, idx, slotAt(first)); err != nil {
		return 0, err
	}
	added := 0
	defer func() {
		if c.beforeCounted != nil {
			c.beforeCounted()
		}
		c.mu.Lock()
		c.addFrames(j.video, added)
		c.mu.Unlock()
	}()
	for rest := frames; len(rest) > 0; {
		var r record
		r, rest = nextRecord(rest)
		u, codec, stored := r.unit, r.codec, r.stored
		if u >= h.units {
			break
		}
		raw := idx[(u-first)*slotSize : (u-first+1)*slotSize]
		old := parseSlot(raw)
		if old.present() && (!check || c.sound(fd, u, old, raw, size, h.units)) {
			held++
			continue
		}
		if !c.reserve(j.video, int64(len(stored))) {
			return held, errors.New("no room within the bound: every video held is wanted")
		}
		s := frameSlot{off: size, codec: codec, stored: len(stored)}
		if err := diskstore.PwriteFull(fd, stored, size); err != nil {
			c.unreserve(int64(len(stored)))
			return held, err
		}
		size += int64(len(stored))
		grown += int64(len(stored))
		marshalSlot(raw, u, s, stored)
		if err := diskstore.PwriteFull(fd, raw, slotAt(u)); err != nil {
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
func (c *Store) sound(fd, u int, s frameSlot, raw []byte, size int64, units int) bool {
	if s.check(u, size, units, c.opts.FrameBytes) != nil {
		return false
	}
	bp := c.bufs.Get(s.stored)
	defer c.bufs.Put(bp)
	n, err := diskstore.PreadFull(fd, *bp, s.off)
	return err == nil && n == s.stored && slotSum(raw, u, *bp) == s.sum
}

// pack compresses frame with the store's codec, with p's coders, or leaves it as it is when that
// does not shrink it. The bytes it returns are valid until p's next use.
func (c *Store) pack(p *packer, frame []byte) (diskstore.Codec, []byte) {
	switch c.opts.Codec {
	case diskstore.LZ4:
		bound := lz4.CompressBlockBound(len(frame))
		p.zbuf = slices.Grow(p.zbuf[:0], bound)[:bound]
		if n, err := p.lz4c.CompressBlock(frame, p.zbuf); err == nil && n > 0 && n < len(frame) {
			return diskstore.LZ4, p.zbuf[:n]
		}
	case diskstore.Zstd:
		p.zbuf = c.enc.EncodeAll(frame, p.zbuf[:0]) // safe for concurrent use
		if len(p.zbuf) < len(frame) {
			return diskstore.Zstd, p.zbuf
		}
	case diskstore.Huff:
		var err error
		if p.zbuf, err = p.huff.pack(p.zbuf[:0], frame); err == nil && len(p.zbuf) < len(frame) {
			return diskstore.Huff, p.zbuf
		}
	}
	return diskstore.None, frame
}

// reserve makes room for n more bytes of video v, evicting others, and counts them as taken
// (the caller adds them to v once written, or gives them back with unreserve).
func (c *Store) reserve(v int, n int64) bool {
	c.mu.Lock()
	gone, ok := c.makeRoom(n, v)
	c.mu.Unlock()
	c.unlinkAll(gone)
	return ok
}

// diskSlack is the room makeDiskRoom keeps free on the disk beside what the copy writes next.
const diskSlack = 64 << 20

// makeDiskRoom removes files of earlier formats, oldest first, while the disk has less than n
// bytes and diskSlack free: they are kept while there is room, and are the first to go when
// there is not. Only the writer calls it (once a batch), without mu; it looks for them on disk
// then, which is rare: the disk full, with files of an earlier format there.
func (c *Store) makeDiskRoom(n int64) {
	c.mu.Lock()
	none := c.oldFiles == 0
	c.mu.Unlock()
	if none {
		return
	}
	free, err := c.free()
	if err != nil || free >= n+diskSlack {
		return
	}
	var old []oldFile
	oldVersions(filepath.Join(c.opts.Dir, diskstore.FramesDir), func(f oldFile) { old = append(old, f) })
	slices.SortFunc(old, func(a, b oldFile) int { return cmp.Compare(a.mod, b.mod) })
	for _, f := range old {
		if free >= n+diskSlack {
			break
		}
		if err := os.Remove(f.path); err != nil {
			continue
		}
		free += f.size
		c.log.Info("training copy: removed a file of an earlier format, the disk being full", "file", f.path, "bytes", f.size)
		c.mu.Lock()
		c.oldFiles--
		c.oldBytes -= f.size
		c.stats.OldRemoved++
		c.mu.Unlock()
	}
}

func (c *Store) unreserve(n int64) {
	c.mu.Lock()
	c.bytes -= n
	c.mu.Unlock()
}
