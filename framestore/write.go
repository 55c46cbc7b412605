package framestore

// Writing frames: Put queues them, and the writer goroutine (diskstore.Writer) appends those a
// video's file lacks, making room for them.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/vidfs/vidfs/internal/diskstore"
)

// job is a batch of frames of one video queued to be written (a Put's): the frames, one after
// another, are the job's data.
type job struct {
	video          int
	key            diskstore.Key
	units          []int
	needed, extent int
}

// Put queues video v's frames units (ascending; frames holds them one after another) to be
// written to its copy under key, copying them, and says whether they were queued. needed is how
// many frames the caller needs of the video, extent how many slots its file's index takes (the
// last frame any sample uses, plus one). It never waits: with the backlog full, it skips.
func (c *Store) Put(v int, key diskstore.Key, needed, extent int, units []int, frames []byte) bool {
	n := len(units) * c.opts.FrameBytes
	if v < 0 || v >= len(c.videos) || len(frames) < n || len(units) == 0 {
		return false
	}
	return c.w.Put(job{video: v, key: key, units: slices.Clone(units), needed: needed, extent: extent}, frames[:n], int64(len(units)))
}

// writeJob writes the frames of job j, for the writer (diskstore.WriterOptions.Write), and says
// how many of them were skipped.
func (c *Store) writeJob(j job, frames []byte) (skipped int64) {
	if c.beforeWrite != nil {
		c.beforeWrite()
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
	return int64(len(j.units) - written)
}

// write writes job j's frames that the video's file lacks (or holds damaged), making room for
// them, and says how many of them are now held.
func (c *Store) write(j job, frames []byte) (held int, err error) {
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
		h = header{key: j.key, frameBytes: fb, units: max(j.extent, j.units[len(j.units)-1]+1)}
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
	idx := make([]byte, (last-first+1)*slotSize)
	if _, err := diskstore.PreadFull(fd, idx, slotAt(first)); err != nil {
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
		raw := idx[(u-first)*slotSize : (u-first+1)*slotSize]
		frame := frames[k*fb : (k+1)*fb]
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

// pack compresses frame with the store's codec, or leaves it as it is when that does not shrink
// it. The bytes it returns are valid until the next call.
func (c *Store) pack(frame []byte) (diskstore.Codec, []byte) {
	switch c.opts.Codec {
	case diskstore.LZ4:
		bound := lz4.CompressBlockBound(len(frame))
		c.zbuf = slices.Grow(c.zbuf[:0], bound)[:bound]
		if n, err := c.lz4c.CompressBlock(frame, c.zbuf); err == nil && n > 0 && n < len(frame) {
			return diskstore.LZ4, c.zbuf[:n]
		}
	case diskstore.Zstd:
		c.zbuf = c.enc.EncodeAll(frame, c.zbuf[:0])
		if len(c.zbuf) < len(frame) {
			return diskstore.Zstd, c.zbuf
		}
	case diskstore.Huff:
		var err error
		if c.zbuf, err = c.huff.pack(c.zbuf[:0], frame); err == nil && len(c.zbuf) < len(frame) {
			return diskstore.Huff, c.zbuf
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

func (c *Store) unreserve(n int64) {
	c.mu.Lock()
	c.bytes -= n
	c.mu.Unlock()
}
